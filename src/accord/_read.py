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

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ._candidates import FLOORS, MAX_LENIENT_CHARS, Candidate, iter_candidates
from ._canonical import DEFAULT_FLOAT_DIGITS, canonical_form, canonical_key
from ._coerce import Coercion, coerce
from ._extract import ECHO, Extract, ExtractionFailure, _bool, _unwrap, check_depth, echoed, extract, shape_of
from ._jsonish import Fix
from ._normalize import normalize, resolve, types_of
from ._schema import Schema
from ._validate import ValidationFailure, validate

IMPLIED = "the bare answer as the only field"
STRICT = Extract(strict=True)
LENIENT = Extract()
_FIX_COSTS = {"closed a cut-off object": 3, "dropped a member cut off": 3, "key-value lines as an object": 2,
              "unescaped quote in a string": 2, "unquoted string": 2, IMPLIED: 4}
# Text that may hold an echoed schema: a quoted schema keyword or type name (JSON as written), or
# any type name at all (text read leniently). Cheap tests, so clean JSON pays almost nothing.
_QUOTED_HINT = re.compile(
    r'"(?:properties|\$defs|\$ref|\$schema|definitions|anyOf|oneOf|allOf|additionalProperties|type|[Ss]tring|str|'
    r'[Ii]nt(?:eger)?|[Ff]loat|[Nn]umber|double|[Bb]ool(?:ean)?|[Dd]ate|YYYY-MM-DD)"'
)
_NOTHING = ({"loc": (), "msg": "no JSON value found in the output", "type": "extract"},)
_ANY_HINT = ("propert", "$defs", "$ref", "type", "str", "int", "float", "number", "double", "bool", "date", "yyyy")
_BARE_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_EQUATION = re.compile(r"[-+*/x×÷().\d\s]+=\s*([-+]?\d+(?:\.\d+)?)\s*\.?")
_STATED = re.compile(r"(?:the )?(?:answer|result)(?: is)?\s*:?\s*\**([-+]?\d+(?:\.\d+)?)\**\s*\.?", re.I)
_LEADING_BOOL = re.compile(r"(yes|no|true|false)(?:[.!,]|\Z)", re.I)


@dataclass(frozen=True)
class Reading:
    """A valid output: the validated value, its JSON data, its canonical form and vote key, and the
    repairs and coercions it took (``{"path", "fix"}`` dicts; empty when read as written)."""

    value: Any
    data: Any
    form: Any
    key: str
    coercions: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class Misreading:
    """An invalid output: which stage rejected it and the structured errors."""

    stage: str  # "extract" | "validate"
    errors: tuple[dict[str, Any], ...]

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'value'}: {e.get('msg')}" for e in self.errors)


def read(
    text: str,
    schema: Schema[Any],
    normalizers: Sequence[Callable[[str], str]] = (),
    float_digits: int = DEFAULT_FLOAT_DIGITS,
    policy: Extract = LENIENT,
) -> Reading | Misreading:
    """Turn one model output into a Reading (valid) or a Misreading (why not).

    ``normalizers`` are the per-schema text normalizers; ``float_digits`` the significant digits
    floats keep in the vote key; ``policy`` whether repairs are allowed (:class:`~accord.Extract`).
    """
    if policy.strict or shape_of(schema) != "json" or not isinstance(text, str) or len(text) > MAX_LENIENT_CHARS:
        return _strict(text, schema, normalizers, float_digits)
    try:
        check_depth(text)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    found = _lenient(text, schema, normalizers, float_digits)
    return found if found is not None else Misreading("extract", _NOTHING)


def _strict(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int) -> Reading | Misreading:
    """The value as written (``_extract``), with no repair."""
    try:
        raw = extract(text, schema)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    reading = _settle(raw, schema, normalizers, float_digits)
    if isinstance(reading, Reading) and _QUOTED_HINT.search(text) and echoed(raw, schema):
        return _echo()
    return reading


def _settle(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int,
            coercions: tuple[dict[str, str], ...] = ()) -> Reading | Misreading:
    """normalize -> validate -> canonicalize of extracted data."""
    checked = _check(data, schema, normalizers)
    return checked if isinstance(checked, Misreading) else _finish(checked, schema, float_digits, coercions)


def _check(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]]) -> Any:
    """normalize -> validate: the validated value, or a Misreading."""
    normalized = normalize(data, schema.json_schema, normalizers)
    try:
        value, _ = validate(normalized, data, schema)
    except ValidationFailure as failure:
        return Misreading("validate", tuple(failure.errors))
    return value


def _finish(value: Any, schema: Schema[Any], float_digits: int, coercions: tuple[dict[str, str], ...]) -> Reading | Misreading:
    """canonicalize a validated value into its Reading."""
    dumped = schema.dump(value)
    form = canonical_form(dumped, schema.json_schema, float_digits)
    try:
        key = canonical_key(form)
    except ValueError:  # NaN or infinity: JSON has no such number, so no vote key either
        return Misreading("validate", ({"loc": (), "msg": "not a finite number", "type": "finite_number"},))
    return Reading(value, dumped, form, key, coercions)


def _echo() -> Misreading:
    return Misreading("extract", ({"loc": (), "msg": ECHO, "type": "schema_echo"},))


def _lenient(text: str, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int) -> Reading | Misreading | None:
    """The best valid candidate; else the most telling failure (an echo, or the fewest errors).

    A candidate that is JSON as written and valid as it is wins at once (the strict reading:
    clean JSON costs what it did before any repair existed)."""
    best: tuple[int, Any, tuple[dict[str, str], ...]] | None = None
    failure: Misreading | None = None
    echo = False
    lowered = text.lower()
    hinted = any(word in lowered for word in _ANY_HINT)
    deferred = []
    for candidate in _found(text, schema):
        if best is not None and best[0] <= FLOORS[candidate.origin]:
            break  # nothing from here on can cost less than the best so far
        fixed = sum(_FIX_COSTS.get(f.kind, 1) for f in candidate.fixes)
        data, coercions, misfits = coerce(candidate.data, schema.json_schema, candidate.closed)
        if not any(c.breaking for c in coercions) and (best is None or fixed < best[0]):
            # Nothing the coercer would change makes the data invalid as it stands, so the data as
            # read is tried first: a value valid as it is is never coerced (a key "start " stays).
            found = _try(candidate, candidate.data, [], fixed, schema=schema, normalizers=normalizers, hinted=hinted)
            if isinstance(found, tuple):
                if not candidate.fixes:
                    return _finish(found[1], schema, float_digits, ())  # JSON as written and valid: nothing beats it
                best = found
                continue
            if found == "echo":
                echo = True
                continue
            if not coercions:
                if isinstance(found, Misreading) and (failure is None or len(found.errors) < len(failure.errors)):
                    failure = found
                continue
        cost = sum(_FIX_COSTS.get(f.kind, 1) for f in candidate.fixes) + sum(c.cost for c in coercions)
        if best is not None and cost >= best[0]:
            continue  # cannot win: an earlier candidate is at least as good
        if misfits:
            # Validation may still accept it (a format or pattern the coercer does not model),
            # but a candidate that fits the schema's types is tried first.
            deferred.append((candidate, data, coercions, cost))
            continue
        found = _try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted)
        if isinstance(found, tuple):
            best = found
        elif found == "echo":
            echo = True
        elif isinstance(found, Misreading) and (failure is None or len(found.errors) < len(failure.errors)):
            failure = found
    if best is None:
        for candidate, data, coercions, cost in deferred:
            if best is not None and cost >= best[0]:
                continue
            found = _try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=hinted)
            if isinstance(found, tuple):
                best = found
            elif found == "echo":
                echo = True
            elif isinstance(found, Misreading) and (failure is None or len(found.errors) < len(failure.errors)):
                failure = found
    if best is not None:
        return _finish(best[1], schema, float_digits, best[2])
    if echo:
        return _echo()
    return failure


def _found(text: str, schema: Schema[Any]) -> Iterator[Candidate]:
    """Every candidate in the text, then the bare answer to a one-field object."""
    yield from iter_candidates(text)
    implied = _implied(text, schema)
    if implied is not None:
        yield implied


def _try(candidate: Candidate, data: Any, coercions: list[Coercion], cost: int, *, schema: Schema[Any],
         normalizers: Sequence[Callable[[str], str]], hinted: bool) -> tuple[int, Any, tuple[dict[str, str], ...]] | Misreading | str:
    """One coerced candidate validated: ``(cost, value, coercions)``, its Misreading, or "echo"."""
    checked = _check(data, schema, normalizers)
    if hinted and echoed(candidate.data, schema):
        return "echo"  # an echo is never a value, valid or not
    if isinstance(checked, Misreading):
        return checked
    return cost, checked, tuple(_dedupe([_fix(f) for f in candidate.fixes] + [c.to_dict() for c in coercions]))


def _fix(fix: Fix) -> dict[str, str]:
    return {"path": ".".join(map(str, fix.path)), "fix": fix.kind}


def _dedupe(items: list[dict[str, str]]) -> list[dict[str, str]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for item in items:
        mark = (item["path"], item["fix"])
        if mark not in seen:
            seen.add(mark)
            out.append(item)
    return out


def _implied(text: str, schema: Schema[Any]) -> Candidate | None:
    """A bare answer to an object of one field (``Yes.`` for ``{answer: bool}``), as that object.

    Only when the text is nothing but the answer (a number, an equation's result, "the answer is
    N", a yes/no word opening the text, an enum member, a date), or its first line is "the answer
    is N", so prose never turns into a value.
    """
    root = schema.json_schema or {}
    props: dict[str, Any] = root["properties"] if isinstance(root.get("properties"), dict) else {}
    if len(props) != 1:
        return None
    name, node = next(iter(props.items()))
    node = resolve(node, root)
    types = types_of(node)
    bare = _unwrap(text)
    value: Any = None
    if types & {"integer", "number"}:
        first_line = text.strip().split("\n", 1)[0].strip()
        for pattern, where in ((_BARE_NUMBER, bare), (_EQUATION, bare), (_STATED, bare), (_STATED, first_line)):
            match = pattern.fullmatch(where)
            if match:
                token = match.group(match.lastindex or 0)
                value = float(token) if "." in token else int(token)
                break
    elif "boolean" in types:
        match = _LEADING_BOOL.match(bare)
        if match:
            value = _bool(match.group(1))
    elif (isinstance(node.get("enum"), list) or node.get("format") in ("date", "date-time")) and (
        bare and "\n" not in bare and len(bare) <= 64
    ):
        value = bare
    if value is None:
        return None
    return Candidate({name: value}, (Fix((name,), IMPLIED),), frozenset(), "implied")
