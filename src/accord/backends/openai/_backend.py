"""An OpenAI-compatible server as a backend: ``accord.models.openai(...)``.

vLLM, SGLang, llama.cpp, Ollama, ``transformers serve`` or OpenAI itself. The official ``openai``
package does the HTTP (its retries off); this module decides what to send and reads what comes
back. One exchange (the calls behind one ballot) is a generator that yields operations and
receives their replies, the httpx auth-flow pattern: :meth:`OpenAIBackend.generate` drives it
with the sync client and :meth:`OpenAIBackend.agenerate` with the async client, natively, so
the budget can cancel an in-flight request.

What an exchange does, per ballot:

1. picks the next server (``base_url`` may be a list: round-robin) and, without ``model=``,
   asks it once for its model (``GET /models``; a server with exactly one model);
2. the first time a server is seen with a schema ``response_format`` can carry (an object
   root, or a bare type wrapped in ``{"answer": ...}``: :func:`._wire.format_for`), probes it
   once: does it honour ``response_format`` (strict JSON Schema)? The answer is remembered per
   (server, model) in :mod:`._caps`, and :attr:`OpenAIBackend.constrains` reports it;
   the core reads ``constrains`` when a run starts, so a run that starts after the probe leaves
   the schema out of the prompt, and one that starts before carries it (harmless);
3. sends the chat completion, with ``logprobs``/``top_logprobs`` unless the server is known to
   drop them; a 400/422 that refuses a parameter (``temperature``, ``seed``,
   ``response_format``, ``logprobs``, ``top_p``, ``top_k``, ``max_tokens``) is retried at once
   without it, and the refusal is remembered;
4. reads the answer (:mod:`._wire`): text (a wrapped answer unwrapped), finish reason, usage,
   ``system_fingerprint``, per-token logprob margins; an answer that is not a JSON object
   although ``response_format`` was sent marks the server as ignoring it (then the schema goes
   in the prompt).

Ballots of one prompt are spread (:mod:`._spread`): one at a time, and each ballot after the
first with batch neighbours of other lengths, so they sample the server's batch noise instead
of sharing one batch. The margin gate's floor is the ``noise_floor`` given, else the one
``accord calibrate --model openai:URL`` measured for (server, model, dtype) (:mod:`._calibrate`).

Every failure leaves as a :class:`~accord.BackendError` (:mod:`._openai_errors`), retryable for
timeouts, dropped connections, 429 and 5xx, with ``retry_after`` from the server. No API key or
URL credential appears in a Result, a log line or an error.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ..._errors import BackendError, ConfigError
from ..._types import Completion, Request, Usage
from .._base import Backend, Noise
from . import _spread as spreading
from . import _wire as wire
from ._calibrate import stored_floor
from ._caps import SHARED, Capabilities, Known
from ._chunks import STREAM_OPTIONS, Chunks
from ._clients import Server, servers_from
from ._errors import guard_logs, to_backend_error

log = logging.getLogger("accord.openai")

DEFAULT_TIMEOUT = 120.0
DEFAULT_CONNECT_TIMEOUT = 10.0
_STRUCTURED = {"auto": "auto", True: "on", False: "off"}
_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"probe": {"type": "integer"}},
    "required": ["probe"],
    "additionalProperties": False,
}
_PROBE_FORMAT = {"type": "json_schema", "json_schema": {"name": "accord_probe", "schema": _PROBE_SCHEMA, "strict": True}}
_PROBE_TOKENS = 48  # a constrained model may write whitespace between the tokens (vLLM's default grammar allows it)
_PROBE_PREFIX = '{"probe":'
_PROBE_ANSWER = re.compile(r'\{"probe":-?\d+\}')


# -- operations an exchange yields ---------------------------------------------------------------


@dataclass(frozen=True)
class _Chat:
    server: Server
    params: dict[str, Any]
    timeout: float | None = None  # the run's time left: an abandoned call does not outlive its budget
    answer: bool = False  # the ballot's answer (not the probe): what ``stream`` streams

    def options(self, client: Any) -> dict[str, Any]:
        if self.timeout is None:
            return self.params
        return {**self.params, "timeout": _capped(getattr(client, "timeout", None), self.timeout)}

    def call(self, client: Any) -> Any:
        return client.chat.completions.create(**self.options(client))

    async def acall(self, client: Any) -> Any:
        return await client.chat.completions.create(**self.options(client))

    def stream(self, client: Any) -> Any:
        return client.chat.completions.create(**self.options(client), stream=True, stream_options=STREAM_OPTIONS)

    async def astream(self, client: Any) -> Any:
        return await client.chat.completions.create(**self.options(client), stream=True, stream_options=STREAM_OPTIONS)


def _capped(timeout: Any, left: float) -> Any:
    """The client's timeout, no part of it longer than the time the run has left."""
    if isinstance(timeout, (int, float)):
        return min(float(timeout), left)
    parts = ("connect", "read", "write", "pool")
    if timeout is not None and all(hasattr(timeout, p) for p in parts):
        import httpx

        return httpx.Timeout(**{p: left if getattr(timeout, p) is None else min(getattr(timeout, p), left) for p in parts})
    return left


@dataclass(frozen=True)
class _ListModels:
    server: Server

    def call(self, client: Any) -> Any:
        return [model.id for model in client.models.list().data]

    async def acall(self, client: Any) -> Any:
        return [model.id for model in (await client.models.list()).data]


_Op = Any  # _Chat | _ListModels
Exchange = Generator[_Op, Any, Completion]


class OpenAIBackend(Backend):
    """A backend over one or more OpenAI-compatible servers.

    ``client``: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (the other twin is derived), or
    None to build both from ``base_url`` (a URL or a list of URLs, round-robin; default
    ``OPENAI_BASE_URL`` or OpenAI) and ``api_key`` (default ``OPENAI_API_KEY``; local servers need
    none). ``model``: the model name; None asks the server (one that serves exactly one model).
    ``timeout``: seconds per HTTP call (or an ``openai.Timeout``). ``max_tokens``: the default
    output budget when the run sets none. ``structured``: "auto" (probe and remember whether the
    server honours ``response_format``), True (trust it does), False (never send it).
    ``logprobs``: ask for ``top_logprobs`` alternatives per token and record the top-1/top-2
    gap as the completion's margins (default on; a server that drops or refuses them is
    remembered). ``noise_floor``: the logprob gap below which a step counts as fragile on this
    server; None (default) uses the floor ``accord calibrate --model openai:URL`` measured for
    (server, model, ``dtype``), if any: with a floor the core's margin gate may accept one ballot
    alone. ``dtype``: the server's compute dtype, to pick the calibrated floor (None: the largest
    floor measured for the server and model). ``spread``: spread the ballots of one prompt (one
    at a time, later ballots with batch neighbours; :mod:`._spread`). ``capabilities``: where
    learned server facts are kept (default: process-wide).
    """

    blocking = True

    def __init__(
        self,
        client: Any = None,
        *,
        base_url: str | list[str] | tuple[str, ...] | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: Any = None,
        max_tokens: int = 512,
        structured: bool | str = "auto",
        logprobs: bool = True,
        top_logprobs: int = 2,
        noise_floor: float | None = None,
        dtype: str | None = None,
        spread: bool = True,
        organization: str | None = None,
        default_headers: dict[str, str] | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model):
            raise ConfigError(f"model must be a non-empty string or None, got {model!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if structured not in _STRUCTURED:
            raise ConfigError(f'structured must be "auto", True or False, got {structured!r}')
        if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int) or not 2 <= top_logprobs <= 20:
            raise ConfigError(f"top_logprobs must be an int from 2 to 20, got {top_logprobs!r}")
        if noise_floor is not None and (isinstance(noise_floor, bool) or not noise_floor >= 0):
            raise ConfigError(f"noise_floor must be >= 0 or None, got {noise_floor!r}")
        if dtype is not None and (not isinstance(dtype, str) or not dtype):
            raise ConfigError(f"dtype must be a non-empty string or None, got {dtype!r}")
        self.model = model
        self.default_max_tokens = max_tokens
        self.structured = _STRUCTURED[structured]
        self.logprobs = bool(logprobs)
        self.top_logprobs = top_logprobs
        self.noise_floor = noise_floor
        self.dtype = dtype
        self.spread = bool(spread)
        self.capabilities = capabilities if capabilities is not None else SHARED
        extra = {k: v for k, v in (("organization", organization), ("default_headers", default_headers)) if v is not None}
        self.servers, self._secrets = servers_from(client, base_url, api_key, _timeout(timeout, client), extra)
        guard_logs(self._secrets)
        self._models: dict[str, str] = {}
        self._turn = 0
        self._neighbour_turn = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._turns = spreading.Turns()

    # -- what the core reads ---------------------------------------------------------------------

    @property
    def constrains(self) -> bool:  # type: ignore[override]  # computed from what the servers are known to do
        """True when every server is known to honour ``response_format`` (or ``structured=True``).

        Read by the core at the start of each run: when False, the schema goes in the prompt.
        """
        if self.structured != "auto":
            return self.structured == "on"
        return all(known is not None and known.response_format == "honoured" for known in self._known_all())

    def constrains_for(self, schema: Any) -> bool:
        """Whether this schema's shape is enforced by the server (``response_format`` carries
        every schema with a JSON Schema, bare types wrapped; not a grammar): when False the core
        puts the schema in the prompt."""
        return self.constrains and _format_for(schema)[0] is not None

    @property
    def gives_margins(self) -> bool:  # type: ignore[override]  # computed: logprobs, a floor, servers that return them
        """True when logprobs are asked for, no server is known to drop them, and a floor is known."""
        if not self.logprobs or self.noise() is None:
            return False
        return all(known is None or known.logprobs not in ("ignored", "rejected") for known in self._known_all())

    def noise(self) -> Noise | None:
        """The ``noise_floor`` given, else the floor measured for every server (the largest);
        None while any server's model is unknown or unmeasured (then the gate stands aside)."""
        if self.noise_floor is not None:
            return Noise(float(self.noise_floor), self.dtype)
        floors = []
        for server in self.servers:
            model = self.model or self._models.get(server.shown)
            floor = stored_floor(server.shown, model, self.dtype) if model else None
            if floor is None:
                return None
            floors.append(floor)
        return Noise(max(floors), self.dtype)

    @property
    def fingerprint(self) -> str:  # type: ignore[override]  # computed from the model and the servers
        """The logical identity (ledger key): model and servers. Without ``model=`` it reads
        ``server-default``, the same before and after the server was asked for its model."""
        return f"openai:{self.model or 'server-default'}@{'|'.join(s.shown for s in self.servers)}"

    def describe(self) -> dict[str, object]:
        servers = []
        for server in self.servers:
            model = self.model or self._models.get(server.shown)
            known = self.capabilities.get((server.shown, model)).to_dict() if model else None
            servers.append({"url": server.shown, "model": model, "capabilities": known})
        noise = self.noise()
        return {
            "backend": type(self).__name__,
            "fingerprint": self.fingerprint,
            "structured": self.structured,
            "servers": servers,
            "noise_floor": None if noise is None else noise.floor,
            "noise_floor_from": "given" if self.noise_floor is not None else "calibrated" if noise is not None else None,
            **({"dtype": self.dtype} if self.dtype else {}),
            "spread": self.spread,
        }

    def _known_all(self) -> list[Known | None]:
        found: list[Known | None] = []
        for server in self.servers:
            model = self.model or self._models.get(server.shown)
            found.append(self.capabilities.get((server.shown, model)) if model else None)
        return found

    # -- the two drivers -------------------------------------------------------------------------

    def generate(self, request: Request) -> Completion:
        if not self.spread:
            return self._drive(request, self._next_server())
        with self._turns.hold(spreading.prompt_key(request)), self._flying():  # one ballot of a prompt at a time
            server = self._next_server()
            neighbours = self._neighbour_params(request, server)
            with spreading.beside(server.fresh_async_client, neighbours):
                return self._noted(self._drive(request, server), len(neighbours))

    async def agenerate(self, request: Request) -> Completion:
        if not self.spread:
            return await self._adrive(request, self._next_server())
        async with self._turns.ahold(spreading.prompt_key(request)):
            with self._flying():
                return await self._aspread(request)

    async def _aspread(self, request: Request) -> Completion:
        server = self._next_server()
        neighbours = self._neighbour_params(request, server)
        async with spreading.abeside(server.async_client(), neighbours):
            return self._noted(await self._adrive(request, server), len(neighbours))

    def _drive(self, request: Request, server: Server) -> Completion:
        flow, reply = self._exchange(request, server), None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                reply = op.call(op.server.sync_client())
            except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
                reply = exc

    async def _adrive(self, request: Request, server: Server) -> Completion:
        flow, reply = self._exchange(request, server), None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                reply = await op.acall(op.server.async_client())
            except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
                reply = exc

    def stream(self, request: Request) -> Iterator[str | Completion]:
        """:meth:`generate`, with the answer's chat completion streamed (``stream=True``): its
        text deltas as they arrive, then the Completion (usage from the last chunk)."""
        flow, reply = self._exchange(request, self._next_server()), None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                yield done.value
                return
            try:
                if isinstance(op, _Chat) and op.answer:
                    chunks = Chunks()
                    for chunk in op.stream(op.server.sync_client()):
                        delta = chunks.add(chunk)
                        if delta:
                            yield delta
                    reply = chunks.response()
                else:
                    reply = op.call(op.server.sync_client())
            except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
                reply = exc

    async def astream(self, request: Request) -> AsyncIterator[str | Completion]:
        flow, reply = self._exchange(request, self._next_server()), None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                yield done.value
                return
            try:
                if isinstance(op, _Chat) and op.answer:
                    chunks = Chunks()
                    async for chunk in await op.astream(op.server.async_client()):
                        delta = chunks.add(chunk)
                        if delta:
                            yield delta
                    reply = chunks.response()
                else:
                    reply = await op.acall(op.server.async_client())
            except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
                reply = exc

    def telemetry(self) -> dict[str, str | int]:
        """``openai`` (the API spoken), the model asked for (or the one discovered), the server."""
        server = self.servers[0]
        attrs: dict[str, str | int] = {"gen_ai.provider.name": "openai"}
        model = self.model or self._models.get(server.shown)
        if model:
            attrs["gen_ai.request.model"] = model
        if len(self.servers) == 1:
            url = urlsplit(server.shown)
            if url.hostname:
                attrs["server.address"] = url.hostname
            if url.port:
                attrs["server.port"] = url.port
        return attrs

    # -- spreading ballots (._spread) -------------------------------------------------------------

    @contextlib.contextmanager
    def _flying(self) -> Iterator[None]:
        """Count this backend's ballots in flight (their company is batch neighbours already)."""
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def _neighbour_params(self, request: Request, server: Server) -> list[dict[str, Any]]:
        """The batch neighbours that go beside this ballot: ``neighbours(ballot)``, less the other
        ballots of this backend in flight (none for ballot 0, or before the model is known)."""
        model = self.model or self._models.get(server.shown)
        with self._lock:
            others = self._in_flight - 1
        count = max(0, spreading.neighbours(request.ballot) - others) if model else 0
        if not count or model is None:
            return []
        max_tokens = request.settings.max_tokens or self.default_max_tokens
        with self._lock:
            first, self._neighbour_turn = self._neighbour_turn, self._neighbour_turn + count
        return [spreading.neighbour_params(model, first + i, max_tokens) for i in range(count)]

    async def agenerate_beside(self, request: Request, neighbours: int) -> Completion:
        """One call with ``neighbours`` batch neighbours of other lengths in flight beside it: the
        request as a busy server computes it (``accord audit --concurrency``)."""
        server = self._next_server()
        model = self.model or await self._amodel(server)
        max_tokens = request.settings.max_tokens or self.default_max_tokens
        with self._lock:
            first, self._neighbour_turn = self._neighbour_turn, self._neighbour_turn + neighbours
        params = [spreading.neighbour_params(model, first + i, max_tokens) for i in range(neighbours)]
        async with spreading.abeside(server.async_client(), params):
            return self._noted(await self._adrive(request, server), neighbours)

    def traffic(self, count: int, max_tokens: int = 64) -> Any:
        """``async with backend.traffic(n):`` n requests of other lengths always in flight on the
        first server while the block runs: a busy server (``accord audit --concurrency``)."""
        server = self.servers[0]

        @contextlib.asynccontextmanager
        async def busy() -> AsyncIterator[None]:
            model = self.model or await self._amodel(server)
            params = lambda turn: spreading.neighbour_params(model, turn, max_tokens // 2 + turn % 4 * max_tokens // 4)  # noqa: E731
            async with spreading.traffic(server.async_client(), params, count):
                yield

        return busy()

    async def _amodel(self, server: Server) -> str:
        flow, reply = self._discover(server), None
        while True:
            try:
                op = flow.send(reply)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                reply = await op.acall(server.async_client())
            except Exception as exc:  # noqa: BLE001 - handed to the flow, which maps it at the boundary
                reply = exc

    @staticmethod
    def _noted(completion: Completion, neighbours: int) -> Completion:
        return replace(completion, meta={**completion.meta, "neighbours": neighbours}) if neighbours else completion

    def close(self) -> None:
        """Close the sync clients accord built (async ones close with their event loop)."""
        for server in self.servers:
            server.close()

    # -- one exchange ----------------------------------------------------------------------------

    def _next_server(self) -> Server:
        with self._lock:
            server = self.servers[self._turn % len(self.servers)]
            self._turn += 1
        return server

    def _exchange(self, request: Request, server: Server) -> Exchange:
        model = self.model or (yield from self._discover(server))
        key = (server.shown, model)
        meta: dict[str, Any] = {"engine": "openai-compatible", "server": server.shown}
        extra_usage = Usage()
        fmt, wrapped = _format_for(request.schema)
        can_format = self.structured != "off" and fmt is not None
        if self.structured == "auto" and can_format and self.capabilities.claim_probe(key):
            meta["probe"], extra_usage = yield from self._probe(server, model, key)
        claimed = self.structured == "on" or self.capabilities.get(key).response_format == "honoured"
        options = wire.Options(model, self.default_max_tokens, self.logprobs, self.top_logprobs)

        def build(known: Known) -> dict[str, Any]:
            structured = can_format and (self.structured == "on" or known.response_format not in ("ignored", "rejected"))
            hint = not structured and claimed and not wire.has_hint(request)
            return wire.chat_params(request, options, known, structured=structured, hint=hint)

        response, params = yield from self._ask(server, key, build, request.deadline, answer=True)
        try:
            parsed = wire.parse(response)
        except Exception as exc:  # noqa: BLE001 - Malformed, or an attribute the server left out: mapped here
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        self._learn(key, params, parsed)
        meta.update(parsed.completion.meta)  # model, system_fingerprint (None when the server sends none)
        meta["structured"] = "response_format" if "response_format" in params else "prompt"
        if "seed" in params:
            meta["seed"] = params["seed"]
        wanted = wire.wire_names(wire.chat_params(request, options, Known(), structured=can_format, hint=False))
        dropped = sorted(self.capabilities.get(key).rejected & wanted)
        if dropped:
            meta["dropped"] = dropped
        completion = parsed.completion
        if wrapped and "response_format" in params:
            inner = wire.unwrap(completion.text)
            if inner is not None:  # else cut off or not wrapped: read as it came
                completion = replace(completion, text=inner)
                meta["wrapped"] = wire.WRAPPER
        return replace(completion, usage=completion.usage + extra_usage, meta=meta)

    def _ask(
        self, server: Server, key: tuple[str, str], build: Callable[[Known], dict[str, Any] | None], deadline: float | None = None,
        *, answer: bool = False,
    ) -> Generator[_Op, Any, tuple[Any, dict[str, Any]]]:
        """Send one chat completion; drop parameters the server refuses and send again."""
        for _ in range(len(wire.DROPPABLE) + 1):
            params = build(self.capabilities.get(key))
            if params is None:
                break
            reply = yield _Chat(server, params, None if deadline is None else max(deadline, 0.05), answer)
            if not isinstance(reply, BaseException):
                return reply, params
            refused = wire.rejected_params(reply, params)
            if not refused:
                raise to_backend_error(reply, server=server.shown, secrets=self._secrets)
            log.info("%s refused %s for %s; sending without it from now on", server.shown, ", ".join(sorted(refused)), key[1])
            self.capabilities.reject(key, refused)
        raise BackendError(f"{server.shown}: the server refused every way of asking", status=400)

    def _probe(self, server: Server, model: str, key: tuple[str, str]) -> Generator[_Op, Any, tuple[str, Usage]]:
        """Ask once whether the server honours ``response_format``; remember the answer."""

        def build(known: Known) -> dict[str, Any] | None:
            if known.response_format == "rejected":
                return None
            params: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "response_format": _PROBE_FORMAT}
            params["max_tokens" if known.accepts("max_tokens") else "max_completion_tokens"] = _PROBE_TOKENS
            if known.accepts("temperature"):
                params["temperature"] = 0.0
            return params

        try:
            response, _ = yield from self._ask(server, key, build)
        except BackendError:
            if self.capabilities.get(key).response_format == "rejected":
                return "rejected", Usage()
            self.capabilities.release_probe(key)  # probe again on a later call
            raise  # the server failed: this ballot's call fails the same way, without a second try
        try:
            parsed = wire.parse(response)
        except Exception as exc:  # noqa: BLE001 - any unusable answer: mapped here
            self.capabilities.release_probe(key)
            raise to_backend_error(exc, server=server.shown, secrets=self._secrets) from None
        verdict = probe_verdict(parsed.completion.text, parsed.completion.finish_reason)
        self.capabilities.learn(key, response_format=verdict)
        log.info("%s %s response_format for %s", server.shown, verdict, model)
        usage = parsed.completion.usage
        return verdict, Usage(usage.prompt_tokens, usage.completion_tokens)

    def _discover(self, server: Server) -> Generator[_Op, Any, str]:
        """The model a server serves, asked once (``GET /models``)."""
        known = self._models.get(server.shown)
        if known is not None:
            return known
        reply = yield _ListModels(server)
        if isinstance(reply, BaseException):
            raise to_backend_error(reply, server=server.shown, secrets=self._secrets)
        if len(reply) != 1:
            names = ", ".join(reply[:5]) or "none"
            raise ConfigError(f"{server.shown} serves {len(reply)} models ({names}); pass model=")
        with self._lock:
            self._models[server.shown] = reply[0]
        return reply[0]  # type: ignore[no-any-return]

    def _learn(self, key: tuple[str, str], params: dict[str, Any], parsed: wire.Parsed) -> None:
        """Passive detection: a server that sent prose for ``response_format``, or no logprobs."""
        if "response_format" in params and self.structured == "auto" and parsed.json_object is False:
            if self.capabilities.get(key).response_format != "ignored":
                log.info("%s ignores response_format for %s: the schema goes in the prompt", key[0], key[1])
            self.capabilities.learn(key, response_format="ignored")
        if "logprobs" in params and parsed.completion.text:
            self.capabilities.learn(key, logprobs="returned" if parsed.logprobs_seen else "ignored")


def _timeout(timeout: Any, client: Any) -> Any:
    if timeout is None:
        if client is not None:
            return None  # keep the client's own
        import openai

        return openai.Timeout(DEFAULT_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
    if isinstance(timeout, bool) or (isinstance(timeout, (int, float)) and not timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return timeout


def probe_verdict(text: str, finish_reason: str | None) -> str:
    """"honoured" when the probe's answer is ``{"probe": <integer>}`` (whitespace aside), or was
    cut off inside that shape; else "ignored" (a server that ignores the format says hello).

    A model constrained by a grammar that allows whitespace between tokens (vLLM's default) may
    spend the whole budget on it: ``{\n    "probe"\n\n:\n\n-1\n\n`` at 16 tokens is honoured.
    """
    compact = "".join(text.split())  # no whitespace inside the probe's only key or its integer
    if _PROBE_ANSWER.fullmatch(compact):
        return "honoured"
    cut_inside = _PROBE_PREFIX.startswith(compact) or re.fullmatch(r'\{"probe":-?\d*', compact) is not None
    return "honoured" if finish_reason == "length" and compact.startswith("{") and cut_inside else "ignored"


@functools.lru_cache(maxsize=256)
def _format_for(schema: Any) -> tuple[dict[str, Any] | None, bool]:
    """:func:`._wire.format_for`, once per schema object (every ballot asks)."""
    return wire.format_for(schema)
