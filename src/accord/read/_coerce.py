"""Schema-aligned coercion: bend data read from a model toward the schema, only where it says how.

Guided by the output's JSON Schema, and recorded: every change is a :class:`Coercion` (which fix,
at which path, at what cost), and a candidate's score is the sum of its costs. The coercions:

- object keys matched case- and separator-insensitively (``firstName`` / ``first_name`` /
  ``First Name``), when exactly one property matches;
- a required nullable field that is missing filled with null (never inside an object the text
  was cut off in: there the model may still have meant a value);
- a scalar (or one object) where the schema wants a list: a one-element list; a one-element list
  where it wants a scalar: the element;
- numeric strings to numbers, ``yes``/``no``/``true``/``false`` strings to booleans, numbers to
  strings for string fields, null-like strings (``N/A``) to null where null is allowed; a number
  or a yes/no written another way (``$1.50``, ``Yes.``) as ``_numbers`` and ``_words`` read it
  at every depth (never a negated, hedged or ambiguous one);
- enum members matched case- and whitespace-insensitively, or named as ``_words.choice`` reads them;
- unions (``anyOf``/``oneOf``): every member tried in order, the one with the fewest misfits and
  the lowest cost kept, the first on a tie. A member that is itself a union is tried as its
  members (each distinct member once): nested unions cost their size, not its product.

Anything else is left as it is, for validation to accept or reject: a coercion never invents a
value the data does not hold.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from ._coercions import quote, spelled_list
from ._jsonish import parse
from ._numbers import number
from ._plan import Plan, Plans, branches_of, plan_in, plans, resolve, types_of
from ._words import boolean, choice, fold, null_like

Path = tuple[str | int, ...]

_NUMERIC = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")
_INTEGER = re.compile(r"\s*[-+]?\d+\s*")
_DROPPED = str.maketrans("", "", "_-.")  # with whitespace, what a key is compared without (``key_fold``)
_MISFIT: Any = object()  # what :meth:`_Coercer.from_text` reads in a string that says no value of its types
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Coercion:
    """One change made to fit the schema: ``fix`` at ``path``, costing ``cost``."""

    path: Path
    fix: str
    cost: int = 1
    breaking: bool = False  # the data is certainly invalid without it (a scalar where a list belongs)


def key_fold(key: str) -> str:
    """A key compared case- and separator-insensitively: ``firstName``, ``first_name``, ``First Name``."""
    return "".join(key.translate(_DROPPED).split()).casefold()


def coerce(data: Any, schema: dict[str, Any] | None, closed: frozenset[Path] = frozenset()) -> tuple[Any, list[Coercion], int]:
    """``(data, coercions, misfits)``: the data bent toward the schema, what was done, and how many
    places still do not fit their type. ``closed``: objects the text was cut off in."""
    walker = _Coercer(schema or {}, closed)
    out = walker.walk(data, schema or {}, (), 0)
    return out, walker.coercions, walker.misfits


class _Coercer:
    def __init__(self, root: dict[str, Any], closed: frozenset[Path], table: Plans | None = None) -> None:
        self.root = root
        self.closed = closed
        self.table = plans(root) if table is None else table
        self.coercions: list[Coercion] = []
        self.misfits = 0

    def note(self, path: Path, fix: str, cost: int, breaking: bool = False) -> None:
        self.coercions.append(Coercion(path, fix, cost, breaking))

    def walk(self, data: Any, node: Any, path: Path, depth: int) -> Any:
        found = self.table.get(id(node)) or plan_in(self.table, node, self.root)
        if found.empty or depth > MAX_DEPTH:
            return data
        if found.branches is not None:
            return self.union(data, found, path, depth)
        if found.all_of is not None:
            return self.walk(data, found.all_of, path, depth + 1)
        if found.members is not None:
            return self.member(data, found.members, path)
        types = found.shape_types
        if not types:
            return data
        if data is None and "null" in types:
            return None
        if "object" in types and isinstance(data, dict):
            return self.object(data, found, path, depth)
        if "array" in types:
            if isinstance(data, list):
                return self.array(data, found, path, depth)
            if data is not None and not types & _kinds(data):
                return self.as_list(data, found, path, depth)
        if isinstance(data, list) and len(data) == 1 and not types & {"array"} and not isinstance(data[0], (list, dict)):
            self.note(path, "one-element list as its element", 2, breaking=True)
            return self.walk(data[0], node, path, depth + 1)
        return self.scalar(data, types, path)

    def as_list(self, data: Any, found: Plan, path: Path, depth: int) -> Any:
        """A value where a list belongs: the list a string spells (or a misfit, where it surely
        spells none), else the value as a list of one."""
        if isinstance(data, str):  # a list spelled in a string: the list it spells, or none for sure
            spelled = spelled_list(data, _list_of)
            if isinstance(spelled, list):
                self.note(path, f"{quote(data)} as the list it spells ({len(spelled)} items)", 2, breaking=True)
                return self.array(spelled, found, path, depth)
            if spelled is not None:
                self.misfits += 1
                return data
        self.note(path, "one value as a list", 2, breaking=True)
        return [self.walk(data, found.items, (*path, 0), depth + 1)]

    def union(self, data: Any, found: Plan, path: Path, depth: int) -> Any:
        best: tuple[int, int, Any, list[Coercion]] | None = None
        if found.leaves is None:
            found.leaves = _leaves(found, self.table, self.root)
        for branch, resolved in found.leaves:
            trial = _Coercer(self.root, self.closed, self.table)
            out = trial.walk(data, branch, path, depth + 1)
            if not _fits(out, resolved, self.root):
                trial.misfits += 1
            cost = sum(c.cost for c in trial.coercions)
            if best is None or (trial.misfits, cost) < (best[0], best[1]):
                best = (trial.misfits, cost, out, trial.coercions)
        assert best is not None
        self.misfits += best[0]
        self.coercions.extend(best[3])
        return best[2]

    def member(self, data: Any, members: list[Any], path: Path) -> Any:
        if any(data == m and type(data) is type(m) for m in members):
            return data
        if isinstance(data, str):
            folded = [m for m in members if isinstance(m, str) and fold(m) == fold(data)]
            if len(folded) == 1:
                if folded[0] != data.strip():
                    self.note(path, f"{data!r} as the member {folded[0]!r}", 1)
                return folded[0]
            numbers = [m for m in members if isinstance(m, (int, float)) and not isinstance(m, bool)]
            if numbers and _NUMERIC.fullmatch(data) and _number(data) in numbers:
                self.note(path, "numeric string as a number", 1)
                return _number(data)
            if not folded:
                read = choice(data, members, nested=True)  # the reading of every depth (``_words``): never a negated member
                if isinstance(read, tuple):
                    self.note(path, read[1] or f"{data!r} as the member {read[0]!r}", 1)
                    return read[0]
        if isinstance(data, list) and len(data) == 1:
            self.note(path, "one-element list as its element", 2, breaking=True)
            return self.member(data[0], members, path)
        self.misfits += 1
        return data

    def object(self, data: dict[str, Any], found: Plan, path: Path, depth: int) -> Any:
        props, extra, table, root = found.props, found.extra, self.table, self.root
        out: dict[str, Any] = {}
        renamed: dict[str, str] = {}
        if props and not data.keys() <= props.keys():  # a key the schema does not name
            if found.folded_keys is None:
                found.folded_keys = _folded(tuple(props))
            wanted = found.folded_keys
            for key in data:
                if key in props:
                    continue
                matches = wanted.get(key_fold(key), [])
                if len(matches) == 1 and matches[0] not in data and matches[0] not in renamed.values():
                    renamed[key] = matches[0]
        for key, value in data.items():
            name = renamed.get(key, key)
            if name != key:
                self.note((*path, name), f"key {key!r} as {name!r}", 1)
            child = props.get(name, extra)
            if child is None:
                out[name] = value
                continue
            below = table.get(id(child)) or plan_in(table, child, root)
            # a scalar of a type the node takes as it is: what the walk would return, without it
            out[name] = value if type(value) in below.as_is and depth < MAX_DEPTH else self.walk(value, child, (*path, name), depth + 1)
        for name in found.required:
            if name in out or name not in props:
                continue
            if path in self.closed:
                self.misfits += 1  # cut off before it: never filled
                continue
            if _nullable(plan_in(self.table, props[name], self.root), self.root):
                self.note((*path, name), "missing nullable field as null", 2, breaking=True)
                out[name] = None
            else:
                self.misfits += 1
        return out

    def array(self, data: list[Any], found: Plan, path: Path, depth: int) -> Any:
        prefix, items = found.prefix, found.items
        if not prefix:
            if items is None:
                return list(data)
            below = self.table.get(id(items)) or plan_in(self.table, items, self.root)
            if depth < MAX_DEPTH and all(type(v) in below.as_is for v in data):
                return list(data)  # scalars the items take as they are: what the walk would return
            return [self.walk(v, items, (*path, i), depth + 1) for i, v in enumerate(data)]
        return [
            self.walk(v, prefix[i] if i < len(prefix) else items, (*path, i), depth + 1)
            if (i < len(prefix) or items is not None) else v
            for i, v in enumerate(data)
        ]

    def scalar(self, data: Any, types: frozenset[str], path: Path) -> Any:
        if types & _kinds(data):
            return data
        if isinstance(data, str):
            read = self.from_text(data, types, path)
            if read is not _MISFIT:
                return read
        elif isinstance(data, (int, float)) and not isinstance(data, bool) and "string" in types:
            self.note(path, "number as a string", 2, breaking=True)
            return str(data)
        elif isinstance(data, float) and "integer" in types and data.is_integer() and abs(data) < 2**53:
            return int(data)
        self.misfits += 1
        return data

    def from_text(self, data: str, types: frozenset[str], path: Path) -> Any:
        """A string where a null, a number or a yes/no belongs, read as one (recorded); ``_MISFIT``
        where it says none."""
        if types == {"null"} and null_like(data):  # a union's null member (a text member takes the text first)
            self.note(path, f"{data!r} as null", 1)
            return None
        if types & {"integer", "number"}:
            if _NUMERIC.fullmatch(data):
                value = _number(data)
                if value is not None and ("number" in types or isinstance(value, int)):
                    self.note(path, "numeric string as a number", 1)
                    return value
            read = number(data, "number" not in types, nested=True)  # the reading of every depth (``_numbers``)
            if isinstance(read, tuple) and ("number" in types or isinstance(read[0], int)):
                self.note(path, read[1] or "numeric string as a number", 2, breaking=True)
                return read[0]
        if "boolean" in types:
            said = boolean(data)
            if isinstance(said, tuple):
                self.note(path, "yes/no string as a boolean" if said[1] is None else said[1], 1)
                return said[0]
        return _MISFIT


@functools.lru_cache(maxsize=1024)
def _folded(props: tuple[str, ...]) -> dict[str, list[str]]:
    """The properties of an object by their folded key (cached: schemas repeat)."""
    wanted: dict[str, list[str]] = {}
    for prop in props:
        wanted.setdefault(key_fold(prop), []).append(prop)
    return wanted


_NULL, _BOOLEAN, _INTEGRAL, _NUMBER, _STRING, _ARRAY, _OBJECT, _NONE = (
    frozenset(kinds) for kinds in ({"null"}, {"boolean"}, {"integer", "number"}, {"number"}, {"string"}, {"array"}, {"object"}, ())
)
_KINDS = {type(None): _NULL, bool: _BOOLEAN, int: _INTEGRAL, float: _NUMBER, str: _STRING, list: _ARRAY, dict: _OBJECT}


def _kinds(data: Any) -> frozenset[str]:
    """The JSON Schema types a Python value is."""
    known = _KINDS.get(type(data))
    if known is not None:
        return known
    if isinstance(data, bool):
        return _BOOLEAN
    if isinstance(data, int):
        return _INTEGRAL
    if isinstance(data, float):
        return _NUMBER
    if isinstance(data, str):
        return _STRING
    if isinstance(data, list):
        return _ARRAY
    if isinstance(data, dict):
        return _OBJECT
    return _NONE


def _leaves(found: Plan, table: Plans, root: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """The union's members, ``(node, resolved)``, with each member that is a union replaced by
    its own members, in order, each resolved node once (a union reached again adds nothing)."""
    out: list[tuple[Any, dict[str, Any]]] = []
    seen: set[int] = set()
    todo: list[tuple[Any, dict[str, Any]]] = list(zip(found.branches or (), branches_of(found, root), strict=True))[::-1]
    while todo:
        branch, resolved = todo.pop()
        if id(resolved) in seen:
            continue
        seen.add(id(resolved))
        inner = plan_in(table, branch, root)
        if inner.branches is not None:
            todo.extend(list(zip(inner.branches, branches_of(inner, root), strict=True))[::-1])
        else:
            out.append((branch, resolved))
    return out


def _fits(data: Any, node: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether the data's top-level type is one the node allows (a cheap test for union members)."""
    if not node:
        return True
    if isinstance(node.get("enum"), list):
        return any(data == m and type(data) is type(m) for m in node["enum"])
    if "const" in node:
        return bool(data == node["const"])
    types = types_of(node) or ({"object"} if "properties" in node else set())
    if not types:
        return True
    return bool(types & _kinds(data))


def _nullable(found: Plan, root: dict[str, Any]) -> bool:
    """Whether the node takes null (once per plan)."""
    if found.takes_null is None:
        found.takes_null = "null" in found.types or any(
            isinstance(branches, list) and any("null" in types_of(resolve(b, root)) for b in branches)
            for branches in (found.raw.get("anyOf"), found.raw.get("oneOf"))
        )
    return found.takes_null


def _list_of(text: str) -> Any:
    """A list written inside a string (``"['a', 'b']"``), read as the lenient reader reads JSON."""
    return parse(text).value


def _number(text: str) -> int | float | None:
    value = float(text)
    if not math.isfinite(value):
        return None
    return int(value) if _INTEGER.fullmatch(text) else value
