"""How many tokens a whole answer to a schema takes, about: what a run's first call is given when
nothing sets its ``max_tokens`` and the backend's default is smaller (``run/_loop``).

A call cut off at ``max_tokens`` is asked again from its first token (``run/_absorb``), so a
schema whose answer does not fit the default pays for it twice: the embedded model's invoice
(eight fields, up to five line items, its indented layout) is about 260 tokens, the local
default 256, and the cut came at ``"total": 750``. Sizing the first call to the schema makes
that one call.

The size is that of a stand-in answer, written as the model writes JSON (indented: the widest
layout), over :data:`CHARS_PER_TOKEN`, plus a fifth (:data:`MARGIN`):

    an object       every property, optional ones too
    a list          ``maxItems`` items (at most :data:`MOST_ITEMS`); with no bound, :data:`ITEMS`
                    (a list that keeps going is a runaway, ended while written: ``read/_runaway``)
    a string        an enum's or const's longest value; a date's or date-time's ISO text; else
                    ``maxLength`` characters, at most :data:`STRING`
    a number        :data:`NUMBER` characters; an integer :data:`INTEGER`; true/false/null
    a union         its widest branch

Pure: a JSON Schema in, a count out; ``$ref`` followed (a recursive one stops at
:data:`DEPTH`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._bounds import referenced

__all__ = ["answer_tokens", "first_call_tokens"]

CHARS_PER_TOKEN = 2.8  # indented JSON of an invoice: 712 characters, 253 tokens (SmolLM2's tokenizer; digits are one each)
ITEMS = 5  # items counted for a list with no maxItems
MOST_ITEMS = 32  # the most items counted for one list, bound or not
STRING = 20  # characters counted for a free string (a name, a description)
NUMBER = 7  # characters counted for a number ("12345.67")
INTEGER = 3  # characters counted for an integer (a count, a quantity)
DEPTH = 8  # nesting and $ref hops followed
ROUND = 64  # the size is a multiple of this many tokens
MARGIN = 1.2


def answer_tokens(schema: dict[str, Any]) -> int:
    """About how many tokens a whole answer to ``schema`` (a JSON Schema) takes, a fifth over."""
    stand_in = _stand_in(schema, schema, 0)
    text = json.dumps(stand_in, indent=2)
    tokens = len(text) / CHARS_PER_TOKEN * MARGIN
    return ROUND * math.ceil(tokens / ROUND)


def first_call_tokens(schema: Any, default: int, sizes: bool = True) -> int | None:
    """The ``max_tokens`` a run's calls are given when nothing sets one: the schema's (a JSON
    Schema) :func:`answer_tokens` where that is over the backend's ``default``, else None (the
    default). ``sizes``: whether the backend takes it (``Backend.sizes_max_tokens``: its own
    ``max_tokens`` was left unset); a backend given one number keeps to it."""
    if not sizes or not isinstance(schema, dict):
        return None
    size = answer_tokens(schema)
    return size if size > default else None


def _stand_in(root: dict[str, Any], node: Any, depth: int) -> Any:
    if not isinstance(node, dict) or depth > DEPTH:
        return None
    node = _merged(root, referenced(root, node))
    choices = _choices(root, node, depth)
    if choices:
        return _widest(choices)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in node:
        return {name: _stand_in(root, child, depth + 1) for name, child in (node.get("properties") or {}).items()}
    if kind == "array" or "items" in node:
        return _items(root, node, depth)
    return _leaf(kind, node)


def _choices(root: dict[str, Any], node: dict[str, Any], depth: int) -> list[Any]:
    """What a const, an enum or a union may be (the widest is the stand-in); [] for anything else."""
    if "const" in node:
        return [node["const"]]
    if isinstance(node.get("enum"), list):
        return list(node["enum"])
    branches = [b for key in ("anyOf", "oneOf") for b in node.get(key) or () if isinstance(b, dict)]
    return [_stand_in(root, b, depth + 1) for b in branches]


def _merged(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A node with the parts of its ``allOf`` merged in."""
    for part in node.get("allOf") or ():
        if isinstance(part, dict):
            node = {**referenced(root, part), **{k: v for k, v in node.items() if k != "allOf"}}
    return node


def _items(root: dict[str, Any], node: dict[str, Any], depth: int) -> list[Any]:
    count = min(int(node.get("maxItems", ITEMS)), MOST_ITEMS)
    prefix = [_stand_in(root, item, depth + 1) for item in node.get("prefixItems") or ()]
    item = _stand_in(root, node["items"], depth + 1) if isinstance(node.get("items"), dict) else None
    return (prefix + [item] * max(0, count - len(prefix)))[: max(count, len(prefix))]


def _leaf(kind: Any, node: dict[str, Any]) -> Any:
    """A string, number, boolean or null's stand-in."""
    if kind == "string":
        dated = {"date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z"}.get(str(node.get("format")))
        return dated or "x" * min(int(node.get("maxLength", STRING)), STRING)
    if kind in ("integer", "number"):
        return int("9" * INTEGER) if kind == "integer" else float("9" * (NUMBER - 3) + ".99")
    return False if kind == "boolean" else None


def _widest(values: list[Any]) -> Any:
    return max(values, key=lambda value: len(json.dumps(value)))
