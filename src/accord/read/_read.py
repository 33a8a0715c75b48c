"""One model output, read top to bottom: extract -> normalize -> validate -> canonicalize.

First strictly: the value as written (``_extract``). If that gives no valid value, and the
:class:`~accord.Extract` policy allows, leniently and by the schema: every candidate value in the
text (``_candidates``: fenced blocks, JSON-like spans repaired by ``_jsonish``, ``key: value``
blocks, and a bare answer to a one-field object), each bent toward the schema (``_coerce``) and
validated. Candidates that are one value are one answer, read with the fewest and smallest
repairs (the earliest on a tie); different values are refused unless one is marked as the final
answer (``_answers``: one answer or none, for the strict reading too; ``_lenient`` searches, and
``_settle`` makes each value a Reading or a Misreading). What was done is kept on the
Reading (``coercions``), so every ballot says it. A candidate that is the schema echoed back is
never a value.
"""


import logging
from typing import Any

from ..schema._schema import Schema
from ._answers import Found, alone, fields_of
from ._bare import one_number
from ._candidates import MAX_LENIENT_CHARS, iter_candidates
from ._canonical import DEFAULT_FLOAT_DIGITS
from ._deadline import Interrupt, TimeUp, settle, within
from ._echo import echoed, may_echo
from ._exact import has_decimals
from ._extract import Extract, ExtractionFailure, extract, first_json, scalar_union, shape_of
from ._jsonish import EXACT, PLAIN
from ._lenient import Normalizers, lenient
from ._locate import NOTHING
from ._plan import types_of
from ._settle import Misreading, Reading, check_data, decide, echo_refused, settle_data

__all__ = ["LENIENT", "STRICT", "Misreading", "Reading", "read"]

log = logging.getLogger("accord")

STRICT = Extract(strict=True)
LENIENT = Extract()
_NOTHING = ({"loc": (), "msg": "no JSON value found in the output", "type": "extract"},)


def read(
    text: str,
    schema: Schema[Any],
    normalizers: Normalizers = (),
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


def _read(text: str, schema: Schema[Any], normalizers: Normalizers, float_digits: int | None,
          policy: Extract) -> Reading | Misreading:
    json_shape, root_types, fields, exact, numeric = _shape(schema)
    if not _may_repair(policy, json_shape, text):
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
        reading = settle_data(raw, schema, normalizers, float_digits, exact=exact)
        tried = (raw, reading)
        if (isinstance(reading, Reading) and not (may_echo(raw) and echoed(raw, schema))
                and (not where or alone(text, where, fields, numeric))):
            return reading  # one value, and nothing else in the text may be another
    found = lenient(text, schema, normalizers, float_digits, tried, misses=misses, known=known, fields=fields, exact=exact)
    if found is None and tried is not None and isinstance(tried[1], Misreading):
        return tried[1]  # the value as written, and why it is none (a bare text under a union of scalars)
    return found if found is not None else Misreading("extract", _NOTHING)


def _may_repair(policy: Extract, json_shape: bool, text: str) -> bool:
    """Whether a text may be read leniently: the policy allows it, the schema reads as JSON, and
    the text is no longer than the lenient reader reads."""
    return not policy.strict and json_shape and isinstance(text, str) and len(text) <= MAX_LENIENT_CHARS


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


def _strict(text: str, schema: Schema[Any], normalizers: Normalizers, float_digits: int | None,
            json_shape: bool = False, *, fields: frozenset[str] | None = None) -> Reading | Misreading:
    """The value as written (``_extract``), with no repair; of JSON values as written, one answer or none."""
    notes: list[dict[str, str]] = []
    where: list[int] = []
    try:
        raw = extract(text, schema, notes=notes, where=where if json_shape else None)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    reading = settle_data(raw, schema, normalizers, float_digits, tuple(notes), exact=has_decimals(schema))
    if isinstance(reading, Reading) and may_echo(raw) and echoed(raw, schema):
        return echo_refused()
    if isinstance(reading, Reading) and where and not alone(text, where, fields):
        found = [Found(0, reading.value, reading.coercions, False, (where[0], where[1]), raw)]
        for candidate in iter_candidates(text, exact=has_decimals(schema)):
            if candidate.fixes or candidate.origin not in ("fenced", "json") or candidate.data is raw:
                continue
            checked = check_data(candidate.data, schema, normalizers)
            if not isinstance(checked, Misreading) and not (may_echo(candidate.data) and echoed(candidate.data, schema)):
                found.append(Found(0, checked[0], checked[1], False, candidate.span, candidate.data))
        return decide(text, found, fields, schema, float_digits)
    return reading
