"""An echoed schema is no value: the JSON Schema or the type signature a model repeats back.

:func:`echoed` tells a value from an echo of the schema it should fill in (``_read`` asks it of
every candidate that may be one, ``_may_echo`` first, so clean JSON pays almost nothing).
"""

from __future__ import annotations

from typing import Any

from ..schema._schema import Schema
from ._plan import resolve, types_of
from ._words import fold

ECHO = "the answer repeats the schema instead of giving values"
_KEYWORDS = {"type", "properties", "items", "required", "enum", "format", "pattern", "minimum", "maximum", "$ref", "anyOf",
             "oneOf", "allOf", "additionalProperties", "definitions", "$defs", "$schema", "title", "default", "const"}
_NODE_KEYS = {"title", "description", "required", "items", "enum", "format", "default", "minimum", "maximum"}
_JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null", "json"}
_TYPE_NAMES = {
    "string": {"string", "str"},
    "integer": {"int", "integer", "number"},
    "number": {"float", "number", "double"},
    "boolean": {"bool", "boolean"},
    "date": {"date", "yyyy-mm-dd", 'string (a date, "yyyy-mm-dd")'},
}


def echoed(data: Any, schema: Schema[Any]) -> bool:
    """Whether extracted data is the schema itself (or its rendered signature), not a value.

    A JSON Schema echo: an object with schema keywords (``properties``, ``$defs``, ``$ref``, or a
    JSON type name under ``type`` beside ``title``/``required``/...), where the schema wants an
    object with named fields and none of them is such a keyword (a free-form object may hold a
    schema). A signature echo: every string field that has a type holds that type's name
    (``{"name": "string", "age": 0}``, ``{"date": "YYYY-MM-DD"}``); one such field among real
    values is a value (``"type": "string"`` is a fine value for a field named type).
    """
    if len(schema.field_names & _KEYWORDS) >= 2:
        return False  # the schema describes schema-like documents (a meta-schema): an echo is a value
    root = schema.json_schema or {}
    walker = _Echo(root)
    return walker.walk(data, root, 0) or (walker.named > 0 and walker.named == walker.typed)


class _Echo:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.typed = 0  # string leaves at a place with a type
        self.named = 0  # ... that hold the name of that type
        self.memo: dict[int, set[str]] = {}  # id(schema node) -> names (the nodes live in root)

    def walk(self, data: Any, node: Any, depth: int) -> bool:
        if depth > 32:
            return False
        node = resolve(node, self.root) if node is not None else {}
        if isinstance(data, dict):
            props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
            types = types_of(node)
            if types and "object" not in types and not props:
                return self.node_like(data)  # an object where a scalar belongs: is it the scalar's schema?
            if not props:
                return False  # a free-form object (or no schema here): anything may be in it, a schema too
            if self.schema_like(data, props):
                return True
            extra = node.get("additionalProperties")
            return any(
                self.walk(value, props.get(key, extra if isinstance(extra, dict) else None), depth + 1)
                for key, value in data.items()
            )
        if isinstance(data, list):
            items = node.get("items") if isinstance(node.get("items"), dict) else None
            return any(self.walk(value, items, depth + 1) for value in data[:64])
        if isinstance(data, str) and node:
            names = self.names(node)
            if names:
                self.typed += 1
                self.named += fold(data) in names
        return False

    @staticmethod
    def schema_like(data: dict[str, Any], props: dict[str, Any]) -> bool:
        """An object that is a JSON Schema node: its keywords, with the values schemas give them."""
        keys = set(data) - set(props)
        for key in keys & {"properties", "$defs", "definitions"}:
            if isinstance(data[key], dict) and data[key] and all(isinstance(v, dict) for v in data[key].values()):
                return True
        for key in keys & {"anyOf", "oneOf", "allOf"}:
            if isinstance(data[key], list) and data[key] and all(isinstance(v, dict) for v in data[key]):
                return True
        if "$ref" in keys and isinstance(data["$ref"], str) and data["$ref"].startswith("#") and len(data) <= 3:
            return True
        if "type" not in keys or not _Echo.node_like(data):
            return False
        shaped = (isinstance(data.get("items"), dict), isinstance(data.get("enum"), list),
                  isinstance(data.get("required"), list) and all(isinstance(r, str) for r in data["required"]))
        return any(shaped)  # a type with the structure schemas give it, not only a title

    @staticmethod
    def node_like(data: dict[str, Any]) -> bool:
        """``{"title": "Age", "type": "integer"}``: a JSON type name beside a schema keyword."""
        kind = data.get("type")
        return isinstance(kind, str) and kind in _JSON_TYPES and bool(set(data) & _NODE_KEYS)

    def names(self, node: dict[str, Any], depth: int = 0) -> set[str]:
        """The type names a string here would echo; a union's, each member once (memoized, and
        bounded in depth: a union that contains itself, or a chain of unions, ends)."""
        found = self.memo.get(id(node))
        if found is None:
            found = self.memo[id(node)] = self._names(node, depth) if depth <= 32 else set()
        return found

    def _names(self, node: dict[str, Any], depth: int) -> set[str]:
        if "enum" in node or "const" in node:
            return set()
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list):
                self.memo[id(node)] = set()  # reached again inside itself: nothing more
                return set().union(*(self.names(resolve(b, self.root), depth + 1) for b in node[key]))
        types = types_of(node)
        if node.get("format") in ("date", "date-time"):
            return _TYPE_NAMES["date"] | _TYPE_NAMES["string"]
        return set().union(*(_TYPE_NAMES.get(t, set()) for t in types)) if types else set()
