"""The fields of an application schema for benchmarks/apps.py: roles, decisive keys, gold, carried.

Paths name a schema's leaves as the field-roles API names them: dotted keys, ``[]`` for the
items of an array (``line_items[].quantity``, ``tags[]``).

Roles come from ``accord.Schema.of(M).describe()["roles"]`` when accord has it (issue 36). Until
then, a FALLBACK rule, marked as such wherever it is used: a leaf is prose when it is a free
``str`` (no enum, pattern or format) whose field is named summary, bio, notes, task or
description; every other leaf is decisive. Under the API, an "auto" leaf counts as decisive for
an input when any accord answer to that input voted it (``result.voted``).

Decisive keys use accord's canonical form (what the vote counts): two answers agree when every
decisive leaf has the same canonical value. Gold is compared more leniently, since it is written
by hand: strings compared without case, accents, surrounding punctuation or a title (Mr, Dr...),
numbers as decimals (``3.5`` is ``3.50``); paths under one array as a multiset of tuples.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from decimal import Decimal, InvalidOperation
from typing import Any

import accord
from accord.read._canonical import canonical_form, canonical_key

PROSE_NAMES = frozenset({"summary", "bio", "notes", "task", "description"})  # the fallback rule's prose fields
_INDEX = re.compile(r"\[\d+\]")


def leaves(json_schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every leaf of a JSON Schema by path, its node with ``$ref`` and ``Optional`` resolved."""
    defs = json_schema.get("$defs", {})
    found: dict[str, dict[str, Any]] = {}

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
        if len(options) == 1:  # Optional[X]
            return resolve(options[0])
        return node

    def walk(node: dict[str, Any], path: str) -> None:
        node = resolve(node)
        if node.get("type") == "object" and "properties" in node:
            for name, child in node["properties"].items():
                walk(child, f"{path}.{name}" if path else name)
        elif node.get("type") == "array" and isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        else:
            found[path] = node

    walk(json_schema, "")
    return found


def fallback_roles(json_schema: dict[str, Any]) -> dict[str, str]:
    """FALLBACK (until the roles API lands): prose for a free str named summary/bio/notes/task/description."""
    roles = {}
    for path, node in leaves(json_schema).items():
        name = path.rsplit(".", 1)[-1].removesuffix("[]")
        free = node.get("type") == "string" and not {"enum", "const", "pattern", "format"} & set(node)
        roles[path] = "prose" if free and name in PROSE_NAMES else "decisive"
    return roles


def normal_path(path: str, known: set[str] | dict[str, Any]) -> str:
    """A path as :func:`leaves` names it (``a[3].b`` is ``a[].b``; ``tags`` is ``tags[]`` when that is the leaf)."""
    path = _INDEX.sub("[]", path)
    return path + "[]" if path not in known and path + "[]" in known else path


def roles_of(schema: accord.Schema[Any]) -> tuple[dict[str, str], str]:
    """(roles by path, "api" or "fallback")."""
    known = leaves(schema.json_schema)
    describe = getattr(schema, "describe", None)
    if callable(describe):
        described = describe()
        roles = described.get("roles") if isinstance(described, dict) else None
        if isinstance(roles, dict) and roles:
            return {normal_path(p, known): str(r) for p, r in roles.items()}, "api"
    return fallback_roles(schema.json_schema), "fallback"


def decisive_paths(roles: dict[str, str], voted: list[tuple[str, ...] | None]) -> tuple[str, ...]:
    """The decisive leaves of one input: role "decisive", and "auto" leaves any answer voted."""
    chosen = {p for p, r in roles.items() if r == "decisive"}
    for paths in voted:
        chosen |= {normal_path(p, roles) for p in paths or () if roles.get(normal_path(p, roles)) == "auto"}
    return tuple(sorted(chosen))


def project(data: Any, path: str) -> Any:
    """The value at a path; under ``[]``, the list of the items' values (None where missing)."""

    def walk(value: Any, parts: list[str]) -> Any:
        if not parts:
            return value
        part, many = (parts[0][:-2], True) if parts[0].endswith("[]") else (parts[0], False)
        inner = value.get(part) if isinstance(value, dict) else None
        if many:
            return [walk(item, parts[1:]) for item in inner] if isinstance(inner, list) else None
        return walk(inner, parts[1:])

    return walk(data, path.split("."))


def decisive_key(schema: accord.Schema[Any], data: Any, paths: tuple[str, ...]) -> str:
    """The canonical key of a valid answer's decisive leaves (its JSON data, as ``schema.dump`` writes it)."""
    form = canonical_form(data, schema.json_schema)
    return canonical_key({path: project(form, path) for path in paths})


def versions(schema: accord.Schema[Any], ballots: list[Any], path: str) -> int:
    """How many distinct canonical values the valid ballots had at a path (the carried count, measured here)."""
    found = {canonical_key(project(canonical_form(data, schema.json_schema), path)) for data in ballots}
    return len(found)


# -- gold ------------------------------------------------------------------------------------------

_TITLE = re.compile(r"^(mr|mrs|ms|miss|dr|prof)\b\.?\s*")


def _text(value: str) -> str:
    text = "".join(c for c in unicodedata.normalize("NFKD", value) if not unicodedata.combining(c)).casefold()
    text = " ".join(text.split()).strip(" .,;:#'\"")
    return _TITLE.sub("", text)


def _numeric(node: dict[str, Any] | None) -> bool:
    kinds = {node.get("type")} | {o.get("type") for o in node.get("anyOf", [])} if node else set()
    return bool(kinds & {"number", "integer"})


def _norm(value: Any, numeric: bool) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if numeric:
        try:
            return Decimal(str(value).replace(",", "")).normalize()
        except InvalidOperation:
            return _text(str(value))
    return _text(value) if isinstance(value, str) else value


def gold_fields(schema: accord.Schema[Any], gold: dict[str, Any], data: Any) -> tuple[int, int]:
    """(gold fields a valid answer's JSON data matches, gold fields): a field is a path, or the
    paths under one array together (compared as a multiset of tuples, one per item)."""
    known = leaves(schema.json_schema)
    groups: dict[str, list[str]] = {}
    for path in gold:
        head = path[: path.index("[]") + 2] if "[]" in path else path
        groups.setdefault(head, []).append(path)
    right = 0
    for head, paths in groups.items():
        numeric = [_numeric(known.get(normal_path(p, known))) for p in paths]
        if "[]" not in head:
            right += _norm(project(data, head), numeric[0]) == _norm(gold[head], numeric[0])
            continue
        got = [project(data, p) for p in paths]
        if any(not isinstance(g, list) for g in got):
            continue
        mine = Counter(tuple(_norm(v, n) for v, n in zip(row, numeric, strict=True)) for row in zip(*got, strict=True))
        want = Counter(tuple(_norm(v, n) for v, n in zip(row, numeric, strict=True)) for row in zip(*(gold[p] for p in paths), strict=True))
        right += mine == want
    return right, len(groups)


def right_on_gold(schema: accord.Schema[Any], gold: dict[str, Any], data: Any) -> bool:
    """Every gold field of a valid answer's JSON data matches (see :func:`gold_fields`)."""
    right, total = gold_fields(schema, gold, data)
    return right == total
