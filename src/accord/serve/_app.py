"""The ASGI app: its routes, and what every request goes through.

    POST /v1/chat/completions   decided (a schema, a tool, a free-text vote) or passed through
    POST /v1/responses          the same, asked in the Responses API (``._responses_api``)
    POST /v1/messages           the same, asked in Anthropic's Messages API (``._messages_api``); its errors in Anthropic's shape
    GET  /v1/models             the upstream's, forwarded; the configured names when routing by model
    GET  /health                the process answers
    GET  /ready                 the upstreams answer (and the server is not shutting down)
    GET  /metrics               Prometheus (``._metrics``)

A chat, Responses or Messages request, in order: shutting down (503), the client key (401), the queue
(429 past ``--concurrency`` + ``--queue`` requests at once), the body (413 past ``--max-body``,
400 when it is not JSON), its model's Deployment (``._router``; 404 for a name no route has),
the Job (``._translate``, ``._responses_api``, ``._messages_api``; 400s), then the decision (``._decide``) or the
pass-through. The decision runs as a task beside a watch on the connection: a client that
leaves cancels it, so its ballots are cancelled and no upstream call is orphaned. Each request
has its server span and one log line (``._observe``), written with its metrics once the answer
is sent (a stream's: as it starts), so neither delays the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import BackendError, Ledger
from . import _messages_api as messages_api
from . import _messages_events as messages_events
from . import _messages_out as messages_out
from ._auth import Keys
from ._config import Config
from ._decide import Decider
from ._errors import ApiError, from_run, refused, upstream
from ._handling import ClientGone, aiter_of, in_daemon_thread, read_body, unless_gone, warm_up
from ._metrics import Metrics
from ._observe import Line, Tracing, log
from ._responses import Reply, headers
from ._responses_api import chat_body, decides, echo, read_responses_job, refuse_state
from ._responses_events import events as response_events
from ._responses_out import decided, from_chat
from ._router import Deployment, Router
from ._stream import Tracked, events
from ._translate import Job, model_of, read_job
from ._wire import Tab

JSON = "application/json"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


class Proxy:
    """One ``accord serve``: its state, and the handlers of its routes."""

    def __init__(self, config: Config, *, tracer_provider: Any = None) -> None:
        self.config = config
        self.metrics = Metrics()
        self.router = Router(config, self.metrics.upstream)
        self.metrics.track_upstream(self.router.wire)
        self.ledger = Ledger(config.ledger) if config.ledger is not None else None
        self.decider = Decider(config, self.ledger, tracer_provider)
        self.keys = Keys(config.api_keys)
        self.tracing = Tracing(tracer_provider)
        self.active = 0  # chat, Responses and Messages requests being handled
        self.draining = False
        self.warm: asyncio.Future[None] | None = None  # the start-up warm-up (``_warm_up``), once started

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._wrapped(self.chat, "/v1/chat/completions"), methods=["POST"]),
            Route("/v1/responses", self._wrapped(self.responses, "/v1/responses"), methods=["POST"]),
            Route("/v1/messages", self._wrapped(self.messages, "/v1/messages"), methods=["POST"]),
            Route("/v1/models", self._wrapped(self.models, "/v1/models"), methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
            Route("/ready", self.ready, methods=["GET"]),
            Route("/metrics", self.prometheus, methods=["GET"]),
        ]
        handlers: Any = {404: self._not_found, 405: self._not_allowed}

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            speaks = {d.upstreams.speaks for d in self.router.deployments}
            self.warm = in_daemon_thread(functools.partial(warm_up, ("anthropic",) if "messages" in speaks else ()))
            try:
                yield
            finally:
                await self.router.aclose()
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
                    response = await self._answer(handler, request, line, anthropic=route == "/v1/messages")
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

    async def _answer(self, handler: Callable[[Request, Line], Awaitable[Response]], request: Request, line: Line, *,
                      anthropic: bool = False) -> Response:  # fmt: skip
        """The handler's answer, or its error in the route's shape (``anthropic``: Anthropic's)."""
        try:
            if self.draining:
                raise ApiError(503, "accord serve is shutting down: send this request to another replica", type="server_error",
                               code="shutting_down", headers={"connection": "close", "retry-after": "1"})  # fmt: skip
            self.keys.check(request.headers)
            response = await handler(request, line)
        except ApiError as exc:
            response = self._error(exc, line, anthropic)
        except ClientGone:
            self.metrics.disconnects.inc()
            line.status, line.error = 499, "client_disconnected"
            return Response(status_code=499)
        except Exception:  # noqa: BLE001 - a bug below is a 500 in the route's shape, logged
            log.exception("accord serve: internal error (request %s)", line.request_id)
            response = self._error(ApiError(500, "internal error in accord serve", type="server_error", code="internal_error"), line,
                                   anthropic)  # fmt: skip
        line.status = response.status_code
        response.headers["x-request-id"] = line.request_id
        if anthropic:
            response.headers["request-id"] = line.request_id  # where Anthropic's clients read it
        return response

    def _error(self, error: ApiError, line: Line, anthropic: bool = False) -> Response:
        self.metrics.errors.labels(error.type).inc()
        line.error = error.type
        body = error.anthropic(line.request_id) if anthropic else error.encoded()
        return Response(body, status_code=error.status, headers=error.headers, media_type=JSON)

    # -- POST /v1/chat/completions, /v1/responses and /v1/messages -----------------------------

    async def chat(self, request: Request, line: Line) -> Response:
        return await self._proxied(request, line, self._chat)

    async def responses(self, request: Request, line: Line) -> Response:
        return await self._proxied(request, line, self._responses)

    async def messages(self, request: Request, line: Line) -> Response:
        return await self._proxied(request, line, self._messages)

    async def _proxied(self, request: Request, line: Line, handle: Callable[[Request, Line, bytes, Any], Awaitable[Response]]) -> Response:
        """What every API's request shares: the queue, the body, and the in-progress count."""
        config = self.config
        if self.active >= config.concurrency + config.queue:
            raise ApiError(429, f"accord serve is at capacity ({self.active} requests in progress): retry shortly",
                           type="rate_limit_error", code="queue_full", headers={"retry-after": "1"})  # fmt: skip
        self.active += 1
        streaming = False
        try:
            body = await read_body(request, config.max_body)
            try:
                parsed = json.loads(body)
            except ValueError as exc:
                raise ApiError(400, f"the request body is not valid JSON: {exc}", code="invalid_json") from None
            response = await handle(request, line, body, parsed)
            if isinstance(response, StreamingResponse):  # in progress until its last chunk is sent (a drain waits for it)
                response.body_iterator = Tracked(response.body_iterator, self._done)
                streaming = True
            return response
        finally:
            if not streaming:
                self.active -= 1

    def _done(self) -> None:
        self.active -= 1

    async def _chat(self, request: Request, line: Line, body: bytes, parsed: Any) -> Response:
        line.model = model_of(parsed)
        deployment = self.router.pick(line.model)
        job = read_job(parsed, deployment.default, max_k=deployment.max_k, max_seconds=deployment.max_seconds)
        line.mode = job.mode
        if job.mode != "pass":
            return await self._decided(request, job, deployment, line)
        return _passed(*await self._relay(request, deployment, _renamed(body, parsed, deployment), job.stream))

    async def _responses(self, request: Request, line: Line, body: bytes, parsed: Any) -> Response:
        line.model = model_of(parsed)
        deployment = self.router.pick(line.model)
        refuse_state(parsed)
        stream = parsed.get("stream", False)
        if not isinstance(stream, bool):
            raise ApiError(400, "stream must be true or false", param="stream", code="invalid_request")
        if decides(parsed):
            job = read_responses_job(parsed, deployment.default, max_k=deployment.max_k, max_seconds=deployment.max_seconds)
            line.mode = job.mode
            if job.mode != "pass":
                return await self._decided(request, job, deployment, line)
        line.mode = "pass"
        return await self._pass_responses(request, line, deployment, _renamed(body, parsed, deployment), parsed)

    async def _pass_responses(self, request: Request, line: Line, deployment: Deployment, body: bytes, parsed: dict[str, Any]) -> Response:
        """A Responses request passed through: to the upstream's own ``/responses`` (unchanged), or,
        where it has none, as the chat completion it asks for, whose answer goes back as a response."""
        stream = bool(parsed.get("stream", False))
        relayed = await self._to_own(request, deployment, "responses", body, stream=stream)
        if relayed is not None:
            return relayed
        chat = {**chat_body(parsed), "model": deployment.upstream_model(line.model or "")}
        status, kept, content = await self._relay(request, deployment, _dumps(chat), False)
        if status >= 300 or not isinstance(content, bytes):  # the upstream's error, passed on as it is (the same shape)
            return Response(content if isinstance(content, bytes) else b"", status_code=status, headers=kept)
        try:
            made = from_chat(json.loads(content), echo(parsed), line.request_id, line.model or "")
        except ValueError as exc:
            raise ApiError(502, f"the upstream's chat completion cannot be read: {exc}", type="upstream_error", code="upstream_failed") from None
        if stream:
            return StreamingResponse(aiter_of(response_events(made)), media_type="text/event-stream", headers={"cache-control": "no-cache"})
        return Response(_dumps(made), media_type=JSON)

    async def _messages(self, request: Request, line: Line, body: bytes, parsed: Any) -> Response:
        messages_api.check(parsed)
        line.model = parsed["model"]
        deployment = self.router.pick(line.model)
        if messages_api.decides(parsed):
            job = messages_api.read_messages_job(parsed, deployment.default, max_k=deployment.max_k, max_seconds=deployment.max_seconds)
            line.mode = job.mode
            return await self._decided(request, job, deployment, line)
        line.mode = "pass"
        return await self._pass_messages(request, line, deployment, _renamed(body, parsed, deployment), parsed)

    async def _pass_messages(self, request: Request, line: Line, deployment: Deployment, body: bytes, parsed: dict[str, Any]) -> Response:
        """A Messages request passed through: to the upstream's own ``/messages`` (unchanged, with the
        client's ``anthropic-version`` and ``anthropic-beta``), or, where it has none, as the chat
        completion it asks for, whose answer (streamed: as it comes) goes back as a message."""
        stream = bool(parsed.get("stream", False))
        named = {k: v for k, v in request.headers.items() if k in ("anthropic-version", "anthropic-beta")}
        relayed = await self._to_own(request, deployment, "messages", body, stream=stream, headers=named)
        if relayed is not None:
            return relayed
        chat = {**messages_api.chat_body(parsed), "model": deployment.upstream_model(line.model or "")}
        if stream:
            chat.update(stream=True, stream_options={"include_usage": True})
        stops = parsed.get("stop_sequences") or ()
        status, kept, content = await self._relay(request, deployment, _dumps(chat), stream)
        if status >= 300:  # the upstream's error, in Anthropic's shape
            raise refused(status, content if isinstance(content, bytes) else b"", kept)
        if not isinstance(content, bytes):
            translated = messages_events.FromChat(line.request_id, line.model or "", stops).translate(content)
            return StreamingResponse(translated, media_type="text/event-stream", headers={"cache-control": "no-cache"})
        try:
            made = messages_out.from_chat(json.loads(content), line.request_id, line.model or "", stops)
        except ValueError as exc:
            raise ApiError(502, f"the upstream's chat completion cannot be read: {exc}", type="upstream_error", code="upstream_failed") from None
        if stream:  # the upstream answered whole: streamed as it is
            return StreamingResponse(aiter_of(messages_events.events(made)), media_type="text/event-stream", headers={"cache-control": "no-cache"})
        return Response(_dumps(made), media_type=JSON)

    async def _decided(self, request: Request, job: Job, deployment: Deployment, line: Line) -> Response:
        if self.warm is not None and not self.warm.done():
            await self.warm  # the first requests wait for the schema machinery, not the event loop
        tab = Tab(forward=job.forward, top_logprobs=job.top_logprobs if job.logprobs else None)
        result, key = await unless_gone(request, self.decider.decide(job, deployment, tab))
        reply = Reply(job, result, tab, line.request_id, key)
        line.calls, line.agreement, line.stable, line.stopped_because = result.calls, result.agreement, result.stable, result.stopped_because
        if result.error is not None:
            raise from_run(result.error, reply.accord, tab.retry_after())
        self.metrics.decided(result.calls, result.agreement, result.stable, result.usage.neighbour_requests)
        extra = headers(result, line.request_id)
        if job.api in ("responses", "messages"):
            made = decided(reply, line.request_id) if job.api == "responses" else messages_out.decided(reply, line.request_id)
            if job.stream:
                streamed = response_events(made) if job.api == "responses" else messages_events.events(made)
                return StreamingResponse(aiter_of(streamed), media_type="text/event-stream", headers={**extra, "cache-control": "no-cache"})
            return Response(_dumps(made), headers=extra, media_type=JSON)
        if job.stream:
            return StreamingResponse(aiter_of(events(reply)), media_type="text/event-stream", headers={**extra, "cache-control": "no-cache"})
        return Response(_dumps(reply.completion()), headers=extra, media_type=JSON)

    async def _to_own(self, request: Request, deployment: Deployment, path: str, body: bytes, *, stream: bool,
                      headers: dict[str, str] | None = None) -> Response | None:  # fmt: skip
        """``body`` passed through unchanged to the upstream's own ``/{path}`` (``responses``,
        ``messages``), its answer as it came; None where it has no such route."""
        try:
            relayed = await unless_gone(request, deployment.upstreams.own(path, body, stream=stream, headers=headers))
        except BackendError as exc:
            raise upstream(exc, None) from None
        return None if relayed is None else _passed(*relayed)

    async def _relay(self, request: Request, deployment: Deployment, body: bytes, stream: bool) -> tuple[int, dict[str, str], Any]:
        try:
            return await unless_gone(request, deployment.upstreams.relay(body, stream=stream))
        except BackendError as exc:
            raise upstream(exc, None) from None

    # -- the other routes ------------------------------------------------------------------------

    async def models(self, request: Request, line: Line) -> Response:
        if self.router.routed:
            return Response(self.router.models_body(), media_type=JSON)
        try:
            status, kept, content = await self.router.deployments[0].upstreams.models()
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
        body = await self.router.ready()
        return Response(json.dumps(body).encode(), status_code=200 if body["status"] == "ready" else 503, media_type=JSON)

    async def prometheus(self, request: Request) -> Response:
        try:
            self.keys.check(request.headers)
        except ApiError as exc:
            return Response(exc.encoded(), status_code=exc.status, media_type=JSON)
        content, kind = self.metrics.text()
        return Response(content, media_type=kind)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        error = ApiError(404, f"no route {request.method} {request.url.path} (accord serve has /v1/chat/completions, /v1/responses, /v1/messages and /v1/models)",
                         code="unknown_url")  # fmt: skip
        anthropic = request.url.path.startswith("/v1/messages/")  # count_tokens, batches: asked by Anthropic's clients
        return Response(error.anthropic() if anthropic else error.encoded(), status_code=404, media_type=JSON)

    async def _not_allowed(self, request: Request, exc: Exception) -> Response:
        error = ApiError(405, f"{request.method} is not allowed on {request.url.path}", code="method_not_allowed")
        return Response(error.encoded(), status_code=405, media_type=JSON)


def _passed(status: int, kept: dict[str, str], content: Any) -> Response:
    """An upstream's answer passed on as it came: whole, or streamed as it streams."""
    if isinstance(content, bytes):
        return Response(content, status_code=status, headers=kept)
    return StreamingResponse(content, status_code=status, headers=kept)


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _renamed(body: bytes, parsed: dict[str, Any], deployment: Deployment) -> bytes:
    """The request body as the upstream takes it: unchanged, but for the upstream's name of a routed model."""
    wanted = deployment.upstream_model(parsed["model"])
    return body if wanted == parsed["model"] else _dumps({**parsed, "model": wanted})


def create_app(config: Config, *, tracer_provider: Any = None) -> Starlette:
    """The ASGI app of ``accord serve`` for ``config`` (``tracer_provider``: where its spans go;
    default the global one)."""
    proxy = Proxy(config, tracer_provider=tracer_provider)
    app = proxy.app()
    app.state.proxy = proxy
    return app

