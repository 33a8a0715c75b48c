"""A reference deployment for an OpenAI-compatible server: ``models.openai(..., reference=B)``.

``B`` is another accord backend of the same weights: an in-process float32 copy
(``models.local(dtype="float32")``, ``models.transformers(path, dtype="float32")``) or a second
server (float32, batch-invariant, batch size 1). The run loop hands it every prompt whose first
ballot the margin gate did not certify (``accord.run._reference``); docs/determinism.md proves
why the answer then stays the same whatever the serving deployment's load or dtype.

:class:`Referee` is the reference computing what the serving deployment computes:

- the same prompt: the messages the server read (the schema in them exactly when the server
  needs it there), through the model's own chat template (vLLM applies the same one; the
  :class:`Learner` checks the prompt's token count against the server's ``usage``);
- for a schema sent as ``response_format``, the same grammar: exactly the JSON Schema sent (a
  bare type wrapped in ``{"answer": ...}`` and unwrapped again), compiled by xgrammar as vLLM
  compiles it (xgrammar lets the model spell a constant such as the key ``"answer"`` in any
  tokens; llguidance forces one spelling), and with the server's whitespace freedom:
  ``"free"`` (any whitespace between JSON tokens, the model's choice: vLLM's default) or
  ``"compact"`` (none: vLLM with ``disable_any_whitespace``). That freedom is detected from the
  server's own answers (:func:`._probe.free_whitespace`, remembered per server and model in
  :mod:`._caps`): free once any answer showed whitespace between tokens or listed a whitespace
  token as allowed, compact until then. The reference's ballot records it (``meta["json"]``).

A compact answer does not prove a compact server: the model may choose no whitespace where the
grammar allows it. On such a prompt the two grammars give the same greedy path, since every
token of a compact answer is allowed by both and the compact grammar allows a subset of the free
one's tokens; the detection switches to "free" at the first answer that differs.

The serving deployment's floor is learned against the reference in :mod:`._learning`.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeGuard

from ..._types import Completion, Request
from ...schema._schema import Schema
from .._base import Backend, Noise
from . import _wire as wire

if TYPE_CHECKING:
    from ..local._backend import TransformersBackend
    from ._backend import OpenAIBackend

ENGINE = "xgrammar"  # the grammar engine a local reference decodes a server's JSON with (vLLM's)


class Referee(Backend):
    """The reference backend, asked as the serving deployment asks (see the module docstring)."""

    blocking: bool
    gives_margins: bool

    def __init__(self, inner: Backend, serving: OpenAIBackend) -> None:
        self.inner, self.serving = inner, serving
        self.blocking = inner.blocking
        self.gives_margins = inner.gives_margins

    @property
    def fingerprint(self) -> str:  # the reference's own
        return self.inner.fingerprint

    @property
    def default_max_tokens(self) -> int:  # the serving deployment's budget
        return self.serving.default_max_tokens

    @property
    def sizes_max_tokens(self) -> bool:
        return self.serving.sizes_max_tokens

    @property
    def constrains(self) -> bool:  # the prompt the serving deployment gets
        return self.serving.constrains

    def constrains_for(self, schema: Schema[Any]) -> bool:
        return self.serving.constrains_for(schema)

    def enforces(self, schema: Schema[Any]) -> bool:
        return self.serving.enforces(schema)

    def wraps(self, schema: Schema[Any]) -> bool:
        return self.serving.wraps(schema)

    def generate(self, request: Request) -> Completion:
        request = wire.sent(request)  # the grammar the server was sent: its lists of labels bounded
        fmt, wrapped = wire.format_for(request.schema)
        structured = fmt is not None and self.serving.constrains_for(request.schema)
        asked = request.with_settings(max_tokens=request.settings.max_tokens or self.serving.default_max_tokens)
        if structured:  # the prompt the serving deployment reads, the schema it was sent as response_format
            asked = replace(asked, schema=_sent(request.schema))
        if structured and _local(self.inner):  # decoded as vLLM's xgrammar does: the server's whitespace, any spelling
            layout = self.whitespace()
            completion = self.inner.generate(asked, whitespace=layout, engine=ENGINE)
            completion = replace(completion, meta={**completion.meta, "json": layout})
        else:
            completion = self.inner.generate(asked)
        if structured and wrapped:
            inner = wire.unwrap(completion.text)
            if inner is not None:
                completion = replace(completion, text=inner, meta={**completion.meta, "wrapped": wire.WRAPPER})
        return completion

    def whitespace(self) -> str:
        """How the serving deployment writes strict JSON, as far as its answers showed (:mod:`._caps`):
        "free" when any of its servers is known to allow whitespace between tokens, else "compact"."""
        return "free" if any(k is not None and k.whitespace == "free" for k in self.serving._known_all()) else "compact"

    def noise(self) -> Noise | None:
        return None  # the reference decides with one ballot: no gate of its own

    def map_error(self, exc: BaseException) -> Any:
        return self.inner.map_error(exc)

    def identity(self) -> str:
        return self.inner.identity()

    def describe(self) -> dict[str, object]:
        return dict(self.inner.describe())

    def telemetry(self) -> dict[str, str | int]:
        return self.inner.telemetry()


@functools.lru_cache(maxsize=256)
def _sent(schema: Schema[Any]) -> Schema[Any]:
    """The JSON Schema the server is sent as ``response_format`` (closed; a bare schema wrapped),
    as a schema the reference decodes with."""
    fmt, _ = wire.format_for(schema)
    assert fmt is not None
    return Schema.of(fmt["json_schema"]["schema"])


def _local(backend: Backend) -> TypeGuard[TransformersBackend]:
    from ..local._backend import TransformersBackend

    return isinstance(backend, TransformersBackend)
