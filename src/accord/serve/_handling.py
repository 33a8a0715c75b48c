"""What every handler of the app waits on: the request body (within ``--max-body``), its work
unless the client leaves first, and the warm-up done in a thread at start-up."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request

from ._errors import ApiError
from ._observe import log

_T = TypeVar("_T")


class ClientGone(Exception):
    """The client closed the connection before its answer."""


async def read_body(request: Request, limit: int) -> bytes:
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


async def unless_gone(request: Request, work: Awaitable[_T]) -> _T:
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


async def aiter_of(chunks: Any) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def in_daemon_thread(work: Callable[[], None]) -> asyncio.Future[None]:
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


def warm_up(modules: tuple[str, ...] = ()) -> None:
    """What the first request would otherwise wait for, done in a worker thread at start-up: the
    JSON Schema validators (importing jsonschema and building the first validator: about 0.1 s),
    and ``modules`` (the anthropic SDK for upstreams that speak Messages: seconds on a small machine)."""
    for name in modules:
        importlib.import_module(name)
    from .. import Schema

    Schema.of({"type": "object", "properties": {"warm": {"type": "string", "format": "date"}}, "required": ["warm"]}).validate({"warm": "2026-01-01"})
