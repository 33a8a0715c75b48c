"""A streamed chat completion put back together, for ``OpenAIBackend.stream``. No I/O.

The answer of a streamed ballot arrives as chunks (``stream=True``): text deltas, the finish
reason and per-token logprobs on the way, the usage in a last chunk without choices
(``stream_options={"include_usage": True}``). :class:`Chunks` hands on each delta and then
assembles a response of the shape :func:`._wire.parse` reads, so the rest of the exchange (the
``response_format`` check, the margins, the meta) is the same as for one whole answer.

:meth:`Chunks.looped` says when the text so far ends in a loop (``read._loops``, the rules for a
text still being written): the reader then closes the stream (the server stops generating when
the connection closes) and the answer's finish reason is ``"loop"``. A stream closed that way
sends no usage chunk: its completion tokens are the tokens the logprobs listed, if any.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...read._loops import LOOP, Loop, find_loop
from ...read._runaway import find_runaway

STREAM_OPTIONS = {"include_usage": True}
CHECK_EVERY = 16  # characters of new text between two loop checks


class Chunks:
    """The chunks of one streamed answer, as they arrive."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.finish: str | None = None
        self.usage: Any = None
        self.model: str | None = None
        self.fingerprint: str | None = None
        self.tokens: list[Any] = []  # logprobs content entries, in order
        self.refusal: list[str] = []
        self.text = ""
        self.loop: Loop | None = None
        self._judged = 0  # characters of text the last loop check saw

    def add(self, chunk: Any) -> str:
        """Take one chunk; return the text it adds ("" if none)."""
        self.model = getattr(chunk, "model", None) or self.model
        self.fingerprint = getattr(chunk, "system_fingerprint", None) or self.fingerprint
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        choices = getattr(chunk, "choices", None) or ()
        if not choices:
            return ""
        choice = choices[0]
        self.finish = getattr(choice, "finish_reason", None) or self.finish
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            self.tokens.extend(content)
        delta = getattr(choice, "delta", None)
        refusal = getattr(delta, "refusal", None)
        if refusal:
            self.refusal.append(str(refusal))
        text = getattr(delta, "content", None)
        if isinstance(text, str) and text:
            self.parts.append(text)
            self.text += text
            return text
        return ""

    def looped(self) -> bool:
        """Does the text so far end in a loop, or in a list that ran away? Then the answer ends here (``finish_reason="loop"``)."""
        if self.loop is None and self.finish is None and len(self.text) - self._judged >= CHECK_EVERY:
            self._judged = len(self.text)
            self.loop = find_loop(self.text, early=True) or find_runaway(self.text, early=True)  # a list that runs away, too
            if self.loop is not None:
                self.finish = LOOP
        return self.loop is not None

    def response(self) -> Any:
        """The whole answer, shaped like a chat completion."""
        message = SimpleNamespace(content="".join(self.parts), refusal="".join(self.refusal) or None)
        logprobs = SimpleNamespace(content=self.tokens) if self.tokens else None
        choice = SimpleNamespace(message=message, finish_reason=self.finish, logprobs=logprobs)
        usage = self.usage
        if usage is None and self.loop is not None and self.tokens:
            usage = SimpleNamespace(prompt_tokens=None, completion_tokens=len(self.tokens))
        return SimpleNamespace(choices=[choice], usage=usage, model=self.model, system_fingerprint=self.fingerprint)
