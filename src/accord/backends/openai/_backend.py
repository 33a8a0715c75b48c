"""An OpenAI-compatible server as a backend: ``accord.models.openai(...)``.

vLLM, SGLang, llama.cpp, Ollama, ``transformers serve`` or OpenAI itself. The official ``openai``
package does the HTTP (its retries off); this module decides what to send and reads what comes
back. One exchange (the calls behind one ballot, :mod:`._exchange`) is a generator that yields
operations (:mod:`._ops`) and receives their replies, the httpx auth-flow pattern:
:meth:`OpenAIBackend.generate` drives it with the sync client and :meth:`OpenAIBackend.agenerate`
with the async client (:mod:`._drivers`), natively, so the budget can cancel an in-flight request.

What an exchange does, per ballot:

1. picks the next server (``base_url`` may be a list: round-robin) and, without ``model=``,
   asks it once for its model (``GET /models``; a server with exactly one model);
2. the first time a server is seen with a schema ``response_format`` can carry (an object
   root, or a bare type wrapped in ``{"answer": ...}``: :func:`._wire.format_for`), probes it
   once (:mod:`._probe`): does it honour ``response_format`` (strict JSON Schema)? The answer
   is remembered per (server, model) in :mod:`._caps`, and :attr:`OpenAIBackend.constrains` reports it.
   The prompt does not depend on it: the core shows the schema in every prompt (unless the
   policy says not), with ``response_format`` or without, so every run's server reads the same
   prompt, the first of a process included;
3. sends the chat completion (with ``api="responses"``, the same request to the Responses API:
   :mod:`._api`, :mod:`._responses`), with ``logprobs``/``top_logprobs`` unless the server is
   known to drop them; a 400/422 that refuses a parameter (``temperature``, ``seed``,
   ``response_format``, ``logprobs``, ``top_p``, ``top_k``, ``max_tokens``) is retried at once
   without it, and the refusal is remembered;
4. reads the answer (:mod:`._wire`): text (a wrapped answer unwrapped), finish reason, usage,
   ``system_fingerprint``, per-token logprob margins; an answer that is not a JSON object although
   ``response_format`` was sent marks the server as ignoring it (then the schema goes in the prompt).

Ballots of one prompt are spread (:mod:`._spread`): one at a time, and each ballot after the
first with batch neighbours of other lengths, so they sample the server's batch noise instead
of sharing one batch. The margin gate's floor is the ``noise_floor`` given (:class:`._options.Margins`),
else the one ``accord calibrate --model openai:URL`` measured for (server, model, dtype label)
(:mod:`._calibrate`), else, with a reference deployment, the one learned against it (:mod:`._learning`).

Every failure leaves as a :class:`~accord.BackendError` (:mod:`._openai_errors`), retryable for
timeouts, dropped connections, 429 and 5xx, with ``retry_after`` from the server. No API key or
URL credential appears in a Result, a log line or an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

from ..._errors import ConfigError
from ..._threads import spawn
from ..._types import Completion, Request
from .._base import DEFAULT_MAX_TOKENS, Backend, Noise
from . import _drivers as drivers
from . import _options as options
from . import _spread as spreading
from ._caps import SHARED, Capabilities, Known
from ._clients import Server, servers_from
from ._errors import guard_logs
from ._exchange import Exchanges, format_for
from ._learning import Learner, floor_for, gate_said, taught
from ._load import self_hosted
from ._noise import LearnedView, NoiseLearner, neighbours_said
from ._options import DEFAULT_MARGINS, Margins
from ._referee import Referee

DEFAULT_TIMEOUT = 120.0
DEFAULT_CONNECT_TIMEOUT = 10.0


class OpenAIBackend(Exchanges):
    """A backend over one or more OpenAI-compatible servers.

    ``client``: an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (the other twin is derived), or
    None to build both from ``base_url`` (a URL or a list of URLs, round-robin; default
    ``OPENAI_BASE_URL`` or OpenAI) and the client options. ``model``: the model name; None asks
    the server (one that serves exactly one model). ``api``: ``"chat"`` (chat completions) or
    ``"responses"`` (the Responses API, ``POST /responses``: the schema as ``text.format``, the
    logprobs through ``include``; :mod:`._responses`). ``max_tokens``: the default output budget per
    call when the run sets none. ``structured``: "auto" (probe and remember whether the server
    honours ``response_format``), True (trust it does), False (never send it). ``margins``: how
    the answers' margins are read (:class:`._options.Margins`: logprobs, ``top_logprobs``, the
    ``noise_floor``, the server's ``dtype_label``). ``spread``: spread the ballots of one prompt
    (one at a time, later ballots with batch neighbours; :mod:`._spread`). ``streamed``: stream
    each answer, a loop cut as it shows (``"loop"``, :mod:`._drivers`); off: found at
    ``max_tokens``. ``reference``: another accord backend of the same weights
    (``models.local(dtype="float32")``, a float32 or batch-invariant server) that decides every
    prompt whose first ballot has a step below the floor (:mod:`._referee`; docs/determinism.md);
    with a local reference the floor is learned against it (:mod:`._learning`), no calibration
    needed. ``capabilities``: where learned server facts are kept (default: process-wide).
    ``**client_options`` go to the ``openai`` clients: ``api_key`` (default ``OPENAI_API_KEY``;
    local servers need none), ``timeout`` (seconds per HTTP call, or an ``openai.Timeout``),
    ``organization``, ``project``, ``default_headers``, ``default_query``.
    """

    blocking = True
    default_max_tokens: int
    sizes_max_tokens: bool
    dtype: str | None

    def __init__(
        self,
        client: Any = None,
        *,
        base_url: str | list[str] | tuple[str, ...] | None = None,
        model: str | None = None,
        api: str = "chat",
        max_tokens: int | None = None,
        structured: bool | str = "auto",
        margins: Margins = DEFAULT_MARGINS,
        spread: bool = True,
        streamed: bool = False,
        reference: Backend | None = None,
        capabilities: Capabilities | None = None,
        **client_options: Any,
    ) -> None:
        margins = options.margins_from(margins, client_options)  # the older logprobs=, noise_floor=, dtype=, ...
        options.checked(model, max_tokens, structured, streamed)
        passed = options.client_options(client_options)
        self.api = options.api_of(api)
        self.model, self.default_max_tokens, self.structured = model, DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens, options.STRUCTURED[structured]
        self.sizes_max_tokens = max_tokens is None  # unset: a run whose schema needs more than 512 asks for it (schema._size)
        self.margins, self.logprobs, self.top_logprobs, self.noise_floor = margins, margins.logprobs, margins.top_logprobs, margins.noise_floor
        self.spread, self.streamed, self.dtype = bool(spread), streamed, margins.dtype_label
        self.capabilities = capabilities if capabilities is not None else SHARED
        if reference is not None and not isinstance(reference, Backend):
            raise ConfigError(f"reference must be an accord backend (models.local(...), models.openai(...)), got {type(reference).__name__}")
        self._referee = Referee(reference, self) if reference is not None else None
        self._learner = Learner(reference, margins.dtype_label) if reference is not None else None
        # No floor given and no reference: the server's noise is learned from its own ballots (._noise).
        learns = margins.learn and margins.logprobs and reference is None and margins.noise_floor is None
        self._noise = NoiseLearner() if learns else None
        self._flying: dict[str, int] = {}
        timeout = _timeout(passed.pop("timeout", None), client)
        self.servers, self._secrets = servers_from(client, base_url, passed.pop("api_key", None), timeout, passed)
        guard_logs(self._secrets)
        self._models: dict[str, str] = {}
        self._turn = 0
        self._lock = threading.Lock()
        self._spreader = spreading.Spreader()

    # -- what the core reads ---------------------------------------------------------------------

    @property
    def one_at_a_time(self) -> bool:  # spreading: one ballot of a prompt at a time
        return self.spread

    @property
    def constrains(self) -> bool:  # computed from what the servers are known to do
        """True when every server is known to honour ``response_format`` (or ``structured=True``)."""
        if self.structured != "auto":
            return self.structured == "on"
        return all(known is not None and known.response_format == "honoured" for known in self._known_all())

    def constrains_for(self, schema: Any) -> bool:
        """Whether this schema's shape is enforced by the server (``response_format`` carries
        every schema with a JSON Schema, bare types wrapped; not a grammar)."""
        return self.constrains and format_for(schema)[0] is not None

    def enforces(self, schema: Any) -> bool:
        """Whether ``response_format`` goes with this schema unless a server refuses it: fixed by
        ``structured=`` and the schema, before any probe (the ledger key's version reads it)."""
        return self.structured != "off" and format_for(schema)[0] is not None

    def wraps(self, schema: Any) -> bool:  # response_format carries it as {"answer": ...}, unless a server refuses it
        refused = any(known is not None and known.response_format in ("ignored", "rejected") for known in self._known_all())
        return self.enforces(schema) and format_for(schema)[1] and not refused

    @property
    def gives_margins(self) -> bool:  # computed: logprobs, a floor, servers that return them
        """True when logprobs are asked for, no server is known to drop them, and a floor is known."""
        if not self.logprobs or self.noise() is None:
            return False
        return all(known is None or known.logprobs not in ("ignored", "rejected") for known in self._known_all())

    @property
    def reference(self) -> Backend | None:  # the reference, asked in this server's format
        """The reference deployment, as this server's format asks it (:class:`._referee.Referee`)."""
        return self._referee

    def noise(self) -> Noise | None:
        """The ``noise_floor`` given, else the floor measured for every server (the largest):
        with a reference that can learn it, the one learned against the reference (an infinite
        floor until then: every first ballot goes to the reference); else the calibrated one.
        None while any server's model is unknown or unmeasured (then the gate stands aside)."""
        if self.noise_floor is not None:
            return Noise(float(self.noise_floor), self.dtype)
        floors = []
        for server in self.servers:
            model = self._model_of(server)
            floor = floor_for(self._learner, server.shown, model, self.dtype) if model else None
            if floor is None:
                if self._referee is not None:
                    return Noise(math.inf, self.dtype)
                if self._noise is None:
                    return None  # learned from the servers' own ballots: the gate reads its distribution (._noise)
                return Noise(math.inf, self.dtype, learned=LearnedView(self._noise, [(s.shown, self._model_of(s)) for s in self.servers]))
            floors.append(floor)
        return Noise(max(floors), self.dtype)

    @property
    def fingerprint(self) -> str:  # computed from the model, the servers and the API
        """The logical identity (ledger key): model and the endpoints called. Without ``model=`` it
        reads ``server-default``, the same before and after the server was asked for its model.

        The endpoints are the servers' base URLs for chat completions, as they always were (the
        answers a ledger holds from chat runs still replay), and ``{base_url}/responses`` for the
        Responses API: the two can compute different answers from one prompt (a provider may
        apply its own defaults, templates or reasoning to one API and not the other; vLLM renders
        and parses each through its own code), so a ledger keeps their answers apart."""
        return f"openai:{self.model or 'server-default'}@{'|'.join(self._api.endpoint(s.shown) for s in self.servers)}"

    def describe(self) -> dict[str, object]:
        servers = []
        for server in self.servers:
            model = self._model_of(server)
            known = self.capabilities.get(self._key(server, model)).to_dict() if model else None
            servers.append({"url": server.shown, "model": model, "capabilities": known})
        noise = self.noise()
        gate, source = gate_said(self, noise)
        return {
            "backend": type(self).__name__,
            "fingerprint": self.fingerprint,
            "api": self.api,
            "structured": self.structured,
            "servers": servers,
            "noise_floor": None if noise is None or math.isinf(noise.floor or 0.0) else noise.floor,
            "noise_floor_from": source,
            "gate": gate,
            **({"dtype": self.dtype} if self.dtype else {}),
            "spread": self.spread,
            "neighbours": neighbours_said(self.spread, self.neighbours),
            **({"noise": self._noise.summaries([(s.shown, self._model_of(s)) for s in self.servers])} if self._noise is not None else {}),
            **({"reference": self._referee.describe()} if self._referee is not None else {}),
        }

    def _model_of(self, server: Server) -> str | None:
        """The model asked for, or the one the server said it serves (None: not asked yet)."""
        return self.model or self._models.get(server.shown)

    def _known_all(self) -> list[Known | None]:
        found: list[Known | None] = []
        for server in self.servers:
            model = self._model_of(server)
            found.append(self.capabilities.get(self._key(server, model)) if model else None)
        return found

    # -- the drivers: spread (._spread), then the exchange (._exchange), then the learner (._learning)

    def generate(self, request: Request) -> Completion:
        if not self.spread:
            return self._drive(request, self._next_server())
        with self._spreader.hold(request):  # one ballot of a prompt at a time
            server = self._next_server()
            neighbours = self._neighbours(request, server)
            with spreading.beside(server.fresh_async_client, neighbours, self._api.call.endpoint) as sent:
                completion = self._drive(request, server, len(neighbours))
            return spreading.noted(completion, sent)

    async def agenerate(self, request: Request) -> Completion:
        if not self.spread:
            return await self._adrive(request, self._next_server())
        async with self._spreader.ahold(request):
            server = self._next_server()
            neighbours = self._neighbours(request, server)
            async with spreading.abeside(server.async_client(), neighbours, self._api.call.endpoint) as sent:
                completion = await self._adrive(request, server, len(neighbours))
            return spreading.noted(completion, sent)

    @property
    def neighbours(self) -> bool:  # spreading, and every server the user's own (:mod:`._spread`)
        """Whether ballots after the first go with batch neighbours (never to a hosted API)."""
        return self.spread and all(self_hosted(server.shown) for server in self.servers)

    def _neighbours(self, request: Request, server: Server) -> list[dict[str, Any]]:
        """The batch neighbours of this ballot (:mod:`._spread`), as this backend's API sends them."""
        if not self.neighbours:
            return []
        max_tokens = request.settings.max_tokens or self.default_max_tokens
        busy = self._noise.loads.others(server.shown) if self._noise is not None else 0  # the server's other traffic
        return [self._api.spell(params) for params in self._spreader.neighbours_for(request.ballot, self._model_of(server), max_tokens, busy)]

    def _drive(self, request: Request, server: Server, neighbours: int = 0) -> Completion:
        with self._in_flight(server):
            completion = drivers.drive(self._exchange(request, server), streamed=self.streamed)
            return self._taught(request, server, completion, neighbours)

    async def _adrive(self, request: Request, server: Server, neighbours: int = 0) -> Completion:
        with self._in_flight(server):
            completion = await drivers.adrive(self._exchange(request, server), streamed=self.streamed)
            if completion.steps is None:
                return completion
            return await asyncio.wrap_future(spawn(self._taught, request, server, completion, neighbours))

    @contextlib.contextmanager
    def _in_flight(self, server: Server) -> Iterator[None]:
        """This backend's requests on ``server`` counted while the block runs (the ballots' load),
        and the server's own count polled meanwhile (:mod:`._load`)."""
        if self._noise is not None:
            self._noise.loads.watch(server.shown)
        with self._lock:
            self._flying[server.shown] = self._flying.get(server.shown, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._flying[server.shown] -= 1
            if self._noise is not None:
                self._noise.loads.done(server.shown)

    def _taught(self, request: Request, server: Server, completion: Completion, neighbours: int = 0) -> Completion:
        """A ballot's tokens, learned from: compared with the reference's (:func:`._learning.taught`)
        or paired with the prompt's other ballots on this server (:mod:`._noise`), at its load."""
        if self._noise is not None and completion.steps is not None:
            return self._paired(request, server, completion, neighbours)
        return taught(self._learner, request, server.shown, self._model_of(server), completion)

    def _paired(self, request: Request, server: Server, completion: Completion, neighbours: int) -> Completion:
        assert self._noise is not None  # the ballot's tokens learned from at its load (._noise.NoiseLearner.ballot)
        with self._lock:
            own = self._flying.get(server.shown, 1) + neighbours
        return self._noise.ballot(server.shown, self._model_of(server), spreading.prompt_key(request), completion, own)

    def stream(self, request: Request) -> Iterator[str | Completion]:
        """:meth:`generate`, with the answer streamed (``stream=True``): its text deltas as they
        arrive, then the Completion (usage from the last chunk, or the Responses API's last event)."""
        server = self._next_server()
        for part in drivers.stream(self._exchange(request, server)):
            yield self._taught(request, server, part) if isinstance(part, Completion) else part

    async def astream(self, request: Request) -> AsyncIterator[str | Completion]:
        server = self._next_server()
        async with contextlib.aclosing(drivers.astream(self._exchange(request, server))) as parts:
            async for part in parts:
                if isinstance(part, Completion) and part.steps is not None:
                    yield await asyncio.wrap_future(spawn(self._taught, request, server, part))
                else:
                    yield part

    def telemetry(self) -> dict[str, str | int]:
        """``openai`` (the provider), the model asked for (or the one discovered), the server."""
        server = self.servers[0]
        attrs: dict[str, str | int] = {"gen_ai.provider.name": "openai"}
        model = self._model_of(server)
        if model:
            attrs["gen_ai.request.model"] = model
        if len(self.servers) == 1:
            url = urlsplit(server.shown)
            if url.hostname:
                attrs["server.address"] = url.hostname
            if url.port:
                attrs["server.port"] = url.port
        return attrs

    # -- a busy server, for ``accord audit --concurrency`` (._spread) ------------------------------

    async def agenerate_beside(self, request: Request, neighbours: int) -> Completion:
        """One call with ``neighbours`` batch neighbours of other lengths in flight beside it: the
        request as a busy server computes it (``accord audit --concurrency``)."""
        server = self._next_server()
        model = self.model or await self._amodel(server)
        params = self._spreader.numbered(model, neighbours, request.settings.max_tokens or self.default_max_tokens)
        async with spreading.abeside(server.async_client(), [self._api.spell(p) for p in params], self._api.call.endpoint) as sent:
            completion = await self._adrive(request, server, neighbours)
        return spreading.noted(completion, sent)

    def traffic(self, count: int, max_tokens: int = 64) -> Any:
        """``async with backend.traffic(n):`` n requests of other lengths always in flight on the
        first server while the block runs: a busy server (``accord audit --concurrency``)."""
        server = self.servers[0]

        @contextlib.asynccontextmanager
        async def busy() -> AsyncIterator[None]:
            model = self.model or await self._amodel(server)
            params = lambda turn: self._api.spell(spreading.neighbour_params(model, turn, max_tokens // 2 + turn % 4 * max_tokens // 4))  # noqa: E731
            async with spreading.traffic(server.async_client(), params, count, self._api.call.endpoint):
                yield

        return busy()

    async def _amodel(self, server: Server) -> str:
        return await drivers.adrive(self._discover(server))

    def close(self) -> None:
        """Close the sync clients accord built (async ones close with their event loop)."""
        for server in self.servers:
            server.close()


def _timeout(timeout: Any, client: Any) -> Any:
    if timeout is None:
        if client is not None:
            return None  # keep the client's own
        import openai

        return openai.Timeout(DEFAULT_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
    if isinstance(timeout, bool) or (isinstance(timeout, (int, float)) and not timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return timeout
