"""One model output, read top to bottom: extract -> normalize -> validate -> canonicalize.

First strictly: the value as written (``_extract``). If that gives no valid value, and the
:class:`~accord.Extract` policy allows, leniently and by the schema: every candidate value in the
text (``_candidates``: fenced blocks, JSON-like spans repaired by ``_jsonish``, ``key: value``
blocks, and a bare answer to a one-field object), each bent toward the schema (``_coerce``) and
validated. Candidates that are one value are one answer, read with the fewest and smallest
repairs (the earliest on a tie); different values are refused unless one is marked as the final
answer (``_answers``: one answer or none, for the strict reading too). What was done is kept on the
Reading (``coercions``), so every ballot says it. A candidate that is the schema echoed back is
never a value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema._schema import Schema
from ._answers import Found, Tally, alone, fields_of, one_answer
from ._bare import IMPLIED, implied, one_number
from ._candidates import MAX_LENIENT_CHARS, Candidate, iter_candidates
from ._canonical import DEFAULT_FLOAT_DIGITS, NotUnicode, canonical_form, canonical_key
from ._coerce import Coercion, coerce
from ._deadline import Interrupt, TimeUp, settle, within
from ._echo import ECHO, echoed, may_echo
from ._exact import decimals, exact_form, has_decimals
from ._extract import NOTHING, Extract, ExtractionFailure, extract, first_json, scalar_union, shape_of
from ._jsonish import EXACT, PLAIN, Fix
from ._leaves import Said
from ._normalize import normalize
from ._plan import types_of
from ._validate import ValidationFailure, validate

log = logging.getLogger("accord")

STRICT = Extract(strict=True)
LENIENT = Extract()
_FIX_COSTS = {"closed a cut-off object": 3, "dropped a member cut off": 3, "key-value lines as an object": 2,
              "unescaped quote in a string": 2, "unquoted string": 2, IMPLIED: 4}
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


class Misreading:  # noqa: PLW1641 - equal by value (its errors are dicts), so never hashed: Python sets __hash__ to None
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

    def __repr__(self) -> str:
        return f"Misreading(stage={self.stage!r}, errors={self.errors!r})"

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'value'}: {e.get('msg')}" for e in self.errors)


def read(
    text: str,
    schema: Schema[Any],
    normalizers: Sequence[Callable[[str], str]] = (),
    float_digits: int | None = DEFAULT_FLOAT_DIGITS,
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


def _read(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int | None,
          policy: Extract) -> Reading | Misreading:
    json_shape, root_types, fields, exact, numeric = _shape(schema)
    if policy.strict or not json_shape or not isinstance(text, str) or len(text) > MAX_LENIENT_CHARS:
        return _strict(text, schema, normalizers, float_digits, json_shape, fields=fields)
    tried: tuple[Any, Reading | Misreading] | None = None
    misses: set[int] = set()  # where the strict reading found no JSON: the lenient one does not decode there again
    known: dict[int, tuple[Any, int]] = {}  # and what it decoded, by where
    where: list[int] = []
    try:
        raw = first_json(text, misses, known, where, EXACT if exact else PLAIN)  # the value as written first (what ``extract`` does for a JSON shape)
    except ExtractionFailure as failure:  # nested too deeply
        return Misreading("extract", tuple(failure.errors))
    raw = text.strip() if raw is NOTHING and text.strip() and scalar_union(schema) else raw  # read as a field reads it
    if raw is not NOTHING and _fits_root(raw, root_types):
        reading = _settle(raw, schema, normalizers, float_digits, exact=exact)
        tried = (raw, reading)
        if (isinstance(reading, Reading) and not (may_echo(raw) and echoed(raw, schema))
                and (not where or alone(text, where, fields, numeric))):
            return reading  # one value, and nothing else in the text may be another
    found = _lenient(text, schema, normalizers, float_digits, tried, misses=misses, known=known)
    if found is None and tried is not None and isinstance(tried[1], Misreading):
        return tried[1]  # the value as written, and why it is none (a bare text under a union of scalars)
    return found if found is not None else Misreading("extract", _NOTHING)


# id(schema) -> (schema, json?, types, fields, decimals?, an object of one numeric field?)
_SHAPES: dict[int, tuple[Schema[Any], bool, frozenset[str], frozenset[str] | None, bool, bool]] = {}
_MAX_SHAPES = 256


def _shape(schema: Schema[Any]) -> tuple[bool, frozenset[str], frozenset[str] | None, bool, bool]:
    """Whether the schema reads as JSON, its top-level types (empty: any), its fields as
    ``_answers`` compares them, whether it holds a Decimal (``_exact``) and whether it is an object
    of one numeric field (``_bare.one_number``), once per schema.

    Keyed by identity (a plain dict costs less than a WeakKeyDictionary on every read): each entry
    holds its schema, so no id is reused while it lives; bounded, the oldest dropped first."""
    known = _SHAPES.get(id(schema))
    if known is None or known[0] is not schema:
        root = schema.json_schema or {}
        types = frozenset(types_of(root) or ({"object"} if "properties" in root else set()))
        if len(_SHAPES) >= _MAX_SHAPES:
            del _SHAPES[next(iter(_SHAPES))]
        known = _SHAPES[id(schema)] = (schema, shape_of(schema) == "json", types, fields_of(root, types), has_decimals(schema),
                                       one_number(schema))
    return known[1], known[2], known[3], known[4], known[5]


def _fits_root(data: Any, types: frozenset[str]) -> bool:
    """Whether data may be of the schema's top-level type (a list is never an object)."""
    if not types:
        return True
    kind = "object" if isinstance(data, dict) else "array" if isinstance(data, list) else None
    return kind is None or kind in types


def _strict(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int | None,
            json_shape: bool = False, *, fields: frozenset[str] | None = None) -> Reading | Misreading:
    """The value as written (``_extract``), with no repair; of JSON values as written, one answer or none."""
    notes: list[dict[str, str]] = []
    where: list[int] = []
    try:
        raw = extract(text, schema, notes=notes, where=where if json_shape else None)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    reading = _settle(raw, schema, normalizers, float_digits, tuple(notes), exact=has_decimals(schema))
    if isinstance(reading, Reading) and may_echo(raw) and echoed(raw, schema):
        return _echo()
    if isinstance(reading, Reading) and where and not alone(text, where, fields):
        found = [Found(0, reading.value, reading.coercions, False, (where[0], where[1]), raw)]
        for candidate in iter_candidates(text, exact=has_decimals(schema)):
            if candidate.fixes or candidate.origin not in ("fenced", "json") or candidate.data is raw:
                continue
            checked = _check(candidate.data, schema, normalizers)
            if not isinstance(checked, Misreading) and not (may_echo(candidate.data) and echoed(candidate.data, schema)):
                found.append(Found(0, checked[0], checked[1], False, candidate.span, candidate.data))
        return _decide(text, found, fields, schema, float_digits)
    return reading


def _decide(text: str, found: list[Found], fields: frozenset[str] | None, schema: Schema[Any],
            float_digits: int | None) -> Reading | Misreading:
    """One answer among the valid candidates, or the Misreading of an ambiguous text (``_answers``)."""
    exact = has_decimals(schema)
    decided = one_answer(text, found, fields, lambda f: _finish(f.value, schema, float_digits, f.coercions, f.open_end, exact=exact),
                         lambda r: r.key if isinstance(r, Reading) else None)
    if isinstance(decided, tuple):
        return Misreading("extract", ({"loc": (), "msg": decided[1], "type": decided[0]},))
    return decided


def _settle(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int | None,
            coercions: tuple[dict[str, str], ...] = (), *, exact: bool = False) -> Reading | Misreading:
    """normalize -> validate -> canonicalize of extracted data."""
    checked = _check(data, schema, normalizers)
    if isinstance(checked, Misreading):
        return checked
    return _finish(checked[0], schema, float_digits, coercions + checked[1], exact=exact)


def _check(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]]) -> tuple[Any, tuple[dict[str, str], ...]] | Misreading:
    """normalize -> validate: ``(value, what normalizing took)``, or a Misreading (where a text
    was refused, as a negation or a number of two readings, its reason in place of the validator's;
    a refusal is a Misreading even where the validator would take the data: ``true`` for a number)."""
    said = Said()
    normalized = normalize(data, schema.json_schema, normalizers, said)
    try:
        value, used = validate(normalized, data, schema)
    except ValidationFailure as failure:
        exact = decimals(normalized, failure, schema, said) if not said.refusals else None
        if exact is not None:
            return exact
        if not said.refusals:
            return Misreading("validate", failure)
        refused = {tuple(path) for path, _ in said.refusals}
        errors = [refusal.error(tuple(path)) for path, refusal in said.refusals]
        errors += [e for e in failure.errors if not any(tuple(e.get("loc", ()))[: len(p)] == p for p in refused)]
        return Misreading("validate", tuple(errors))
    if said.refusals:
        return Misreading("validate", tuple(refusal.error(tuple(path)) for path, refusal in said.refusals))
    return value, tuple(said.notes) if used is normalized else ()


def _finish(value: Any, schema: Schema[Any], float_digits: int | None, coercions: tuple[dict[str, str], ...],
            open_ended: bool = False, *, exact: bool = False) -> Reading | Misreading:
    """canonicalize a validated value into its Reading (``exact``: the schema holds a Decimal)."""
    dumped = schema.dump(value)
    form = canonical_form(exact_form(schema, value, dumped) if exact else dumped, schema.json_schema, float_digits)
    try:
        key = canonical_key(form, strict=True)
    except NotUnicode:  # "\ud800" is no text: it could be neither stored nor sent on
        return Misreading("validate", ({"loc": (), "msg": "a lone surrogate: not valid Unicode text", "type": "unicode"},))
    except ValueError:  # NaN or infinity: JSON has no such number, so no vote key either
        return Misreading("validate", ({"loc": (), "msg": "not a finite number", "type": "finite_number"},))
    return Reading(value, dumped, form, key, coercions, open_ended)


def _echo() -> Misreading:
    return Misreading("extract", ({"loc": (), "msg": ECHO, "type": "schema_echo"},))


def _lenient(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int | None,
             tried: tuple[Any, Reading | Misreading] | None = None, *, misses: Collection[int] = (),
             known: dict[int, tuple[Any, int]] | None = None) -> Reading | Misreading | None:
    """The one valid answer among the candidates (``_answers``: several different ones are
    refused); else the most telling failure (an echo, or the fewest errors).

    While the best candidate so far is :func:`~._answers.alone` in the text, the search stops as
    soon as nothing left could cost less (a candidate that is JSON as written and valid as it is
    ends it at once: clean JSON costs what it did before any repair existed). ``misses``: where
    the strict reading found no JSON value."""
    _, _, fields, exact, _ = _shape(schema)
    tally = hinted = Tally(text, fields, schema)
    deferred = []
    for candidate in _found(text, schema, misses, tally.enough, known, exact=exact):
        if tally.enough(candidate.origin):
            break  # nothing from here on can cost less than the best so far, and nothing else may be a value
        if not candidate.fixes:  # JSON as written: valid as it is, it takes no coercion and nothing beats it
            # (the strict reading already read this very value: not validated twice)
            same = tried is not None and (candidate.data is tried[0] or candidate.data == tried[0])
            checked: Any = tried[1] if same and tried is not None else _check(candidate.data, schema, normalizers)
            if isinstance(checked, Reading):
                checked = (checked.value, checked.coercions)
            if not isinstance(checked, Misreading) and not (may_echo(candidate.data) and echoed(candidate.data, schema)):
                tally.take(Found(0, checked[0], checked[1], candidate.open_end, candidate.span, candidate.data))
                if tally.enough("fenced"):
                    break
                continue
        fixed = 0
        for f in candidate.fixes:
            fixed += _FIX_COSTS.get(f.kind, 1)
        if candidate.fixes and (tally.best is None or fixed < tally.best.cost or not tally.alone()):
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
            continue  # cannot win: an earlier candidate is at least as good, and it is alone
        if misfits:
            # Validation may still accept it (a format or pattern the coercer does not model),
            # but a candidate that fits the schema's types is tried first.
            deferred.append((candidate, data, coercions, cost))
            continue
        tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted))
    for candidate, data, coercions, cost in deferred:
        if tally.beaten_by(cost):
            tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted))
    if tally.found:
        return _decide(text, tally.found, fields, schema, float_digits)
    if tally.echo:
        return _echo()
    failure: Misreading | None = tally.failure
    return failure


def _found(text: str, schema: Schema[Any], misses: Collection[int] = (), enough: Callable[[str], bool] | None = None,
           known: dict[int, tuple[Any, int]] | None = None, *, exact: bool = False) -> Iterator[Candidate]:
    """Every candidate in the text, then the bare answer to a one-field object; ``enough(origin)``
    stops the search before the candidates of an origin that could not win (see :class:`Tally`)."""
    yield from iter_candidates(text, misses, enough, known, exact)
    if enough is not None and enough("implied"):
        return
    bare = implied(text, schema)
    if bare is not None:
        yield bare


def _try(candidate: Candidate, data: Any, coercions: list[Coercion], cost: int, *, schema: Schema[Any],
         normalizers: Sequence[Callable[[str], str]], hinted: Tally) -> Found | Misreading | str:
    """One coerced candidate validated: its :class:`~._answers.Found`, its Misreading, or "echo"."""
    checked = _check(data, schema, normalizers)
    if may_echo(candidate.data) and hinted() and echoed(candidate.data, schema):
        return "echo"  # an echo is never a value, valid or not
    if isinstance(checked, Misreading):
        return checked
    return Found(cost, checked[0], _said(candidate.fixes, coercions) + checked[1], candidate.open_end, candidate.span, candidate.data)


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
