"""One exchange: the calls behind one ballot, as a generator that yields operations (:mod:`._ops`)
and receives their replies, and does no I/O (the httpx auth-flow pattern, as the OpenAI backend's).

:class:`Exchanges` is the I/O-free half of :class:`~._backend.AnthropicBackend`. Per ballot it:

1. asks the server once for its model when none was given (``GET /v1/models``: a server with
   exactly one model);
2. with ``structured="auto"``, the first time a (server, model) is seen with a schema, asks it
   once whether it honours ``output_config.format`` (:func:`probe_params`, the verdict read as the
   OpenAI backend reads its probe's): honoured, the schema goes as ``output_config``; refused
   (HTTP 400) or ignored (prose), as one forced tool call. The answer is remembered
   (:mod:`._caps`), and the probe's tokens count in the ballot that made it;
3. sends ``messages.create`` (:mod:`._wire`), the shared prefix marked cacheable when it is long
   enough (:mod:`._cache`); a 400 that refuses a parameter it may do without (a sampling
   parameter; with ``"auto"``, ``output_config`` or ``tools``: the next way down) is sent again
   at once without it, and the refusal remembered;
4. reads the answer: text (a tool call's input; a wrapped answer unwrapped), finish reason, usage
   with the cache's reads and writes; an answer that is not a JSON object although
   ``output_config`` was sent moves the server to tool calls (with ``"auto"``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from ..._errors import BackendError, ConfigError
from ..._types import Request, Usage
from .._base import Backend
from ..openai._probe import probe_verdict
from ..openai._wire import WRAPPER, format_for, unwrap
from . import _wire as wire
from ._cache import Mark, minimum_for
from ._caps import Capabilities, Known
from ._clients import Server
from ._errors import to_backend_error
from ._ops import Create, Exchange, ListModels, Op

log = logging.getLogger("accord.anthropic")

_PROBE_SCHEMA = {"type": "object", "properties": {"probe": {"type": "integer"}}, "required": ["probe"], "additionalProperties": False}
_PROBE_TOKENS = 48


def probe_params(model: str, known: Known) -> wire.Params | None:
    """The probe's call: a tiny question with ``output_config.format`` (None: the server is known
    to refuse ``output_config``, nothing to ask)."""
    if not known.accepts("output_config"):
        return None
    kwargs = {"model": model, "max_tokens": _PROBE_TOKENS, "messages": [{"role": "user", "content": "Say hello."}],
              "output_config": {"format": {"type": "json_schema", "schema": _PROBE_SCHEMA}}}
    return wire.Params(kwargs, Mark(0, 0, False))


class Exchanges(Backend):
    """The exchange per ballot; :class:`~._backend.AnthropicBackend` sets the state."""

    model: str | None
    structured: str  # "auto", "output_config", "tool" or "off"
    cache_min_tokens: int | None
    capabilities: Capabilities
    server: Server
    _secrets: list[str]
    _models: dict[str, str]
    _lock: threading.Lock

    def _exchange(self, request: Request) -> Exchange:
        server = self.server
        model = self.model or (yield from self._discover(server))
        key = (server.shown, model)
        meta: dict[str, Any] = {"engine": "anthropic", "server": server.shown}
        extra_usage = Usage()
        fmt, wrapped = format_for(request.schema)
        if self.structured == "auto" and fmt is not None and self.capabilities.claim_probe(key):
            meta["probe"], extra_usage = yield from self._probe(server, model, key)
        options = wire.Options(model, self.default_max_tokens, self.minimum(model))

        def build(known: Known) -> wire.Params:
            return wire.message_params(request, options, known, how=self.how(known, fmt is not None))

        response, params = yield from self._ask(server, key, build, request.deadline)
        try:
            parsed = wire.parse(response)
        except Exception as exc:  # noqa: BLE001 - Malformed, or an attribute the server left out: mapped here
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        self._learn(key, params.kwargs, parsed)
        sent = self._sent(key, params)
        meta.update(parsed.completion.meta)
        meta.update(sent)
        completion = parsed.completion
        if wrapped and sent["structured"] != "prompt":
            inner = unwrap(completion.text)
            if inner is not None:  # else cut off or not wrapped: read as it came
                completion = replace(completion, text=inner)
                meta["wrapped"] = WRAPPER
        return replace(completion, usage=completion.usage + extra_usage, meta=meta)

    def how(self, known: Known, has_format: bool) -> str:
        """How the schema travels to this server: the way given, else the one learned (output_config until told otherwise)."""
        if not has_format:
            return "off"
        if self.structured != "auto":
            return self.structured
        return known.structured or "output_config"

    def minimum(self, model: str) -> int:
        """The prefix length, in tokens, from which a prompt is marked cacheable (:mod:`._cache`)."""
        return self.cache_min_tokens if self.cache_min_tokens is not None else minimum_for(model)

    def _sent(self, key: tuple[str, str], params: wire.Params) -> dict[str, Any]:
        """What the ballot records of the call sent: how the schema went, the prompt cache's
        mark, and the parameters dropped."""
        kwargs = params.kwargs
        structured = "output_config" if "output_config" in kwargs else "tool" if "tools" in kwargs else "prompt"
        sent: dict[str, Any] = {"structured": structured, "cache": params.cache.to_dict()}
        dropped = sorted(self.capabilities.get(key).rejected & set(wire.SAMPLING))
        if dropped:
            sent["dropped"] = dropped
        return sent

    def _droppable(self) -> tuple[str, ...]:
        return (*wire.STRUCTURE, *wire.SAMPLING) if self.structured == "auto" else wire.SAMPLING

    def _ask(
        self, server: Server, key: tuple[str, str], build: Callable[[Known], wire.Params | None], deadline: float | None = None,
    ) -> Generator[Op, Any, tuple[Any, wire.Params]]:
        """Send one ``messages.create``; drop a parameter the server refuses and send again."""
        for _ in range(len(wire.STRUCTURE) + len(wire.SAMPLING) + 1):
            params = build(self.capabilities.get(key))
            if params is None:
                break
            reply = yield Create(server, params.kwargs, None if deadline is None else max(deadline, 0.05))
            if not isinstance(reply, BaseException):
                return reply, params
            refused = wire.refused(reply, params.kwargs, self._droppable())
            if not refused:
                raise to_backend_error(reply, server=server.shown, secrets=self._secrets)
            log.info("%s refused %s for %s; sending without it from now on", server.shown, ", ".join(sorted(refused)), key[1])
            self.capabilities.reject(key, refused)
        raise BackendError(f"{server.shown}: the server refused every way of asking", status=400)

    def _probe(self, server: Server, model: str, key: tuple[str, str]) -> Generator[Op, Any, tuple[str, Usage]]:
        """Ask once whether the server honours ``output_config.format``; remember how the schema goes."""
        try:
            response, _ = yield from self._ask(server, key, functools.partial(probe_params, model))
        except BackendError:
            if self.capabilities.get(key).structured is not None:  # it refused output_config: known
                return "rejected", Usage()
            self.capabilities.release_probe(key)  # probe again on a later call
            raise  # the server failed: this ballot's call fails the same way, without a second try
        try:
            parsed = wire.parse(response)
        except Exception as exc:  # noqa: BLE001 - any unusable answer: mapped here
            self.capabilities.release_probe(key)
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        verdict = probe_verdict(parsed.completion.text, parsed.completion.finish_reason)
        self.capabilities.learn(key, "output_config" if verdict == "honoured" else "tool")
        log.info("%s %s output_config for %s", server.shown, verdict, model)
        return verdict, replace(parsed.completion.usage, seconds=0.0, calls=0)

    def _discover(self, server: Server) -> Generator[Op, Any, str]:
        """The model a server serves, asked once (``GET /v1/models``)."""
        known = self._models.get(server.shown)
        if known is not None:
            return known
        reply = yield ListModels(server)
        if isinstance(reply, BaseException):
            raise to_backend_error(reply, server=server.shown, secrets=self._secrets)
        if len(reply) != 1:
            names = ", ".join(reply[:5]) or "none"
            raise ConfigError(f"{server.shown} serves {len(reply)} models ({names}); pass model=")
        model: str = reply[0]
        with self._lock:
            self._models[server.shown] = model
        return model

    def _learn(self, key: tuple[str, str], kwargs: dict[str, Any], parsed: wire.Parsed) -> None:
        """Passive detection, with ``"auto"``: a server that wrote prose for ``output_config``
        gets tool calls from now on; one that answered a forced tool call with prose, the schema
        in the prompt only."""
        if self.structured != "auto":
            return
        if "output_config" in kwargs and parsed.json_object is False:
            log.info("%s ignores output_config for %s: the schema goes as a tool call", key[0], key[1])
            self.capabilities.learn(key, "tool")
        elif "tools" in kwargs and not parsed.tool_used and parsed.completion.finish_reason == "stop":
            log.info("%s ignores tool_choice for %s: the schema goes in the prompt only", key[0], key[1])
            self.capabilities.learn(key, "off")
