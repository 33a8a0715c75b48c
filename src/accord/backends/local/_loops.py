"""A local call ends once its text ends in a loop, not at ``max_tokens``.

:class:`LoopStop` is a stopping criterion for ``model.generate``: after each step it decodes row
0's new tokens (a batch neighbour's rows are someone else's) and asks
:func:`accord.read._loops.find_loop` with the rules for a text still being written (``early``).
Once the text ends in a loop, every row stops: the call ends with ``finish_reason="loop"``
(``LOOP``) and the loop found (``.loop``). A greedy decoder in a loop repeats it to any length, so
the steps after it are time spent for nothing.
"""

from __future__ import annotations

from typing import Any

from ...read._loops import LOOP, Loop, find_loop
from ._steps import token_ids

__all__ = ["LOOP", "LoopStop"]
_PARTIAL = "\ufffd"  # what a character cut in the middle decodes to


class LoopStop:
    """Stopping criterion (``model.generate(stopping_criteria=[...])``); see the module docstring.

    ``width``: where row 0's new tokens start; ``ends``: the end-of-sequence id(s).
    """

    def __init__(self, tokenizer: Any, width: int, ends: Any) -> None:
        self.tokenizer = tokenizer
        self.width = width
        self.ends = set(token_ids(ends))
        self.loop: Loop | None = None
        self.steps = 0  # tokens row 0 had written when the loop was found

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if self.loop is not None:
            return done | True
        tokens = input_ids[0, self.width :].tolist()
        if self.ends & set(tokens):
            return done  # row 0 has ended; the batch runs on for the others
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if text.endswith(_PARTIAL):
            return done  # a character cut in the middle: judged with its next token
        loop = find_loop(text, early=True)
        if loop is None:
            return done
        self.loop, self.steps = loop, len(tokens)
        return done | True
