"""The two drivers of the run loop: they only call the backend and wait; ``_loop`` decides
(which calls start, and when: one at a time for a ``one_at_a_time`` backend).

    for item in drive(flow, backend):          # in this thread, calls in worker threads
    async for item in adrive(flow, backend):   # on the running event loop, calls in tasks

Each yields the flow's Result last; before it, when ``streaming``, the text ballot slot 0 writes
as it arrives (:class:`Delta`). Every call reports to one inbox (``_stream``: a delta, the call's
Outcome, or that a call waiting for a slot of ``limit`` reached the model), so a driver waits on
one thing and sends the flow what came, or nothing once the step's timeout passed.

With a ``watch`` (``_watch``: hooks and spans), the async hooks called so far are awaited before
the calls of a step start and once the flow is over.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import time
from collections.abc import AsyncGenerator, Generator, Iterator, Sequence
from typing import Any

from .._result import Result
from .._threads import spawn
from ..backends._base import Backend
from . import _stream
from ._calls import Delta, Outcome, Queued, Step
from ._watch import Watch

Flow = Generator[Step, Sequence[Outcome | Queued], Result[Any]]
Item = Delta | Outcome | Queued  # what a call puts in its driver's inbox


def drive(flow: Flow, backend: Backend, watch: Watch | None = None, *, streaming: bool = False) -> Iterator[Delta | Result[Any]]:
    """Run a flow to its Result in this thread (usable inside a running event loop): a blocking
    backend's calls in daemon threads, so a hung one can be abandoned; any other's in place."""
    inbox: queue.SimpleQueue[Item] = queue.SimpleQueue()
    running, step = 0, next(flow)
    while True:
        if watch is not None:
            watch.settle_now()
        made: list[Item] = []  # what the calls made in place put: all there is to take
        for call in step.start:
            if backend.blocking:
                running += 1
                spawn(_stream.call, backend, call, inbox.put, watch, streaming)
            else:
                _stream.call(backend, call, made.append, watch, streaming)
        received: list[Outcome | Queued] = []
        for item in made or _take(inbox, running, step.timeout):
            if isinstance(item, Delta):
                yield item
            else:
                received.append(item)
        running -= len(received) if backend.blocking else 0
        try:
            step = flow.send(received)
        except StopIteration as stop:
            if watch is not None:
                watch.settle_now()
            yield stop.value
            return  # calls still running are abandoned (daemon threads)


def _take(inbox: queue.SimpleQueue[Item], running: int, timeout: float | None) -> Iterator[Item]:
    """What arrives until a call finishes, then everything else already in; nothing past
    ``timeout`` seconds (a sleep, when no call runs)."""
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
        if not isinstance(item, Delta):
            break
    while True:
        try:
            yield inbox.get_nowait()
        except queue.Empty:
            return


async def adrive(
    flow: Flow, backend: Backend, watch: Watch | None = None, *, limit: asyncio.Semaphore | None = None, streaming: bool = False
) -> AsyncGenerator[Delta | Result[Any], None]:
    """Run a flow to its Result on the running event loop; ``limit`` bounds calls in flight (a
    map's, shared by its prompts: see ``_stream.start``). Cancelling the task that iterates this
    cancels its calls."""
    inbox: asyncio.Queue[Item] = asyncio.Queue()
    tasks: list[asyncio.Future[None]] = []
    running, step = 0, next(flow)
    try:
        while True:
            if watch is not None:
                await watch.settle()
            tasks += [_stream.start(backend, call, inbox, watch, streaming, limit=limit) for call in step.start]
            running += len(step.start)
            received: list[Outcome | Queued] = []
            async with contextlib.aclosing(_atake(inbox, running, step.timeout)) as items:
                async for item in items:
                    if isinstance(item, Delta):
                        yield item
                    else:
                        received.append(item)
            running -= sum(isinstance(item, Outcome) for item in received)
            try:
                step = flow.send(received)
            except StopIteration as stop:
                result: Result[Any] = stop.value
                break
    finally:
        for task in tasks:
            task.cancel()  # calls still running once the flow is over (or the reader stopped)
    if watch is not None:
        await watch.settle()
    yield result


async def _atake(inbox: asyncio.Queue[Item], running: int, timeout: float | None) -> AsyncGenerator[Item, None]:
    """:func:`_take` on the event loop (a call that waits for a slot, or reaches the model, ends the wait too)."""
    if not running:
        await asyncio.sleep(timeout or 0.0)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    getter: asyncio.Future[Item] | None = None
    try:
        while True:
            getter = asyncio.ensure_future(inbox.get())
            done, _ = await asyncio.wait({getter}, timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
            if not done:
                return
            item, getter = getter.result(), None
            yield item
            if not isinstance(item, Delta):
                break
        while not inbox.empty():
            yield inbox.get_nowait()
    finally:
        if getter is not None:
            getter.cancel()
