"""One model output, read top to bottom: extract -> normalize -> validate -> canonicalize.

First strictly: the value as written (``_extract``). If that gives no valid value, and the
:class:`~accord.Extract` policy allows, leniently and by the schema: every candidate value in the
text (``_candidates``: fenced blocks, JSON-like spans repaired by ``_jsonish``, ``key: value``
blocks, and a bare answer to a one-field object), each bent toward the schema (``_coerce``) and
validated; the valid one with the fewest and smallest repairs wins, the earliest on a tie. What
was done is kept on the Reading (``coercions``), so every ballot says it. A candidate that is
the schema echoed back is never a value.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema._schema import Schema
from ._bare import IMPLIED, implied
from ._candidates import FLOORS, MAX_LENIENT_CHARS, Candidate, iter_candidates
from ._canonical import DEFAULT_FLOAT_DIGITS, NotUnicode, canonical_form, canonical_key
from ._coerce import Coercion, coerce
from ._deadline import Interrupt, TimeUp, settle, within
from ._echo import ECHO, echoed
from ._extract import NOTHING, Extract, ExtractionFailure, extract, first_json, shape_of
from ._jsonish import Fix
from ._normalize import Said, normalize
from ._plan import types_of
from ._validate import ValidationFailure, validate

log = logging.getLogger("accord")

STRICT = Extract(strict=True)
LENIENT = Extract()
_FIX_COSTS = {"closed a cut-off object": 3, "dropped a member cut off": 3, "key-value lines as an object": 2,
              "unescaped quote in a string": 2, "unquoted string": 2, IMPLIED: 4}
# Text that may hold an echoed schema: any type name at all (for text read leniently).
_ANY_HINT = re.compile("|".join(map(re.escape, ("propert", "$defs", "$ref", "type", "str", "int", "float", "number", "double",
                                                  "bool", "date", "yyyy"))))
_ECHO_KEYS = frozenset({"properties", "$defs", "definitions", "$ref", "anyOf", "oneOf", "allOf", "type", "title"})
_TYPE_NAMES = frozenset({"string", "str", "int", "integer", "number", "float", "double", "bool", "boolean", "date",
                         "yyyy-mm-dd", 'string (a date, "yyyy-mm-dd")', "null", "object", "array"})
_NOTHING = ({"loc": (), "msg": "no JSON value found in the output", "type": "extract"},)


@dataclass(frozen=True, slots=True)
class Reading:
    """A valid output: the validated value, its JSON data, its canonical form and vote key, and the
    repairs and coercions it took (``{"path", "fix"}`` dicts; empty when read as written).
    ``open_ended``: its last value ran to the very end of the text with nothing to close it
    (``key: value`` lines, a bare answer), so a text cut off at ``max_tokens`` may have cut it
    (the run loop then treats it as truncated)."""

    value: Any
    data: Any
    form: Any
    key: str
    coercions: tuple[dict[str, str], ...] = ()
    open_ended: bool = False


class Misreading:
    """An invalid output: which stage rejected it (``stage``: "extract" | "validate") and the
    structured ``errors``; given a :class:`ValidationFailure` in their place, they are made from it
    when first asked for (most failed candidates of a lenient reading are only counted)."""

    __slots__ = ("_errors", "_failure", "stage")

    def __init__(self, stage: str, errors: tuple[dict[str, Any], ...] | ValidationFailure) -> None:
        self.stage = stage
        self._errors = errors if isinstance(errors, tuple) else None
        self._failure = None if isinstance(errors, tuple) else errors

    @property
    def errors(self) -> tuple[dict[str, Any], ...]:
        if self._errors is None:
            assert self._failure is not None
            self._errors, self._failure = tuple(self._failure.errors), None
        return self._errors

    @property
    def count(self) -> int:
        """How many errors (without making them)."""
        return len(self._errors) if self._errors is not None else self._failure.count if self._failure is not None else 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Misreading) and (self.stage, self.errors) == (other.stage, other.errors)

    __hash__ = None  # type: ignore[assignment]  # compared by value (its errors are dicts): never hashed

    def __repr__(self) -> str:
        return f"Misreading(stage={self.stage!r}, errors={self.errors!r})"

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'value'}: {e.get('msg')}" for e in self.errors)


def read(
    text: str,
    schema: Schema[Any],
    normalizers: Sequence[Callable[[str], str]] = (),
    float_digits: int = DEFAULT_FLOAT_DIGITS,
    policy: Extract = LENIENT,
    *,
    seconds: float | None = None,
) -> Reading | Misreading:
    """Turn one model output into a Reading (valid) or a Misreading (why not); never raises.

    ``normalizers`` are the per-schema text normalizers; ``float_digits`` the significant digits
    floats keep in the vote key; ``policy`` whether repairs are allowed and how long reading may
    take (:class:`~accord.Extract`); ``seconds`` what the run's budget has left. The one place the
    work of reading is bounded (``_deadline``): past the time, the output is a Misreading of type
    "timeout". An exception from a schema's own code (a validator that raises TypeError) is a
    Misreading too, logged in one line (its traceback at debug level).
    """
    limit = policy.max_seconds if seconds is None else seconds if policy.max_seconds is None else min(seconds, policy.max_seconds)
    try:
        return within(limit, _read, text, schema, normalizers, float_digits, policy)
    except TimeUp as exc:
        return Misreading("extract", ({"loc": (), "msg": str(exc), "type": "timeout"},))
    except Interrupt:  # the deadline's interrupt landed in the instant the reading ended: the same
        settle()
        return Misreading("extract", ({"loc": (), "msg": "reading the output ran out of time", "type": "timeout"},))
    except RecursionError:
        return Misreading("extract", ({"loc": (), "msg": "output nested too deeply to read", "type": "extract"},))
    except Exception as exc:  # a schema's own code failed on this output: the output is invalid, the run goes on
        log.warning("reading an output raised %s: %s (the output counts as invalid)", type(exc).__name__, exc)
        log.debug("the traceback of that reading", exc_info=True)
        return Misreading("validate", ({"loc": (), "msg": f"{type(exc).__name__}: {exc}"[:200], "type": "error"},))


def _read(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int,
          policy: Extract) -> Reading | Misreading:
    json_shape, root_types = _shape(schema)
    if policy.strict or not json_shape or not isinstance(text, str) or len(text) > MAX_LENIENT_CHARS:
        return _strict(text, schema, normalizers, float_digits)
    tried: tuple[Any, Reading | Misreading] | None = None
    misses: set[int] = set()  # where the strict reading found no JSON: the lenient one does not decode there again
    known: dict[int, tuple[Any, int]] = {}  # and what it decoded, by where
    try:
        raw = first_json(text, misses, known)  # the value as written first (what ``extract`` does for a JSON shape)
    except ExtractionFailure as failure:  # nested too deeply
        return Misreading("extract", tuple(failure.errors))
    if raw is not NOTHING and _fits_root(raw, root_types):
        reading = _settle(raw, schema, normalizers, float_digits)
        tried = (raw, reading)
        if isinstance(reading, Reading) and not (_may_echo(raw) and echoed(raw, schema)):
            return reading
    found = _lenient(text, schema, normalizers, float_digits, tried, misses=misses, known=known)
    return found if found is not None else Misreading("extract", _NOTHING)


def _may_echo(data: Any) -> bool:
    """A cheap test before :func:`echoed` on valid JSON as written (so clean JSON pays ~1 us): an
    echo has schema keywords at its top level, or no top-level text that is not a type name (and
    then, with no text at all there, an object or a list inside)."""
    if isinstance(data, list):
        return any(_may_echo(item) for item in data[:8])
    if not isinstance(data, dict):
        return isinstance(data, str) and data.strip().casefold() in _TYPE_NAMES
    if not _ECHO_KEYS.isdisjoint(data):
        return True
    nested = False
    for value in data.values():
        if isinstance(value, str):
            return value.strip().casefold() in _TYPE_NAMES  # one real text: no signature echo
        nested = nested or isinstance(value, (dict, list))
    return nested  # no text, no keyword: only what it holds could be an echo


_SHAPES: dict[int, tuple[Schema[Any], bool, frozenset[str]]] = {}  # id(schema) -> (schema, json?, types)
_MAX_SHAPES = 256


def _shape(schema: Schema[Any]) -> tuple[bool, frozenset[str]]:
    """Whether the schema reads as JSON, and its top-level types (empty: any), once per schema.

    Keyed by identity (a plain dict costs less than a WeakKeyDictionary on every read): each entry
    holds its schema, so no id is reused while it lives; bounded, the oldest dropped first."""
    known = _SHAPES.get(id(schema))
    if known is None or known[0] is not schema:
        root = schema.json_schema or {}
        types = types_of(root) or ({"object"} if "properties" in root else set())
        if len(_SHAPES) >= _MAX_SHAPES:
            del _SHAPES[next(iter(_SHAPES))]
        known = _SHAPES[id(schema)] = (schema, shape_of(schema) == "json", frozenset(types))
    return known[1], known[2]


def _fits_root(data: Any, types: frozenset[str]) -> bool:
    """Whether data may be of the schema's top-level type (a list is never an object)."""
    if not types:
        return True
    kind = "object" if isinstance(data, dict) else "array" if isinstance(data, list) else None
    return kind is None or kind in types


def _strict(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int) -> Reading | Misreading:
    """The value as written (``_extract``), with no repair."""
    notes: list[dict[str, str]] = []
    try:
        raw = extract(text, schema, notes=notes)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    reading = _settle(raw, schema, normalizers, float_digits, tuple(notes))
    if isinstance(reading, Reading) and _may_echo(raw) and echoed(raw, schema):
        return _echo()
    return reading


def _settle(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int,
            coercions: tuple[dict[str, str], ...] = ()) -> Reading | Misreading:
    """normalize -> validate -> canonicalize of extracted data."""
    checked = _check(data, schema, normalizers)
    if isinstance(checked, Misreading):
        return checked
    return _finish(checked[0], schema, float_digits, coercions + checked[1])


def _check(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]]) -> tuple[Any, tuple[dict[str, str], ...]] | Misreading:
    """normalize -> validate: ``(value, what normalizing took)``, or a Misreading (where a text
    was refused, as a negation or a number of two readings, its reason in place of the validator's)."""
    said = Said()
    normalized = normalize(data, schema.json_schema, normalizers, said)
    try:
        value, used = validate(normalized, data, schema)
    except ValidationFailure as failure:
        if not said.refusals:
            return Misreading("validate", failure)
        refused = {tuple(path) for path, _ in said.refusals}
        errors = [refusal.error(tuple(path)) for path, refusal in said.refusals]
        errors += [e for e in failure.errors if not any(tuple(e.get("loc", ()))[: len(p)] == p for p in refused)]
        return Misreading("validate", tuple(errors))
    return value, tuple(said.notes) if used is normalized else ()


def _finish(value: Any, schema: Schema[Any], float_digits: int, coercions: tuple[dict[str, str], ...],
            open_ended: bool = False) -> Reading | Misreading:
    """canonicalize a validated value into its Reading."""
    dumped = schema.dump(value)
    form = canonical_form(dumped, schema.json_schema, float_digits)
    try:
        key = canonical_key(form, strict=True)
    except NotUnicode:  # "\ud800" is no text: it could be neither stored nor sent on
        return Misreading("validate", ({"loc": (), "msg": "a lone surrogate: not valid Unicode text", "type": "unicode"},))
    except ValueError:  # NaN or infinity: JSON has no such number, so no vote key either
        return Misreading("validate", ({"loc": (), "msg": "not a finite number", "type": "finite_number"},))
    return Reading(value, dumped, form, key, coercions, open_ended)


def _echo() -> Misreading:
    return Misreading("extract", ({"loc": (), "msg": ECHO, "type": "schema_echo"},))


def _lenient(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int,
             tried: tuple[Any, Reading | Misreading] | None = None, *, misses: Collection[int] = (),
             known: dict[int, tuple[Any, int]] | None = None) -> Reading | Misreading | None:
    """The best valid candidate; else the most telling failure (an echo, or the fewest errors).

    A candidate that is JSON as written and valid as it is wins at once (the strict reading:
    clean JSON costs what it did before any repair existed). ``misses``: where the strict
    reading found no JSON value."""
    tally = hinted = _Tally(text)
    deferred = []
    for candidate in _found(text, schema, misses, tally.enough, known):
        if tally.best is not None and tally.best[0] <= FLOORS[candidate.origin]:
            break  # nothing from here on can cost less than the best so far
        if not candidate.fixes:  # JSON as written: valid as it is, it takes no coercion and nothing beats it
            # (the strict reading already found this very value invalid: not validated twice)
            same = tried is not None and isinstance(tried[1], Misreading) and (candidate.data is tried[0] or candidate.data == tried[0])
            checked = tried[1] if same and tried is not None and isinstance(tried[1], Misreading) else _check(candidate.data, schema, normalizers)
            if not isinstance(checked, Misreading) and not (_may_echo(candidate.data) and echoed(candidate.data, schema)):
                return _finish(checked[0], schema, float_digits, checked[1])
        fixed = 0
        for f in candidate.fixes:
            fixed += _FIX_COSTS.get(f.kind, 1)
        if candidate.fixes and (tally.best is None or fixed < tally.best[0]):
            # The data as read is tried first: a value valid as it is is never coerced (a key
            # "start " stays), and needs no coercer's walk. (A data the coercer would have to
            # change for its types, a scalar where a list belongs, is invalid as it stands unless
            # the schema's own validators take it: then it is taken as they took it.)
            found = _try(candidate, candidate.data, [], fixed, schema=schema, normalizers=normalizers, hinted=hinted)
            if not isinstance(found, Misreading):
                tally.take(found)
                continue
            data, coercions, misfits = coerce(candidate.data, schema.json_schema, candidate.closed)
            if not coercions:
                tally.take(found)
                continue
        elif candidate.fixes:
            continue  # cannot win: its repairs alone cost no less than the best so far
        else:
            data, coercions, misfits = coerce(candidate.data, schema.json_schema, candidate.closed)
            if not coercions:  # invalid as written, and nothing to coerce
                if hinted() and echoed(candidate.data, schema):
                    tally.echo = True
                elif isinstance(checked, Misreading):
                    tally.fail(checked)
                continue
        cost = fixed + sum(c.cost for c in coercions)
        if not tally.beaten_by(cost):
            continue  # cannot win: an earlier candidate is at least as good
        if misfits:
            # Validation may still accept it (a format or pattern the coercer does not model),
            # but a candidate that fits the schema's types is tried first.
            deferred.append((candidate, data, coercions, cost))
            continue
        tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted))
    if tally.best is None:
        for candidate, data, coercions, cost in deferred:
            if tally.beaten_by(cost):
                tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted))
    if tally.best is not None:
        return _finish(tally.best[1], schema, float_digits, tally.best[2], open_ended=tally.best[3])
    if tally.echo:
        return _echo()
    return tally.failure


_Found = tuple[int, Any, tuple[dict[str, str], ...], bool]  # (cost, value, coercions, open-ended)


class _Tally:
    """The candidates tried so far: the best valid one, whether one was an echo, the most telling
    failure; and, called, whether the text names any type at all (so it may hold an echoed
    schema), looked for once and only when asked."""

    __slots__ = ("best", "echo", "failure", "hint", "text")

    def __init__(self, text: str) -> None:
        self.best: _Found | None = None
        self.echo = False
        self.failure: Misreading | None = None
        self.text = text
        self.hint: bool | None = None

    def __call__(self) -> bool:
        if self.hint is None:
            self.hint = _ANY_HINT.search(self.text.lower()) is not None
        return self.hint

    def enough(self, origin: str) -> bool:
        """Whether no candidate of this origin could beat the best so far (its least cost is no less)."""
        return self.best is not None and self.best[0] <= FLOORS[origin]

    def beaten_by(self, cost: int) -> bool:
        """Whether a candidate of this cost could beat the best so far."""
        return self.best is None or cost < self.best[0]

    def take(self, found: _Found | Misreading | str) -> None:
        if isinstance(found, tuple):
            self.best = found
        elif isinstance(found, Misreading):
            self.fail(found)
        elif found == "echo":
            self.echo = True

    def fail(self, found: Misreading) -> None:
        if self.failure is None or found.count < self.failure.count:
            self.failure = found


def _found(text: str, schema: Schema[Any], misses: Collection[int] = (),
           enough: Callable[[str], bool] | None = None, known: dict[int, tuple[Any, int]] | None = None) -> Iterator[Candidate]:
    """Every candidate in the text, then the bare answer to a one-field object; ``enough(origin)``
    stops the search before the candidates of an origin that could not win (see :class:`_Tally`)."""
    yield from iter_candidates(text, misses, enough, known)
    if enough is not None and enough("implied"):
        return
    bare = implied(text, schema)
    if bare is not None:
        yield bare


def _try(candidate: Candidate, data: Any, coercions: list[Coercion], cost: int, *, schema: Schema[Any],
         normalizers: Sequence[Callable[[str], str]], hinted: _Tally) -> _Found | Misreading | str:
    """One coerced candidate validated: ``(cost, value, coercions)``, its Misreading, or "echo"."""
    checked = _check(data, schema, normalizers)
    if _may_echo(candidate.data) and hinted() and echoed(candidate.data, schema):
        return "echo"  # an echo is never a value, valid or not
    if isinstance(checked, Misreading):
        return checked
    return cost, checked[0], _said(candidate.fixes, coercions) + checked[1], candidate.open_end


def _said(fixes: tuple[Fix, ...], coercions: list[Coercion]) -> tuple[dict[str, str], ...]:
    """The repairs, then the coercions, as ``{"path", "fix"}`` dicts, each (path, fix) once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for path, kind in [*fixes, *((c.path, c.fix) for c in coercions)]:
        mark = (".".join(map(str, path)), kind)
        if mark not in seen:
            seen.add(mark)
            out.append({"path": mark[0], "fix": kind})
    return tuple(out)
