"""The drivers: they send what an exchange (:mod:`._exchange`) yields, with the sync or the
async client, and hand each reply back (an exception too: the exchange maps it at the
boundary). :func:`stream` and :func:`astream` stream the ballot's answer (``stream=True``): its
text deltas as they arrive, then the Completion (usage from the last chunk).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Iterator
from typing import Any, TypeVar

from ..._types import Completion
from ._chunks import Chunks
from ._ops import Chat, Op

T = TypeVar("T")


def drive(flow: Generator[Op, Any, T]) -> T:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply = op.call(op.server.sync_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc


async def adrive(flow: Generator[Op, Any, T]) -> T:
    reply = None
    while True:
        try:
            op = flow.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
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
                chunks = Chunks()
                for chunk in op.stream(op.server.sync_client()):
                    delta = chunks.add(chunk)
                    if delta:
                        yield delta
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
                chunks = Chunks()
                async for chunk in await op.astream(op.server.async_client()):
                    delta = chunks.add(chunk)
                    if delta:
                        yield delta
                reply = chunks.response()
            else:
                reply = await op.acall(op.server.async_client())
        except Exception as exc:  # noqa: BLE001 - handed to the exchange, which maps it at the boundary
            reply = exc
