"""A local call ends once its text ends in a loop, not at ``max_tokens``; a loop in prose ends
the string it is in, not the call.

:class:`LoopStop` is a stopping criterion for ``model.generate``: after each step it decodes row
0's new tokens (a batch neighbour's rows are someone else's) and asks
:func:`accord.read._loops.find_loop` with the rules for a text still being written (``early``).

- A loop inside a string at one of the run's **prose** paths (``Request.prose``: a summary, a
  reason, a task; never a decisive or auto field) *closes* that string: the next step may write
  only a token that begins with ``"`` (:class:`CloseString`, between the grammar's mask and the
  step recorder, so the grammar still decides which of them fits), and decoding goes on with the
  fields after it. Once the call is done, the tokens from the end of the loop's first stretch up
  to the closing quote are dropped (:func:`trimmed`): the string keeps what the model wrote before
  it began to repeat itself, and the Completion records the loop (``Completion.closed_loops``).
  The dropped steps become one step (``""``, the least certain of them): a decision written
  after the string was written reading them, so a gate that reads up to it reads them too.
  A prose text is carried, never voted (``schema/_roles``): the decision written around it is
  what the ballot is for, and one call gives it. Where no closing token fits (a ``minLength`` not
  reached), the call ends as below.
- A prose string that runs for ``prose_tokens`` tokens (the backend gives half the call's
  ``max_tokens``), or is still open when :data:`RESERVE` tokens of the call are left, is closed
  the same way, with nothing dropped: the fields after it still fit in the call, and a long text
  cut is no reason to ask again (``Completion.closed_loops``: its path and ``bound_tokens``).
- A loop among the items of a list voted as a set of labels (``tags``, ``skills``: ``"Rocks",
  "Rocks", ...``; three stretches over 40+ characters, the rule for a cut text) closes the list
  (``"]`` or ``]``) once the text is at the end of an item the loop repeats (within
  :data:`PENDING` tokens, else the call ends as below), dropping the repeats: a set is the same
  set with one copy of each item.
  Any other list that loops (line items, names) is a decision.
- A list whose items keep coming, each new (``"1. Bill to"``, ``"2. Invoice no."``, ...: no
  loop is seen), ends the call as a loop does, once :func:`accord.read._runaway.find_runaway`
  says it ran away (``Loop.runaway``); the retry bounds the list.
- Any other loop ends every row: the call ends with ``finish_reason="loop"`` (``LOOP``) and the
  loop found (``.loop``). A greedy decoder in a loop repeats it to any length, so the steps after
  it are time spent for nothing; the run retries with feedback (``run/_absorb``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...read._close import kept_until
from ...read._loops import LOOP, Loop, find_loop, path_at
from ...read._runaway import find_runaway
from ._steps import pieces_of, token_ids

__all__ = ["LOOP", "CloseString", "Closed", "Closing", "LoopStop", "trimmed"]
_PARTIAL = "\ufffd"  # what a character cut in the middle decodes to
RESERVE = 24  # a prose string open with this many tokens of the call left is closed
PENDING = 48  # tokens a loop among labels waits for an item to end before it ends the call

#: A value closed: the loop it was in (None: a prose string that reached the bound), the index of
#: the token that closed it, its path, and what that token begins with (``"``: a string;
#: ``"]`` or ``]``: a list of labels).
Closed = tuple[Loop | None, int, str, str]


class LoopStop:
    """Stopping criterion (``model.generate(stopping_criteria=[...])``); see the module docstring.

    ``width``: where row 0's new tokens start; ``ends``: the end-of-sequence id(s); ``prose``:
    the paths (``summary``, ``items[].note``) whose strings a loop closes instead of ending the
    call; ``labels``: the items of the lists voted as sets of labels (``tags[]``), whose list a
    loop of repeated items closes; ``prose_tokens``: the most tokens one prose string may take (None: no bound).
    """

    def __init__(self, tokenizer: Any, width: int, ends: Any, *, prose: frozenset[str] = frozenset(),
                 prose_tokens: int | None = None, labels: frozenset[str] = frozenset(), max_tokens: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.width = width
        self.ends = set(token_ids(ends))
        self.prose = prose
        self.prose_tokens = prose_tokens
        self.max_tokens = max_tokens
        self.labels = labels
        self.loop: Loop | None = None
        self.steps = 0  # tokens row 0 had written when the loop was found
        self.closing: Closed | None = None  # the value the next tokens close
        self.left = ""  # what they still have to write
        self.closed: list[Closed] = []  # each value closed
        self.opened: tuple[str, int] | None = None  # the prose string being written: its path, its first token
        self.pending: tuple[Loop, int] | None = None  # a loop among labels, and when it was found: closed once an item ends

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if self.loop is not None:
            return done | True
        tokens = input_ids[0, self.width :].tolist()
        if self.closing is not None:  # this step's token was forced (CloseString): is the value closed?
            piece = str(self.tokenizer.decode(tokens[-1:], skip_special_tokens=True))
            left, fits = consumed(piece, self.left)
            self.left = left if fits else ""
            if not self.left:
                self.closed.append(self.closing)
                self.closing = None
            return done
        if self.ends & set(tokens):
            return done  # row 0 has ended; the batch runs on for the others
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if text.endswith(_PARTIAL):
            return done  # a character cut in the middle: judged with its next token
        loop = self.pending[0] if self.pending is not None else find_loop(text, early=True) or self.repeated_labels(text)
        if loop is None and (runaway := find_runaway(text, early=True)) is not None:
            self.loop, self.steps = runaway, len(tokens)  # a list whose items keep coming: the call ends
            return done | True
        if loop is None:
            if self.too_long(text, len(tokens)) and self.opened is not None:
                self.closing, self.left = (None, len(tokens), self.opened[0], '"'), '"'
            return done
        closer = self.closer(loop, text)
        if closer is not None:
            self.closing, self.left, self.pending = (loop, len(tokens), loop.path or "", closer), closer, None
            return done
        if loop.path in self.labels and (self.pending is None or len(tokens) - self.pending[1] < PENDING):
            self.pending = self.pending or (loop, len(tokens))  # among labels: closed once an item ends
            return done
        self.loop, self.steps = loop, len(tokens)
        return done | True

    def closer(self, loop: Loop, text: str) -> str | None:
        """What the token that ends ``loop`` begins with: ``"`` inside a string at a prose path,
        ``"]`` or ``]`` among the items of a list of labels; None when no token ends it here
        (elsewhere; right after a backslash, where a quote would be an escaped one)."""
        inside = path_at(text, len(text))[1]
        if loop.path is None or (inside and _escaping(text)):
            return None
        if loop.path in self.prose and '"' not in loop.stretch and inside and path_at(text, loop.start)[1]:
            return '"'
        if loop.path in self.labels:
            return _label_closer(loop, text, inside)
        return None

    def repeated_labels(self, text: str) -> Loop | None:
        """A loop among the items of a list of labels by the rule for a cut text (3 stretches over
        40+ characters, ``find_loop``): items repeated there add nothing to the set, so the list
        is closed sooner than the early rule for structure (8 stretches) would stop it."""
        if not self.labels:
            return None
        loop = find_loop(text)
        return loop if loop is not None and loop.path in self.labels else None

    def too_long(self, text: str, written: int) -> bool:
        """Whether the prose string open at the end of ``text`` has taken ``prose_tokens`` tokens,
        or the call has :data:`RESERVE` tokens left (to close it and write what follows)."""
        if not self.prose or self.prose_tokens is None:
            return False
        path, inside = path_at(text, len(text))
        if not inside or path not in self.prose:
            self.opened = None
            return False
        if self.opened is None or self.opened[0] != path:
            self.opened = (path, written)
        long = written - self.opened[1] >= self.prose_tokens
        late = self.max_tokens is not None and self.max_tokens - written <= RESERVE
        return (long or late) and not _escaping(text)

    def give_up(self) -> None:
        """No closing token fits: a loop ends the call after all; a long string goes on."""
        if self.closing is not None and self.closing[0] is not None:
            self.loop, self.steps = self.closing[0], self.closing[1]
        self.closing = None


def consumed(piece: str, left: str) -> tuple[str, bool]:
    """What of ``left`` (a closer: ``"``, ``"]``, ``]``) is still to write once ``piece`` is written,
    and whether ``piece`` fits it: its characters spell the closer's next ones, but for whitespace
    before a bracket (a model's own layout puts a new line and an indent there), and what follows
    once the closer is whole is the grammar's to judge."""
    for char in piece:
        if not left:
            return "", True
        if char == left[0]:
            left = left[1:]
        elif not (char.isspace() and left[0] in "]}"):
            return left, False
    return left, True


def _escaping(text: str) -> bool:
    """Whether ``text`` ends in an escape's backslash (a quote next would be an escaped one)."""
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _label_closer(loop: Loop, text: str, inside: bool) -> str | None:
    """What closes a list of labels that loops, where the text is now: ``"]`` when the item being
    written already spells a whole item of the loop (its closing quote would come next), ``]``
    right after such an item; None elsewhere (mid-item, after a comma), where a close would leave
    a cut label behind."""
    twice = loop.stretch * 2  # holds every item of the stretch whole
    if inside:
        item = text[text.rfind('"') + 1 :]
        return '"]' if item and f'"{item}"' in twice else None
    end = text.rstrip()
    if not end.endswith('"'):
        return None
    item = end[end.rfind('"', 0, len(end) - 1) + 1 : -1]
    return "]" if item and f'"{item}"' in twice else None


class CloseString:
    """Logits processor (after the grammar's mask): while :class:`LoopStop` is closing a value,
    row 0 may write only a token that writes what closes it (``"]``): one that begins with it, or
    one that is the start of it (``"``, then ``]``). ``starting(text)``: those tokens' ids."""

    def __init__(self, stop: LoopStop, starting: Callable[[str], list[int]]) -> None:
        self.stop = stop
        self.starting = starting

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.stop.closing is None:
            return scores
        row = scores[0]
        keep = torch.full_like(row, -math.inf)
        wanted = self.starting(self.stop.left)
        ids = torch.tensor([i for i in wanted if i < row.shape[0]], dtype=torch.long, device=row.device)
        keep[ids] = row[ids]
        if not torch.isfinite(keep).any():
            self.stop.give_up()
            return scores
        scores[0] = keep
        return scores


class Closing:
    """One tokenizer's side of closing loops (a backend holds one): the stopping criterion and
    processor for a call, the trim once it is done, and each token's text (made once)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._texts: list[str] | None = None
        self._starting: dict[str, list[int]] = {}

    def stop(self, width: int, ends: Any, prose: frozenset[str], labels: frozenset[str], max_tokens: int) -> LoopStop:
        """A call's loop check: prose strings bounded to half its ``max_tokens``."""
        return LoopStop(self.tokenizer, width, ends, prose=prose, prose_tokens=max_tokens // 2, labels=labels,
                        max_tokens=max_tokens)

    def processors(self, stop: LoopStop | None) -> list[Any]:
        """The processor that closes what ``stop`` says, when the call has prose or labels."""
        return [CloseString(stop, self.starting)] if stop is not None and (stop.prose or stop.labels) else []

    def starting(self, text: str) -> list[int]:
        """The ids whose text begins with ``text`` or is a start of it, whitespace before a bracket
        allowed (:func:`consumed`; made once per text)."""
        if text not in self._starting:
            if self._texts is None:
                self._texts = [str(t) for t in self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))],
                                                                           skip_special_tokens=True)]
            self._starting[text] = [i for i, piece in enumerate(self._texts) if piece and consumed(piece, text)[1]]
        return self._starting[text]

    def trim(self, tokens: list[int], recorder: Any, stop: LoopStop) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...] | None]:
        """Drop, in place, each closed loop's tokens past its first stretch (:func:`trimmed`); their
        steps become one (``recorder.collapse``: the least certain of them), written ``""``. What
        was closed, as the Completion records it, and each step's text (None: unknown)."""
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        pieces = pieces_of(self.tokenizer, tokens, text)
        ranges = trimmed(tokens, pieces, stop.closed)
        kept = list(pieces) if pieces is not None else None
        for first, end in sorted(ranges, reverse=True):
            del tokens[first:end]
            recorder.collapse(first, end)
            if kept is not None:
                kept[first:end] = [""]
        dropped = {end: end - first for first, end in ranges}  # by the closing token's index
        closed = tuple({**loop.describe(), "dropped_tokens": dropped.get(closer, 0)} if loop is not None
                       else {"path": path, "bound_tokens": stop.prose_tokens} for loop, closer, path, _ in stop.closed)
        return closed, tuple(kept) if kept is not None else None


def trimmed(tokens: list[int], pieces: tuple[str, ...] | None, closed: list[Closed]) -> list[tuple[int, int]]:
    """The token ranges ``[start, end)`` to drop for the closed loops: from the first token at or
    after the end of the loop's first stretch up to (not including) the token that closed its
    string (or from the end of a sentence that stretch ends). ``pieces``: each token's text (None:
    nothing is dropped)."""
    if pieces is None or len(pieces) != len(tokens):
        return []
    starts, at = [], 0
    for piece in pieces:
        starts.append(at)
        at += len(piece)
    ranges = []
    for loop, closer, _, closing in closed:
        if loop is None or closer >= len(tokens):
            continue  # closed at the bound: nothing repeated, nothing dropped
        if closing == '"':  # inside a string: any point of it is one the quote may follow
            keep_to = kept_until(loop)
            first = next((i for i, start in enumerate(starts) if start >= keep_to), closer)
        else:  # among items: where the text is as it was when the loop was found (a whole stretch later)
            end = starts[closer]
            first = next((i for i, start in enumerate(starts[:closer]) if start >= loop.start + loop.period
                          and (end - start) % loop.period == 0), closer)
        if first < closer:
            ranges.append((first, closer))
    return ranges
