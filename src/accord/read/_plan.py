"""A schema read once: the plan of each JSON Schema node that the walkers of a reading need.

``_normalize`` and ``_coerce`` walk data beside its schema; a :class:`Plan` says, for one node,
what they would otherwise look up in the schema's dicts at every value (its union branches, its
members, its types, its children), built once per node and kept per schema.
"""

from __future__ import annotations

from typing import Any


def resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    """Follow local ``$ref``s (``#/...``) to the schema node they name; ``{}`` when unknown."""
    if type(node) is dict and "$ref" not in node:
        return node  # the common case, first: no reference to follow
    for _ in range(32):  # bounded: a cycle of bare $refs ends here
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return node
        target: Any = root
        for escaped in ref[2:].split("/") if len(ref) > 1 else ():
            part = escaped.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        node = target
    return {}


def types_of(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


# The JSON Schema types of each scalar Python type (a bool is no integer, an int is also a number).
_SCALAR_KINDS: dict[type, frozenset[str]] = {
    type(None): frozenset({"null"}), bool: frozenset({"boolean"}), int: frozenset({"integer", "number"}),
    float: frozenset({"number"}), str: frozenset({"string"}),
}


class Plan:
    """What a walker needs to know of one schema node, read once: the node resolved (``raw``),
    its union branches (``anyOf``/``oneOf``, first non-empty), its single ``allOf`` member, its
    members (``enum``, or ``[const]``), its types, and its children.

    Built by :func:`plan` once per node of a schema, so the walkers (normalize, coerce) do not
    inspect the schema's dicts again at every value they visit."""

    __slots__ = ("all_of", "as_is", "branches", "empty", "extra", "fmt", "folded_keys", "free_text", "items", "leaves", "members", "node", "prefix",
                 "props", "raw", "required", "resolved_branches", "risky", "scalar", "shape_types", "takes_null",
                 "text_only", "types", "walks")

    def __init__(self, raw: dict[str, Any], node: Any = None) -> None:
        self.raw = raw
        self.node = node  # the node as the schema holds it (a ``$ref`` unresolved): kept alive with its plan
        self.empty = not raw
        self.branches: list[Any] | None = _branches(raw)
        all_of = _list_at(raw, "allOf")
        self.all_of: Any = all_of[0] if all_of is not None and len(all_of) == 1 else None
        self.members: list[Any] | None = _members(raw)
        self.types = frozenset(types_of(raw))
        self.shape_types = self.types or _shape_types(raw)
        self.props: dict[str, Any] = _dict_at(raw, "properties") or {}
        self.extra: dict[str, Any] | None = _dict_at(raw, "additionalProperties")
        self.required: list[Any] = _list_at(raw, "required") or []
        self.prefix: list[Any] = _list_at(raw, "prefixItems") or []
        self.items: dict[str, Any] | None = _dict_at(raw, "items")
        fmt = raw.get("format")
        self.fmt: str | None = fmt if fmt in ("date", "date-time") else None
        self.free_text = "string" in self.types and not fmt and "pattern" not in raw  # the text normalizers apply
        # The numeric or boolean reading of a node that takes no string (normalize).
        self.scalar: str | None = _scalar(self.types)
        decided = self.branches is not None or self.all_of is not None or self.members is not None  # by a union, allOf or member
        # A string here is only trimmed and NFC'd (no union, member, number, boolean or date to read it
        # as; the text normalizers aside, see ``free_text``): normalize does it without a walk.
        self.text_only = not raw or (not decided and self.scalar is None and self.fmt is None)
        # The Python types of a scalar coerce leaves as it is here (the walk would only return it).
        self.as_is: frozenset[type] = frozenset() if decided else _as_is(self.shape_types) if raw else frozenset(_SCALAR_KINDS)
        # The scalar types normalize must look at here rather than keep (a bool where a number
        # belongs, a number where a bool belongs: refused; a union or a member decides by its branches).
        self.walks: frozenset[type] = frozenset({bool, int}) if decided else _walks(self.scalar)
        self.risky: tuple[frozenset[str], frozenset[str], bool, bool] | None = None  # (normalize fills it)
        self.resolved_branches: list[dict[str, Any]] | None = None
        self.leaves: list[tuple[Any, dict[str, Any]]] | None = None  # the union flattened (coerce)
        self.folded_keys: dict[str, list[str]] | None = None
        self.takes_null: bool | None = None


def _dict_at(raw: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The node's member ``key`` where it is an object, else None."""
    value = raw.get(key)
    return value if isinstance(value, dict) else None


def _list_at(raw: dict[str, Any], key: str) -> list[Any] | None:
    """The node's member ``key`` where it is an array, else None."""
    value = raw.get(key)
    return value if isinstance(value, list) else None


def _branches(raw: dict[str, Any]) -> list[Any] | None:
    """A union's branches: ``anyOf``, else ``oneOf`` (the first that is a non-empty list)."""
    return _list_at(raw, "anyOf") or _list_at(raw, "oneOf") or None


def _members(raw: dict[str, Any]) -> list[Any] | None:
    """A node's members: its ``enum`` (a list), else ``[const]``, else None."""
    enum = _list_at(raw, "enum")
    if enum is not None:
        return enum
    return [raw["const"]] if "const" in raw else None


def _shape_types(raw: dict[str, Any]) -> frozenset[str]:
    """The type of a node that names none, as coerce reads it: with properties an object, with items an array."""
    if "properties" in raw:
        return frozenset({"object"})
    return frozenset({"array"}) if "items" in raw or "prefixItems" in raw else frozenset()


def _scalar(types: frozenset[str]) -> str | None:
    """A node's numeric or boolean reading, where it takes no string."""
    if "string" in types:
        return None
    return next((t for t in ("integer", "number", "boolean") if t in types), None)


def _as_is(shape_types: frozenset[str]) -> frozenset[type]:
    """The Python scalar types a node that no union, allOf or member decides takes as they are."""
    return frozenset(
        kind for kind, kinds in _SCALAR_KINDS.items()
        if kinds & shape_types and (kind is not type(None) or "null" in shape_types)
    )


def _walks(scalar: str | None) -> frozenset[type]:
    """The scalar types normalize must look at under a number (a bool) or a yes/no (an int)."""
    if scalar in ("integer", "number"):
        return frozenset({bool})
    return frozenset({int}) if scalar == "boolean" else frozenset()


EMPTY_PLAN = Plan({})
Plans = dict[int, Plan]  # one schema's plans by the identity of their node (each plan holds its node)
_TABLES: dict[int, tuple[dict[str, Any], Plans]] = {}  # id(root) -> (root, its plans)
_MAX_ROOTS = 256


def plans(root: dict[str, Any]) -> Plans:
    """The plans of the nodes of one schema, filled by :func:`plan_in` as nodes are met.

    Keyed by identity: each entry holds its root, and each plan its node, so no id is reused
    while it lives; bounded (``_MAX_ROOTS`` schemas, the oldest dropped first; a schema's nodes
    are finite)."""
    table = _TABLES.get(id(root))
    if table is not None and table[0] is root:
        return table[1]
    if len(_TABLES) >= _MAX_ROOTS:
        del _TABLES[next(iter(_TABLES))]
    _TABLES[id(root)] = (root, {})
    return _TABLES[id(root)][1]


def plan_in(table: Plans, node: Any, root: dict[str, Any]) -> Plan:
    """The :class:`Plan` of a node of ``root`` (its ``$ref`` followed), built once per node.
    Walkers look in ``table`` first (``table.get(id(node)) or plan_in(...)``)."""
    if not node:
        return EMPTY_PLAN
    found = table.get(id(node))
    if found is None:
        resolved = resolve(node, root)
        found = table[id(node)] = Plan(resolved, node) if resolved else Plan({}, node)
    return found


def plan(node: Any, root: dict[str, Any]) -> Plan:
    """The :class:`Plan` of a node of ``root``."""
    return plan_in(plans(root), node, root)


def branches_of(found: Plan, root: dict[str, Any]) -> list[dict[str, Any]]:
    """The union's branches resolved (once per plan)."""
    if found.resolved_branches is None:
        found.resolved_branches = [resolve(b, root) for b in found.branches or ()]
    return found.resolved_branches
