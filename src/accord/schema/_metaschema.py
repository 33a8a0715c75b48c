"""The meta-schema a JSON Schema is checked against at construction, in one document.

Drafts 2019-09 and 2020-12 split their meta-schema into vocabularies joined by ``$dynamicRef``;
jsonschema resolves each of those references through ``referencing`` at every subschema, which
made the check most of the cost of ``Schema(json_schema)`` (measured on the 551 draft 2020-12
schemas of ../shared/jsonschemabench: 18.3 s official, 6.6 s joined, under a load of 4 on two
cores). :func:`check_schema` checks against the same meta-schema joined into one document, its
vocabularies as ``allOf`` members and every ``$dynamicRef`` to the meta-schema a plain ``$ref``
to the root (a plain dialect: the dynamic scope can only name the root). Same errors, same
format checker; the earlier drafts keep their own single-document meta-schemas.
"""

from __future__ import annotations

import functools
from typing import Any

_MAPS = {"properties", "$defs", "patternProperties", "dependentSchemas"}
_DROPPED = {"$id", "$schema", "$vocabulary", "$dynamicAnchor"}


def check_schema(cls: Any, schema: Any) -> None:
    """``cls.check_schema(schema)``: raise jsonschema's ``SchemaError`` for the first error the
    draft's meta-schema finds, as ``check_schema`` does."""
    from ._formats import jsonschema as import_jsonschema

    jsonschema = import_jsonschema()
    meta = _joined(cls)
    if meta is None:
        cls.check_schema(schema)
        return
    for error in cls(meta, format_checker=cls.FORMAT_CHECKER).iter_errors(schema):
        raise jsonschema.exceptions.SchemaError.create_from(error)


@functools.lru_cache(maxsize=8)
def _joined(cls: Any) -> dict[str, Any] | None:
    meta = cls.META_SCHEMA
    parts = meta.get("allOf")
    if meta.get("$dynamicAnchor") != "meta" or not isinstance(parts, list):
        return None  # a single-document meta-schema (drafts 3 to 7), or 2019-09's $recursiveRef
    from jsonschema_specifications import REGISTRY

    base = str(meta["$id"]).rsplit("/", 1)[0] + "/"
    top: dict[str, Any] = _static({k: v for k, v in meta.items() if k != "allOf"})
    defs = top.setdefault("$defs", {})
    members = []
    for part in parts:
        vocabulary = _static(REGISTRY.contents(base + part["$ref"]))
        defs.update(vocabulary.pop("$defs", {}))
        members.append(vocabulary)
    top["allOf"] = members
    return top


def _static(node: Any, in_map: bool = False) -> Any:
    """A meta-schema part with its references local to the joined document."""
    if isinstance(node, list):
        return [_static(v) for v in node]
    if not isinstance(node, dict):
        return node
    if in_map:  # names of properties (``$ref`` among them), each with a schema
        return {k: _static(v) for k, v in node.items()}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$dynamicRef":
            out["$ref"] = "#"
        elif key == "$ref" and isinstance(value, str):
            out["$ref"] = "#" + value.split("#", 1)[1] if "#" in value else "#"
        elif key not in _DROPPED:
            out[key] = _static(value, key in _MAPS)
    return out


MAX_PATTERN = 10_000  # characters of one regular expression (a 1 MB one took 12 s to compile)


def check_patterns(schema: Any) -> None:
    """Raise :class:`~accord.UnsupportedSchema` naming the first ``pattern`` (or
    ``patternProperties`` key) longer than ``MAX_PATTERN`` characters, before anything compiles
    it. One walk over the schema's nodes, following no reference."""
    from .._errors import UnsupportedSchema

    todo: list[tuple[Any, str]] = [(schema, "#")]
    while todo:
        node, where = todo.pop()
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str) and len(pattern) > MAX_PATTERN:
                raise UnsupportedSchema(f"the pattern at {where}/pattern is {len(pattern):,} characters long; accord takes patterns of up to {MAX_PATTERN:,}")
            found = node.get("patternProperties")
            for key in found if isinstance(found, dict) else ():
                if isinstance(key, str) and len(key) > MAX_PATTERN:
                    raise UnsupportedSchema(
                        f"a patternProperties key at {where}/patternProperties is {len(key):,} characters long; accord takes patterns of up to {MAX_PATTERN:,}"
                    )
            todo.extend((v, f"{where}/{_escape(k)}") for k, v in node.items() if isinstance(v, (dict, list)) and k not in ("enum", "const", "default", "examples"))
        elif isinstance(node, list):
            todo.extend((v, f"{where}/{i}") for i, v in enumerate(node) if isinstance(v, (dict, list)))


def _escape(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
