"""The streaming drivers: ``_drive``'s two, except that the calls of ballot slot 0 go through
``backend.stream`` and their text is handed out as it arrives.

    for item in stream(flow, backend):        # Delta(call, text) as slot 0 writes, ..., the Result
    async for item in astream(flow, backend): # the same, on the running event loop

Every call reports to one inbox (a text delta, or the call's Outcome), so a driver waits on one
thing: it yields the deltas as they come and sends the flow the Outcomes of the calls that
finished, or none once the step's timeout passed, exactly as ``drive`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, NamedTuple

from .._errors import BackendError
from .._result import Result
from .._threads import spawn
from .._types import Completion
from ..backends._base import Backend
from ._calls import Call, Outcome
from ._drive import _NO_LIMIT, Flow
from ._watch import Watch

STREAMED_SLOT = 0  # the first ballot: the one a reader sees as it is written


class Delta(NamedTuple):
    """Text a streamed call just wrote."""

    call: Call
    text: str


def stream(flow: Flow, backend: Backend, watch: Watch | None = None) -> Iterator[Delta | Result[Any]]:
    """Run a flow to its Result (the last item), yielding slot 0's text as it is written."""
    inbox: queue.SimpleQueue[Delta | Outcome] = queue.SimpleQueue()
    running = 0
    step = next(flow)
    while True:
        if watch is not None:
            watch.settle_now()
        for call in step.start:
            running += 1
            if backend.blocking:
                spawn(_feed, backend, call, inbox, watch)
            else:
                _feed(backend, call, inbox, watch)
        outcomes = []
        for item in _take(inbox, running, step.timeout):
            if isinstance(item, Outcome):
                outcomes.append(item)
            else:
                yield item
        running -= len(outcomes)
        try:
            step = flow.send(outcomes)
        except StopIteration as stop:
            if watch is not None:
                watch.settle_now()
            yield stop.value
            return  # calls still running are abandoned (daemon threads)


def _take(inbox: queue.SimpleQueue[Delta | Outcome], running: int, timeout: float | None) -> Iterator[Delta | Outcome]:
    """The deltas that arrive until a call finishes, then everything else already in; nothing
    past ``timeout`` seconds."""
    if not running:
        time.sleep(timeout or 0.0)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            item = inbox.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return
        yield item
        if isinstance(item, Outcome):
            break
    while True:
        try:
            yield inbox.get_nowait()
        except queue.Empty:
            return


def _feed(backend: Backend, call: Call, inbox: queue.SimpleQueue[Delta | Outcome], watch: Watch | None) -> None:
    backend = call.backend or backend  # a reference deciding
    start = time.perf_counter()
    try:
        with watch.scope(call) if watch is not None else contextlib.nullcontext():
            if call.slot == STREAMED_SLOT:
                completion = _streamed(backend, call, inbox, watch)
            else:
                completion = backend.generate(call.request)
        inbox.put(Outcome(call, completion, None, time.perf_counter() - start))
    except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
        inbox.put(Outcome(call, None, exc, time.perf_counter() - start))


def _streamed(backend: Backend, call: Call, inbox: queue.SimpleQueue[Delta | Outcome], watch: Watch | None) -> Completion:
    """Hand each text delta of the call to the inbox; return its Completion."""
    first = True
    for item in backend.stream(call.request):
        if isinstance(item, Completion):
            return item
        if item:
            if first and watch is not None:
                watch.chunk(call)
            first = False
            inbox.put(Delta(call, item))
    raise BackendError("the backend's stream ended without a Completion")


async def astream(
    flow: Flow, backend: Backend, limit: asyncio.Semaphore | None = None, watch: Watch | None = None
) -> AsyncIterator[Delta | Result[Any]]:
    """Run a flow to its Result (the last item) on the running event loop, yielding slot 0's text
    as it is written; ``limit`` bounds calls in flight."""
    inbox: asyncio.Queue[Delta | Outcome] = asyncio.Queue()
    tasks: set[asyncio.Future[None]] = set()
    getter: asyncio.Future[Delta | Outcome] | None = None
    running = 0
    step = next(flow)
    try:
        while True:
            if watch is not None:
                await watch.settle()
            for call in step.start:
                running += 1
                task = asyncio.ensure_future(_afeed(backend, call, inbox, limit, watch))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            outcomes = []
            if not running:
                await asyncio.sleep(step.timeout or 0.0)
            else:
                deadline = None if step.timeout is None else time.monotonic() + step.timeout
                while True:
                    getter = getter or asyncio.ensure_future(inbox.get())
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    done, _ = await asyncio.wait({getter}, timeout=wait)
                    if not done:
                        break
                    item, getter = getter.result(), None
                    if isinstance(item, Outcome):
                        outcomes.append(item)
                        while not inbox.empty():
                            more = inbox.get_nowait()
                            if isinstance(more, Outcome):
                                outcomes.append(more)
                            else:
                                yield more
                        break
                    yield item
            running -= len(outcomes)
            try:
                step = flow.send(outcomes)
            except StopIteration as stop:
                if watch is not None:
                    await watch.settle()
                yield stop.value
                return
    finally:
        for left in tasks:
            left.cancel()
        if getter is not None:
            getter.cancel()


async def _afeed(
    backend: Backend, call: Call, inbox: asyncio.Queue[Delta | Outcome], limit: asyncio.Semaphore | None, watch: Watch | None
) -> None:
    backend = call.backend or backend  # a reference deciding
    async with limit or _NO_LIMIT:
        start = time.perf_counter()
        try:
            with watch.scope(call) if watch is not None else contextlib.nullcontext():
                if call.slot == STREAMED_SLOT:
                    completion = await _acompletion(backend, call, inbox, watch)
                else:
                    completion = await backend.agenerate(call.request)
            inbox.put_nowait(Outcome(call, completion, None, time.perf_counter() - start))
        except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
            inbox.put_nowait(Outcome(call, None, exc, time.perf_counter() - start))


async def _acompletion(backend: Backend, call: Call, inbox: asyncio.Queue[Delta | Outcome], watch: Watch | None) -> Completion:
    first = True
    async for item in backend.astream(call.request):
        if isinstance(item, Completion):
            return item
        if item:
            if first and watch is not None:
                watch.chunk(call)
            first = False
            inbox.put_nowait(Delta(call, item))
    raise BackendError("the backend's stream ended without a Completion")
