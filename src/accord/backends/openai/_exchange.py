"""One exchange: the calls behind one ballot, as a generator that yields operations
(:mod:`._ops`) and receives their replies, and does no I/O (the httpx auth-flow pattern).

:class:`Exchanges` is the I/O-free half of :class:`~._backend.OpenAIBackend`: it picks the
server, asks it for its model once, probes ``response_format`` once (:mod:`._probe`), sends the
chat completion (dropping a parameter the server refuses and sending again), reads the answer
(:mod:`._wire`) and learns from it (:mod:`._caps`). The backend's drivers (:mod:`._drivers`)
send what it yields with the sync or the async client.

Over the Responses API (``api="responses"``) the exchange is the same, in that API's words
(:mod:`._api`: the request and the answer are :mod:`._responses`'s, the probe asks whether
``text.format`` is honoured, and what is learned is kept under the endpoint's URL).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from ..._errors import BackendError, ConfigError
from ..._types import Request, TokenSteps, Usage
from .._base import Backend
from . import _wire as wire
from ._api import APIS, Api
from ._calibrate import steps_of
from ._caps import Capabilities, Known
from ._clients import Server
from ._errors import to_backend_error
from ._learning import TOP, Learner
from ._noise import NoiseLearner
from ._ops import Exchange, ListModels, Op
from ._probe import free_whitespace, probe_verdict

log = logging.getLogger("accord.openai")


class Exchanges(Backend):
    """The exchange per ballot over the servers; :class:`~._backend.OpenAIBackend` sets the state."""

    model: str | None
    api: str  # "chat" or "responses" (:mod:`._api`)
    structured: str  # "auto", "on" or "off"
    logprobs: bool
    top_logprobs: int
    capabilities: Capabilities
    servers: list[Server]
    _secrets: list[str]
    _models: dict[str, str]
    _turn: int
    _lock: threading.Lock
    _learner: Learner | None
    _noise: NoiseLearner | None

    @property
    def _api(self) -> Api:
        return APIS[self.api]

    def _key(self, server: Server, model: str) -> tuple[str, str]:
        """Where what a server is known to do is kept (:mod:`._caps`): per endpoint and model."""
        return self._api.endpoint(server.shown), model

    def _next_server(self) -> Server:
        with self._lock:
            server = self.servers[self._turn % len(self.servers)]
            self._turn += 1
        return server

    def _exchange(self, request: Request, server: Server) -> Exchange:
        request = wire.sent(request)  # lists of labels bounded in the grammar (wire.grammar_schema)
        model = self.model or (yield from self._discover(server))
        api, key = self._api, self._key(server, model)
        meta: dict[str, Any] = {"engine": "openai-compatible", "server": server.shown}
        extra_usage = Usage()
        fmt, wrapped = format_for(request.schema)
        can_format = self.structured != "off" and fmt is not None
        if self.structured == "auto" and can_format and self.capabilities.claim_probe(key):
            meta["probe"], extra_usage = yield from self._probe(server, model, key)
        compared = self._compared(request)
        top = max(self.top_logprobs, TOP) if compared and self._noise is None else self.top_logprobs  # pairs need no more
        options = wire.Options(model, self.default_max_tokens, self.logprobs, top)

        def build(known: Known) -> dict[str, Any]:
            # The prompt is the core's (the schema shown unless the policy says not): response_format
            # enforces the shape the prompt already told, where the server honours it.
            structured = can_format and (self.structured == "on" or known.response_format not in ("ignored", "rejected"))
            return api.params(request, options, known, structured=structured)

        response, params = yield from self._ask(server, key, build, request.deadline, answer=True)
        try:
            parsed, answer = api.parse(response), api.answer(response)
        except Exception as exc:  # noqa: BLE001 - Malformed, or an attribute the server left out: mapped here
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        self._learn(key, params, parsed, answer)
        meta.update(parsed.completion.meta)  # model, system_fingerprint (None when the server sends none)
        meta.update(self._sent(key, params, lambda: api.params(request, options, Known(), structured=can_format)))
        steps = None
        if compared and api.logprobs in params:  # the prompt as sent: the reference is fed the same (_learning.Learner)
            steps = TokenSteps(request.messages, steps_of(answer), parsed.completion.usage.prompt_tokens)
        completion = parsed.completion
        if wrapped and api.format in params:
            inner = wire.unwrap(completion.text)
            if inner is not None:  # else cut off or not wrapped: read as it came
                completion = replace(completion, text=inner)
                meta["wrapped"] = wire.WRAPPER
        return replace(completion, usage=completion.usage + extra_usage, meta=meta, steps=steps)

    def _compared(self, request: Request) -> bool:
        """Whether this ballot keeps its tokens, with more alternatives: every ballot where the
        server's noise is learned from its own ballots (:mod:`._noise`), else a first ballot the
        floor learner compares with the reference (:mod:`._learning`)."""
        if not self.logprobs:
            return False
        if self._noise is not None:
            return True
        if self._learner is None or request.ballot != 0 or request.attempt != 1:
            return False
        return self._learner.wants()

    def _sent(self, key: tuple[str, str], params: dict[str, Any], everything: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """What the ballot records of the call sent: how the schema went, the seed, and the
        parameters dropped (those ``everything()``, the call to a server that takes every
        parameter, has and this one had not)."""
        api = self._api
        sent: dict[str, Any] = {"structured": api.shown_format if api.format in params else "prompt"}
        if "seed" in params:
            sent["seed"] = params["seed"]
        rejected = self.capabilities.get(key).rejected
        dropped = sorted(rejected & wire.wire_names(everything())) if rejected else []
        if dropped:
            sent["dropped"] = dropped
        return sent

    def _ask(
        self, server: Server, key: tuple[str, str], build: Callable[[Known], dict[str, Any] | None], deadline: float | None = None,
        *, answer: bool = False,
    ) -> Generator[Op, Any, tuple[Any, dict[str, Any]]]:
        """Send one request; drop parameters the server refuses and send again."""
        api = self._api
        for _ in range(len(api.droppable) + 1):
            params = build(self.capabilities.get(key))
            if params is None:
                break
            reply = yield api.call(server, params, None if deadline is None else max(deadline, 0.05), answer)
            if not isinstance(reply, BaseException):
                return reply, params
            refused = api.rejected(reply, params)
            if not refused:
                raise to_backend_error(reply, server=server.shown, secrets=self._secrets)
            log.info("%s refused %s for %s; sending without it from now on", server.shown, ", ".join(sorted(refused)), key[1])
            self.capabilities.reject(key, refused)
        raise BackendError(f"{server.shown}: the server refused every way of asking", status=400)

    def _probe(self, server: Server, model: str, key: tuple[str, str]) -> Generator[Op, Any, tuple[str, Usage]]:
        """Ask once whether the server honours ``response_format`` (``text.format``); remember the answer."""
        api = self._api
        try:
            response, _ = yield from self._ask(server, key, functools.partial(api.probe, model))
        except BackendError:
            if self.capabilities.get(key).response_format == "rejected":
                return "rejected", Usage()
            self.capabilities.release_probe(key)  # probe again on a later call
            raise  # the server failed: this ballot's call fails the same way, without a second try
        except BaseException:
            self.capabilities.release_probe(key)  # any other failure too: a claim never given back would end probing
            raise
        try:
            parsed, answer = api.parse(response), api.answer(response)
        except Exception as exc:  # noqa: BLE001 - any unusable answer: mapped here
            self.capabilities.release_probe(key)
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        verdict = probe_verdict(parsed.completion.text, parsed.completion.finish_reason)
        self.capabilities.learn(key, response_format=verdict)
        if verdict == "honoured":
            self.capabilities.saw_json(key, free_whitespace(parsed.completion.text, steps_of(answer)))
        log.info("%s %s %s for %s", server.shown, verdict, api.shown_format, model)
        return verdict, replace(parsed.completion.usage, seconds=0.0, calls=0)

    def _discover(self, server: Server) -> Generator[Op, Any, str]:
        """The model a server serves, asked once (``GET /models``)."""
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

    def _learn(self, key: tuple[str, str], params: dict[str, Any], parsed: wire.Parsed, choice: Any) -> None:
        """Passive detection: a server that sent prose for ``response_format``, or no logprobs;
        whether its strict JSON has free whitespace (:func:`._probe.free_whitespace`)."""
        fmt = self._api.format
        if fmt in params and self.structured == "auto" and parsed.json_object is False:
            if self.capabilities.get(key).response_format != "ignored":
                log.info("%s ignores %s for %s: the schema goes in the prompt", key[0], self._api.shown_format, key[1])
            self.capabilities.learn(key, response_format="ignored")
        elif fmt in params and parsed.completion.text and self.capabilities.get(key).whitespace != "free":
            self.capabilities.saw_json(key, free_whitespace(parsed.completion.text, steps_of(choice)))
        if self._api.logprobs in params and parsed.completion.text:
            self.capabilities.learn(key, logprobs="returned" if parsed.logprobs_seen else "ignored")



@functools.lru_cache(maxsize=256)
def format_for(schema: Any) -> tuple[dict[str, Any] | None, bool]:
    """:func:`._wire.format_for`, once per schema object (every ballot asks)."""
    return wire.format_for(schema)
