"""The ASGI app: its routes, and what every request goes through.

    POST /v1/chat/completions   decided (a schema, a tool, a free-text vote) or passed through
    GET  /v1/models             the upstream's, forwarded
    GET  /health                the process answers
    GET  /ready                 the upstreams answer (and the server is not shutting down)
    GET  /metrics               Prometheus (``._metrics``)

A chat request, in order: shutting down (503), the client key (401), the queue (429 past
``--concurrency`` + ``--queue`` requests at once), the body (413 past ``--max-body``, 400 when
it is not JSON), the Job (``._translate``; 400s), then the decision (``._decide``) or the
pass-through. The decision runs as a task beside a watch on the connection: a client that
leaves cancels it, so its ballots are cancelled and no upstream call is orphaned. Each request
has its server span and one log line (``._observe``), written with its metrics once the answer
is sent (a stream's: as it starts), so neither delays the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import BackendError, Ledger
from ._auth import Keys
from ._config import Config
from ._decide import Decider
from ._errors import ApiError, from_run, upstream
from ._metrics import Metrics
from ._observe import Line, Tracing, log
from ._policy import server_default
from ._responses import Reply, headers
from ._stream import Tracked, events
from ._translate import Job, read_job
from ._upstream import Upstreams
from ._wire import Tab

JSON = "application/json"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class ClientGone(Exception):
    """The client closed the connection before its answer."""


class Proxy:
    """One ``accord serve``: its state, and the handlers of its routes."""

    def __init__(self, config: Config, *, tracer_provider: Any = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.upstreams = Upstreams(config, self.metrics.upstream)
        self.metrics.track_upstream(self.upstreams.wire)
        self.ledger = Ledger(config.ledger) if config.ledger is not None else None
        self.decider = Decider(config, self.upstreams, self.ledger, tracer_provider)
        self.default = server_default(config.policy, max_k=config.max_k, max_seconds=config.max_seconds)
        self.keys = Keys(config.api_keys)
        self.tracing = Tracing(tracer_provider)
        self.active = 0  # chat requests being handled
        self.draining = False
        self.warm: asyncio.Future[None] | None = None  # the start-up warm-up (``_warm_up``), once started

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._wrapped(self.chat, "/v1/chat/completions"), methods=["POST"]),
            Route("/v1/models", self._wrapped(self.models, "/v1/models"), methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/ready", self.ready, methods=["GET"]),
            Route("/metrics", self.prometheus, methods=["GET"]),
        ]
        handlers: Any = {404: self._not_found, 405: self._not_allowed}

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            self.warm = _in_daemon_thread(_warm_up)
            try:
                yield
            finally:
                await self.upstreams.aclose()
                if self.ledger is not None:
                    self.ledger.close()

        return Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)

    # -- what every /v1 request goes through ---------------------------------------------------------

    def _wrapped(self, handler: Callable[[Request, Line], Awaitable[Response]], route: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            start = time.perf_counter()
            given = request.headers.get("x-request-id", "")
            line = Line(request.method, request.url.path, given if _REQUEST_ID.fullmatch(given) else secrets.token_hex(12))
            self.metrics.in_flight.inc()
            try:
                with self.tracing.span(line, route, request.headers):
                    response = await self._answer(handler, request, line)
            finally:
                self.metrics.in_flight.dec()
            seconds = time.perf_counter() - start
            if type(response) is Response and response.background is None:  # after its bytes are sent: off the answer's path
                response.background = BackgroundTask(self._record_after, line, seconds)
            else:  # a stream (sent later, maybe never whole): now
                self._record(line, seconds)
            return response

        return endpoint

    def _record(self, line: Line, seconds: float) -> None:
        self.metrics.answered(line.mode, line.status, seconds)
        line.emit(seconds)

    async def _record_after(self, line: Line, seconds: float) -> None:  # async: Starlette runs a sync one in a thread
        self._record(line, seconds)

    async def _answer(self, handler: Callable[[Request, Line], Awaitable[Response]], request: Request, line: Line) -> Response:
        try:
            if self.draining:
                raise ApiError(503, "accord serve is shutting down: send this request to another replica", type="server_error",
                               code="shutting_down", headers={"connection": "close", "retry-after": "1"})  # fmt: skip
            self.keys.check(request.headers)
            response = await handler(request, line)
        except ApiError as exc:
            response = self._error(exc, line)
        except ClientGone:
            self.metrics.disconnects.inc()
            line.status, line.error = 499, "client_disconnected"
            return Response(status_code=499)
        except Exception:  # noqa: BLE001 - a bug below is a 500 in OpenAI's shape, logged
            log.exception("accord serve: internal error (request %s)", line.request_id)
            response = self._error(ApiError(500, "internal error in accord serve", type="server_error", code="internal_error"), line)
        line.status = response.status_code
        response.headers["x-request-id"] = line.request_id
        return response

    def _error(self, error: ApiError, line: Line) -> Response:
        self.metrics.errors.labels(error.type).inc()
        line.error = error.type
        return Response(error.encoded(), status_code=error.status, headers=error.headers, media_type=JSON)

    # -- POST /v1/chat/completions ---------------------------------------------------------------

    async def chat(self, request: Request, line: Line) -> Response:
        config = self.config
        if self.active >= config.concurrency + config.queue:
            raise ApiError(429, f"accord serve is at capacity ({self.active} requests in progress): retry shortly",
                           type="rate_limit_error", code="queue_full", headers={"retry-after": "1"})  # fmt: skip
        self.active += 1
        streaming = False
        try:
            body = await _body(request, config.max_body)
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
            job = read_job(parsed, self.default, max_k=config.max_k, max_seconds=config.max_seconds)
            line.mode, line.model = job.mode, job.model
            response = await (self._pass(request, body, job) if job.mode == "pass" else self._decided(request, job, line))
            if isinstance(response, StreamingResponse):  # in progress until its last chunk is sent (a drain waits for it)
                response.body_iterator = Tracked(response.body_iterator, self._done)
                streaming = True
            return response
        finally:
            if not streaming:
                self.active -= 1

    def _done(self) -> None:
        self.active -= 1

    async def _decided(self, request: Request, job: Job, line: Line) -> Response:
        if self.warm is not None and not self.warm.done():
            await self.warm  # the first requests wait for the schema machinery, not the event loop
        tab = Tab(forward=job.forward, top_logprobs=job.top_logprobs if job.logprobs else None)
        result, key = await _unless_gone(request, self.decider.decide(job, tab))
        reply = Reply(job, result, tab, line.request_id, key)
        line.calls, line.agreement, line.stable, line.stopped_because = result.calls, result.agreement, result.stable, result.stopped_because
        if result.error is not None:
            raise from_run(result.error, reply.accord, tab.retry_after())
        self.metrics.decided(result.calls, result.agreement, result.stable)
        extra = headers(result, line.request_id)
        if job.stream:
            return StreamingResponse(_aiter(events(reply)), media_type="text/event-stream", headers={**extra, "cache-control": "no-cache"})
        content = json.dumps(reply.completion(), ensure_ascii=False, separators=(",", ":")).encode()
        return Response(content, headers=extra, media_type=JSON)

    async def _pass(self, request: Request, body: bytes, job: Job) -> Response:
        try:
            status, kept, content = await _unless_gone(request, self.upstreams.relay(body, stream=job.stream))
        except BackendError as exc:
            raise upstream(exc, None) from None
        if isinstance(content, bytes):
            return Response(content, status_code=status, headers=kept)
        return StreamingResponse(content, status_code=status, headers=kept)

    # -- the other routes ------------------------------------------------------------------------

    async def models(self, request: Request, line: Line) -> Response:
        try:
            status, kept, content = await self.upstreams.models()
        except BackendError as exc:
            raise upstream(exc, None) from None
        return Response(content, status_code=status, headers=kept)

    async def health(self, request: Request) -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    async def ready(self, request: Request) -> Response:
        if self.draining:
            return Response(b'{"status":"shutting down"}', status_code=503, media_type=JSON)
        if self.warm is not None and not self.warm.done():
            return Response(b'{"status":"starting"}', status_code=503, media_type=JSON)
        answered = await self.upstreams.ready()
        body = {"status": "ready" if all(answered) else "not ready", "upstreams": [{"index": i, "ok": ok} for i, ok in enumerate(answered)]}
        return Response(json.dumps(body).encode(), status_code=200 if all(answered) else 503, media_type=JSON)

    async def prometheus(self, request: Request) -> Response:
        try:
            self.keys.check(request.headers)
        except ApiError as exc:
            return Response(exc.encoded(), status_code=exc.status, media_type=JSON)
        content, kind = self.metrics.text()
        return Response(content, media_type=kind)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        error = ApiError(404, f"no route {request.method} {request.url.path} (accord serve has /v1/chat/completions and /v1/models)",
                         code="unknown_url")  # fmt: skip
        return Response(error.encoded(), status_code=404, media_type=JSON)

    async def _not_allowed(self, request: Request, exc: Exception) -> Response:
        error = ApiError(405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed")
        return Response(error.encoded(), status_code=405, media_type=JSON)


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused with a 413 past ``limit`` bytes (said or read)."""
    too_big = ApiError(413, f"the request body is larger than this server's --max-body ({limit} bytes)", code="request_too_large")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


async def _unless_gone(request: Request, work: Awaitable[Any]) -> Any:
    """``work``'s value, or ClientGone once the client closes the connection (``work`` is then cancelled)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        done, _ = await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        watch.cancel()
        raise
    if task in done:
        watch.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    raise ClientGone


async def _disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


async def _aiter(chunks: Any) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _in_daemon_thread(work: Callable[[], None]) -> asyncio.Future[None]:
    """``work`` in a daemon thread (a shutdown never waits for it); a future of the running loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def run() -> None:
        try:
            work()
        except Exception:  # noqa: BLE001 - a failed warm-up only means the first request pays for it
            log.warning("accord serve: warming up failed", exc_info=True)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(_settle, done)

    threading.Thread(target=run, name="accord-serve-warm-up", daemon=True).start()
    return done


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _warm_up() -> None:
    """What the first request would otherwise wait for, done in a worker thread at start-up: the
    JSON Schema validators (importing jsonschema and building the first validator: about 0.1 s)."""
    from .. import Schema

    Schema.of({"type": "object", "properties": {"warm": {"type": "string", "format": "date"}}, "required": ["warm"]}).validate({"warm": "2026-01-01"})


def create_app(config: Config, *, tracer_provider: Any = None) -> Starlette:
    """The ASGI app of ``accord serve`` for ``config`` (``tracer_provider``: where its spans go;
    default the global one)."""
    proxy = Proxy(config, tracer_provider=tracer_provider)
    app = proxy.app()
    app.state.proxy = proxy
    return app

