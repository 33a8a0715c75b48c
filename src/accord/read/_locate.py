"""Where a JSON value stands in a text: a fenced block's body, a ``{...}`` or ``[...]`` span, the
whole text; the first found (:class:`Search`, for ``_extract.first_json``), and the cheap looks
that say where ``json`` would certainly fail (:func:`may_open`, :func:`may_be_json`), so the
strict and the lenient readings decode each place once.
"""

from __future__ import annotations

import json
import re
from typing import Any

_MAX_DECODE_TRIES = 64
WHOLE = -1  # in ``misses``: the whole text is no JSON value

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_OPEN = re.compile(r"[\[{]")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")  # the only space JSON has
_SPACES = frozenset(" \t\n\r")
_OBJECT_GOES_ON = frozenset('"}')
_VALUE_STARTS = frozenset('"{[-0123456789tfnNI')  # a string, object, list, number, true, false, null, NaN, Infinity
_ARRAY_GOES_ON = _VALUE_STARTS | {"]"}
_LITERALS = {"t": "true", "f": "false", "n": "null", "N": "NaN", "I": "Infinity"}

NOTHING: Any = object()  # what :func:`first_json` finds in a text with no JSON value


def fence_body(match: re.Match[str]) -> tuple[str, int]:
    """A fenced block's body (group 2 of a fence pattern), stripped, and where it starts in the
    text: the position the strict and the lenient readings both mark it by (``misses``, ``found``)."""
    inside = match.group(2)
    return inside.strip(), match.start(2) + len(inside) - len(inside.lstrip())


def fence_miss(start: int) -> int:
    """The mark in ``misses`` of a fenced block (opening at ``start``) whose body is no JSON."""
    return -2 - start


class Search:
    """One search of a text for its first JSON value: in fenced blocks first, then at each ``{``
    or ``[`` (at most ``_MAX_DECODE_TRIES``), then the whole text. ``missed`` gets where no value
    starts, ``found`` (when given) each span decoded by its start with its end, ``where`` (when
    given) the start and end of the value found."""

    __slots__ = ("decoder", "found", "missed", "text", "where")

    def __init__(self, text: str, missed: set[int], found: dict[int, tuple[Any, int]] | None, where: list[int] | None,
                 decoder: json.JSONDecoder) -> None:
        self.text, self.missed, self.found, self.where, self.decoder = text, missed, found, where, decoder

    def first(self) -> Any:
        """The first JSON value, or ``NOTHING``."""
        value = self.in_fences() if "```" in self.text else NOTHING
        if value is NOTHING:
            value = self.at_openings()
        return self.as_whole() if value is NOTHING else value

    def in_fences(self) -> Any:
        """The body of the first fenced block that is one JSON value, or ``NOTHING`` (each body that
        is none marked in ``missed``)."""
        for match in _FENCE.finditer(self.text):
            body, at = fence_body(match)
            if body[:1] in "{[":  # decoded where it stands in the text, so the span there is decoded once
                value = self.fenced_span(body, at)
            else:
                value = self.decoded(body) if may_be_json(body) else NOTHING
                if value is not NOTHING:
                    self.mark(at, at + len(body))
            if value is not NOTHING:
                return value
            self.missed.add(fence_miss(match.start()))
        return NOTHING

    def fenced_span(self, body: str, at: int) -> Any:
        """A fence's body that opens an object or an array, decoded where it stands: its value when it
        is the whole body (what ``decoder.decode(body)`` reads), else ``NOTHING``."""
        try:
            if not may_open(self.text, at):
                self.missed.add(at)
                return NOTHING
            value, end = self.decoder.raw_decode(self.text, at)
        except ValueError:
            self.missed.add(at)
            return NOTHING
        if self.found is not None:
            self.found[at] = (value, end)
        if end <= at + len(body) and not self.text[end : at + len(body)].strip():
            self.mark(at, end)
            return value
        return NOTHING

    def at_openings(self) -> Any:
        """The first ``{...}`` or ``[...]`` span that decodes (at most ``_MAX_DECODE_TRIES`` tried), or ``NOTHING``."""
        for tries, match in enumerate(_OPEN.finditer(self.text), 1):
            start = match.start()
            if tries > _MAX_DECODE_TRIES:
                break
            if start in self.missed:
                continue  # a fence's body that opens here is no JSON
            if self.found and start in self.found:
                self.mark(start, self.found[start][1])
                return self.found[start][0]  # a fence's body that opens here is JSON, with more after it
            try:
                if may_open(self.text, start):
                    value, end = self.decoder.raw_decode(self.text, start)
                    if self.found is not None:
                        self.found[start] = (value, end)
                    self.mark(start, end)
                    return value
            except ValueError:
                pass
            self.missed.add(start)
        return NOTHING

    def as_whole(self) -> Any:
        """The whole text as one JSON value (a scalar, say), or ``NOTHING``."""
        text = self.text
        first = len(text) - len(text.lstrip(" \t\n\r"))  # past JSON's space
        if first not in self.missed and may_be_json(text, first):  # else json.loads would certainly fail
            value = self.decoded(text)
            if value is not NOTHING:
                self.mark(first, len(text.rstrip(" \t\n\r")))
                return value
        self.missed.add(WHOLE)
        return NOTHING

    def decoded(self, text: str) -> Any:
        """The text as one JSON value, or ``NOTHING``."""
        try:
            return self.decoder.decode(text)
        except ValueError:
            return NOTHING

    def mark(self, start: int, end: int) -> None:
        """Where the value found starts and ends, for a caller that asks (``where``)."""
        if self.where is not None:
            self.where[:] = (start, end)


def may_open(text: str, start: int) -> bool:
    """Whether the ``{`` or ``[`` at ``start`` may open a JSON value: after JSON's space, ``"`` or
    ``}`` in an object, a value's first character or ``]`` in an array, and a closing bracket of
    its kind somewhere after it. False: ``raw_decode`` there certainly fails (so it need not be
    tried: its error costs more than this look)."""
    after = start + 1
    if text[after : after + 1] in _SPACES:  # (most openings have none after them: no match to run)
        space = _JSON_SPACE.match(text, after)  # (always a match: the pattern matches the empty string)
        after = space.end() if space else after
    if after >= len(text):
        return False  # nothing after the opening: cut off
    if text[start] == "{":
        return text[after] in _OBJECT_GOES_ON and text.rfind("}", after) >= 0  # no "}" after it: cut off
    return text[after] in _ARRAY_GOES_ON and text.rfind("]", after) >= 0


def may_be_json(text: str, first: int = 0) -> bool:
    """Whether the whole text may be one JSON value, its first character at ``first`` (after JSON's
    space). False: ``json.loads`` certainly fails (its error costs more than this look): a word
    that opens no literal, or a literal (``true``, ``null``...) with more than space after it."""
    char = text[first : first + 1]
    if char not in _VALUE_STARTS:
        return False
    literal = _LITERALS.get(char)
    return literal is None or text[first:].rstrip(" \t\n\r") == literal
