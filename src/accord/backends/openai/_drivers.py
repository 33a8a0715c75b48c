"""The drivers: they send what an exchange (:mod:`._exchange`) yields, with the sync or the
async client, and hand each reply back (an exception too: the exchange maps it at the
boundary). :func:`stream` and :func:`astream` stream the ballot's answer (``stream=True``): its
text deltas as they arrive, then the Completion (usage from the last chunk). :func:`drive` and
:func:`adrive` stream it too when asked (``streamed=True``), handing on only the Completion.

A streamed answer is read until its text ends in a loop (:meth:`._chunks.Chunks.looped`), then
the stream is closed: the server sees the connection go and stops generating, and the answer's
finish reason is ``"loop"``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any, TypeVar

from ..._types import Completion
from ._chunks import Chunks
from ._ops import Chat, Op

T = TypeVar("T")


def drive(flow: Generator[Op, Any, T], *, streamed: bool = False) -> T:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            value: T = done.value
            return value
        try:
            if streamed and isinstance(op, Chat) and op.answer:
                chunks = op.chunks()
                for _ in read(op, op.server.sync_client(), chunks):
                    pass
                reply = chunks.response()
            else:
                reply = op.call(op.server.sync_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc


async def adrive(flow: Generator[Op, Any, T], *, streamed: bool = False) -> T:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            value: T = done.value
            return value
        try:
            if streamed and isinstance(op, Chat) and op.answer:
                chunks = op.chunks()
                async for _ in aread(op, op.server.async_client(), chunks):
                    pass
                reply = chunks.response()
            else:
                reply = await op.acall(op.server.async_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc


def stream(flow: Generator[Op, Any, Completion]) -> Iterator[str | Completion]:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            yield done.value
            return
        try:
            if isinstance(op, Chat) and op.answer:
                chunks = op.chunks()
                yield from read(op, op.server.sync_client(), chunks)
                reply = chunks.response()
            else:
                reply = op.call(op.server.sync_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc


async def astream(flow: Generator[Op, Any, Completion]) -> AsyncGenerator[str | Completion, None]:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            yield done.value
            return
        try:
            if isinstance(op, Chat) and op.answer:
                chunks = op.chunks()
                async for delta in aread(op, op.server.async_client(), chunks):
                    yield delta
                reply = chunks.response()
            else:
                reply = await op.acall(op.server.async_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc


def read(op: Chat, client: Any, chunks: Chunks) -> Iterator[str]:
    """The answer's text deltas as they arrive, into ``chunks``; the stream is closed at its end,
    or as soon as the text ends in a loop."""
    answer = op.stream(client)
    try:
        for chunk in answer:
            delta = chunks.add(chunk)
            if delta:
                yield delta
                if chunks.looped():
                    break
    finally:
        answer.close()


async def aread(op: Chat, client: Any, chunks: Chunks) -> AsyncIterator[str]:
    """:func:`read` on the async client."""
    answer = await op.astream(client)
    try:
        async for chunk in answer:
            delta = chunks.add(chunk)
            if delta:
                yield delta
                if chunks.looped():
                    break
    finally:
        await answer.close()
