"""A text that ran out inside prose, closed where the prose went wrong: pure, text in, text out.

A model that loops in a summary, or is cut at ``max_tokens`` while still writing one, has most
often written every decision already: a ticket's category, priority and customer come before
its summary. The text is then a valid answer but for the end of one free text. :func:`closed`
gives that text back with the prose ended and every value open there closed:

    looped (``loop`` found)   the string keeps what came before the loop and its first stretch
                              (up to the end of a sentence in that stretch, when there is one):
                              ``"... I'm disputing with my bank now."``
    cut off (no loop)         the string keeps what was written

Only a string at one of the run's prose paths (``schema/_roles``) is closed, never a decisive
or auto field, and only at a point inside that string (not inside an escape). The run
(``run/_absorb``) reads the closed text against the run's own schema and keeps it only when it
is valid there: a schema with a required field after the prose makes the closed text invalid,
and the call is asked again as before. The local backend closes such a string while decoding
(``backends/local/_loops``); this is the same close for every other backend, after the fact.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .._types import Completion
from ._loops import Loop, open_values, path_at

__all__ = ["closed", "closed_completion", "kept_until"]
_PARTIAL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*(\\(?:u[0-9a-fA-F]{0,3})?)$")  # an odd backslash, or \u and < 4 digits, at the end


def kept_until(loop: Loop) -> int:
    """Where a string that looped is cut: after the loop's first stretch, or right after the last
    sentence that stretch ends (``" to help you. I'm here"``: after ``"you."``)."""
    ends = [at for at, char in enumerate(loop.stretch) if char in ".!?"]
    return loop.start + (ends[-1] + 1 if ends else loop.period)


def closed(text: str, loop: Loop | None, prose: frozenset[str]) -> tuple[str, int, str] | None:
    """``text`` ended inside its prose and closed, how many of its characters were kept, and the
    path of the string closed; None when it did not run out inside a prose string (see the
    module docstring)."""
    if not prose:
        return None
    if loop is not None:
        if loop.path not in prose or '"' in loop.stretch or not path_at(text, loop.start)[1]:
            return None
        keep = min(len(text), kept_until(loop))
    else:
        keep = len(text)
    head = text[:keep]
    path, inside = path_at(head, keep)
    if not inside or path not in prose or path_at(text, len(text))[0] != path:
        return None  # not in prose, or the text went on past that string (then it was not where it ran out)
    head = _whole_escapes(head)
    return head + '"' + open_values(head), len(head), path


def closed_completion(completion: Completion, loop: Loop | None, prose: frozenset[str]) -> Completion | None:
    """``completion`` with its text :func:`closed`, its steps kept as far as the kept text goes
    (the characters written to close it one step of their own, no choice in it: margin ``inf``),
    and the close recorded (``Completion.closed_loops``); None where :func:`closed` is."""
    found = closed(completion.text or "", loop, prose)
    if found is None:
        return None
    text, kept, path = found
    margins, pieces = completion.margins, completion.pieces
    if margins is not None and pieces is not None and len(pieces) == len(margins) and "".join(pieces) == completion.text:
        steps, at = 0, 0
        while steps < len(pieces) and at + len(pieces[steps]) <= kept:
            at += len(pieces[steps])
            steps += 1
        margins, pieces = (*margins[:steps], float("inf")), (*pieces[:steps], text[at:])
    else:
        margins = pieces = None  # the steps cannot be placed on the text: none is read
    record = {**(loop.describe() if loop is not None else {"path": path}), "closed": "read"}
    return replace(completion, text=text, margins=margins, pieces=pieces, closed_loops=(*completion.closed_loops, record))


def _whole_escapes(head: str) -> str:
    """``head`` without an escape it ends in the middle of (``\\`` alone, ``\\u00``)."""
    found = _PARTIAL_ESCAPE.search(head)
    return head[: found.start(1)] if found else head
