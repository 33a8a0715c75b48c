"""Stage 3, extract: from raw model text to JSON-like data, with bounded work.

Handles markdown fences, prose around the value, the first complete JSON value, and a bare choice
word, number or yes/no. Input longer than ``MAX_CHARS`` or nested deeper than ``MAX_DEPTH`` fails
fast with :class:`ExtractionFailure` (never a hang or a RecursionError).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._normalize import fold
from ._schema import Schema

MAX_CHARS = 1_000_000
MAX_DEPTH = 256
_MAX_DECODE_TRIES = 64

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BOOL_WORDS = {"yes": True, "no": False, "true": True, "false": False, "y": True, "n": False}
_WORD = re.compile(r"[A-Za-z]+")
_DECODER = json.JSONDecoder()


class ExtractionFailure(Exception):
    """The text holds no value of the expected shape; ``errors`` are structured like validation's."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errors = [{"loc": (), "msg": message, "type": "extract"}]


def shape_of(schema: Schema) -> str:
    """What to look for in the text: "json", "choice", "number", "bool" or "text"."""
    if schema.kind == "choice":
        return "choice"
    if schema.kind in {"regex", "grammar"}:
        return "text"
    if schema.kind == "scalar":
        return {int: "number", float: "number", bool: "bool", str: "text"}[schema.source]
    root = schema.json_schema or {}
    if "enum" in root or "const" in root:
        return "choice"
    kind = root.get("type")
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "bool"
    if kind == "string":
        return "text"
    return "json"


def extract(text: str, schema: Schema) -> Any:
    """The data the text carries for this schema, or raise :class:`ExtractionFailure`."""
    if not isinstance(text, str):
        raise ExtractionFailure(f"expected text from the model, got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise ExtractionFailure(f"output too long to read ({len(text):,} characters > {MAX_CHARS:,})")
    shape = shape_of(schema)
    if shape == "json":
        return extract_json(text)
    if shape == "text":
        return _json_string(text.strip()) if schema.kind in {"scalar", "type", "json"} else text
    stripped = _unwrap(text)
    if shape == "choice":
        return _choice(stripped, text, schema.choices or ())
    if shape == "number":
        return _number(stripped)
    return _bool(stripped)


def extract_json(text: str) -> Any:
    """The first complete JSON object or array in the text (fenced blocks first), else the whole text."""
    _check_depth(text)
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        try:
            return json.loads(body)
        except ValueError:
            continue
    tries = 0
    for match in re.finditer(r"[\[{]", text):
        tries += 1
        if tries > _MAX_DECODE_TRIES:
            break
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:
            continue
        return value
    try:
        return json.loads(text)
    except ValueError:
        raise ExtractionFailure("no JSON value found in the output") from None


def _check_depth(text: str) -> None:
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


def _choice(stripped: str, text: str, choices: tuple[Any, ...]) -> Any:
    folded = {_fold(c): c for c in choices}
    if _fold(stripped) in folded:
        return folded[_fold(stripped)]
    if stripped[:1] in "{[":
        data = extract_json(stripped)
        if isinstance(data, dict) and len(data) == 1:
            return next(iter(data.values()))
        return data
    # A choice named in prose: exactly one member mentioned as a whole word.
    found = {c for c in choices if isinstance(c, str) and re.search(rf"(?<!\w){re.escape(c)}(?!\w)", text, re.I)}
    if len(found) == 1:
        return found.pop()
    numbers = [c for c in choices if not isinstance(c, str)]
    if numbers:
        try:
            return _number(stripped)
        except ExtractionFailure:
            pass
    return stripped


def _fold(value: Any) -> Any:
    return fold(value) if isinstance(value, str) else value


def _number(text: str) -> int | float:
    match = _NUMBER.search(text)
    if match is None:
        raise ExtractionFailure("no number found in the output")
    token = match.group(0).replace(",", "")
    value = float(token)
    return int(token) if re.fullmatch(r"[-+]?\d+", token) else value


def _bool(text: str) -> bool | str:
    try:
        value = json.loads(text.lower())
        if isinstance(value, bool):
            return value
    except ValueError:
        pass
    for word in _WORD.findall(text)[:3]:
        if word.lower() in _BOOL_WORDS:
            return _BOOL_WORDS[word.lower()]
    raise ExtractionFailure("no yes/no answer found in the output")
