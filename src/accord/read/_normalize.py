"""Stage 4, normalize: bring extracted data into the form the schema expects.

Guided by the schema's JSON Schema:

- strings to Unicode NFC and trimmed (object keys are the schema's and never rewritten);
- enum members matched case- and whitespace-insensitively;
- numeric strings to numbers for numeric fields, ``3.0`` to ``3`` for integers only when exact;
- yes/no/true/false to booleans for boolean fields;
- dates and datetimes to ISO 8601 for ``format: date`` / ``date-time`` fields;
- the per-schema text normalizers (``Extract(normalize=[...])``, e.g. :func:`casefold`) on
  free-text fields: strings without enum, const, pattern or format;
- a list of labels (a list of free text the schema names as labels: ``tags``, ``keywords``, ...,
  ``schema/_roles``) keeps each label once, and no item that is no label (``", "``, ``""``):
  the items whose :func:`~accord.read._canonical.label` form is empty or an earlier item's are
  dropped, recorded, so the value holds the labels its vote key holds.

Per-field normalizers are ``Annotated[str, accord.Normalize(fn)]`` and run inside validation.
Normalization is idempotent (given idempotent normalizers), and the pipeline validates the
normalized data first and falls back to the raw data, so it never makes a valid answer invalid.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import core_schema

from .._errors import ConfigError
from ..schema._roles import ANY_KEY, ITEM, Pattern, roles_of
from ._canonical import label
from ._coerce import _list_of
from ._coercions import Refusal, bool_for_number, number_for_bool, spelled_list
from ._leaves import Said, iso, member, scalar
from ._plan import Plan, branches_of, plan_in, plans, types_of
from ._words import null_like

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


def normalize(data: Any, schema: dict[str, Any] | None, text: Sequence[TextNormalizer] = (), said: Said | None = None) -> Any:
    """Normalized copy of ``data`` under ``schema`` (a JSON Schema; ``None`` means no guidance).

    ``said``, when given, collects what was read beyond case and space, and what was refused."""
    root = _NO_SCHEMA if schema is None else schema
    sink = Said() if said is None else said
    if text:
        return _Walker(root, tuple(text)).walk(data, root, 0, (), sink)
    walker = _WALKERS.get(id(root))  # a walker keeps no state of its own walks: one per schema
    if walker is None or walker.root is not root:
        if len(_WALKERS) >= _MAX_ROOTS:
            del _WALKERS[next(iter(_WALKERS))]
        walker = _WALKERS[id(root)] = _Walker(root, ())
    return walker.walk(data, root, 0, (), sink)


_NO_SCHEMA: dict[str, Any] = {}
_MAX_ROOTS = 256  # walkers kept, one per schema (the oldest dropped first)
# What every walk returns as it is, whatever the node (only strings are read as numbers, members,
# booleans or dates, and only floats as integers): not walked at all.
_NONE = type(None)
_KEPT = frozenset({int, bool, _NONE})
_WALKERS: dict[int, _Walker] = {}  # id(root) -> its walker without text normalizers (each holds its root)
_LABELS: dict[int, tuple[dict[str, Any], frozenset[Pattern], frozenset[Pattern]]] = {}  # id(root) -> (root, labels, nodes)


def _label_lists(root: dict[str, Any]) -> tuple[frozenset[Pattern], frozenset[Pattern]]:
    """The patterns of the root's lists of labels (``tags[]``) and of its nodes, once per root
    (a role the schema spells wrong is the Stabilizer's ConfigError: here, no labels)."""
    known = _LABELS.get(id(root))
    if known is None or known[0] is not root:
        try:
            roles = roles_of(root) if root else None
        except ConfigError:
            roles = None
        if len(_LABELS) >= _MAX_ROOTS:
            del _LABELS[next(iter(_LABELS))]
        known = _LABELS[id(root)] = (root, roles.labels, roles.nodes) if roles and roles.labels else (root, frozenset(), frozenset())
    return known[1], known[2]


class _Walker:
    def __init__(self, root: dict[str, Any], text: tuple[TextNormalizer, ...]) -> None:
        self.root = root
        self.text = text
        self.table = plans(root)
        self.labels, self.nodes = _label_lists(root)

    def walk(self, data: Any, node: Any, depth: int, path: tuple[Any, ...], said: Said) -> Any:
        found = self.table.get(id(node)) or plan_in(self.table, node, self.root)
        if found.empty or depth > 64:
            return _plain(data)
        if found.branches is not None:
            return self.branch(data, found, depth, path, said)
        if found.all_of is not None:
            return self.walk(data, found.all_of, depth + 1, path, said)
        if found.members is not None:
            return member(_plain(data), found.members, path, said)
        if isinstance(data, dict):
            return self.object(data, found, depth, path, said)
        if isinstance(data, list):
            return self.array(data, found, depth, path, said)
        if found.scalar is not None:
            return scalar(data, found.scalar, path, said)
        if isinstance(data, str):
            return self.string(data, found, path, said)
        return _plain(data)

    def object(self, data: dict[str, Any], found: Plan, depth: int, path: tuple[Any, ...], said: Said) -> dict[str, Any]:
        """An object's members walked under their properties; its keys are the schema's: never rewritten."""
        props, extra = found.props, found.extra
        walked: dict[str, Any] = {}
        risky = found.risky or self.risky(found)
        for key, value in data.items():
            kind = type(value)
            # kept as it is, unless its node refuses or decides it (a bool for a number)
            if kind in _KEPT and (kind is _NONE or (key not in (risky[1] if kind is int else risky[0])
                                                    and (key in props or not (risky[3] if kind is int else risky[2])))):
                walked[key] = value
                continue
            child = props.get(key, extra)
            if kind is str and self.text_only(child):  # only trimmed and NFC'd (no walk)
                walked[key] = _text(value)
                continue
            walked[key] = self.walk(value, child, depth + 1, (*path, key), said)
        return walked

    def array(self, data: list[Any], found: Plan, depth: int, path: tuple[Any, ...], said: Said) -> list[Any]:
        """An array's items walked under their node (the prefix's first)."""
        prefix, items = found.prefix, found.items
        if not prefix:
            if items is None or not self.text_only(items):
                out = [self.walk(v, items, depth + 1, (*path, i), said) for i, v in enumerate(data)]
            else:
                out = [_text(v) if type(v) is str else self.walk(v, items, depth + 1, (*path, i), said) for i, v in enumerate(data)]
            return _labelled(out, data, path, said) if self.labels and self.of_labels(path) else out
        return [self.walk(v, prefix[i] if i < len(prefix) else items, depth + 1, (*path, i), said) for i, v in enumerate(data)]

    def of_labels(self, path: tuple[Any, ...]) -> bool:
        """Whether the list at ``path`` is a list of labels (its items' pattern among the labels)."""
        pattern: Pattern = ()
        for key in path:
            named = (*pattern, str(key))
            pattern = (*pattern, ITEM) if isinstance(key, int) else named if named in self.nodes else (*pattern, ANY_KEY)
        return (*pattern, ITEM) in self.labels

    def string(self, data: str, found: Plan, path: tuple[Any, ...], said: Said) -> Any:
        """A string where the node takes no scalar: a spelled list refused with why, a date or time
        in its ISO form, free text through the text normalizers; else trimmed and NFC'd."""
        if "array" in found.types:  # a list spelled in a string: the coercer reads it, or here it is refused with why
            spelled = spelled_list(data, _list_of)
            if isinstance(spelled, Refusal):
                said.refuse(path, spelled)
            return _text(data)
        if found.fmt is not None:
            return iso(_text(data), found.fmt)
        if self.text and found.free_text:
            out = _text(data)
            for fn in self.text:
                out = fn(out)
            return out
        return _text(data)

    def risky(self, found: Plan) -> tuple[frozenset[str], frozenset[str], bool, bool]:
        """The properties of an object node whose bool (first) or int (second) value must be
        walked, not kept, and whether a key the node does not name must be (its bool, its int):
        once per node (``Plan.risky``)."""
        def walks(node: Any) -> frozenset[type]:
            return (self.table.get(id(node)) or plan_in(self.table, node, self.root)).walks if node is not None else frozenset()
        props, other = found.props, walks(found.extra)
        found.risky = (frozenset(k for k, v in props.items() if bool in walks(v)),
                       frozenset(k for k, v in props.items() if int in walks(v)), bool in other, int in other)
        return found.risky

    def text_only(self, node: Any) -> bool:
        """Whether a string under this node is normalized to ``_text`` of it, as :meth:`walk` would."""
        found = self.table.get(id(node)) or plan_in(self.table, node, self.root)
        return found.text_only and not (self.text and found.free_text)

    def branch(self, data: Any, found: Plan, depth: int, path: tuple[Any, ...], said: Said) -> Any:
        """Normalize under the one branch whose type fits the data; if none or several, leave it.

        A null-like string (``""``, ``N/A``, ``null``) where a branch is null and none takes free
        text is null, recorded (under ``Optional[str]`` the text is a value: kept); a
        string no branch takes as text is read under the one scalar branch there is (a number,
        a yes/no, a choice), as it would be were that branch the whole node."""
        if data is None:
            return None
        branches = branches_of(found, self.root)
        if isinstance(data, (int, float)) and _refused_kind(data, branches, path, said):
            return data
        if isinstance(data, str) and null_like(data) and _nullable_not_text(branches):
            said.note(path, f"{data!r} as null")
            return None
        fits = [b for b in branches if _fits(data, b)]
        if len(fits) == 1:
            return self.walk(data, fits[0], depth + 1, path, said)
        if not fits and isinstance(data, str):
            readers = [b for b in branches if (b.get("enum") is not None or types_of(b) & {"integer", "number", "boolean"})]
            if len(readers) == 1:
                return self.walk(data, readers[0], depth + 1, path, said)
        return _plain(data)


def _labelled(items: list[Any], written: list[Any], path: tuple[Any, ...], said: Said) -> list[Any]:
    """A list of labels (``items``, normalized from ``written``) with each label once and no item
    that is none (its label form empty), each item dropped recorded: the ``a label once``
    coercion. Of the items of one label, the one kept is the same whatever their order (a set's
    value never depends on the order it was written in): the label form itself if written, else
    the shortest, then the first in code-point order; it stands where the label first stood. A
    list that holds anything but text is left as it is."""
    if not all(type(v) is str for v in items):
        return items
    forms = [label(text) for text in items]
    kept: dict[str, int] = {}  # each label's form -> the index of the item kept for it
    for i, (form, text) in enumerate(zip(forms, items, strict=True)):
        held = kept.get(form)
        if form and (held is None or (text != form, len(text), text) < (items[held] != form, len(items[held]), items[held])):
            kept[form] = i
    if len(kept) == len(items):
        return items  # every item a label of its own: as it is
    for i, form in enumerate(forms):
        if not form:
            said.note((*path, i), f"{written[i]!r} dropped: no label (a list of labels holds each label once)")
        elif kept[form] != i:
            said.note((*path, i), f"{written[i]!r} dropped: the label {items[kept[form]]!r} is there "
                                  "(a list of labels holds each label once)")
    return [items[i] for i in kept.values()]


def _refused_kind(data: float, branches: list[dict[str, Any]], path: tuple[Any, ...], said: Said) -> bool:
    """Whether a union refuses a yes/no (or a number) because it takes only numbers (or only yes/no)."""
    takes = set().union(*(types_of(b) for b in branches)) if branches else set()
    if type(data) is bool and "boolean" not in takes and takes & {"integer", "number"}:
        said.refuse(path, bool_for_number(data))
        return True
    if type(data) is not bool and "boolean" in takes and not takes & {"integer", "number"}:
        said.refuse(path, number_for_bool(data))
        return True
    return False


def _nullable_not_text(branches: list[dict[str, Any]]) -> bool:
    """Whether a union takes null and no free text (so a null-like string there can only mean null)."""
    return any("null" in types_of(b) for b in branches) and not any(
        "string" in types_of(b) and not ({"enum", "const", "format", "pattern"} & b.keys()) for b in branches
    )


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
