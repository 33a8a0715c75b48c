"""The two drivers of the run loop: they only call the backend and wait; ``_loop`` decides.

With a ``watch`` (``_watch``: hooks and spans), each call runs inside ``watch.scope(call)`` (its
span current), and the async hooks called so far are awaited before the calls of a step start
and once the flow is over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator, Sequence
from concurrent import futures
from typing import Any

from .._result import Result
from .._threads import spawn
from ..backends._base import Backend
from ._calls import Call, Outcome, Queued, Step
from ._watch import Watch

Flow = Generator[Step, Sequence[Outcome | Queued], Result[Any]]


def _call(backend: Backend, call: Call, watch: Watch | None = None) -> Outcome:
    backend = call.backend or backend
    start = time.perf_counter()
    try:
        if watch is None:
            return Outcome(call, backend.generate(call.request), None, time.perf_counter() - start)
        with watch.scope(call):
            return Outcome(call, backend.generate(call.request), None, time.perf_counter() - start)
    except (Exception, asyncio.CancelledError) as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
        return Outcome(call, None, exc, time.perf_counter() - start)


async def _acall(backend: Backend, call: Call, watch: Watch | None = None) -> Outcome:
    backend = call.backend or backend
    start = time.perf_counter()
    try:
        if watch is None:
            return Outcome(call, await backend.agenerate(call.request), None, time.perf_counter() - start)
        with watch.scope(call):  # once the call may start: after its slot of a concurrency bound
            return Outcome(call, await backend.agenerate(call.request), None, time.perf_counter() - start)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or getattr(task, "cancelling", lambda: 1)():
            raise  # accord itself cancels this call (the run is over): let it
        return Outcome(call, None, exc, time.perf_counter() - start)  # the model function raised it: a failed call
    except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
        return Outcome(call, None, exc, time.perf_counter() - start)


def _wait(running: dict[futures.Future[Outcome], Call], timeout: float | None) -> tuple[list[Outcome], BaseException | None]:
    """The outcomes of the calls that finish first (all that are done), or none after ``timeout``;
    and a BaseException one of them raised (KeyboardInterrupt, SystemExit), to re-raise."""
    if not running:
        time.sleep(timeout or 0.0)
        return [], None
    done, _ = futures.wait(running, timeout=timeout, return_when=futures.FIRST_COMPLETED)
    outcomes, escaped = [], None
    for future in done:
        if running.pop(future, None):
            try:
                outcomes.append(future.result())
            except BaseException as exc:  # noqa: BLE001 - re-raised once the others are recorded
                escaped = escaped or exc
    return outcomes, escaped


def drive(flow: Flow, backend: Backend, watch: Watch | None = None) -> Result[Any]:
    """Run a flow to its Result with worker threads (usable inside a running event loop).

    A blocking backend's calls run in daemon threads, so a hung one can be abandoned; a backend
    that returns at once is called in place. A ``one_at_a_time`` backend's calls of this run go
    one after another, as in :func:`adrive`.
    """
    running: dict[futures.Future[Outcome], Call] = {}
    held: list[Call] = []  # one_at_a_time: calls waiting for this run's call in flight
    serial = backend.one_at_a_time and backend.blocking
    step = next(flow)
    while True:
        escaped = None
        if watch is not None:
            watch.settle_now()
        notices: list[Queued] = []
        if backend.blocking:
            for call in step.start:
                if serial and (running or held):
                    held.append(call)
                    notices.append(Queued(call, started=False))
                else:
                    running[spawn(_call, backend, call, watch)] = call
            outcomes, escaped = _wait(running, step.timeout) if not notices else ([], None)
            if held and not running:  # one_at_a_time: the next call's turn
                call = held.pop(0)
                running[spawn(_call, backend, call, watch)] = call
                notices.append(Queued(call, started=True))
        else:
            outcomes = [_call(backend, call, watch) for call in step.start] or _wait({}, step.timeout)[0]
        try:
            if escaped is not None and not outcomes:
                raise escaped
            step = flow.send([*outcomes, *notices])  # the calls that finished beside an interrupt are recorded first
        except StopIteration as stop:
            if escaped is not None:
                raise escaped from None
            result: Result[Any] = stop.value
            if watch is not None:
                watch.settle_now()
            return result  # calls still running are abandoned (daemon threads)
        if escaped is not None:
            raise escaped


async def adrive(flow: Flow, backend: Backend, limit: asyncio.Semaphore | None = None, watch: Watch | None = None) -> Result[Any]:
    """Run a flow to its Result on the running event loop; ``limit`` bounds calls in flight.

    Under a limit shared with other runs (``amap``) a call may have to wait for a free slot: the
    flow is told at once that it waits and again when it reaches the model (:class:`Queued`).
    A model function that raises CancelledError (nothing of accord's was cancelled) made a failed
    call; cancelling the task that awaits this cancels its calls and raises CancelledError.

    A backend whose calls of one run go ``one_at_a_time`` (the OpenAI backend spreading ballots)
    gets them one after another: the next call waits here, told as waiting (:class:`Queued`), and
    takes no slot of ``limit`` while it waits, so the slots stay with calls that reach the model.
    """
    running: dict[asyncio.Future[Outcome], Call] = {}
    waiting: dict[asyncio.Future[Any], Call] = {}  # a slot of ``limit`` being waited for
    held: list[Call] = []  # one_at_a_time: calls waiting for this run's call in flight
    serial = backend.one_at_a_time

    def begin(call: Call) -> None:  # the call holds its slot until its task is done, cancelled or not
        task = asyncio.ensure_future(_acall(backend, call, watch))
        if limit is not None:
            task.add_done_callback(lambda _: limit.release())
        running[task] = call

    async def admit(call: Call) -> bool:
        """Start the call if a slot is free (True); else wait for one (False)."""
        if limit is not None and limit.locked():
            waiting[asyncio.ensure_future(limit.acquire())] = call
            return False
        if limit is not None:
            await limit.acquire()  # free: taken at once
        begin(call)
        return True

    step = next(flow)
    try:
        while True:
            notices: list[Outcome | Queued] = []
            if watch is not None:
                await watch.settle()
            for call in step.start:
                if serial and (running or waiting or held):
                    held.append(call)
                    notices.append(Queued(call, started=False))
                elif not await admit(call):
                    notices.append(Queued(call, started=False))
            if not notices:
                pending = [*running, *waiting]
                if pending:
                    done, _ = await asyncio.wait(pending, timeout=step.timeout, return_when=asyncio.FIRST_COMPLETED)
                else:
                    await asyncio.sleep(step.timeout or 0.0)
                    done = set()
                for future in done:
                    if future in waiting:  # its slot is free: the call starts now
                        call = waiting.pop(future)
                        begin(call)
                        notices.append(Queued(call, started=True))
                    elif future in running:
                        notices.append(_finished(future, running.pop(future)))
                if held and not running and not waiting:  # one_at_a_time: the next call's turn
                    call = held.pop(0)
                    if await admit(call):  # else it waits for a slot now, as already told
                        notices.append(Queued(call, started=True))
            try:
                step = flow.send(notices)
            except StopIteration as stop:
                result: Result[Any] = stop.value
                if watch is not None:
                    await watch.settle()
                return result
    finally:
        for task in running:
            task.cancel()
        for future in waiting:
            if future.done() and not future.cancelled():
                limit.release()  # type: ignore[union-attr]  # a slot taken, its call never started
            else:
                future.cancel()


def _finished(task: asyncio.Future[Outcome], call: Call) -> Outcome:
    """A finished call's Outcome; a task that ended cancelled was a model function raising
    CancelledError (accord cancels its calls only once the run is over)."""
    if task.cancelled():
        return Outcome(call, None, asyncio.CancelledError("the model call raised CancelledError"), 0.0)
    return task.result()


class _Unlimited:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_LIMIT = _Unlimited()  # the streaming drivers' bound when there is none (``_stream``)
