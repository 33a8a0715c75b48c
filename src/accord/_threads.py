"""Daemon worker threads whose calls can be abandoned (a hung sync backend never blocks exit),
and coroutines run to completion from sync code."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


def spawn(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run ``fn(*args)`` in a new daemon thread; return its Future."""
    future: Future[T] = Future()

    def target() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=target, name="accord-call", daemon=True).start()
    return future


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion, also from inside a running event loop (a notebook): then in
    another thread, with the caller's context variables (the current span among them)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(context.run(asyncio.run, coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="accord-map")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return values[0]


async def aiterate(items: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
    """Iterate a blocking iterator (made by ``items()``) in a daemon thread, from async code."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def hand(kind: str, value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(inbox.put_nowait, (kind, value))

    def target() -> None:
        try:
            for item in items():
                hand("item", item)
            hand("end", None)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the event loop
            hand("error", exc)

    threading.Thread(target=target, name="accord-stream", daemon=True).start()
    while True:
        kind, value = await inbox.get()
        if kind == "end":
            return
        if kind == "error":
            raise value
        yield value
