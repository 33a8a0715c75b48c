"""A local call's text as it is decoded: the streamer ``TransformersBackend.stream`` gives
``generate``.

``generate`` hands a streamer the prompt first, then each step's new token of every row; this
one keeps row 0 (a batch neighbour's rows are someone else's), stops at the end-of-sequence
token, and hands on the new text once it decodes whole (a multi-byte character split across
tokens waits for its last token).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._steps import token_ids

_PARTIAL = "\ufffd"  # what a character cut in the middle decodes to


class TextDeltas:
    """The streamer (``put``/``end``, as transformers calls them); ``hand`` gets each delta."""

    def __init__(self, tokenizer: Any, ends: Any, hand: Callable[[str], Any]) -> None:
        self.tokenizer = tokenizer
        self.ends = set(token_ids(ends))
        self.hand = hand
        self.prompt_seen = False
        self.done = False
        self.tokens: list[int] = []
        self.shown = 0  # characters handed on so far

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True  # the prompt itself
            return
        if self.done:
            return
        for token in value.reshape(value.shape[0], -1)[0].tolist() if value.dim() else [int(value)]:
            if token in self.ends:
                self.done = True
                break
            self.tokens.append(int(token))
        text = self.tokenizer.decode(self.tokens, skip_special_tokens=True)
        if text.endswith(_PARTIAL) and not self.done:
            return
        if len(text) > self.shown:
            self.hand(text[self.shown :])
            self.shown = len(text)

    def end(self) -> None:
        return None
