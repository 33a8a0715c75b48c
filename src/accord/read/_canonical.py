"""Stage 6, canonicalize: the vote key of a validated value.

Votes count canonical forms, never raw text. The canonical form of a value's JSON data, guided by
its JSON Schema:

- numbers as exactly as the value holds them: an int its digits, a float every digit it holds
  (its shortest repr: ``10000000.01`` and ``10000000.02`` stay two answers), a ``Decimal`` its
  value (``_exact``: ``1234.50`` and ``1234.5`` are one); integral floats written as integers
  (``3.0`` is ``3``). Only an explicit ``Vote(float_digits=n)`` rounds floats to ``n``
  significant digits, merging every value that rounds alike (rounding groups values
  transitively, which a tolerance would not);
- set-like lists (``set[...]``, ``frozenset[...]``, ``uniqueItems``, ``accord.Unordered[...]``)
  sorted, so their order never splits a vote;
- objects with sorted keys, no whitespace (canonical JSON).

A list voted as a set of labels (``schema/_roles``: ``tags``, ``keywords``, ...) is keyed by
``vote/_decisive`` as the sorted set of its items' :func:`label` forms; normalize
(``_normalize``) keeps in the value only the items whose label form is a label, once each, so
the value and its key hold the same labels.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from ._plan import resolve

DEFAULT_FLOAT_DIGITS: int | None = None  # exact: a float's key is every digit it holds
UNORDERED = "x-accord-unordered"


class _UnorderedMarker:
    def __get_pydantic_json_schema__(self, core: Any, handler: Any) -> dict[str, Any]:
        schema: dict[str, Any] = handler(core)
        schema = handler.resolve_ref_schema(schema) if "$ref" in schema else schema
        schema[UNORDERED] = True
        return schema


_T = TypeVar("_T")

if TYPE_CHECKING:
    Unordered = Annotated[_T, ...]  # to a type checker, Unordered[list[str]] is list[str]
else:

    class Unordered:
        """``accord.Unordered[list[str]]``: a list whose order carries no meaning (voted as a set)."""

        def __class_getitem__(cls, item: Any) -> Any:
            return Annotated[item, _UnorderedMarker()]


class NotUnicode(ValueError):
    """Text holds a lone surrogate (``"\\ud800"``): no Unicode text, so UTF-8 cannot encode it."""


_SURROGATE = re.compile("[\ud800-\udfff]")
# json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False), built once
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _fast_encode() -> Callable[[Any], str]:
    """``_ENCODER.encode``, with the C encoder behind it made once (``encode`` makes it again at
    every call); ``encode`` itself where there is no C encoder."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - another interpreter's json
        return _ENCODER.encode
    made = make(None, _ENCODER.default, encoder.encode_basestring, None, ":", ",", True, False, False)
    text = encoder.encode_basestring

    def encode(data: Any) -> str:
        if isinstance(data, str):
            return str(text(data))  # the C encoder takes a container or a number
        return "".join(made(data, 0))

    return encode


_encode = _fast_encode()


def label(text: str) -> str:
    """A label as the vote compares it: case-folded, one space between words, no punctuation or
    quote at either end (``" Billing. "`` is ``billing``; ``", "`` is ``""``, no label at all)."""
    return " ".join(text.casefold().split()).strip(" .,;:!?\"'")


def canonical_key(data: Any, *, strict: bool = False) -> str:
    """Canonical JSON of data already in canonical form. A lone surrogate in a string, which
    UTF-8 cannot encode, is written as its JSON escape (``\\ud800``), so every key can be
    stored and hashed; ``strict=True`` raises :class:`NotUnicode` instead. ``ValueError`` for NaN
    or an infinity (JSON has no such number)."""
    text = _encode(data)
    if text.isascii() or _SURROGATE.search(text) is None:
        return text  # the common case: one search
    if strict:
        raise NotUnicode("the value holds a lone surrogate: not valid Unicode text")
    return escape_surrogates(text)


def escape_surrogates(text: str) -> str:
    """JSON text with every lone surrogate written as its escape (``\\ud800``): the same JSON
    value, and text UTF-8 can encode. (In JSON text a surrogate can only stand inside a string.)"""
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def canonical_form(data: Any, schema: dict[str, Any] | None, float_digits: int | None = DEFAULT_FLOAT_DIGITS) -> Any:
    """The canonical form of validated JSON data (see the module docstring)."""
    if not schema or not _has_sets(schema):
        return _rounded(data, float_digits)  # no set-like list anywhere: only floats change
    return _Canon(schema or {}, float_digits).form(data, schema or {}, 0)


_SET_KEYS = ("uniqueItems", UNORDERED)
_HAS_SETS: dict[int, tuple[dict[str, Any], bool]] = {}  # id(schema) -> (schema, whether it has a set-like node)
_MAX_SCHEMAS = 256


def _has_sets(schema: dict[str, Any]) -> bool:
    """Whether any node of the schema (its ``$defs`` included) may be set-like, once per schema.

    Keyed by the schema's identity: a Schema builds its JSON Schema once, and the cache holds it
    (so its id is not reused while the entry lives); bounded, the oldest entry dropped first."""
    known = _HAS_SETS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    found = _mentions(schema, 0)
    if len(_HAS_SETS) >= _MAX_SCHEMAS:
        del _HAS_SETS[next(iter(_HAS_SETS))]
    _HAS_SETS[id(schema)] = (schema, found)
    return found


def _mentions(node: Any, depth: int) -> bool:
    """Whether a set-like keyword is set anywhere in the node (True past a depth: the full walk decides)."""
    if depth > 64:
        return True
    if isinstance(node, dict):
        if any(node.get(key) for key in _SET_KEYS):
            return True
        return any(_mentions(value, depth + 1) for value in node.values())
    if isinstance(node, list):
        return any(_mentions(value, depth + 1) for value in node)
    return False


def _rounded(data: Any, digits: int | None) -> Any:
    """:meth:`_Canon.form` where no list is set-like: floats rounded, the rest copied."""
    if isinstance(data, float):
        return _number(data, digits)
    if isinstance(data, dict):
        return {k: v if type(v) in _AS_IS else _rounded(v, digits) for k, v in data.items()}
    if isinstance(data, list):
        return [v if type(v) in _AS_IS else _rounded(v, digits) for v in data]
    return data


_AS_IS = frozenset({str, int, bool, type(None)})  # what _rounded returns as it is (no call for them)


def _number(value: float, digits: int | None) -> int | float:
    if not math.isfinite(value):
        return value
    rounded = value if digits is None else float(f"{value:.{digits}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def is_set_like(node: dict[str, Any]) -> bool:
    return bool(node.get("uniqueItems")) or bool(node.get(UNORDERED))


class _Canon:
    def __init__(self, root: dict[str, Any], digits: int | None) -> None:
        self.root = root
        self.digits = digits

    def form(self, data: Any, node: Any, depth: int) -> Any:
        node = resolve(node, self.root) if depth < 64 else {}
        if isinstance(data, float):
            return self.number(data)
        if isinstance(data, dict):
            props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
            extra = node.get("additionalProperties") if isinstance(node.get("additionalProperties"), dict) else None
            return {k: self.form(v, self.branch(props.get(k, extra), v), depth + 1) for k, v in data.items()}
        if isinstance(data, list):
            items = node.get("items") if isinstance(node.get("items"), dict) else None
            prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
            out = [self.form(v, self.branch(prefix[i] if i < len(prefix) else items, v), depth + 1) for i, v in enumerate(data)]
            return sorted(out, key=canonical_key) if is_set_like(node) else out
        return data

    def branch(self, node: Any, data: Any) -> Any:
        """Under anyOf/oneOf, the branch that describes containers (where set-likeness lives)."""
        node = resolve(node, self.root)
        for key in ("anyOf", "oneOf", "allOf"):
            branches = node.get(key) if isinstance(node, dict) else None
            if isinstance(branches, list):
                want = "array" if isinstance(data, list) else "object" if isinstance(data, dict) else None
                for b in (resolve(branch, self.root) for branch in branches):
                    if want and (b.get("type") == want or (want == "array" and "items" in b) or (want == "object" and "properties" in b)):
                        return b
        return node

    def number(self, value: float) -> int | float:
        return _number(value, self.digits)
