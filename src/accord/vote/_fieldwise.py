"""Field-level voting: each field path gets its own tally, then the winners are reassembled.

Every node of a ballot's canonical form votes at its path: objects vote ``{}`` and their keys
vote below them (a missing key votes "absent"); ordered lists vote their length and their items
by position; set-like lists vote each member in or out; leaves vote their canonical JSON. A path
is decided by the same rules as a whole-object vote (quorum, early stop), and the run is decided
once every path of the assembled tree is. The caller re-validates the assembly and falls back to
the whole-object winner when it does not validate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..read._canonical import canonical_key, is_set_like
from ..read._plan import resolve
from ._vote import Tally, Vote

Path = tuple[Any, ...]
ABSENT = "<absent>"
OBJECT = "{}"
SET = "<set>"
IN = "<in>"
_STRENGTH = {"unanimous": 0, "unbeatable": 1, "confident": 2, "k reached": 3}


def flatten(form: Any, schema: dict[str, Any] | None) -> dict[Path, str]:
    """Path -> vote key for every node of a canonical form."""
    out: dict[Path, str] = {}
    _flatten(form, schema or {}, schema or {}, (), out, depth=0)
    return out


def _flatten(data: Any, node: Any, root: dict[str, Any], path: Path, out: dict[Path, str], *, depth: int) -> None:
    node = resolve(node, root) if depth < 64 else {}
    if isinstance(data, dict):
        out[path] = OBJECT
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        extra = node.get("additionalProperties") if isinstance(node.get("additionalProperties"), dict) else None
        for key, value in data.items():
            _flatten(value, props.get(key, extra), root, (*path, key), out, depth=depth + 1)
    elif isinstance(data, list) and is_set_like(node):
        out[path] = SET
        for item in data:
            out[(*path, ("member", canonical_key(item)))] = IN
    elif isinstance(data, list):
        out[path] = f"[{len(data)}]"
        items = node.get("items") if isinstance(node.get("items"), dict) else None
        for i, value in enumerate(data):
            _flatten(value, items, root, (*path, i), out, depth=depth + 1)
    else:
        out[path] = canonical_key(data)


def render_path(path: Path) -> str:
    parts = []
    for token in path:
        if isinstance(token, int):
            parts.append(f"[{token}]")
        elif isinstance(token, tuple):
            parts.append(f"{{{token[1]}}}")
        else:
            parts.append(f".{token}" if parts else str(token))
    return "".join(parts) or "$"


@dataclass(frozen=True)
class Assembly:
    """The fieldwise outcome: decided (reason and data), hopeless, or still open."""

    reason: str | None
    data: Any = None
    hopeless: bool = False
    agreement: dict[str, float] | None = None


def decide(flats: Sequence[dict[Path, str]], done: int, vote: Vote) -> Assembly:
    """Vote every path of the tree the winners assemble; decided when all of them are."""
    assembler = _Assembler(flats, done, vote)
    data = assembler.build(()) if flats else _MISSING
    agreement, reasons = assembler.agreement, assembler.reasons
    if assembler.hopeless:
        return Assembly(None, hopeless=True, agreement=agreement)
    if data is _MISSING or not all(reasons):
        return Assembly(None, agreement=agreement)
    weakest = max(reasons, key=lambda r: _STRENGTH.get(r, 99))
    return Assembly(weakest, _strip(data), agreement=agreement)


class _Assembler:
    """One fieldwise vote: each path voted as the tree of winners is built, top down."""

    def __init__(self, flats: Sequence[dict[Path, str]], done: int, vote: Vote) -> None:
        self.flats, self.done, self.vote = flats, done, vote
        self.children: dict[Path, list[Any]] = {}  # a path's child tokens, in the order first seen
        for flat in flats:
            for path in flat:
                if path:
                    siblings = self.children.setdefault(path[:-1], [])
                    if path[-1] not in siblings:
                        siblings.append(path[-1])
        self.reasons: list[str] = []
        self.agreement: dict[str, float] = {}
        self.hopeless = False

    def winner(self, path: Path) -> str:
        """The winning key at ``path``; its reason, agreement and hopelessness recorded."""
        counts: dict[str, int] = {}
        for flat in self.flats:
            value = flat.get(path, ABSENT)
            counts[value] = counts.get(value, 0) + 1
        tally = Tally(counts, self.done, self.vote.k, self.vote.needed)
        self.hopeless = self.hopeless or tally.hopeless
        self.reasons.append(self.vote.decide(tally) or "")
        key = self.vote.winner(tally) or ABSENT
        if path:
            self.agreement[render_path(path)] = counts[key] / len(self.flats) if self.flats else 0.0
        return key

    def build(self, path: Path) -> Any:
        """The data the winners assemble at ``path`` (``_MISSING``: absent)."""
        key = self.winner(path)
        children = self.children.get(path, [])
        if key == OBJECT:
            out = {}
            for token in children:
                value = self.build((*path, token))
                if value is not _MISSING:
                    out[token] = value
            return out
        if key == SET:
            members = [t for t in children if self.build((*path, t)) is not _MISSING]
            return [json.loads(t[1]) for t in sorted(members, key=lambda t: t[1])]
        if key.startswith("[") and key.endswith("]") and key[1:-1].isdigit():
            return [self.build((*path, i)) for i in range(int(key[1:-1]))]
        if key == ABSENT:
            return _MISSING
        return True if key == IN else json.loads(key)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _strip(data: Any) -> Any:
    """Replace missing list items (a position no ballot agreed on) with None; validation decides."""
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items()}
    if isinstance(data, list):
        return [None if v is _MISSING else _strip(v) for v in data]
    return data
