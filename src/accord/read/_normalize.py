"""Stage 4, normalize: bring extracted data into the form the schema expects.

Guided by the schema's JSON Schema:

- strings to Unicode NFC and trimmed (object keys are the schema's and never rewritten);
- enum members matched case- and whitespace-insensitively;
- numeric strings to numbers for numeric fields, ``3.0`` to ``3`` for integers only when exact;
- yes/no/true/false to booleans for boolean fields;
- dates and datetimes to ISO 8601 for ``format: date`` / ``date-time`` fields;
- the per-schema text normalizers (``Stabilizer(normalize=[...])``, e.g. :func:`casefold`) on
  free-text fields: strings without enum, const, pattern or format.

Per-field normalizers are ``Annotated[str, accord.Normalize(fn)]`` and run inside validation.
Normalization is idempotent (given idempotent normalizers), and the pipeline validates the
normalized data first and falls back to the raw data, so it never makes a valid answer invalid.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic_core import core_schema

_NUMERIC = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "y": True, "n": False}
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %d %Y", "%Y.%m.%d")

TextNormalizer = Callable[[str], str]


@dataclass(frozen=True)
class Normalize:
    """A per-field normalizer: ``Annotated[str, accord.Normalize(str.casefold)]``.

    ``fn`` runs on the validated field value, so the value returned and its vote key are both
    normalized. It should be idempotent (``fn(fn(x)) == fn(x)``).
    """

    fn: Callable[[Any], Any]

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.fn, handler(source))


def casefold(text: str) -> str:
    """Case-insensitive text: ``"Straße"`` and ``"STRASSE"`` compare equal."""
    return text.casefold()


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace inside the text to one space."""
    return " ".join(text.split())


def nfkc(text: str) -> str:
    """Unicode NFKC (compatibility forms folded: ``"ﬁ"`` to ``"fi"``, full-width digits to ASCII)."""
    return unicodedata.normalize("NFKC", text)


def normalize(data: Any, schema: dict[str, Any] | None, text: Sequence[TextNormalizer] = ()) -> Any:
    """Normalized copy of ``data`` under ``schema`` (a JSON Schema; ``None`` means no guidance)."""
    root = _NO_SCHEMA if schema is None else schema
    if text:
        return _Walker(root, tuple(text)).walk(data, root, 0)
    walker = _WALKERS.get(id(root))  # a walker keeps no state of its own walks: one per schema
    if walker is None or walker.root is not root:
        if len(_WALKERS) >= _MAX_ROOTS:
            del _WALKERS[next(iter(_WALKERS))]
        walker = _WALKERS[id(root)] = _Walker(root, ())
    return walker.walk(data, root, 0)


_NO_SCHEMA: dict[str, Any] = {}
# What every walk returns as it is, whatever the node (only strings are read as numbers, members,
# booleans or dates, and only floats as integers): not walked at all.
_KEPT = frozenset({int, bool, type(None)})
_WALKERS: dict[int, _Walker] = {}  # id(root) -> its walker without text normalizers (each holds its root)


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
                 "props", "raw", "required", "resolved_branches", "scalar", "shape_types", "takes_null", "text_only",
                 "types")

    def __init__(self, raw: dict[str, Any], node: Any = None) -> None:
        self.raw = raw
        self.node = node  # the node as the schema holds it (a ``$ref`` unresolved): kept alive with its plan
        self.empty = not raw
        branches = None
        for key in ("anyOf", "oneOf"):
            found = raw.get(key)
            if isinstance(found, list) and found:
                branches = found
                break
        self.branches: list[Any] | None = branches
        all_of = raw.get("allOf")
        self.all_of: Any = all_of[0] if isinstance(all_of, list) and len(all_of) == 1 else None
        self.members: list[Any] | None = (
            raw["enum"] if isinstance(raw.get("enum"), list) else [raw["const"]] if "const" in raw else None
        )
        self.types = frozenset(types_of(raw))
        # The types as coerce reads them: a node with properties or items is an object or an array.
        self.shape_types = self.types or (
            frozenset({"object"}) if "properties" in raw
            else frozenset({"array"}) if "items" in raw or "prefixItems" in raw else frozenset()
        )
        self.props: dict[str, Any] = raw["properties"] if isinstance(raw.get("properties"), dict) else {}
        extra = raw.get("additionalProperties")
        self.extra: dict[str, Any] | None = extra if isinstance(extra, dict) else None
        self.required: list[Any] = raw["required"] if isinstance(raw.get("required"), list) else []
        self.prefix: list[Any] = raw["prefixItems"] if isinstance(raw.get("prefixItems"), list) else []
        self.items: dict[str, Any] | None = raw["items"] if isinstance(raw.get("items"), dict) else None
        fmt = raw.get("format")
        self.fmt: str | None = fmt if fmt in ("date", "date-time") else None
        self.free_text = "string" in self.types and not fmt and "pattern" not in raw  # the text normalizers apply
        # The numeric or boolean reading of a node that takes no string (normalize).
        self.scalar: str | None = None
        if "string" not in self.types:
            self.scalar = next((t for t in ("integer", "number", "boolean") if t in self.types), None)
        # A string here is only trimmed and NFC'd (no union, member, number, boolean or date to read it
        # as; the text normalizers aside, see ``free_text``): normalize does it without a walk.
        self.text_only = not raw or (
            branches is None and self.all_of is None and self.members is None and self.scalar is None and self.fmt is None
        )
        # The Python types of a scalar coerce leaves as it is here (the walk would only return it).
        self.as_is: frozenset[type] = frozenset(
            kind for kind, kinds in _SCALAR_KINDS.items()
            if branches is None and self.all_of is None and self.members is None and self.shape_types and kinds & self.shape_types
            and (kind is not type(None) or "null" in self.shape_types)
        ) if raw else frozenset(_SCALAR_KINDS)
        self.resolved_branches: list[dict[str, Any]] | None = None
        self.leaves: list[tuple[Any, dict[str, Any]]] | None = None  # the union flattened (coerce)
        self.folded_keys: dict[str, list[str]] | None = None
        self.takes_null: bool | None = None


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


class _Walker:
    def __init__(self, root: dict[str, Any], text: tuple[TextNormalizer, ...]) -> None:
        self.root = root
        self.text = text
        self.table = plans(root)

    def walk(self, data: Any, node: Any, depth: int) -> Any:
        found = self.table.get(id(node)) or plan_in(self.table, node, self.root)
        if found.empty or depth > 64:
            return _plain(data)
        if found.branches is not None:
            return self.branch(data, branches_of(found, self.root), depth)
        if found.all_of is not None:
            return self.walk(data, found.all_of, depth + 1)
        if found.members is not None:
            return _member(_plain(data), found.members)
        if isinstance(data, dict):
            props, extra = found.props, found.extra
            walked: dict[str, Any] = {}
            for key, value in data.items():  # keys are the schema's: never rewritten
                if type(value) in _KEPT:
                    walked[key] = value
                    continue
                child = props.get(key, extra)
                if type(value) is str and self.text_only(child):  # only trimmed and NFC'd (no walk)
                    walked[key] = _text(value)
                    continue
                walked[key] = self.walk(value, child, depth + 1)
            return walked
        if isinstance(data, list):
            prefix, items = found.prefix, found.items
            if not prefix:
                if items is None or not self.text_only(items):
                    return [self.walk(v, items, depth + 1) for v in data]
                return [_text(v) if type(v) is str else self.walk(v, items, depth + 1) for v in data]
            return [self.walk(v, prefix[i] if i < len(prefix) else items, depth + 1) for i, v in enumerate(data)]
        scalar = found.scalar
        if scalar is not None:
            return _integer(data) if scalar == "integer" else _number(data) if scalar == "number" else _boolean(data)
        if isinstance(data, str):
            if found.fmt is not None:
                return _iso(_text(data), found.fmt)
            if self.text and found.free_text:
                out = _text(data)
                for fn in self.text:
                    out = fn(out)
                return out
        return _plain(data)

    def text_only(self, node: Any) -> bool:
        """Whether a string under this node is normalized to ``_text`` of it, as :meth:`walk` would."""
        found = self.table.get(id(node)) or plan_in(self.table, node, self.root)
        return found.text_only and not (self.text and found.free_text)

    def branch(self, data: Any, branches: list[dict[str, Any]], depth: int) -> Any:
        """Normalize under the one branch whose type fits the data; if none or several, leave it."""
        if data is None:
            return None
        fits = [b for b in branches if _fits(data, b)]
        if len(fits) == 1:
            return self.walk(data, fits[0], depth + 1)
        return _plain(data)


def _fits(data: Any, node: dict[str, Any]) -> bool:
    types = types_of(node)
    if isinstance(data, bool):
        return "boolean" in types
    if isinstance(data, (int, float)):
        return bool(types & {"integer", "number"})
    if isinstance(data, str):
        return "string" in types
    if isinstance(data, dict):
        return "object" in types
    if isinstance(data, list):
        return "array" in types
    return False


def _plain(data: Any) -> Any:
    """Type-independent normalization: strings to NFC and trimmed, recursively (keys kept)."""
    if isinstance(data, str):
        return _text(data)
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def _text(value: str) -> str:
    return unicodedata.normalize("NFC", value).strip()



def fold(value: str) -> str:
    """Text compared case- and whitespace-insensitively (NFC first)."""
    return " ".join(unicodedata.normalize("NFC", value).split()).casefold()


def _member(data: Any, members: list[Any]) -> Any:
    """The enum member the data names, matched exactly, then case- and whitespace-insensitively."""
    if any(data == m and type(data) is type(m) for m in members):
        return data
    if isinstance(data, str):
        folded = [m for m in members if isinstance(m, str) and fold(m) == fold(data)]
        if len(folded) == 1:
            return folded[0]
        numeric = [m for m in members if isinstance(m, (int, float)) and not isinstance(m, bool)]
        if numeric and _NUMERIC.fullmatch(data):
            value = _number(data)
            if value in numeric:
                return value
    return data


def _number(data: Any) -> Any:
    if isinstance(data, str) and _NUMERIC.fullmatch(data):
        value = float(data)
        if math.isfinite(value):
            return int(value) if value.is_integer() and re.fullmatch(r"\s*[-+]?\d+\s*", data) else value
    return data


def _integer(data: Any) -> Any:
    data = _number(data)
    if isinstance(data, float) and data.is_integer() and abs(data) < 2**53:
        return int(data)
    return data


def _boolean(data: Any) -> Any:
    if isinstance(data, str):
        return _BOOLS.get(fold(data), data)
    return data


def _iso(text: str, fmt: str) -> str:
    """An unambiguous date (or datetime) written another way, to ISO 8601; else unchanged."""
    if fmt == "date-time":
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat().replace("+00:00", "Z")
        except ValueError:
            return text
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    for pattern in _DATE_FORMATS:
        try:
            return datetime.strptime(text, pattern).date().isoformat()
        except ValueError:
            continue
    return text
