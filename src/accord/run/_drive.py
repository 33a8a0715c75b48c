"""The two drivers of the run loop: they only call the backend and wait; ``_loop`` decides."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator, Sequence
from concurrent import futures
from typing import Any

from .._result import Result
from ..backends._base import Backend
from ._loop import Call, Outcome, Step
from ._threads import spawn

Flow = Generator[Step, Sequence[Outcome], Result[Any]]


def _call(backend: Backend, call: Call) -> Outcome:
    start = time.perf_counter()
    try:
        return Outcome(call, backend.generate(call.request), None, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
        return Outcome(call, None, exc, time.perf_counter() - start)


async def _acall(backend: Backend, call: Call, limit: asyncio.Semaphore | None) -> Outcome:
    async with limit or _NO_LIMIT:
        start = time.perf_counter()
        try:
            return Outcome(call, await backend.agenerate(call.request), None, time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001 - handed to the loop, which maps it to a BackendError
            return Outcome(call, None, exc, time.perf_counter() - start)


def _wait(running: dict[futures.Future[Outcome], Call], timeout: float | None) -> list[Outcome]:
    """The outcomes of the calls that finish first (all that are done), or none after ``timeout``."""
    if not running:
        time.sleep(timeout or 0.0)
        return []
    done, _ = futures.wait(running, timeout=timeout, return_when=futures.FIRST_COMPLETED)
    return [future.result() for future in done if running.pop(future, None)]


def drive(flow: Flow, backend: Backend) -> Result[Any]:
    """Run a flow to its Result with worker threads (usable inside a running event loop).

    A blocking backend's calls run in daemon threads, so a hung one can be abandoned; a backend
    that returns at once is called in place.
    """
    running: dict[futures.Future[Outcome], Call] = {}
    step = next(flow)
    while True:
        if backend.blocking:
            running.update({spawn(_call, backend, call): call for call in step.start})
            outcomes = _wait(running, step.timeout)
        else:
            outcomes = [_call(backend, call) for call in step.start] or _wait({}, step.timeout)
        try:
            step = flow.send(outcomes)
        except StopIteration as stop:
            result: Result[Any] = stop.value
            return result  # calls still running are abandoned (daemon threads)


async def adrive(flow: Flow, backend: Backend, limit: asyncio.Semaphore | None = None) -> Result[Any]:
    """Run a flow to its Result on the running event loop; ``limit`` bounds calls in flight."""
    running: dict[asyncio.Future[Outcome], Call] = {}
    step = next(flow)
    try:
        while True:
            running.update({asyncio.ensure_future(_acall(backend, c, limit)): c for c in step.start})
            if running:
                done, _ = await asyncio.wait(running, timeout=step.timeout, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(step.timeout or 0.0)
                done = set()
            outcomes = [task.result() for task in done if running.pop(task, None)]
            try:
                step = flow.send(outcomes)
            except StopIteration as stop:
                result: Result[Any] = stop.value
                return result
    finally:
        for task in running:
            task.cancel()


class _Unlimited:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


_NO_LIMIT = _Unlimited()
