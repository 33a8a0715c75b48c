"""``Decimal``, a number like any other: every number form a float gets, and a vote by value.

A JSON Schema cannot tell a ``Decimal`` from ``float | str`` (pydantic writes both as a number or
a string), so the schema's own validator says where one is: a string it refuses as a decimal
(``decimal_parsing``) is read as ``_numbers`` reads a number at every depth, with its digits kept
(``$1,234.50`` is ``Decimal('1234.50')``, recorded), and validated again. In the vote key a
Decimal is its value, whatever its digits: ``"1234.50"`` and ``1234.5`` are one answer, and
``10000000.01`` and ``10000000.02`` are two.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from ..schema._schema import Schema, ValidationFailure
from ._coercions import Refusal
from ._numbers import number

_HAS: dict[int, tuple[Schema[Any], bool]] = {}  # id(schema) -> (schema, whether it holds a Decimal)
_MAX = 256
_SCALE = 30  # a key writes a Decimal in full up to 10**30 and down to 10**-30, else in scientific notation


def has_decimals(schema: Schema[Any]) -> bool:
    """Whether the schema's validator takes a ``Decimal`` anywhere (once per schema)."""
    known = _HAS.get(id(schema))
    if known is None or known[0] is not schema:
        adapter = getattr(schema, "_adapter", None)
        found = adapter is not None and _mentions(getattr(adapter, "core_schema", None), 0)
        if len(_HAS) >= _MAX:
            del _HAS[next(iter(_HAS))]
        known = _HAS[id(schema)] = (schema, found)
    return known[1]


def _mentions(node: Any, depth: int) -> bool:
    if depth > 200:
        return True
    if isinstance(node, dict):
        return node.get("type") == "decimal" or any(_mentions(v, depth + 1) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(_mentions(v, depth + 1) for v in node)
    return False


def decimals(data: Any, failure: ValidationFailure, schema: Schema[Any], said: Any) -> tuple[Any, tuple[dict[str, str], ...]] | None:
    """``(value, coercions)`` of data whose only fault was a number form where a Decimal belongs
    (each read as ``_numbers`` reads it, its digits kept, recorded in ``said``); None when there
    is none, or another fault (a form refused is added to ``said``'s refusals)."""
    if not has_decimals(schema):
        return None
    errors = failure.errors
    if not errors or any(e.get("type") != "decimal_parsing" for e in errors):
        return None
    fixed = data
    for error in errors:
        loc, text = tuple(error.get("loc", ())), error.get("input")
        if not isinstance(text, str) or not _at(fixed, loc, text):
            return None
        read = number(text, False, nested=bool(loc), exact=True)
        if isinstance(read, Refusal):
            said.refuse(loc, read)
            return None
        if read is None:
            return None
        value = Decimal(read[0]) if not isinstance(read[0], Decimal) else read[0]
        fixed = _put(fixed, loc, value)
        said.note(loc, read[1] or f"{text!r} as {value}")
    try:
        return schema.validate(fixed), tuple(said.notes)
    except ValidationFailure:
        return None


def _at(data: Any, loc: tuple[Any, ...], text: str) -> bool:
    """Whether ``text`` stands at ``loc`` in the data (pydantic's loc may name a union's branch)."""
    for part in loc:
        if (isinstance(data, dict) and part in data) or (isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)):
            data = data[part]
        else:
            return False
    return bool(data == text)


def _put(data: Any, loc: tuple[Any, ...], value: Any) -> Any:
    """A copy of the data with ``value`` at ``loc``."""
    if not loc:
        return value
    head, rest = loc[0], loc[1:]
    if isinstance(data, dict):
        return {**data, head: _put(data[head], rest, value)}
    out = list(data)
    out[head] = _put(out[head], rest, value)
    return out


def exact_form(schema: Schema[Any], value: Any, dumped: Any) -> Any:
    """The dumped data with each Decimal the value holds written by its value (:func:`decimal_key`);
    the data itself for a schema with no Decimal."""
    if not has_decimals(schema):
        return dumped
    adapter = schema._adapter
    assert adapter is not None
    return _merge(adapter.dump_python(value), dumped)


def _merge(python: Any, data: Any) -> Any:
    if isinstance(python, Decimal):
        return decimal_key(python) if python.is_finite() else data
    if isinstance(python, dict) and isinstance(data, dict):
        return {k: _merge(python[k], v) if k in python else v for k, v in data.items()}
    if isinstance(python, (list, tuple)) and isinstance(data, list) and len(python) == len(data):
        return [_merge(p, d) for p, d in zip(python, data, strict=True)]
    return data  # a set (its order is its own), or anything else: as dumped


def decimal_key(value: Decimal) -> str:
    """A Decimal as its vote key writes it: its value, with no trailing zero (``1234.50`` and
    ``1234.5`` alike), in full up to 30 digits either side of the point."""
    if not value:
        return "0"
    value = value.normalize()
    return format(value, "f") if -_SCALE <= value.adjusted() <= _SCALE else str(value)
