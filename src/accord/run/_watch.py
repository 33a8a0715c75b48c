"""What a run reports as it goes: hooks and spans, the effects the loop itself never has.

One :class:`Watch` per run, made by the Stabilizer only when something listens (hooks, or a
tracer that records: ``_telemetry.tracer``); a run without one pays a ``None`` check at each
point below, nothing else. A run span the sampler dropped (not recording) makes no call span and
builds no attribute: its context is still current while the backend works, so what an HTTP
client makes there is dropped with it.

    Stabilizer   begin(prompt)        the run span, a child of the caller's current span
    loop         request(call)        a call is handed to the driver: ``before_request``
    drivers      scope(call)          around the backend call: its span starts and is current
    drivers      chunk(call)          a streamed call's first text (time to first chunk)
    loop         ballot(ballot)       a call recorded: ``after_ballot``, its span ends
    loop         retry(event)         a slot asks again: ``on_retry``, an event on the run span
    drivers      settle()/settle_now  awaits the async hooks called so far: before the calls of
                                      each step start, and once the run is over
    Stabilizer   end(result)          ``on_result`` or ``on_error``, the run span ends
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .._threads import run_coroutine
from ..observe import _hooks as hooks
from ..observe import _telemetry as telemetry
from ..read._extract import shape_of

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from .._result import Ballot, Result
    from ..backends._base import Backend
    from ..observe._hooks import Hooks, RetryEvent
    from ..schema._schema import Schema
    from ._calls import Call
    from ._policy import Policy


class Watch:
    """The hooks and spans of one run (see the module docstring)."""

    def __init__(
        self,
        listeners: Hooks | None,
        tracer: Any,
        *,
        content: bool,
        backend: Backend,
        schema: Schema[Any],
        policy: Policy,
        streaming: bool = False,
    ) -> None:
        self.hooks = listeners
        self.tracer = tracer
        self.content = content
        self.backend, self.schema, self.policy = backend, schema, policy
        self.streaming = streaming
        self.name = "chat"
        self.pending: list[Awaitable[None]] = []
        self.span: Any = None  # the run span
        self.recording = False  # the run span records: call spans are made, attributes built
        self.context: Any = None  # the context that holds it: the parent of every call span
        self.calls: dict[tuple[int, int], _Call] = {}  # (slot, attempt) -> its span, once started
        self.model: dict[str, str | int] = {}
        self.static: dict[str, Any] = {}  # the attributes every call span of the run shares

    # -- the run ---------------------------------------------------------------------------------

    def begin(self, prompt: Any) -> None:
        if self.tracer is None:
            return
        attrs = telemetry.run_start(self.schema.name, self.policy, prompt, self.content)
        self.span = self.tracer.start_span("accord.run", attributes=attrs)  # the sampler sees them
        self.context = telemetry.in_context(self.span)  # the caller's context, the run span current in it
        self.recording = self.span.is_recording()
        if self.recording:
            self.model = dict(self.backend.telemetry())
            self.static = telemetry.call_static(self.model, shape_of(self.schema))
            self.name = f"chat {self.model['gen_ai.request.model']}" if self.model.get("gen_ai.request.model") else "chat"

    def end(self, result: Result[Any]) -> None:
        """The run is over (a Result, or a failed one): the last hook, the run span ends."""
        if self.hooks is not None:
            if result.error is None and self.hooks.on_result is not None:
                hooks.call("on_result", self.hooks.on_result, result, self.pending)
            elif result.error is not None and self.hooks.on_error is not None:
                hooks.call("on_error", self.hooks.on_error, result.error, self.pending)
        if self.span is None:
            return
        self._end_calls()
        if self.recording:
            self.span.set_attributes(telemetry.run_end(result, self.content))
            if result.error is not None:
                self._failed(self.span, result.error)
        self.span.end()
        self.span = None

    def crash(self, exc: BaseException) -> None:
        """Something raised out of the run (not an output error: a bug, a bad configuration), or
        a stream's reader stopped reading (``GeneratorExit``: the run is abandoned, not failed)."""
        if self.span is None:
            return
        self._end_calls()
        if self.recording and isinstance(exc, GeneratorExit):
            self.span.set_attribute("accord.outcome", "abandoned")
        elif self.recording:
            self.span.set_attribute("error.type", type(exc).__name__)
            self._failed(self.span, exc)
        self.span.end()
        self.span = None

    def trace_id(self) -> str | None:
        """The run's trace id (32 hex digits), for log records; None without a span."""
        if self.span is None:
            return None
        return format(self.span.get_span_context().trace_id, "032x")

    def _end_calls(self) -> None:
        for call in self.calls.values():
            if call.span is not None:
                call.span.end()  # a call the run never recorded (the flow was abandoned)
        self.calls.clear()

    @staticmethod
    def _failed(span: Any, exc: BaseException) -> None:
        trace = telemetry.api()
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))

    # -- the loop's recording points -------------------------------------------------------------

    def request(self, call: Call) -> None:
        request = call.request
        if self.hooks is not None and self.hooks.before_request is not None:
            hooks.call("before_request", self.hooks.before_request, request, self.pending)
        if not self.recording:
            return
        streamed = self.streaming and call.slot == 0
        max_tokens = self.backend.default_max_tokens
        attrs = telemetry.call_start(request, self.static, max_tokens=max_tokens, streamed=streamed, content=self.content)
        self.calls[(call.slot, request.attempt)] = _Call(self, attrs)

    def ballot(self, ballot: Ballot) -> None:
        if self.hooks is not None and self.hooks.after_ballot is not None:
            hooks.call("after_ballot", self.hooks.after_ballot, ballot, self.pending)
        found = self.calls.pop((ballot.slot, ballot.attempt), None)
        if found is None:
            return
        span = found.span if found.span is not None else found.start()  # cancelled before it started
        span.set_attributes(telemetry.call_end(ballot, self.content))
        if ballot.status == "error":
            trace = telemetry.api()
            error = ballot.error or {}
            span.add_event("exception", {"exception.type": str(error.get("type", "BackendError")), "exception.message": str(error.get("message", ""))})
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(error.get("message", ""))[:500]))
        span.end()

    def retry(self, event: RetryEvent) -> None:
        if self.hooks is not None and self.hooks.on_retry is not None:
            hooks.call("on_retry", self.hooks.on_retry, event, self.pending)
        if self.recording:
            self.span.add_event("accord.retry", telemetry.retry_event(event))

    # -- the drivers' ----------------------------------------------------------------------------

    def scope(self, call: Call) -> AbstractContextManager[Any]:
        """Where the backend works on ``call`` (once it may start: after a concurrency bound):
        its span starts there and is the current one."""
        found = self.calls.get((call.slot, call.request.attempt))
        if found is not None:
            return found
        if self.span is not None:  # a run span the sampler dropped: its context is the current one
            return _Current(self)
        return contextlib.nullcontext()

    def chunk(self, call: Call) -> None:
        """The first text of a streamed call arrived."""
        found = self.calls.get((call.slot, call.request.attempt))
        if found is not None and found.span is not None:
            found.span.set_attribute("gen_ai.response.time_to_first_chunk", time.perf_counter() - found.started)

    async def settle(self) -> None:
        """Await the async hooks called so far, in the order they were called."""
        while self.pending:
            waiting, self.pending = self.pending, []
            for awaitable in waiting:
                await awaitable

    def settle_now(self) -> None:
        """:meth:`settle` from sync code."""
        if self.pending:
            run_coroutine(self.settle())


class _Call:
    """One call's span: its request attributes, then the span once the call starts. As a context
    manager (:meth:`Watch.scope`), the span starts and is the current one inside the block, as in
    ``trace.use_span`` without its exception handling (the drivers catch everything)."""

    __slots__ = ("attrs", "span", "started", "token", "watch")

    def __init__(self, watch: Watch, attrs: dict[str, Any]) -> None:
        self.watch = watch
        self.attrs = attrs
        self.span: Any = None
        self.started = 0.0
        self.token: Any = None

    def start(self) -> Any:
        watch = self.watch
        self.span = watch.tracer.start_span(watch.name, context=watch.context, kind=telemetry.CLIENT, attributes=self.attrs)
        self.started = time.perf_counter()
        return self.span

    def __enter__(self) -> Any:
        # on the run's context (the caller's, in a worker thread too), the call span current in it
        self.token = telemetry.attach(telemetry.in_context(self.start(), self.watch.context))
        return self.span

    def __exit__(self, *exc: object) -> None:
        telemetry.detach(self.token)


class _Current:
    """A span made current inside the block, as :class:`_Call` does (here: a run span the sampler
    dropped, so that what the backend makes is dropped with it)."""

    __slots__ = ("context", "span", "token")

    def __init__(self, watch: Watch) -> None:
        self.span = watch.span
        self.context = watch.context
        self.token: Any = None

    def __enter__(self) -> Any:
        self.token = telemetry.attach(self.context)
        return self.span

    def __exit__(self, *exc: object) -> None:
        telemetry.detach(self.token)
