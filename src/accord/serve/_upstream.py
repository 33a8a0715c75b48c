"""The upstream deployments: one HTTP connection pool for all (:class:`Pool`), and for each set
of upstreams (:class:`Upstreams`; one per routed model) an openai client per base URL, the
``accord.models.openai`` backends per model, and the calls the proxy makes itself (a request
passed through unchanged, to ``/chat/completions`` or ``/responses``, ``GET /models``, the
readiness check).

The backends are ``accord.models.openai(client, model=...)`` over an ``openai.AsyncOpenAI``
(:class:`~._client.LeanAsyncOpenAI`) whose transport is :class:`~._wire.Wire`, so capability detection, logprob margins, calibrated noise floors
(``accord calibrate --model openai:URL`` measures them under the same URL) and spreading apply
as they do for a Python program. The upstream key is ``OPENAI_API_KEY`` (or a routed model's
``key_env``) from the proxy's environment, read here only, and only put on requests to the upstream.

Whether an upstream serves ``POST /responses`` (or ``POST /messages``) is learned from the first
Responses (Messages) request passed through to it (a 404 or 405 that is not an API error: no such
route), and remembered. An upstream configured to speak Messages (``wire = "messages"``) has
``/messages``, and takes its key as ``x-api-key``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from .. import BackendError, models
from ..backends.openai._options import flat_margins
from ._backend import Upstream
from ._client import LeanAsyncOpenAI
from ._config import Config
from ._errors import watch_key
from ._http import LeanClient, Target
from ._http import usable as lean_usable
from ._routes import DEFAULT_KEY_ENV
from ._stream import Tracked
from ._wire import Wire, http_module

KEY_ENV = DEFAULT_KEY_ENV
NO_KEY = "unused"  # local servers need none; the openai client insists on one
ANTHROPIC_VERSION = "2023-06-01"  # the Messages API version an upstream that speaks it is asked for, unless the client names one
_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id", "request-id")
_MODELS_KEPT = 64  # (model, kind) pairs with their backends kept; the least recently used go


def _hand_over(backend: Any, client: Any) -> None:
    """Have ``backend`` (``models.openai(base_url=URL)``) send with the proxy's ``client``.

    Built from the URL, the backend names its server as written (its fingerprint, hence the
    ledger key, and the key its calibrated noise floor is stored under, are those of a program
    calling ``models.openai(base_url=URL)``); built from a client, it would name it with the
    openai client's trailing slash. So it is built from the URL and handed the client the way
    ``models.openai(client)`` keeps one: as each server's given async client.
    """
    for server in backend.servers:
        server.async_given = client


@functools.lru_cache(maxsize=64)
def _target(url: str) -> Target:
    return Target.of(url)


class Pool:
    """The HTTP machinery every upstream shares: one connection pool, the lean client, and the
    :class:`~._wire.Wire` whose ``--concurrency`` bound holds for all requests and models together."""

    def __init__(self, config: Config, observe: Callable[[int | None, float], None]) -> None:
        self.http = http_module()
        self.timeout = float(config.backend.get("timeout", 120.0))
        pool = max(2 * config.concurrency, 16)
        self.transport = self.http.AsyncHTTPTransport(limits=self.http.Limits(max_connections=pool, max_keepalive_connections=pool))
        self.lean = LeanClient(self.http) if lean_usable() else None
        self.wire = Wire(self.transport, config.concurrency, observe, self.lean)
        self.observe = observe
        timeout = self.http.Timeout(self.timeout, connect=min(10.0, self.timeout))
        self.sdk_http = self.http.AsyncClient(transport=self.wire, timeout=timeout, follow_redirects=True)
        self.sdk_http.accord_wire = self.wire  # ._client's lean create sends through it directly
        self.relay_http = self.http.AsyncClient(transport=self.transport, timeout=timeout)

    async def aclose(self) -> None:
        if self.lean is not None:
            with contextlib.suppress(Exception):
                await self.lean.aclose()
        for closing in (self.relay_http.aclose, self.sdk_http.aclose, self.transport.aclose):
            with contextlib.suppress(Exception):
                await closing()


class Upstreams:
    """One set of upstreams (see the module docstring): ``urls`` round-robin, the key from
    ``key_env``, ``backend`` the ``accord.models.openai`` options; ``wire`` what they speak:
    "chat" (chat completions) or "messages" (Anthropic's Messages API)."""

    def __init__(self, pool: Pool, urls: tuple[str, ...], *, key_env: str = KEY_ENV, backend: Mapping[str, Any] | None = None,
                 wire: str = "chat") -> None:  # fmt: skip
        self.pool = pool
        self.given = urls  # as written: the backends' fingerprints name them so
        self.urls = tuple(u.rstrip("/") for u in urls)
        self.http = pool.http
        self.lean = pool.lean
        self.wire = pool.wire
        self.relay_http = pool.relay_http
        self.observe = pool.observe
        options = dict(backend or {})
        self.timeout = float(options.pop("timeout", pool.timeout))
        self.structured = options.pop("structured", "auto")
        self.options = options
        watch_key(key_env)
        key = self._key = os.environ.get(key_env) or NO_KEY
        self.speaks = wire
        self._auth = {} if key == NO_KEY else {"x-api-key": key} if wire == "messages" else {"authorization": f"Bearer {key}"}
        self._plain = {"anthropic-version": ANTHROPIC_VERSION} if wire == "messages" else {}  # what every request to it carries
        self.clients = [LeanAsyncOpenAI(base_url=url, api_key=key, http_client=pool.sdk_http, max_retries=0) for url in self.urls]
        self._anthropic: list[Any] | None = None  # an upstream that speaks Messages: its anthropic clients, once built
        self._backends: OrderedDict[tuple[str, str], Upstream] = OrderedDict()
        self._turn = itertools.count()
        self.serves: dict[tuple[str, str], bool] = {}  # (path, URL): whether that upstream has the route, once learned

    def backend(self, model: str, kind: str) -> Upstream:
        """The backend of ``model`` on every upstream; ``kind`` "schema" (``response_format``
        where the upstream honours it) or "text" (never sent)."""
        key = (model, kind)
        found = self._backends.get(key)
        if found is not None:
            self._backends.move_to_end(key)
            return found
        if self.speaks == "messages":
            made = [self._claude(client, model, kind) for client in self._anthropic_clients()]
            return self._kept(key, Upstream(made, model))
        structured = self.structured if kind == "schema" else False
        made = []
        for url, client in zip(self.given, self.clients, strict=True):
            backend = models.openai(base_url=url, api_key=self._key, model=model, structured=structured, timeout=self.timeout,
                                    **flat_margins(self.options))
            _hand_over(backend, client.with_options(max_retries=0, timeout=self.timeout))
            made.append(backend)
        return self._kept(key, Upstream(made, model))

    def _kept(self, key: tuple[str, str], upstream: Upstream) -> Upstream:
        self._backends[key] = upstream
        while len(self._backends) > _MODELS_KEPT:
            self._backends.popitem(last=False)
        return upstream

    def _claude(self, client: Any, model: str, kind: str) -> Any:
        """``accord.models.anthropic`` for ``model`` on one upstream that speaks Messages, over ``client``."""
        structured = self.structured if kind == "schema" else "off"
        return models.anthropic(client, model=model, structured=structured, **self.options)

    def _anthropic_clients(self) -> list[Any]:
        """One ``anthropic.AsyncAnthropic`` per upstream, sending through the :class:`~._wire.Wire`
        (the ``--concurrency`` bound, what came back) where the SDK takes the pool's HTTP client.
        Built from a client, the backend's fingerprint names the base URL as ``models.anthropic(base_url=URL)``
        does (the SDK's, without ``/v1``)."""
        if self._anthropic is None:
            import anthropic

            made = []
            for url in self.urls:
                settings: dict[str, Any] = {"base_url": url.removesuffix("/v1"), "api_key": self._key, "max_retries": 0, "timeout": self.timeout}
                try:
                    made.append(anthropic.AsyncAnthropic(**settings, http_client=self.pool.sdk_http))
                except TypeError:  # the SDK is built on another HTTP package than the pool: its own, unbounded
                    made.append(anthropic.AsyncAnthropic(**settings))
            self._anthropic = made
        return self._anthropic

    def _url(self) -> str:
        return self.urls[next(self._turn) % len(self.urls)]

    # -- calls the proxy makes itself ------------------------------------------------------------

    async def relay(self, body: bytes, *, stream: bool, path: str = "chat/completions", url: str | None = None,
                    headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes | AsyncIterator[bytes]]:  # fmt: skip
        """POST ``body`` to the next upstream's ``/chat/completions`` (or ``path``) unchanged, with
        ``headers`` beside the key: its status, the headers worth passing on, and its body (an
        iterator of raw chunks when ``stream`` and the upstream streams). Raises BackendError when
        the upstream cannot be reached."""
        url = f"{url or self._url()}/{path}"
        sent = {"content-type": "application/json", **self._plain, **(headers or {}), **self._auth}
        if not stream and self.lean is not None:
            return await self._relay_lean(url, body, sent)
        request = self.relay_http.build_request("POST", url, content=body, headers=sent, timeout=self.timeout)
        bound, wire = self.wire.bound, self.wire
        await bound.acquire()
        wire.in_flight += 1
        start = time.perf_counter()
        try:
            response = await self.relay_http.send(request, stream=True)
        except BaseException as exc:
            bound.release()
            wire.in_flight -= 1
            self.observe(None, time.perf_counter() - start)
            if isinstance(exc, self.http.TransportError):
                raise BackendError(f"the upstream cannot be reached ({type(exc).__name__})") from None
            raise
        headers = {k: v for k, v in response.headers.items() if k.lower() in _KEPT_HEADERS}
        if not stream or not response.headers.get("content-type", "").startswith("text/event-stream"):
            try:
                content = await response.aread()
            finally:
                await response.aclose()
                bound.release()
                wire.in_flight -= 1
                self.observe(response.status_code, time.perf_counter() - start)
            return response.status_code, headers, content

        async def closed() -> None:
            bound.release()  # first: a dropped stream gives its slot back even if closing fails
            wire.in_flight -= 1
            self.observe(response.status_code, time.perf_counter() - start)
            await response.aclose()

        return response.status_code, headers, Tracked(response.aiter_raw(), closed)

    async def _relay_lean(self, url: str, body: bytes, sent: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        assert self.lean is not None
        headers = list(sent.items())
        async with self.wire.bound:
            self.wire.in_flight += 1
            start = time.perf_counter()
            try:
                answer = await self.lean.post(_target(url), headers, body, self.timeout)
            except self.http.TransportError as exc:
                self.observe(None, time.perf_counter() - start)
                raise BackendError(f"the upstream cannot be reached ({type(exc).__name__})") from None
            finally:
                self.wire.in_flight -= 1
        self.observe(answer.status, time.perf_counter() - start)
        kept = {k.decode("latin-1"): v.decode("latin-1") for k, v in answer.headers if k.lower().decode("latin-1") in _KEPT_HEADERS}
        return answer.status, kept, answer.body

    async def own(self, path: str, body: bytes, *, stream: bool, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes | AsyncIterator[bytes]] | None:
        """``body`` passed through to the next upstream's own ``POST /{path}`` (``responses``,
        ``messages``), as :meth:`relay`; None when that upstream has no such route (learned on its
        first such request, then remembered): the caller translates the request to chat
        completions instead. An upstream that speaks Messages always has ``/messages``."""
        url = self._url()
        if self.serves.get((path, url)) is False:
            return None
        status, kept, content = await self.relay(body, stream=stream, path=path, url=url, headers=headers)
        known = path == "messages" and self.speaks == "messages"
        if status in (404, 405) and isinstance(content, bytes) and not _api_error(content) and not known:
            self.serves[(path, url)] = False
            return None
        if status < 400:
            self.serves[(path, url)] = True
        return status, kept, content

    async def models(self) -> tuple[int, dict[str, str], bytes]:
        """The first upstream's ``GET /models``, as it answered."""
        try:
            response = await self.relay_http.get(f"{self.urls[0]}/models", headers={**self._plain, **self._auth}, timeout=self.timeout)
        except self.http.TransportError as exc:
            raise BackendError(f"the upstream cannot be reached ({type(exc).__name__})") from None
        headers = {k: v for k, v in response.headers.items() if k.lower() in _KEPT_HEADERS}
        return response.status_code, headers, response.content

    async def ready(self, timeout: float = 3.0) -> list[bool]:
        """Whether each upstream answers ``GET /models`` with a 2xx, within ``timeout``."""

        async def one(url: str) -> bool:
            try:
                response = await self.relay_http.get(f"{url}/models", headers={**self._plain, **self._auth}, timeout=timeout)
            except (self.http.TransportError, asyncio.TimeoutError):
                return False
            return bool(200 <= response.status_code < 300)

        return list(await asyncio.gather(*(one(u) for u in self.urls)))


def _api_error(content: bytes) -> bool:
    """Whether a 404's body is the server's API error (an unknown model, ...), not "no such route"."""
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and (isinstance(data.get("error"), dict) or data.get("object") == "error")
