"""Field roles: which leaves of a schema the application branches on, and which are prose.

Stability is owed on what an application keys or branches on; free text rides along with it.
Every leaf of a schema gets one role, read from its JSON Schema once:

    decisive   voted: a choice (``enum``/``const``, Literal, Enum), a bool, a number, null, a
               string with a ``format`` (date, time, email, uuid, ...), a ``pattern`` or a
               ``maxLength`` of at most :data:`SHORT_MAX_LENGTH`
    prose      carried, never voted: a free-text string whose field is named as prose (its last
               word is one of :data:`PROSE_WORDS`: ``summary``, ``reason``, ``description``,
               ``notes``, ``task_description``, ...)
    auto       any other free-text string (``name``, ``city``, ``product``, ``title``): decided
               by what the ballots write (``vote/_decisive``): voted while every ballot's text
               is short (at most :data:`SHORT_WORDS` words) or copied from the input; prose once
               a ballot writes a longer text of its own

The root is never prose: a schema that is one string is the answer itself. A list whose items
are prose is prose as a whole (its length is no decision). A list of free-text strings whose
field is named as a set of labels (its last word one of :data:`LABEL_WORDS`: ``tags``,
``keywords``, ``skills``, ...) is voted as a set of labels: order and case never split it (an
application filters on membership; ``"x-accord-unordered": false`` keeps it ordered).

The user's word wins over the rule: ``accord.Prose[str]`` / ``accord.Decisive[str]`` on a field
(``"x-accord-role"`` in its JSON Schema), or ``accord.Vote(roles={"summary": "prose"})`` for a
JSON Schema dict. Paths read ``items[].sku`` (``[]``: any item of a list, ``*``: any key of a map).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from .._errors import ConfigError
from ..read._plan import resolve

ROLE = "x-accord-role"
DECISIVE, PROSE, AUTO = "decisive", "prose", "auto"
ITEM, ANY_KEY = "[]", "*"
SHORT_WORDS = 4  # a free text of more words, not copied from the input, is prose (vote/_decisive)
SHORT_MAX_LENGTH = 64  # a string whose maxLength is at most this is a short field: decisive
MAX_DEPTH = 16  # deeper nodes are decisive: voted, as before roles existed
MAX_NODES = 4_000  # nodes walked per schema; past them, every node is a decisive leaf

PROSE_WORDS = frozenset({
    "summary", "summaries", "description", "descriptions", "desc", "reason", "reasons", "reasoning", "rationale",
    "explanation", "explanations", "justification", "note", "notes", "comment", "comments", "remark", "remarks",
    "details", "feedback", "message", "body", "text", "content", "bio", "biography", "overview", "abstract",
    "narrative", "analysis", "thoughts", "task", "instructions", "advice", "suggestion", "suggestions",
})
LABEL_WORDS = frozenset({
    "tags", "labels", "keywords", "topics", "categories", "skills", "languages", "interests", "hobbies", "genres",
})
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

Pattern = tuple[str, ...]


@dataclass(frozen=True)
class Roles:
    """The roles of a schema's leaves by path pattern, and its lists voted as label sets.

    ``plain``: no leaf is prose or auto and no list is a label set, so the vote key of a value
    is its canonical key, exactly as before roles existed."""

    leaves: Mapping[Pattern, str]
    labels: frozenset[Pattern] = frozenset()

    @property
    def plain(self) -> bool:
        return not self.labels and all(role == DECISIVE for role in self.leaves.values())

    def of(self, role: str) -> list[Pattern]:
        return [pattern for pattern, said in self.leaves.items() if said == role]

    @cached_property
    def rendered(self) -> tuple[str, ...]:
        """Every leaf's path, as :func:`render` writes it."""
        return tuple(render(p) for p in self.leaves)

    @cached_property
    def nodes(self) -> frozenset[Pattern]:
        """Every node on the way to a leaf (each leaf's prefixes), the root included."""
        return frozenset(self.below)

    @cached_property
    def below(self) -> dict[Pattern, tuple[Pattern, ...]]:
        """Every node, with the leaves at or under it."""
        out: dict[Pattern, list[Pattern]] = {}
        for leaf in self.leaves:
            for i in range(len(leaf) + 1):
                out.setdefault(leaf[:i], []).append(leaf)
        return {node: tuple(leaves) for node, leaves in out.items()}

    @cached_property
    def auto(self) -> tuple[Pattern, ...]:
        """The auto leaves with a field to carry (under a bare list of texts there is none: voted)."""
        return tuple(p for p in self.of(AUTO) if any(part != ITEM for part in p))

    def describe(self) -> dict[str, str]:
        """``{path: role}`` for every leaf ("$" is the root), a label set's items as ``tags[]``."""
        out = {render(pattern): role for pattern, role in self.leaves.items()}
        for pattern in self.labels:
            out[render(pattern)] = f"{out.get(render(pattern), DECISIVE)} (a set of labels)"
        return out


def render(pattern: Pattern) -> str:
    """``("items", "[]", "sku")`` as ``items[].sku``; the root as ``$``."""
    text = ""
    for part in pattern:
        text += part if part == ITEM else f".{part}" if text else part
    return text or "$"


def parse(path: str) -> Pattern:
    """The inverse of :func:`render` (``$`` or an empty path is the root)."""
    path = path.strip()
    if path in ("", "$"):
        return ()
    parts: list[str] = []
    for segment in path.split("."):
        name, lists = segment, 0
        while name.endswith(ITEM):
            name, lists = name[: -len(ITEM)], lists + 1
        if "[" in name or "]" in name or not (name or lists):
            raise ConfigError(f"Vote(roles=...): cannot read the path {path!r} (write it as items[].sku)")
        parts += [name] if name else []
        parts += [ITEM] * lists
    return tuple(parts)


def words(name: str) -> list[str]:
    """A field name's words, lower-case: ``taskDescription``, ``task_description`` and
    ``Task-Description`` are all ``["task", "description"]``."""
    return [w.lower() for w in _WORDS.findall(name)]


def roles_of(schema: dict[str, Any] | None, overrides: Mapping[str, str] | None = None) -> Roles:
    """Every leaf's role (see the module docstring); ``overrides``: ``{path: "prose" | "decisive"}``,
    a ConfigError for a path the schema does not have."""
    if not isinstance(schema, dict):
        return Roles({(): DECISIVE})
    wanted = {parse(path): role for path, role in (overrides or {}).items()}
    walk = _Walk(schema, wanted)
    walk.node(schema, (), None, 0)
    unknown = [render(p) for p in wanted if p not in walk.seen]
    if unknown:
        known = ", ".join(sorted(render(p) for p in walk.seen if p)) or "none"
        raise ConfigError(f"Vote(roles=...) names {', '.join(unknown)}, which the schema does not have (its paths: {known})")
    return Roles(dict(walk.leaves), frozenset(walk.labels))


class _Walk:
    def __init__(self, root: dict[str, Any], wanted: Mapping[Pattern, str]) -> None:
        self.root, self.wanted = root, wanted
        self.leaves: dict[Pattern, str] = {}
        self.labels: set[Pattern] = set()
        self.seen: set[Pattern] = set()

    def node(self, raw: Any, pattern: Pattern, name: str | None, depth: int, *, said: str | None = None,
             refs: frozenset[str] = frozenset()) -> None:
        """Give the node at ``pattern`` (the property ``name``) and everything below it a role;
        ``said``: a role the user gave a node above (it holds for every leaf below); ``refs``: the
        definitions on the way here (a recursive one is not walked into again)."""
        self.seen.add(pattern)
        node = resolve(raw, self.root)
        said = self.wanted.get(pattern) or _said(raw) or _said(node) or said
        ref = raw.get("$ref") if isinstance(raw, dict) else None
        if depth > MAX_DEPTH or ref in refs or len(self.seen) > MAX_NODES:
            self.leaf(pattern, said or DECISIVE)  # a recursive definition, or past the bounds: voted whole
            return
        refs = refs | {ref} if isinstance(ref, str) else refs
        kids = list(self.children(node, pattern))
        if not kids:
            self.leaf(pattern, said or _leaf_role(node, name))
            return
        for child, child_pattern, child_name in kids:
            self.node(child, child_pattern, child_name, depth + 1, said=said, refs=refs)
        items = (*pattern, ITEM)
        labels = self.leaves.get(items) == AUTO and name is not None and (words(name) or [""])[-1] in LABEL_WORDS
        if labels and node.get("x-accord-unordered") is not False and not node.get("prefixItems"):
            self.labels.add(items)  # a list of free-text labels: voted as a set

    def children(self, node: dict[str, Any], pattern: Pattern) -> Iterator[tuple[Any, Pattern, str | None]]:
        """The nodes below an object, a list or a union branch, with their patterns and names."""
        props = node.get("properties")
        if isinstance(props, dict):
            for key, child in props.items():
                yield child, (*pattern, str(key)), str(key)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            yield extra, (*pattern, ANY_KEY), None
        items = node.get("items")
        if isinstance(items, dict) and items:
            yield items, (*pattern, ITEM), pattern[-1] if pattern else None
        for key in ("anyOf", "oneOf", "allOf"):
            branches = node.get(key)
            if isinstance(branches, list):
                for branch in branches:
                    if isinstance(branch, dict) and "$ref" not in branch and _container(branch):
                        yield from self.children(branch, pattern)
                    elif isinstance(branch, dict) and _container(resolve(branch, self.root)):
                        yield branch, pattern, None  # a definition: walked as the node itself, its reference on the way

    def leaf(self, pattern: Pattern, role: str) -> None:
        if not pattern:
            role = DECISIVE  # the root is the answer itself
        known = self.leaves.get(pattern)
        # A leaf reached twice (union branches) keeps the strongest claim: decisive over auto over prose.
        order = (PROSE, AUTO, DECISIVE)
        self.leaves[pattern] = role if known is None else max(known, role, key=order.index)


def _said(node: Any) -> str | None:
    role = node.get(ROLE) if isinstance(node, dict) else None
    if role is None:
        return None
    if role not in (DECISIVE, PROSE):
        raise ConfigError(f'"{ROLE}" must be "decisive" or "prose", got {role!r}')
    return str(role)


def _container(node: dict[str, Any]) -> bool:
    return isinstance(node.get("properties"), dict) or isinstance(node.get("items"), dict) or isinstance(
        node.get("additionalProperties"), dict) or node.get("type") in ("object", "array")


def _leaf_role(node: dict[str, Any], name: str | None) -> str:
    """The default rule for one leaf (see the module docstring)."""
    if not _free_text(node):
        return DECISIVE
    if name is not None and (words(name) or [""])[-1] in PROSE_WORDS:
        return PROSE  # ``summary: str``, and each item of ``notes: list[str]``
    return AUTO


def _free_text(node: dict[str, Any]) -> bool:
    """A string the schema does not pin down: no choice, no format, no pattern, no short maximum."""
    types = node.get("type")
    branches = [resolve(b, {}) if isinstance(b, dict) else {} for b in node.get("anyOf", []) or []]
    if types is None and branches:  # Optional[str]: a string or null
        kinds = [b.get("type") for b in branches]
        strings = [b for b in branches if b.get("type") == "string"]
        return len(strings) == 1 and all(k in ("string", "null") for k in kinds) and _free_text(strings[0])
    if types != "string" and not (isinstance(types, list) and "string" in types and set(types) <= {"string", "null"}):
        return False
    if any(key in node for key in ("enum", "const", "format", "pattern", "contentEncoding")):
        return False
    limit = node.get("maxLength")
    return not (isinstance(limit, int) and not isinstance(limit, bool) and limit <= SHORT_MAX_LENGTH)


# -- the annotations -----------------------------------------------------------------------------

class _RoleMarker:
    def __init__(self, role: str) -> None:
        self.role = role

    def __get_pydantic_json_schema__(self, core: Any, handler: Any) -> dict[str, Any]:
        schema: dict[str, Any] = handler(core)
        if "$ref" in schema:  # a model's reference: the role goes beside it, never into the shared definition
            return {"allOf": [schema], ROLE: self.role}
        schema[ROLE] = self.role
        return schema

    def __repr__(self) -> str:
        return f"accord.{self.role.title()}"


_T = TypeVar("_T")

if TYPE_CHECKING:
    Prose = Annotated[_T, ...]  # to a type checker, Prose[str] is str
    Decisive = Annotated[_T, ...]
else:

    class Prose:
        """``summary: accord.Prose[str]``: generated text whose wording is not the point: carried
        from a ballot that holds the winning decision, never voted."""

        def __class_getitem__(cls, item: Any) -> Any:
            return Annotated[item, _RoleMarker(PROSE)]

    class Decisive:
        """``name: accord.Decisive[str]``: a field the application branches on: always voted."""

        def __class_getitem__(cls, item: Any) -> Any:
            return Annotated[item, _RoleMarker(DECISIVE)]
