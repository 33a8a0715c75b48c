"""Does a model's text end in a loop? Read while it is written (``early``) or once cut off.

A greedy decoder that writes one stretch twice in a row often writes it forever: the same
sentence (``"I'm disputing with my bank now. I'm disputing ..."``), the same list item
(``"tutorial", "tutorial", ...``), spaces, or a counting run (``"1. 2. 3. ... 41. "``, stretches
alike but for a number that grows). :func:`find_loop` finds the one the text *ends* in and says
where it is (:class:`Loop`: the stretch, its period, how often, the JSON path it began in).

Two rules, because a text still being written must not be cut for a value that repeats for a
reason (a list of equal numbers, a table, a ``"--------"`` rule, a string of zeros):

    early (while generating: the local backend's stopping check, a streamed answer over HTTP)
        inside a string (prose), or plain text    one stretch of 2+ distinct characters, 3+ times,
                                                  over 64+ characters; or a counting run of 8+
                                                  stretches over 64+ characters
        in the JSON structure (items, members)    one stretch holding a string, 8+ times, over
                                                  96+ characters (a list of equal numbers or
                                                  booleans is never cut early)
        in one number                             a stretch of digits 3+ times over 48+ characters
                                                  (``"unit_price": 1111...``: no float or decimal a
                                                  model is asked for runs that long)
        whitespace                                80+ characters of it, anywhere
    cut off (``finish_reason="length"``: the text ran to ``max_tokens``)
        anywhere                                  one stretch 3+ times over 40+ characters
                                                  (:func:`accord._retry.looping`), or a counting
                                                  run of 6+ stretches over 40+ characters

A text cut at ``max_tokens`` inside a periodic tail has no end the model chose, so the looser
rule holds there; while the text is written the rule waits for evidence no honest value gives.
No I/O, no accord imports: the backends and the run loop share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

LOOP = "loop"  # the finish reason of a call stopped for a loop (``Completion.finish_reason``)
MAX_PERIOD = 200  # the longest stretch looked for (characters)
WINDOW = 16_384  # the end of a text looked at: a loop is counted within it (bounded work on any text)
MAX_PATH_SCAN = 200_000  # characters read to name a path; past it the path is unknown
_DIGITS = re.compile(r"\d+")
_IN_A_NUMBER = re.compile(r"[0-9.]+")  # a loop's characters all inside one JSON number


@dataclass(frozen=True)
class Rule:
    """The evidence one kind of loop needs: repeats back to back and characters spanned."""

    repeats: int
    span: int


#: While a text is written (see the module docstring).
EARLY_PROSE = Rule(3, 64)
EARLY_STRUCTURE = Rule(8, 96)
EARLY_COUNTING = Rule(8, 64)
EARLY_WHITESPACE = Rule(1, 80)
EARLY_NUMBER = Rule(3, 48)
#: Once a text was cut off at ``max_tokens``.
CUT = Rule(3, 40)
CUT_COUNTING = Rule(6, 40)


@dataclass(frozen=True)
class Loop:
    """A loop a text ends in. ``stretch``: one period, as first written in the loop; ``period``:
    its length in characters; ``repeats``: whole periods back to back at the end; ``start``: the
    offset where the loop begins; ``path``: the JSON path it began in (``"summary"``,
    ``"tags[]"``; ``[]`` stands for an array's items), None outside JSON; ``counting``: the
    stretches differ only in a number that grows (``"1. "``, ``"2. "``, ...). ``runaway``: not a
    loop but a list whose items kept coming (:mod:`._runaway`), and why ("alike", "counter",
    "cut"); then ``stretch`` is the item the retry's bound ends at and ``repeats`` the whole items
    written."""

    stretch: str
    period: int
    repeats: int
    start: int
    path: str | None = None
    counting: bool = False
    runaway: str | None = None

    def describe(self) -> dict[str, Any]:
        """The loop as JSON data (a ballot's ``error["loop"]``)."""
        return {"stretch": self.stretch, "period": self.period, "repeats": self.repeats, "start": self.start,
                "path": self.path, "counting": self.counting, **({"runaway": self.runaway} if self.runaway else {})}  # fmt: skip

    def message(self) -> str:
        """One line for a person: ``the output looped in `summary`: 'I'm disputing ...' repeated 4 times``."""
        where = f" in `{self.path}`" if self.path else ""
        if self.runaway is not None:
            items = f"`{self.path[: self.path.rindex('[]')]}`" if self.path and "[]" in self.path else "a list"
            how = _RUNAWAYS.get(self.runaway, "")
            return f"the list {items} ran away: {self.repeats} items{how}; list only the items the input has"
        if self.counting:
            return f"the output looped{where}: {shown(self.stretch)} written {self.repeats} times with a growing number"
        return f"the output looped{where}: {shown(self.stretch)} repeated {self.repeats} times"


_RUNAWAYS = {"alike": ", each like the last but for a number", "counter": ", each numbered one more than the last",
             "cut": " and still going when the output was cut off"}


def shown(stretch: str, limit: int = 60) -> str:
    """A stretch quoted for a message: stripped, at most ``limit`` characters, whitespace named."""
    text = stretch.strip()
    if not text:
        return f"whitespace ({stretch[:1]!r})"
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def find_loop(text: str, *, early: bool = False) -> Loop | None:
    """The loop ``text`` ends in, or None. ``early``: the text is still being written (the
    stricter rules of the module docstring); else it was cut off at ``max_tokens``."""
    skipped = max(0, len(text) - WINDOW)
    tail = text[skipped:]
    found = _repeated(tail, early) or _counting(tail, early)
    if found is None or not skipped:
        return found
    path = path_at(text, skipped + found.start)[0]  # the path from the text's start
    return Loop(found.stretch, found.period, found.repeats, skipped + found.start, path, found.counting)


def _repeated(text: str, early: bool) -> Loop | None:
    n = len(text)
    for period in range(1, min(MAX_PERIOD, n // 2) + 1):
        if text[n - period :] != text[n - 2 * period : n - period]:
            continue  # not even twice back to back
        length = periodic_length(text, period)
        stretch = text[n - length : n - length + period]
        repeats = length // period
        if not early:
            if repeats >= CUT.repeats and length >= CUT.span:
                return Loop(stretch, period, repeats, n - length, path_at(text, n - length)[0])
            continue
        if not stretch.strip():
            if length >= EARLY_WHITESPACE.span:
                return Loop(stretch, period, repeats, n - length, path_at(text, n - length)[0])
            continue
        if _number_runs(text, n - length, repeats, length):
            return Loop(stretch, period, repeats, n - length, path_at(text, n - length)[0])
        if repeats < EARLY_PROSE.repeats or length < EARLY_PROSE.span:
            continue  # the least evidence any rule asks for
        path, prose = path_at(text, n - length)
        prose = prose and '"' not in stretch  # a stretch that crosses strings is structure
        rule = EARLY_PROSE if prose else EARLY_STRUCTURE
        if repeats < rule.repeats or length < rule.span:
            continue
        if prose and len(set(stretch) - set(" \t\r\n")) < 2:
            continue  # "-----", "0000": a rule line, a null hash
        if not prose and '"' not in stretch:
            continue  # equal numbers, booleans, nulls: data, not cut early
        return Loop(stretch, period, repeats, n - length, path)
    return None


def _number_runs(text: str, start: int, repeats: int, length: int) -> bool:
    """Whether the loop from ``start`` to the end lies inside one JSON number (digits only, outside
    any string) and has the evidence :data:`EARLY_NUMBER` asks for."""
    if repeats < EARLY_NUMBER.repeats or length < EARLY_NUMBER.span or not _IN_A_NUMBER.fullmatch(text, start):
        return False
    return not path_at(text, start)[1]


def _counting(text: str, early: bool) -> Loop | None:
    """A counting run: the text with every number as ``#`` ends in a loop, and the numbers in it
    grow by 1 or 2 from one stretch to the next."""
    rule = EARLY_COUNTING if early else CUT_COUNTING
    numbers = list(_DIGITS.finditer(text))
    if len(numbers) < rule.repeats:
        return None
    flat, offsets = _flattened(text, numbers)
    n = len(flat)
    for period in range(2, min(MAX_PERIOD, n // 2) + 1):
        if flat[n - period :] != flat[n - 2 * period : n - period]:
            continue
        length = periodic_length(flat, period)
        stretch = flat[n - length : n - length + period]
        if stretch.count("#") != 1 or length // period < rule.repeats:
            continue
        start = offsets[n - length]
        if len(text) - start < rule.span:
            continue
        path, prose = path_at(text, start)
        if early and not prose:
            continue  # a list of growing numbers is data
        values = [int(m.group()) for m in numbers if m.start() >= start and m.end() < len(text)]  # the last may be cut
        steps = [b - a for a, b in pairwise(values)]
        if len(values) < rule.repeats or not all(1 <= step <= 2 for step in steps):
            continue
        first = text[start : offsets[n - length + period]] if n - length + period < n else text[start:]
        return Loop(first, len(first), length // period, start, path, counting=True)
    return None


def _flattened(text: str, numbers: list[re.Match[str]]) -> tuple[str, list[int]]:
    """``text`` with each number as one ``#``, and for each of its characters the offset in ``text``."""
    parts: list[str] = []
    offsets: list[int] = []
    at = 0
    for match in numbers:
        parts.append(text[at : match.start()])
        offsets.extend(range(at, match.start()))
        parts.append("#")
        offsets.append(match.start())
        at = match.end()
    parts.append(text[at:])
    offsets.extend(range(at, len(text)))
    return "".join(parts), offsets


def periodic_length(text: str, period: int) -> int:
    """How many characters at the end of ``text`` repeat with ``period`` (at least ``period``)."""
    n = len(text)
    i = n - period - 1
    # Whole periods first (a slice comparison each), then character by character.
    while i - period + 1 >= 0 and text[i - period + 1 : i + 1] == text[i + 1 : i + period + 1]:
        i -= period
    while i >= 0 and text[i] == text[i + period]:
        i -= 1
    return n - i - 1


def path_at(text: str, offset: int) -> tuple[str | None, bool]:
    """The JSON path open at ``offset`` of a (possibly cut-off) JSON text, and whether that
    offset is prose: inside a string value, or plain text outside any JSON value.

    ``{"a": {"b": "xy`` at its end is ``("a.b", True)``; ``{"tags": ["x", `` is ``("tags[]",
    False)``. Keys are dotted, an array's items are ``[]``; the root is None.
    """
    if offset > MAX_PATH_SCAN:
        return None, False
    scan = _scanned(text[:offset])
    return _dotted(scan.stack), (scan.in_string and not scan.is_key) or not scan.stack


def open_values(text: str) -> str:
    """What closes every value open at the end of a JSON text outside any string: ``"}"`` for
    ``{"a": 1``, ``"]}"`` for ``{"a": [1``."""
    return "".join("}" if frame[0] == "{" else "]" for frame in reversed(_scanned(text).stack))


def _scanned(text: str) -> _PathScan:
    """The scan's state at the end of ``text``."""
    scan = _PathScan()
    for char in text:
        if scan.in_string:
            scan.string_char(char)
        else:
            scan.structure_char(char)
    return scan


class _PathScan:
    """The state of :func:`path_at`'s scan: the values open (per value ``["{", key, expecting a
    key]`` or ``["["]``), and whether it is inside a string, a key, after a backslash."""

    __slots__ = ("escaped", "in_string", "is_key", "key", "stack")

    def __init__(self) -> None:
        self.stack: list[list[Any]] = []
        self.in_string = False
        self.is_key = False
        self.escaped = False
        self.key: list[str] = []

    def string_char(self, char: str) -> None:
        """One character inside a string (a key's characters kept)."""
        if self.escaped:
            self.escaped = False
            if self.is_key:
                self.key.append(char)
        elif char == "\\":
            self.escaped = True
        elif char == '"':
            self.in_string = False
            if self.is_key:
                self.stack[-1][1], self.stack[-1][2] = "".join(self.key), False
        elif self.is_key:
            self.key.append(char)

    def structure_char(self, char: str) -> None:
        """One character outside strings: a string opens, a value opens or closes, a member ends."""
        stack = self.stack
        if char == '"' and stack:
            self.in_string, self.is_key = True, stack[-1][0] == "{" and stack[-1][2]
            self.key = []
        elif char == "{":
            stack.append(["{", None, True])
        elif char == "[":
            stack.append(["["])
        elif char in "}]" and stack:
            stack.pop()
        elif char == "," and stack and stack[-1][0] == "{":
            stack[-1][2] = True


def _dotted(stack: list[list[Any]]) -> str | None:
    """The path of the values open: keys dotted, an array's items ``[]``; None at the root."""
    parts: list[str] = []
    for frame in stack:
        if frame[0] == "[":
            parts.append("[]")
        elif not frame[2]:  # past its key (else between members: the object's own path)
            parts.append(("." if parts else "") + frame[1])
    return "".join(parts) or None
