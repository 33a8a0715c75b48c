"""The grammar a loop's retry decodes under: the field that looped, bounded to what came before
the loop. Pure: a schema and a text in, a schema out.

A greedy decoder that looped in a field is likely to loop there again when asked again: the
feedback block names the field, but a small model reads it and writes the same stretch. So the
retry's grammar (``Request.schema``, what constrained decoding compiles, locally and in a server's
``response_format``) takes the looping field's length away:

    a loop among an array's items (``tags[]``: ``"tutorial", "tutorial", ...``), or in the
    structure across them (``items[].price``: ``1.0}, {"description": "Pen", "price": 1.0}, ...``)
        ``maxItems``: the items the array had once the loop's first stretch was written
    a loop inside a string (``summary``: ``"I'm disputing ... now. I'm disputing ..."``)
        ``maxLength``: the string's characters up to the end of the loop's first stretch

The model still writes every field, the looping one included, as it chooses within the bound,
and the ballot is read and validated against the run's own schema: a bound narrows what the
retry may write, never what counts as valid. A loop outside JSON, at the root, at a path the
schema does not have, in a string with a ``pattern`` or ``format`` (bounded already, and a
length beside them is more than some servers' grammars take), or where the bound would break the
field's own ``minItems``/``minLength`` is not bounded (None): the retry is asked with feedback alone.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from ..read._loops import Loop, path_at
from ._schema import Schema

__all__ = ["bounded", "bounded_labels", "iso_dates", "referenced", "unbounded_lists"]

LABELS = 8  # the labels a list of free-text labels may hold in a server's grammar (``bounded_labels``)

#: What a retry's grammar forces on a date or date-time the model wrote unreadably (``iso_dates``).
ISO = {"date": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
       "date-time": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?$"}

_FLOORS = {"maxItems": "minItems", "maxLength": "minLength"}  # a bound under its floor is not set
_KINDS = {"maxItems": "array", "maxLength": "string"}  # the type each bound is for
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)", re.DOTALL)  # one escape in a JSON string: one character
_MAX_DEPTH = 64  # $ref hops and nesting followed to reach a path


def bounded(schema: Schema[Any], text: str, loop: Loop) -> Schema[Any] | None:
    """``schema`` with the field ``loop`` began in bounded (see the module docstring), as a JSON
    Schema dict schema with the same title; None when there is nothing to bound."""
    root = schema.json_schema
    if loop.path is None or not isinstance(root, dict):
        return None
    end = min(len(text), loop.start + loop.period)
    if path_at(text, loop.start)[1] and '"' not in loop.stretch:  # inside a string: its length (a tag's too, at ``tags[]``)
        length = _string_length_at(text, end)
        return None if length is None else _with(schema, loop.path, "maxLength", max(1, length))
    if "[]" in loop.path:  # in the structure within an array's items (whole items, or across them): how many
        count = _items_at(text, end)
        array = loop.path[: loop.path.rindex("[]")]
        return None if count is None else _with(schema, array, "maxItems", max(1, count))
    return None  # in the structure outside any array: nothing a bound fits


def _with(schema: Schema[Any], path: str, keyword: str, bound: int) -> Schema[Any] | None:
    """The schema with ``keyword: bound`` at ``path``: on the node, or on each branch of its
    ``anyOf``/``oneOf`` of the type the keyword is for; None where it cannot go."""
    copied: dict[str, Any] = copy.deepcopy(schema.json_schema or {})
    node = _resolve(copied, path)
    if node is None:
        return None
    kind = _KINDS[keyword]
    targets = [b for key in ("anyOf", "oneOf") for b in node.get(key) or () if isinstance(b, dict) and b.get("type") == kind]
    targets = targets or ([node] if node.get("type") == kind else [])
    if not targets or any(t.get(_FLOORS[keyword], 0) > bound or "pattern" in t or "format" in t for t in targets):
        return None  # no node of that type, a bound under its floor, or a string a pattern already bounds
    for target in targets:
        target[keyword] = min(bound, target.get(keyword, bound))
    copied.setdefault("title", schema.name)
    return Schema(copied)


def _resolve(root: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The subschema at ``path`` (``items[].note``, ``tags``; ``""`` is the root), made a node of
    its own: a ``$ref`` on the way is replaced by a copy of what it names, so a bound set there
    reaches this path only. None when the schema has no such path."""
    parts = [p for p in path.replace("[]", ".[]").split(".") if p]
    node: dict[str, Any] = root
    for part in parts:
        node = _own(root, node)
        if part == "[]":
            child = node.get("items")
        else:
            child = (node.get("properties") or {}).get(part)
        if not isinstance(child, dict):
            return None
        node = child  # made its own in place by the next _own: the parent still holds it
    return _own(root, node)


def _own(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` inlined and an ``anyOf``/``oneOf`` narrowed to its one branch
    that is not null (``Optional[...]``), in place; the node itself where neither applies."""
    for _ in range(_MAX_DEPTH):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                return node
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node.clear()
            node.update(copy.deepcopy(target), **rest)
            continue
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list):
                real = [b for b in branches if isinstance(b, dict) and b.get("type") != "null"]
                if len(real) == 1 and len(real) < len(branches):
                    return _own(root, real[0])  # made its own in place: the list still holds it
        return node
    return node


def _items_at(text: str, offset: int) -> int | None:
    """How many items the innermost array open at ``offset`` has, the one being written included
    (None: no array is open there). ``["a", "b`` has 2, ``["a", "b", `` has 2 as well, and so has
    ``[{"x": 1}, {"x": 2`` (an object open inside the array)."""
    arrays: list[list[int] | None] = []  # per open value: [commas, content since the last] (an array), None (an object)
    for _, char, inside in _scan(text[:offset]):
        top = arrays[-1] if arrays else None
        if top is not None and not char.isspace() and char not in ",]":
            top[1] = 1
        if inside:
            continue
        if char in "[{":
            arrays.append([0, 0] if char == "[" else None)
        elif char in "]}" and arrays:
            arrays.pop()
        elif char == "," and top is not None:
            top[0], top[1] = top[0] + 1, 0
    innermost = next((array for array in reversed(arrays) if array is not None), None)
    return None if innermost is None else innermost[0] + innermost[1]


def _string_length_at(text: str, offset: int) -> int | None:
    """The characters of the string value open at ``offset`` written so far (an escape counts as
    the one character it stands for); None when no string is open there."""
    start = None
    for at, char, inside in _scan(text[:offset]):
        if char == '"' and not inside:
            start = at + 1 if start is None else None  # an opening quote, then its closing one
    if start is None:
        return None
    return len(_ESCAPE.sub("x", text[start:offset]))


def _scan(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each character of a (cut-off) JSON text, and whether it is inside a string: its quotes are
    not, an escaped quote is."""
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string and not escaped and char == '"':
            in_string = False
            yield at, char, False
            continue
        yield at, char, in_string
        if in_string:
            escaped = not escaped and char == "\\"
        elif char == '"':
            in_string = True


def iso_dates(schema: Schema[Any], errors: Any) -> Schema[Any] | None:
    """``schema`` with an ISO 8601 ``pattern`` on each ``date``/``date-time`` field an error names
    (a validation error's ``loc``); None when no error is at one.

    A local grammar leaves dates to the model's own spelling, which the reader brings to ISO
    (``backends/local/_constrain.strict``); a date the reader could not read ("the twelfth") is
    asked again under a grammar that writes ISO digits, so the retry is valid.
    """
    copied: dict[str, Any] = copy.deepcopy(schema.json_schema or {})
    changed = False
    for error in errors or ():
        loc = error.get("loc") if isinstance(error, dict) else None
        path = ".".join(str(p) if not isinstance(p, int) else "[]" for p in loc or ()).replace(".[]", "[]")
        node = _resolve(copied, path) if path else None
        if node is not None and node.get("format") in ISO and "pattern" not in node:
            node["pattern"] = ISO[node["format"]]
            changed = True
    if not changed:
        return None
    copied.setdefault("title", schema.name)
    return Schema(copied)


def bounded_labels(schema: Schema[Any], labels: frozenset[str]) -> Schema[Any]:
    """``schema`` with each list of labels (``labels``: their item paths, ``tags[]``) that has no
    ``maxItems`` bounded: to its choices where its items are an enum (a label twice is one label
    in the vote and the value), else to :data:`LABELS`. A server's grammar then closes a list the
    model would keep adding to (``"ticket", "ticket_details", ...`` until ``max_tokens``) within
    the first call; the answer is still read and validated against the run's own schema."""
    bounded_ = schema
    for item_path in sorted(labels):
        array = item_path[:-2] if item_path.endswith("[]") else item_path
        root = bounded_.json_schema
        node = _resolve(copy.deepcopy(root), array) if isinstance(root, dict) else None
        if node is None or not isinstance(root, dict):
            continue
        arrays = [b for key in ("anyOf", "oneOf") for b in node.get(key) or () if isinstance(b, dict) and b.get("type") == "array"]
        arrays = arrays or ([node] if node.get("type") == "array" else [])
        if not arrays or any("maxItems" in a for a in arrays):
            continue  # not a list here, or one the schema bounds already
        items = arrays[0].get("items")
        choices = referenced(root, items).get("enum") if isinstance(items, dict) else None
        count = len(choices) if isinstance(choices, list) and choices else LABELS
        count = max([count] + [int(a.get("minItems", 0)) for a in arrays])
        found = _with(bounded_, array, "maxItems", count)
        bounded_ = found if found is not None else bounded_
    return bounded_


def unbounded_lists(schema: Schema[Any]) -> list[str]:
    """The paths of the lists of objects with no ``maxItems`` (``line_items``, ``people[].jobs``):
    a small model may keep adding items to them (``Stabilizer.describe()`` warns; docs/retry.md,
    "Bound your schema")."""
    root = schema.json_schema
    found: list[str] = []
    if isinstance(root, dict):
        _walk_lists(root, root, "", found, 0)
    return found


def _walk_lists(root: dict[str, Any], node: dict[str, Any], path: str, found: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    node = referenced(root, node)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(key) or ():
            if isinstance(branch, dict):
                _walk_lists(root, branch, path, found, depth + 1)
    for name, child in (node.get("properties") or {}).items():
        if isinstance(child, dict):
            _walk_lists(root, child, f"{path}.{name}" if path else name, found, depth + 1)
    items = node.get("items")
    if node.get("type") == "array" and isinstance(items, dict):
        item = referenced(root, items)
        if "maxItems" not in node and (item.get("type") == "object" or "properties" in item) and path not in found:
            found.append(path or "(the root)")
        _walk_lists(root, item, f"{path}[]", found, depth + 1)


def referenced(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """What a local ``$ref`` names (one hop at a time, bounded), else the node (also ``._size``'s)."""
    for _ in range(_MAX_DEPTH):
        ref = node.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return node
        node = target
    return node
