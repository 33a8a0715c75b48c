"""Daemon worker threads whose calls can be abandoned (a hung sync backend never blocks exit)."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
