"""What one local generate call records at each decoding step.

:class:`StepRecorder` is the last logits processor (after the model's own and the grammar
engine's mask). For each generated token it keeps the gap between the best and the second-best
*allowed* logit (``Completion.margins``; ``inf`` where the grammar allowed one token only), the
chosen token's log-probability (``Completion.score`` is their mean) and the time the step
started. A row the grammar left without any allowed token raises :class:`GrammarDeadEnd`
instead of decoding from an all ``-inf`` row.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any


class GrammarDeadEnd(Exception):
    """The grammar allowed no token at all (an engine error): never decode from an all -inf row."""


class StepRecorder:
    """Logits processor placed last: records margins, chosen-token log-probs and step times.

    ``sampling``: the chosen token is known only at the next step (greedy: it is the best).
    ``ends``: the end-of-sequence id(s); row 0 is done once it emits one (a batch may run on).
    """

    def __init__(self, sampling: bool, ends: Any = ()) -> None:
        self.sampling = sampling
        self.ends = set(token_ids(ends))
        self.done = False
        self.tops: list[Any] = []  # per step: the best two allowed logits (a tensor of 2)
        self.logprobs: list[float] = []
        self.times: list[float] = []
        self._previous: Any = None  # sampling: last step's log-softmax, read once the token is known

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.done or (self.tops and int(input_ids[0, -1]) in self.ends):
            self.done = True
            return scores
        self.times.append(time.perf_counter())
        row = scores[0]
        top = torch.topk(row, 2).values if row.shape[0] > 1 else torch.cat([row, row.new_full((1,), -math.inf)])
        best = float(top[0])
        if not math.isfinite(best):
            raise GrammarDeadEnd(f"the grammar allowed no token at step {len(self.tops) + 1}")
        norm = torch.logsumexp(row.float(), 0)
        if self._previous is not None:
            self.logprobs.append(float(self._previous[input_ids[0, -1]]))
        if self.sampling:
            self._previous = row.float() - norm
        else:
            self.logprobs.append(best - float(norm))
        self.tops.append(top)
        return scores

    def keep(self, tokens: list[int]) -> None:
        """Keep the steps of row 0's ``tokens`` only (a batch runs on after our row ends), and
        record the last token's log-probability when sampling."""
        del self.tops[len(tokens):], self.logprobs[len(tokens):]
        self.finish(tokens[-1] if tokens else None)

    def collapse(self, start: int, end: int) -> None:
        """The steps ``[start, end)`` (tokens a closed loop's trim took out of the text) as one
        step: the one of them with the smallest margin, so a gate that reads up to a decision
        written after them still reads the least certain of them."""
        low = min(range(start, end), key=lambda i: float(self.tops[i][0] - self.tops[i][1]))
        self.tops[start:end] = [self.tops[low]]
        del self.logprobs[start:end], self.times[start:end]

    def finish(self, last_token: int | None) -> None:
        if self._previous is not None and last_token is not None:
            self.logprobs.append(float(self._previous[last_token]))
            self._previous = None

    @property
    def margins(self) -> tuple[float, ...]:
        return tuple(float(a - b) if math.isfinite(b) else math.inf for a, b in (t.tolist() for t in self.tops))

    @property
    def score(self) -> float | None:
        """The mean chosen-token log-probability; None when no token was generated."""
        return sum(self.logprobs) / len(self.logprobs) if self.logprobs else None

    @property
    def seconds_per_token(self) -> float | None:
        steps = [b - a for a, b in zip(self.times, self.times[1:], strict=False)]
        return statistics.median(steps) if steps else None


def token_ids(value: Any) -> list[Any]:
    """A generation config's token id field (None, one id or a list of ids) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def until_end(tokens: list[int], eos: Any) -> list[int]:
    """The tokens up to and including the first end-of-sequence (a batch pads after it)."""
    ends = set(token_ids(eos))
    for i, token in enumerate(tokens):
        if token in ends:
            return tokens[: i + 1]
    return tokens


def pieces_of(tokenizer: Any, tokens: list[int], text: str) -> tuple[str, ...] | None:
    """The text each generated token wrote (``""`` for an end-of-sequence token), aligned with
    the margins; None when they cannot spell ``text`` (which a stop string may have cut short)."""
    singles = [str(piece) for piece in tokenizer.batch_decode([[t] for t in tokens], skip_special_tokens=True)]
    if "".join(singles).startswith(text):
        return tuple(singles)
    # A character split across tokens (or a tokenizer that decodes a lone token otherwise): by prefixes.
    pieces, before = [], ""
    for end in range(1, len(tokens) + 1):
        now = str(tokenizer.decode(tokens[:end], skip_special_tokens=True))
        now = now.rstrip("\ufffd") if end < len(tokens) else now  # a cut character is written by the token that ends it
        if not now.startswith(before):
            return None
        pieces.append(now[len(before):])
        before = now
    return tuple(pieces) if "".join(pieces).startswith(text) else None
