"""One model call as a driver (``_drive``) makes it: its Outcome goes to the driver's inbox and,
when the run streams, so does the text ballot slot 0 writes, as it arrives (:class:`Delta`,
through ``backend.stream``; a backend that cannot stream gives its whole text as one delta).

    call(backend, call, inbox.put, watch, streaming)          in a worker thread, or in place
    task = start(backend, call, inbox, watch, streaming)   on the running event loop

A call runs inside ``watch.scope(call)`` when the run has a watch (its span current). A failed call
is an Outcome with its error: the loop maps it to a BackendError, or raises it when it must
propagate (KeyboardInterrupt, SystemExit; ``_loop.escapes``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from .._errors import BackendError
from .._types import Completion
from ..backends._base import Backend
from ._calls import Call, Delta, Outcome, Queued
from ._watch import Watch

STREAMED_SLOT = 0  # the first ballot: the one a reader sees as it is written

Put = Callable[[Any], None]  # an inbox's put: Deltas, Outcomes, Queued notices


def call(backend: Backend, call: Call, put: Put, watch: Watch | None, streaming: bool) -> None:
    """Make ``call`` (on the backend it names, a reference deciding, else ``backend``); put its Outcome."""
    backend = call.backend or backend
    start = time.perf_counter()
    streamed = streaming and call.slot == STREAMED_SLOT
    try:
        if watch is None:
            completion = _streamed(backend, call, put, watch) if streamed else backend.generate(call.request)
        else:
            with watch.scope(call):
                completion = _streamed(backend, call, put, watch) if streamed else backend.generate(call.request)
        put(Outcome(call, completion, None, time.perf_counter() - start))
    except BaseException as exc:  # noqa: BLE001 - handed to the loop (which raises a KeyboardInterrupt)
        put(Outcome(call, None, exc, time.perf_counter() - start))


def _streamed(backend: Backend, call: Call, put: Put, watch: Watch | None) -> Completion:
    """Put each text delta of the call; return its Completion."""
    first = True
    for item in backend.stream(call.request):
        if isinstance(item, Completion):
            return item
        if item:
            if first and watch is not None:
                watch.chunk(call)
            first = False
            put(Delta(call, item))
    raise BackendError("the backend's stream ended without a Completion")


def start(
    backend: Backend, call: Call, inbox: asyncio.Queue[Any], watch: Watch | None, streaming: bool, *,
    limit: asyncio.Semaphore | None = None,
) -> asyncio.Future[None]:
    """Make ``call`` in a task on the running event loop. Under a ``limit`` (shared with other
    runs: ``map``) the call holds a slot until its task is done, cancelled or not; one that must
    wait for a free slot says so (:class:`Queued`), and again once it reaches the model."""
    task = asyncio.ensure_future(_acall(backend, call, inbox, watch, streaming, limit=limit))
    task.add_done_callback(functools.partial(_lost, call, inbox))
    return task


async def _acall(
    backend: Backend, call: Call, inbox: asyncio.Queue[Any], watch: Watch | None, streaming: bool, *,
    limit: asyncio.Semaphore | None,
) -> None:
    if limit is not None:
        queued = limit.locked()
        if queued:
            inbox.put_nowait(Queued(call, started=False))
        await limit.acquire()
        if queued:
            inbox.put_nowait(Queued(call, started=True))
    try:
        inbox.put_nowait(await _outcome(call.backend or backend, call, inbox, watch, streaming))
    finally:
        if limit is not None:
            limit.release()


async def _outcome(backend: Backend, call: Call, inbox: asyncio.Queue[Any], watch: Watch | None, streaming: bool) -> Outcome:
    start = time.perf_counter()
    try:
        streamed = streaming and call.slot == STREAMED_SLOT
        if watch is None:
            completion = await (_astreamed(backend, call, inbox.put_nowait, watch) if streamed else backend.agenerate(call.request))
        else:
            with watch.scope(call):  # once the call may start: after its slot of a limit
                completion = await (_astreamed(backend, call, inbox.put_nowait, watch) if streamed else backend.agenerate(call.request))
        return Outcome(call, completion, None, time.perf_counter() - start)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or getattr(task, "cancelling", lambda: 1)():
            raise  # accord itself cancels this call (the run is over): let it
        return Outcome(call, None, exc, time.perf_counter() - start)  # the model function raised it: a failed call
    except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
        return Outcome(call, None, exc, time.perf_counter() - start)


async def _astreamed(backend: Backend, call: Call, put: Put, watch: Watch | None) -> Completion:
    first = True
    async for item in backend.astream(call.request):
        if isinstance(item, Completion):
            return item
        if item:
            if first and watch is not None:
                watch.chunk(call)
            first = False
            put(Delta(call, item))
    raise BackendError("the backend's stream ended without a Completion")


def _lost(call: Call, inbox: asyncio.Queue[Any], task: asyncio.Future[None]) -> None:
    """A task that ended cancelled without its Outcome was a model function raising CancelledError
    where a task cannot tell who cancelled it (Python 3.10); once the run is over, no one reads it."""
    if task.cancelled():
        inbox.put_nowait(Outcome(call, None, asyncio.CancelledError("the model call raised CancelledError"), 0.0))
