"""A JSON Schema dict as a schema: checked whole at construction, validated with bounded patterns.

:func:`json_validator` makes the jsonschema validator :class:`~._schema.Schema` uses for a dict
schema. The schema is checked against its draft's meta-schema (:mod:`._metaschema`), every
``$ref`` in it must resolve (within the schema, or to the meta-schemas: nothing is fetched), and
its pattern keywords are matched within the reading's time left (:mod:`accord.read._deadline`).
"""

from __future__ import annotations

import functools
from typing import Any

from .._errors import UnsupportedSchema
from ..read import _deadline
from ._formats import jsonschema as import_jsonschema
from ._metaschema import check_patterns, check_schema


def json_validator(schema: dict[str, Any]) -> Any:
    """A jsonschema validator for the schema, checked whole at construction: the schema is valid for
    its draft and every ``$ref`` in it resolves. References resolve within the schema and to the
    JSON Schema meta-schemas only: nothing is fetched over the network (jsonschema alone would try)."""
    jsonschema = import_jsonschema()
    from jsonschema_specifications import REGISTRY

    try:
        check_patterns(schema)
        cls = jsonschema.validators.validator_for(schema)
        check_schema(cls, schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise UnsupportedSchema(f"invalid JSON Schema: {exc.message}") from exc
    _check_refs(schema, cls, REGISTRY)
    return _bounded(cls)(schema, format_checker=_formats(cls), registry=REGISTRY)


_MAX_SCHEMA_NODES = 100_000


@functools.lru_cache(maxsize=16)
def _formats(cls: Any) -> Any:
    """Every format jsonschema knows, whatever the draft (draft 4 has no "date", for example),
    each as the schema's draft means it: ``time`` is RFC 3339's ``10:20:30Z`` from draft 7 on,
    where jsonschema's draft-less checker holds draft 3's ``%H:%M:%S``."""
    checker = import_jsonschema().FormatChecker()
    checker.checkers.update(cls.FORMAT_CHECKER.checkers)
    return checker


def _check_refs(schema: dict[str, Any], cls: Any, registry: Any) -> None:
    """Raise :class:`UnsupportedSchema` for a ``$ref`` that names nothing (``{"$ref": "#/nope"}``)
    or something outside the schema, instead of failing on the first output that reaches it."""
    import referencing.jsonschema
    from referencing.exceptions import Unresolvable

    dialect = cls.META_SCHEMA.get("$schema") or cls.META_SCHEMA.get("id") or ""
    spec = referencing.jsonschema.specification_with(dialect, default=referencing.jsonschema.DRAFT202012)
    root = spec.create_resource(schema)
    todo = [(registry.resolver_with_root(root), root)]
    seen = 0
    while todo and seen < _MAX_SCHEMA_NODES:
        resolver, resource = todo.pop()
        seen += 1
        ref = resource.contents.get("$ref") if isinstance(resource.contents, dict) else None
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable as exc:
                where = "" if ref.startswith("#") else " (references outside the schema are not fetched)"
                raise UnsupportedSchema(f"invalid JSON Schema: $ref {ref!r} cannot be resolved{where}: {exc}") from None
        todo.extend((resolver.in_subresource(sub), sub) for sub in resource.subresources())


@functools.lru_cache(maxsize=16)
def _bounded(cls: Any) -> Any:
    """``cls`` with its pattern keywords matched within the reading's time left (``_deadline``):
    ``pattern``, ``patternProperties`` and ``additionalProperties`` beside them."""
    jsonschema = import_jsonschema()
    from jsonschema import _keywords

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "string") and not _deadline.search(patrn, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, value in instance.items():
                if _deadline.search(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Any:
        patterns = schema.get("patternProperties") if isinstance(schema, dict) else None
        if not patterns or not validator.is_type(instance, "object"):
            yield from _keywords.additionalProperties(validator, extra, instance, schema)
            return
        properties = schema.get("properties", {})
        joined = "|".join(patterns)
        extras = {key for key in instance if key not in properties and not _deadline.search(joined, key)}
        if validator.is_type(extra, "object"):
            for key in extras:
                yield from validator.descend(instance[key], extra, path=key)
        elif not extra and extras:
            yield jsonschema.ValidationError(
                f"{', '.join(map(repr, sorted(extras)))} {'does' if len(extras) == 1 else 'do'} not match any of the "
                f"regexes: {', '.join(map(repr, sorted(patterns)))}"
            )

    keywords = {"pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties}
    return jsonschema.validators.extend(cls, {k: v for k, v in keywords.items() if k in cls.VALIDATORS})
