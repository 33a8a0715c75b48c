"""Claude's Messages API as a backend: ``accord.models.anthropic(...)``.

The official ``anthropic`` SDK does the HTTP (its retries off); this module decides what to send
and reads what comes back. One exchange (the calls behind one ballot, :mod:`._exchange`) is a
generator of operations (:mod:`._ops`) that the OpenAI backend's drivers send with the sync or
the async client, so the budget can cancel an in-flight request.

What Claude gives, and what accord does with it:

- **structured output**: the schema as ``output_config.format`` where the model takes it, one
  forced tool call where it does not (:mod:`._wire`; probed once per (server, model) with
  ``structured="auto"``, or named);
- **no logprobs**: the Messages API returns none, so no ballot has margins; the margin gate
  cannot settle a prompt on one ballot, and the vote over the ballots decides
  (:meth:`AnthropicBackend.describe` says so);
- **prompt caching**: the prefix a prompt's ballots share is marked cacheable when it is long
  enough to be cached (:mod:`._cache`), and the usage records the cache's writes and reads, which
  ``accord.Prices`` bills at their own rates.

Ballots of one prompt go one at a time (``spread=True``, :class:`accord.backends.openai._spread.Spreader`):
each after the previous is answered, so a ballot never shares a batch with its siblings and every
ballot after the first reads the cached prefix. No batch neighbours are sent: a hosted API bills
them, and its batching is not accord's to sample.

Every failure leaves as a :class:`~accord.BackendError` (:mod:`._errors`), retryable for
timeouts, dropped connections, 429, 529 and 5xx, with ``retry_after`` from the server. No API key
or URL credential appears in a Result, a log line or an error.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from ... import _check
from ..._errors import ConfigError
from ..._types import Completion, Request
from ...schema._schema import Schema
from .._base import DEFAULT_MAX_TOKENS
from ..openai import _drivers as drivers
from ..openai._errors import guard_logs
from ..openai._spread import Spreader
from ..openai._wire import format_for
from ._caps import SHARED, Capabilities
from ._clients import checked_options, server_from
from ._errors import LOGGERS
from ._exchange import Exchanges

DEFAULT_TIMEOUT = 120.0
DEFAULT_CONNECT_TIMEOUT = 10.0
STRUCTURED = ("auto", "output_config", "tool", "off")
NO_MARGINS = ("stood aside: the Messages API returns no logprobs, so no ballot has margins; the gate cannot settle a prompt "
              "on one ballot, and the vote decides")


class AnthropicBackend(Exchanges):
    """A backend over Claude's Messages API (or a server that speaks it: vLLM's ``/v1/messages``).

    ``client``: an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` (the other twin is
    derived), or None to build both from ``base_url`` (default ``ANTHROPIC_BASE_URL`` or
    Anthropic's API; a trailing ``/v1`` is dropped, the SDK appends ``/v1/messages``) and the
    client options. ``model``: the model name; None asks the server (one that serves exactly one
    model). ``max_tokens``: the output budget per call when the run sets none (the API requires
    one). ``structured``: "auto" (probe once per server and model whether it takes
    ``output_config``, else a forced tool call), "output_config", "tool", or "off" (the schema in
    the prompt only). ``spread``: the ballots of one prompt one at a time. ``cache_min_tokens``:
    the estimated prefix length from which a prompt is marked cacheable (None: the model's
    minimum cacheable length, :func:`._cache.minimum_for`). ``capabilities``: where learned server
    facts are kept (default: process-wide). ``**client_options`` go to the ``anthropic`` clients:
    ``api_key`` (default ``ANTHROPIC_API_KEY``), ``auth_token``, ``timeout`` (seconds per HTTP
    call, or an ``anthropic.Timeout``), ``default_headers``, ``default_query``.
    """

    blocking = True
    default_max_tokens: int
    sizes_max_tokens: bool

    def __init__(
        self,
        client: Any = None,
        *,
        base_url: str | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        structured: str = "auto",
        spread: bool = True,
        cache_min_tokens: int | None = None,
        capabilities: Capabilities | None = None,
        **client_options: Any,
    ) -> None:
        _checked(model, max_tokens, structured, spread, cache_min_tokens)
        passed = checked_options(client_options)
        self.model, self.default_max_tokens, self.structured = model, DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens, structured
        self.sizes_max_tokens = max_tokens is None  # a run whose schema needs more than 512 asks for it (schema._size)
        self.spread, self.cache_min_tokens = spread, cache_min_tokens
        self.capabilities = capabilities if capabilities is not None else SHARED
        timeout = _timeout(passed.pop("timeout", None), client)
        self.server, self._secrets = server_from(client, base_url, passed, timeout)
        guard_logs(self._secrets, LOGGERS)
        self._models: dict[str, str] = {}
        self._lock = threading.Lock()
        self._spreader = Spreader()

    # -- what the core reads ---------------------------------------------------------------------

    @property
    def one_at_a_time(self) -> bool:  # spreading: one ballot of a prompt at a time
        return self.spread

    @property
    def constrains(self) -> bool:  # computed from what the server is known to do
        """True when the schema goes as ``output_config`` (named, or the server is known to take
        it): Claude's structured outputs constrain the answer. A forced tool call is not counted:
        Claude follows the tool's schema, but nothing enforces it."""
        if self.structured != "auto":
            return self.structured == "output_config"
        model = self._model()
        return model is not None and self.capabilities.get((self.server.shown, model)).structured == "output_config"

    def constrains_for(self, schema: Schema[Any]) -> bool:
        """Whether this schema's shape is enforced by the server (``output_config`` carries every
        schema with a JSON Schema, bare types wrapped)."""
        return self.constrains and format_for(schema)[0] is not None

    def enforces(self, schema: Schema[Any]) -> bool:
        """Whether the schema goes with the call (``output_config`` or a forced tool call) unless the
        server refuses both: fixed by ``structured=`` and the schema, before any probe (the ledger
        key's version reads it)."""
        return self.structured != "off" and format_for(schema)[0] is not None

    @property
    def fingerprint(self) -> str:  # computed from the model and the base URL
        """The logical identity (ledger key): ``anthropic:MODEL@BASE_URL``. Without ``model=`` it
        reads ``server-default``, the same before and after the server was asked for its model."""
        return f"anthropic:{self.model or 'server-default'}@{self.server.shown}"

    def describe(self) -> dict[str, object]:
        model = self._model()
        known = self.capabilities.get((self.server.shown, model)).to_dict() if model else None
        return {
            "backend": type(self).__name__,
            "fingerprint": self.fingerprint,
            "structured": self.structured,
            "server": {"url": self.server.shown, "model": model, "capabilities": known},
            "logprobs": False,
            "gate": NO_MARGINS,
            "spread": self.spread,
            "cache": {"min_tokens": self.minimum(model) if model else self.cache_min_tokens,
                      "estimate": "characters / 4 of the prefix the ballots share"},
        }

    def telemetry(self) -> dict[str, str | int]:
        """``anthropic`` (the API spoken), the model asked for (or the one discovered), the server."""
        attrs: dict[str, str | int] = {"gen_ai.provider.name": "anthropic"}
        model = self._model()
        if model:
            attrs["gen_ai.request.model"] = model
        url = urlsplit(self.server.shown)
        if url.hostname:
            attrs["server.address"] = url.hostname
        if url.port:
            attrs["server.port"] = url.port
        return attrs

    def _model(self) -> str | None:
        """The model asked for, or the one the server said it serves (None: not asked yet)."""
        return self.model or self._models.get(self.server.shown)

    # -- the drivers: spread, then the exchange (._exchange) --------------------------------------

    def generate(self, request: Request) -> Completion:
        if not self.spread:
            return drivers.drive(self._exchange(request))
        with self._spreader.hold(request):  # one ballot of a prompt at a time
            return drivers.drive(self._exchange(request))

    async def agenerate(self, request: Request) -> Completion:
        if not self.spread:
            return await drivers.adrive(self._exchange(request))
        async with self._spreader.ahold(request):
            return await drivers.adrive(self._exchange(request))

    def close(self) -> None:
        """Close the sync client accord built (async ones close with their event loop)."""
        self.server.close()


def _checked(model: Any, max_tokens: Any, structured: Any, spread: Any, cache_min_tokens: Any) -> None:
    """A ConfigError for a model name, output budget, ``structured``, ``spread`` or ``cache_min_tokens`` it cannot take."""
    if model is not None and (not isinstance(model, str) or not model):
        raise ConfigError(f"model must be a non-empty string or None, got {model!r}")
    _check.integer("", "max_tokens", max_tokens, optional=True)
    if not isinstance(structured, str) or structured not in STRUCTURED:
        raise ConfigError(f"structured must be one of {', '.join(map(repr, STRUCTURED))}, got {structured!r}")
    _check.boolean("", "spread", spread)
    _check.integer("", "cache_min_tokens", cache_min_tokens, optional=True)


def _timeout(timeout: Any, client: Any) -> Any:
    if timeout is None:
        if client is not None:
            return None  # keep the client's own
        import anthropic

        return anthropic.Timeout(DEFAULT_TIMEOUT, connect=DEFAULT_CONNECT_TIMEOUT)
    if isinstance(timeout, bool) or (isinstance(timeout, (int, float)) and not timeout > 0):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return timeout
