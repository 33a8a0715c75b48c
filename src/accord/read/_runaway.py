"""Does a model's JSON end in a list that runs away? Items that keep coming, each new, so no loop
is seen (``"1. Bill to ACME Corp."``, ``"2. Invoice no."``, ... ``"29. Gadget at"``).

A loop repeats one stretch (:mod:`._loops`); a runaway list writes a new item each time, so the
loop rules never fire and the call runs to ``max_tokens``, and growing ``max_tokens`` only lets
it run further. :func:`find_runaway` reads the innermost list open at the end of a (cut-off)
JSON text and says it ran away when:

    items alike but for a number     the last items are equal once every number in them is ``#``
                                     (``{"description": "Item 7", "quantity": 7}``), hold a
                                     letter, and are not all identical (that is a loop)
    a counter                        the last items' first strings begin with a number that grows
                                     by one (``"7. Gadget at"``, ``"8. Bill to"``)
    cut off inside the list          (``early=False`` only) the text ran to ``max_tokens`` inside
                                     a list that has a whole item: more room is not the answer

Both pattern rules need :data:`EARLY` items while the text is written (6: a list of rooms 101 to
104 is data) and :data:`CUT` once it was cut off (4). The runaway is returned as a :class:`Loop`
with ``runaway=True``, placed so that :func:`accord.schema._bounds.bounded` bounds the list to the
items before the run began (at least one), or, for a cut, to one fewer than the whole items
written: the retry asks again with feedback under that bound, never with more tokens. Pure; no
I/O, no accord imports but :mod:`._loops`.
"""

from __future__ import annotations

import re

from ._loops import Loop, path_at

__all__ = ["CUT", "EARLY", "find_runaway"]

EARLY = 6  # items that must follow the pattern while the text is written
CUT = 4  # ... once it was cut off at max_tokens
_NUMBER = re.compile(r"\d+")
_COUNTER = re.compile(r"\s*(\d+)\s*[.):-]")  # a string that begins with a counter: "7. Gadget"
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_LETTER = re.compile(r"[^\W\d_]")


def find_runaway(text: str, *, early: bool = False) -> Loop | None:
    """The list ``text`` ends in, when it ran away (see the module docstring); else None."""
    items = _innermost_list(text)
    if items is None:
        return None
    whole = [text[a:b].strip() for a, b in items[:-1]]
    need = EARLY if early else CUT
    start = _alike_from(whole, need)
    why = "alike"
    if start is None:
        start, why = _counter_from(whole, need), "counter"
    if start is not None:
        return _runaway(text, items, bound=max(start, 1), why=why, count=len(whole))
    if not early and len(whole) >= 1:
        return _runaway(text, items, bound=max(len(whole) - 1, 1), why="cut", count=len(whole))
    return None


def _runaway(text: str, items: list[tuple[int, int]], *, bound: int, why: str, count: int) -> Loop:
    """A Loop at the item that makes ``bounded`` set ``maxItems: bound`` (its first character)."""
    at, end = items[bound - 1]
    at += len(text[at:end]) - len(text[at:end].lstrip())  # its first character: inside the item
    return Loop(text[at:end].strip()[:200] or text[at : at + 1], 1, count, at, path_at(text, at)[0], runaway=why)


def _alike_from(items: list[str], need: int) -> int | None:
    """Where a run of ``need``+ items alike but for their numbers begins; None if the list does not end in one."""
    if len(items) < need:
        return None
    shapes = [_NUMBER.sub("#", item) for item in items]
    last = shapes[-1]
    if "#" not in last or not _LETTER.search(last):
        return None
    start = len(shapes)
    while start > 0 and shapes[start - 1] == last:
        start -= 1
    run = items[start:]
    if len(run) < need or len(set(run)) == 1:
        return None
    return start


def _counter_from(items: list[str], need: int) -> int | None:
    """Where a run of ``need``+ items whose first string value begins with a growing counter begins."""
    counters = [_counter(item) for item in items]
    start = len(counters) - 1
    if start < 0 or counters[start] is None:
        return None
    while start > 0 and (before := counters[start - 1]) is not None and counters[start] == before + 1:
        start -= 1
    return start if len(counters) - start >= need else None


def _counter(item: str) -> int | None:
    """The number an item's first string value begins with (``"7. Gadget"``: 7), else None."""
    for match in _STRING.finditer(item):
        if item[match.end() :].lstrip().startswith(":"):
            continue  # a key
        counter = _COUNTER.match(match.group(1))
        return int(counter.group(1)) if counter is not None else None
    return None


def _innermost_list(text: str) -> list[tuple[int, int]] | None:
    """The items of the innermost list open at the end of ``text``, as (start, end) offsets, the
    last one the item being written (possibly empty); None when no list is open there."""
    stack: list[list[tuple[int, int]] | None] = []  # per open value: its items so far (a list) or None (an object)
    starts: list[int] = []  # per open value: where its current item starts
    in_string = escaped = False
    for at, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "[{":
            stack.append([] if char == "[" else None)
            starts.append(at + 1)
        elif char in "]}" and stack:
            stack.pop()
            starts.pop()
        elif char == "," and stack and stack[-1] is not None:
            stack[-1].append((starts[-1], at))
            starts[-1] = at + 1
    for depth in range(len(stack) - 1, -1, -1):
        items = stack[depth]
        if items is not None:
            return [*items, (starts[depth], len(text))]
    return None
