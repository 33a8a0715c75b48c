"""The upstream deployments: one HTTP connection pool, one openai client per base URL, the
``accord.models.openai`` backends per model, and the calls the proxy makes itself (a request
passed through unchanged, ``GET /models``, the readiness check).

The backends are ``accord.models.openai(client, model=...)`` over an ``openai.AsyncOpenAI``
(:class:`~._client.LeanAsyncOpenAI`) whose transport is :class:`~._wire.Wire`, so capability detection, logprob margins, calibrated noise floors
(``accord calibrate --model openai:URL`` measures them under the same URL) and spreading apply
as they do for a Python program. The upstream key is ``OPENAI_API_KEY`` from the proxy's
environment, read here only, and only put on requests to the upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from .. import BackendError, models
from ._backend import Upstream
from ._client import LeanAsyncOpenAI
from ._config import Config
from ._http import LeanClient, Target
from ._http import usable as lean_usable
from ._stream import Tracked
from ._wire import Wire, http_module

KEY_ENV = "OPENAI_API_KEY"
NO_KEY = "unused"  # local servers need none; the openai client insists on one
_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-request-id")
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


class Upstreams:
    """Everything that talks to the upstreams (see the module docstring)."""

    def __init__(self, config: Config, observe: Callable[[int | None, float], None]) -> None:
        self.config = config
        self.urls = tuple(u.rstrip("/") for u in config.upstreams)
        self.http = http_module()
        options = dict(config.backend)
        self.timeout = float(options.pop("timeout", 120.0))
        self.structured = options.pop("structured", "auto")
        self.options = options
        pool = max(2 * config.concurrency, 16)
        self.transport = self.http.AsyncHTTPTransport(limits=self.http.Limits(max_connections=pool, max_keepalive_connections=pool))
        self.lean = LeanClient(self.http) if lean_usable() else None
        self.wire = Wire(self.transport, config.concurrency, observe, self.lean)
        self.observe = observe
        key = self._key = os.environ.get(KEY_ENV) or NO_KEY
        self._auth = {"authorization": f"Bearer {key}"} if key != NO_KEY else {}
        timeout = self.http.Timeout(self.timeout, connect=min(10.0, self.timeout))
        sdk_http = self.http.AsyncClient(transport=self.wire, timeout=timeout, follow_redirects=True)
        sdk_http.accord_wire = self.wire  # ._client's lean create sends through it directly
        self.relay_http = self.http.AsyncClient(transport=self.transport, timeout=timeout)
        self.clients = [LeanAsyncOpenAI(base_url=url, api_key=key, http_client=sdk_http, max_retries=0) for url in self.urls]
        self._backends: OrderedDict[tuple[str, str], Upstream] = OrderedDict()
        self._turn = itertools.count()

    def backend(self, model: str, kind: str) -> Upstream:
        """The backend of ``model`` on every upstream; ``kind`` "schema" (``response_format``
        where the upstream honours it) or "text" (never sent)."""
        key = (model, kind)
        found = self._backends.get(key)
        if found is not None:
            self._backends.move_to_end(key)
            return found
        structured = self.structured if kind == "schema" else False
        made = []
        for url, client in zip(self.config.upstreams, self.clients, strict=True):
            backend = models.openai(base_url=url, api_key=self._key, model=model, structured=structured, timeout=self.timeout, **self.options)
            _hand_over(backend, client.with_options(max_retries=0, timeout=self.timeout))
            made.append(backend)
        upstream = Upstream(made, model)
        self._backends[key] = upstream
        while len(self._backends) > _MODELS_KEPT:
            self._backends.popitem(last=False)
        return upstream

    def _url(self) -> str:
        return self.urls[next(self._turn) % len(self.urls)]

    # -- calls the proxy makes itself ------------------------------------------------------------

    async def relay(self, body: bytes, *, stream: bool) -> tuple[int, dict[str, str], bytes | AsyncIterator[bytes]]:
        """POST ``body`` to the next upstream's ``/chat/completions`` unchanged: its status, the
        headers worth passing on, and its body (an iterator of raw chunks when ``stream``).
        Raises BackendError when the upstream cannot be reached."""
        url = f"{self._url()}/chat/completions"
        if not stream and self.lean is not None:
            return await self._relay_lean(url, body)
        request = self.relay_http.build_request("POST", url, content=body, headers={"content-type": "application/json", **self._auth})
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

    async def _relay_lean(self, url: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self.lean is not None
        headers = [("content-type", "application/json"), *self._auth.items()]
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

    async def models(self) -> tuple[int, dict[str, str], bytes]:
        """The first upstream's ``GET /models``, as it answered."""
        try:
            response = await self.relay_http.get(f"{self.urls[0]}/models", headers=self._auth)
        except self.http.TransportError as exc:
            raise BackendError(f"the upstream cannot be reached ({type(exc).__name__})") from None
        headers = {k: v for k, v in response.headers.items() if k.lower() in _KEPT_HEADERS}
        return response.status_code, headers, response.content

    async def ready(self, timeout: float = 3.0) -> list[bool]:
        """Whether each upstream answers ``GET /models`` with a 2xx, within ``timeout``."""

        async def one(url: str) -> bool:
            try:
                response = await self.relay_http.get(f"{url}/models", headers=self._auth, timeout=timeout)
            except (self.http.TransportError, asyncio.TimeoutError):
                return False
            return bool(200 <= response.status_code < 300)

        return list(await asyncio.gather(*(one(u) for u in self.urls)))

    async def aclose(self) -> None:
        if self.lean is not None:
            with contextlib.suppress(Exception):
                await self.lean.aclose()
        with contextlib.suppress(Exception):
            await self.relay_http.aclose()
        with contextlib.suppress(Exception):
            await self.transport.aclose()
