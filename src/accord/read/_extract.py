"""Stage 3, extract: from raw model text to JSON-like data, with bounded work.

The strict reading: markdown fences, prose around the value, the first complete JSON value, and a
bare choice word, number or yes/no. When it finds no valid value, ``_read`` reads the text again
leniently and by the schema (``_candidates``, ``_jsonish``, ``_coerce``) unless the
:class:`Extract` policy is strict. Input longer than ``MAX_CHARS`` or nested deeper than
``MAX_DEPTH`` fails fast with :class:`ExtractionFailure` (never a hang or a RecursionError). An
echoed JSON Schema or type signature is recognised (:func:`echoed`) and is never a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _check
from ..schema._schema import Schema
from ._coercions import doubt
from ._exact import has_decimals
from ._jsonish import EXACT, PLAIN
from ._locate import _FENCE, NOTHING, Search
from ._numbers import number
from ._plan import resolve, types_of
from ._words import Refusal, boolean, choice, fold, mentions

MAX_CHARS = 1_000_000
MAX_DEPTH = 256

_DECODER = PLAIN  # (the name the property tests import)


@dataclass(frozen=True)
class Extract:
    """How model text becomes data: ``Stabilizer(..., extract=accord.Extract(strict=True))``.

    By default (``strict=False``) a text that does not read as valid JSON of the schema is read
    again leniently and by the schema: broken JSON repaired, every candidate value in the text
    scored, schema-justified coercions made, and each repair recorded in ``Ballot.coercions``.
    ``strict=True`` turns every repair off: only JSON as written (in a fence or in prose) or a
    bare choice, number or yes/no word is read; normalization and validation are unchanged.
    ``max_seconds``: the most reading one output may take (extract, normalize, validate,
    canonicalize; a catastrophic regular expression or a huge grammar input included), bounded
    further by what the run's ``Budget(max_seconds=...)`` has left; past it the output is invalid
    (``"type": "timeout"``). None: no limit but the budget's.
    ``normalize``: text normalizers (``str -> str``, e.g. ``accord.casefold``) applied to every
    free-text field before validation (one field's own: ``Annotated[str, accord.Normalize(fn)]``).
    """

    strict: bool = False
    max_seconds: float | None = 10.0
    normalize: Sequence[Callable[[str], str]] = ()

    def __post_init__(self) -> None:
        _check.boolean("Extract", "strict", self.strict)
        _check.number("Extract", "max_seconds", self.max_seconds, strict=True, optional=True)
        object.__setattr__(self, "normalize", _check.normalizers(self.normalize))


class ExtractionFailure(Exception):
    """The text holds no value of the expected shape; ``errors`` are structured like validation's."""

    def __init__(self, message: str, kind: str = "extract") -> None:
        super().__init__(message)
        self.errors = [{"loc": (), "msg": message, "type": kind}]


def shape_of(schema: Schema[Any]) -> str:
    """What to look for in the text: "json", "choice", "number", "bool" or "text"."""
    if schema.kind == "choice":
        return "choice"
    if schema.kind in {"regex", "grammar"}:
        return "text"
    if schema.kind == "scalar":
        return {int: "number", float: "number", bool: "bool", str: "text"}[schema.source]
    root = schema.json_schema or {}
    members = root["enum"] if isinstance(root.get("enum"), list) else [root["const"]] if "const" in root else None
    if members is not None and not any(isinstance(m, (dict, list)) for m in members):
        return "choice"  # an enum or const of objects or lists is read as JSON (never unwrapped)
    kind = root.get("type")
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "bool"
    if kind == "string":
        return "text"
    return "json"


def extract(text: str, schema: Schema[Any], misses: set[int] | None = None, notes: list[dict[str, str]] | None = None,
            where: list[int] | None = None) -> Any:
    """The data the text carries for this schema, or raise :class:`ExtractionFailure`.

    ``misses``, when given, collects where no JSON value was found (see :func:`extract_json`);
    ``notes``, what reading a bare choice, number or yes/no took (``{"path", "fix"}`` dicts): the
    same words as at any depth (``_words``, ``_numbers``); ``where``, where the JSON value found
    stands in the text (see :func:`first_json`)."""
    if not isinstance(text, str):
        raise ExtractionFailure(f"expected text from the model, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ExtractionFailure(f"output too long to read ({len(text):,} characters > {MAX_CHARS:,})")
    shape = shape_of(schema)
    if shape == "json":
        found = first_json(text, misses, None, where, EXACT if has_decimals(schema) else PLAIN)
        if found is NOTHING:
            if text.strip() and scalar_union(schema):
                return text.strip()  # Optional[int], Union[int, str]: the bare text, read as it is in a field
            raise ExtractionFailure("no JSON value found in the output")
        return found
    if shape == "text":
        return _json_string(text.strip()) if schema.kind in {"scalar", "type", "json"} else text
    stripped = _unwrap(text)
    said: list[dict[str, str]] = [] if notes is None else notes
    if shape == "choice":
        return _choice(stripped, text, schema.choices or (), said)
    if shape == "number":
        root = schema.json_schema or {}
        return _number(_unfenced(text), schema.source is int if schema.kind == "scalar" else root.get("type") == "integer", said)
    return _bool(_unfenced(text), said)


def scalar_union(schema: Schema[Any]) -> bool:
    """Whether the schema is a union of scalars only (``Optional[int]``, ``Union[int, str]``): a
    bare text that holds no JSON value is then read as the string it is, as a field would be."""
    root = schema.json_schema or {}
    branches = root.get("anyOf") or root.get("oneOf")
    if not isinstance(branches, list) or not branches:
        return False
    for branch in branches:
        node = resolve(branch, root)
        kinds = types_of(node)
        if not kinds or not kinds <= {"null", "integer", "number", "boolean", "string"} or "properties" in node or "items" in node:
            return False
    return True


def extract_json(text: str, misses: set[int] | None = None) -> Any:
    """The first complete JSON object or array in the text (fenced blocks first), else the whole text.

    ``misses``, when given, collects the positions in the text where no JSON value starts (``-1``:
    the whole text is none; :func:`fence_miss` of a fence's start: its body is none), so a lenient
    reading after this one need not decode them again."""
    found = first_json(text, misses)
    if found is NOTHING:
        raise ExtractionFailure("no JSON value found in the output")
    return found


def first_json(text: str, misses: set[int] | None = None, found: dict[int, tuple[Any, int]] | None = None,
               where: list[int] | None = None, decoder: json.JSONDecoder = PLAIN) -> Any:
    """:func:`extract_json` without the exception: ``NOTHING`` when no JSON value is found (what
    the lenient reader asks first, for nearly every text it reads). :class:`ExtractionFailure`
    still for text nested too deeply. ``found``, when given, gets the value found in a ``{...}``
    or ``[...]`` span by its start, with its end (so the lenient reader does not decode it again);
    ``where``, when given, gets the start and the end of the value found in the text; ``decoder``:
    ``_jsonish.EXACT`` for a schema that holds a Decimal (a number's digits kept)."""
    check_depth(text)
    missed: set[int] = set() if misses is None else misses
    return Search(text, missed, found, where, decoder).first()


def check_depth(text: str) -> None:
    """Raise :class:`ExtractionFailure` for text nested deeper than ``MAX_DEPTH``."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # no deeper than it has openings
    depth = deepest = 0
    for char in re.findall(r"[\[\]{}]", text):
        depth = depth + 1 if char in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            raise ExtractionFailure(f"output nested more than {MAX_DEPTH} levels deep")


def _unwrap(text: str) -> str:
    """Strip a fence, whitespace, quotes and trailing punctuation around a bare answer."""
    match = _FENCE.search(text)
    if match:
        text = match.group(2)
    text = text.strip().strip("`").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1]
    return text.strip().rstrip(".!").strip()


def _json_string(text: str) -> str:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        if isinstance(value, str):
            return value
    return text


def _choice(stripped: str, text: str, choices: tuple[Any, ...], notes: list[dict[str, str]]) -> Any:
    folded = {_fold(c): c for c in choices}
    if _fold(stripped) in folded:
        member = folded[_fold(stripped)]
        if isinstance(member, str) and text.strip() != member:  # a case fold too is recorded
            _note(notes, f"{text.strip()!r} as the member {member!r}")
        return member
    if stripped[:1] in "{[":
        data = extract_json(stripped)
        if isinstance(data, dict) and len(data) == 1 and data not in choices:
            data = next(iter(data.values()))  # {"answer": "positive"}: the member inside
        _one_member(text, data, choices)
        return data
    found = choice(_unfenced(text), choices)  # a choice named in prose, with no negation or hedge
    if isinstance(found, Refusal):
        raise ExtractionFailure(found.msg, found.kind)
    if found is not None:
        if found[1] is not None:
            _note(notes, found[1])
        return found[0]
    if any(not isinstance(c, str) for c in choices):
        read = number(_unfenced(text), all(isinstance(c, int) for c in choices if not isinstance(c, str)))
        if isinstance(read, Refusal):
            raise ExtractionFailure(read.msg, read.kind)
        if read is not None:
            return read[0]
    return stripped


def _one_member(text: str, said: Any, choices: tuple[Any, ...]) -> None:
    """Raise :class:`ExtractionFailure` when the text names another member than the one its JSON
    value says, with no negation, hedge or unknown around it (a draft, an example, a correction):
    one answer or none."""
    members = [c for c in choices if isinstance(c, str)]
    other = {m for start, end, m in mentions(text, members)
             if fold(m) != (fold(said) if isinstance(said, str) else said) and doubt(text[:start], text[end:], text) is None}
    if other:
        raise ExtractionFailure(f"the output names {', '.join(map(repr, sorted(other)))} beside its answer {said!r}: "
                                "answer once, with one value", "ambiguous")


def _fold(value: Any) -> Any:
    return fold(value) if isinstance(value, str) else value


def _note(notes: list[dict[str, str]], fix: str) -> None:
    notes.append({"path": "", "fix": fix})


def _unfenced(text: str) -> str:
    """The body of the text's first fence, or the text."""
    match = _FENCE.search(text) if "```" in text else None
    return match.group(2) if match else text


def _number(text: str, integer: bool, notes: list[dict[str, str]]) -> Any:
    """The one number the whole answer says (``_numbers``), or raise :class:`ExtractionFailure` with why not."""
    read = number(text, integer)
    if read is None:
        raise ExtractionFailure("no number found in the output")
    if isinstance(read, Refusal):
        raise ExtractionFailure(read.msg, read.kind)
    if read[1] is not None:
        _note(notes, read[1])
    return read[0]


def _bool(text: str, notes: list[dict[str, str]] | None = None) -> bool | str:
    """The yes/no the whole answer says (``_words``), or raise :class:`ExtractionFailure` with why not."""
    literal = text.lower().strip(" \t\n\r")  # JSON's true or false (what json.loads would read)
    if literal in ("true", "false"):
        return literal == "true"
    read = boolean(text)
    if read is None:
        raise ExtractionFailure("no yes/no answer found in the output")
    if isinstance(read, Refusal):
        raise ExtractionFailure(read.msg, read.kind)
    if read[1] is not None and notes is not None:
        _note(notes, read[1])
    return read[0]
