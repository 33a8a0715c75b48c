"""The decisive prefix of a ballot: the decoding steps up to the end of its last decisive value.

Greedy decoding repeats a run's tokens exactly up to the first step whose margin a perturbation
can overturn. So when every step up to the end of the last decisive value clears the noise
floor, every decisive value is written again token for token, whatever the steps after it do:
those write prose (and the brackets that close it). The margin gate, the predictor and the
reference read that prefix only (docs/determinism.md has the proof and its premises).

The prefix is found in the text: the JSON value is scanned with the offset of every value
(:func:`spans`), and the generated steps are placed on the text through the text of each step
(``Completion.pieces``). The end is the end of the last decisive leaf, or of a list or map that
holds one (how many items is a decision), plus the step right after it (which decides that a
number ends there). Where the prefix cannot be told, every step is read, as before: a text that
is not one JSON value, steps whose pieces do not spell the text, an optional decisive field the
ballot left out (a later step might have written it), a run with no prose.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..schema._roles import ANY_KEY, ITEM, Pattern
from ._decisive import Decisions, Path

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_SPACE = " \t\n\r"
MAX_DEPTH = 64

Span = tuple[int, int, str]  # start, end (exclusive), kind: "object" | "array" | "scalar"


def spans(text: str) -> dict[Path, Span] | None:
    """Every value of the one JSON value ``text`` holds, by path, with where it stands; None when
    the text is not exactly one JSON value (whitespace around it aside)."""
    out: dict[Path, Span] = {}
    try:
        end = _Scan(text, out).value(_skip(text, 0), (), 0)
    except (ValueError, IndexError):
        return None
    return out if _skip(text, end) == len(text) else None


class _Scan:
    def __init__(self, text: str, out: dict[Path, Span]) -> None:
        self.text, self.out = text, out

    def value(self, at: int, path: Path, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ValueError("too deep")
        text = self.text
        first = text[at]
        if first == "{":
            end = self.members(at, path, depth)
            kind = "object"
        elif first == "[":
            end = self.items(at, path, depth)
            kind = "array"
        elif first == '"':
            end = _string_end(text, at)
            kind = "scalar"
        else:
            for word in ("true", "false", "null"):
                if text.startswith(word, at):
                    end = at + len(word)
                    break
            else:
                match = _NUMBER.match(text, at)
                if match is None:
                    raise ValueError(f"no JSON value at {at}")
                end = match.end()
            kind = "scalar"
        self.out[path] = (at, end, kind)
        return end

    def members(self, at: int, path: Path, depth: int) -> int:
        text, at = self.text, _skip(self.text, at + 1)
        if text[at] == "}":
            return at + 1
        while True:
            if text[at] != '"':
                raise ValueError("a key must be a string")
            key_end = _string_end(text, at)
            key = json.loads(text[at:key_end])
            at = _skip(text, key_end)
            if text[at] != ":":
                raise ValueError("':' expected")
            at = _skip(text, self.value(_skip(text, at + 1), (*path, key), depth + 1))
            if text[at] == "}":
                return at + 1
            if text[at] != ",":
                raise ValueError("',' or '}' expected")
            at = _skip(text, at + 1)

    def items(self, at: int, path: Path, depth: int) -> int:
        text, at = self.text, _skip(self.text, at + 1)
        if text[at] == "]":
            return at + 1
        index = 0
        while True:
            at = _skip(text, self.value(at, (*path, index), depth + 1))
            index += 1
            if text[at] == "]":
                return at + 1
            if text[at] != ",":
                raise ValueError("',' or ']' expected")
            at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _string_end(text: str, at: int) -> int:
    """The end (exclusive) of the JSON string starting at ``at``."""
    i = at + 1
    while True:
        ch = text[i]
        if ch == "\\":
            i += 2
        elif ch == '"':
            return i + 1
        else:
            i += 1


def decisive_end(text: str, decisions: Decisions, prose: set[Pattern]) -> int | None:
    """Where the last decisive value of ``text`` ends (exclusive); None when every step must be
    read (see the module docstring)."""
    found = spans(text)
    if found is None:
        return None
    end = 0
    for path, (_, stop, kind) in found.items():
        pattern = decisions.pattern(path)
        if not decisions.decides(pattern, prose):
            continue
        if kind in ("scalar", "array") or (kind == "object" and (*pattern, ANY_KEY) in decisions.nodes):
            end = max(end, stop)  # a decisive leaf, or a list / map whose length is a decision
        if kind == "object" and _left_out(path, pattern, found, decisions, prose):
            return None  # a decisive field this ballot did not write: a later step may have
    return end or None


def _left_out(path: Path, pattern: Pattern, found: dict[Path, Span], decisions: Decisions, prose: set[Pattern]) -> bool:
    """Whether the object at ``path`` lacks a property that holds a decisive leaf."""
    n = len(pattern)
    names = {node[n] for node in decisions.nodes if len(node) == n + 1 and node[:n] == pattern and node[n] not in (ITEM, ANY_KEY)}
    return any((*path, name) not in found and decisions.decides((*pattern, name), prose) for name in names)


def counted(text: str, pieces: tuple[str, ...] | None, steps: int, end: int | None) -> int:
    """How many of the first ``steps`` decoding steps the gate reads: those that start at or
    before ``end`` in ``text``; all of them when the pieces cannot place the steps on the text."""
    if end is None or pieces is None or len(pieces) != steps:
        return steps
    joined = "".join(pieces)
    base = joined.find(text) if text else -1
    if base < 0:
        return steps
    offset = 0
    for index, piece in enumerate(pieces):
        if offset > base + end:
            return index
        offset += len(piece)
    return steps


def prefix(text: str, pieces: tuple[str, ...] | None, steps: int, decisions: Decisions | None, form: Any) -> int:
    """The number of leading steps of one ballot the gate reads (all of them where its roles are
    plain, or where no prose of this ballot could be told apart)."""
    if decisions is None or decisions.plain or not steps:
        return steps
    prose = decisions.judged(form)
    if not prose:
        return steps
    return counted(text, pieces, steps, decisive_end(text, decisions, prose))
