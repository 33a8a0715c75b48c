"""``stream: true``: the decided value as ``chat.completion.chunk`` server-sent events.

The stream starts once the vote is decided: what is streamed is the decided value, never a
ballot the vote might still overturn, and a failed vote is an error answer with its status (a
422 with ``x-should-retry: false``), as without ``stream``. The events, in OpenAI's order:

    data: {... "delta": {"role": "assistant", "content": ""}}             the role
    data: {... "delta": {"content": "<a piece of the value>"}}            the value, in pieces
    data: {... "delta": {}, "finish_reason": "stop", "accord": {...}}     the finish reason (and the summary)
    data: {... "choices": [], "usage": {...}}                             with stream_options.include_usage
    data: [DONE]

A tool request streams ``tool_calls`` deltas (the name first, then the arguments in pieces).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

from ._responses import Reply

PIECE = 24  # characters of the value per chunk (per delta, in every API's stream)


def pieces(text: str) -> list[str]:
    """``text`` in the pieces a stream sends it in (one empty piece for no text)."""
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)] or [""]


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def events(reply: Reply) -> Iterator[bytes]:
    """Every event of the stream of ``reply``, ``[DONE]`` last."""
    usage = {"usage": None} if reply.job.include_usage else {}
    if reply.job.mode == "tool":
        head = {"index": 0, "id": reply.call_id, "type": "function", "function": {"name": reply.job.tool, "arguments": ""}}
        yield _event(reply.chunk({"role": "assistant", "content": None, "tool_calls": [head]}, **usage))
        for piece in pieces(reply.content):
            yield _event(reply.chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, **usage))
    else:
        yield _event(reply.chunk({"role": "assistant", "content": ""}, **usage))
        for i, piece in enumerate(pieces(reply.content)):
            logprobs = reply.logprobs if i == 0 else None  # the winning ballot's, once
            yield _event(reply.chunk({"content": piece}, logprobs=logprobs, **usage))
    yield _event(reply.chunk({}, reply.finish, accord=reply.accord, **usage))
    if reply.job.include_usage:
        last = reply.chunk({}, usage=reply.usage)
        last["choices"] = []
        yield _event(last)
    yield b"data: [DONE]\n\n"


class Tracked:
    """``chunks`` as an async iterator that calls ``on_close()`` exactly once, however the stream
    ends: read to the end, failed, closed, or dropped without ever being read (a client gone
    before its first chunk: an async generator never started has no ``finally`` to run, so this
    is a class). ``on_close`` may be a coroutine function; dropped, it is scheduled on the loop."""

    def __init__(self, chunks: AsyncIterable[Any], on_close: Callable[[], Coroutine[Any, Any, None] | None]) -> None:
        self._chunks: AsyncIterator[Any] = aiter(chunks)
        self._on_close = on_close
        self._over = False

    def __aiter__(self) -> Tracked:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._chunks.__anext__()
        except BaseException:  # StopAsyncIteration too
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._over:
            return
        self._over = True
        closing = getattr(self._chunks, "aclose", None)
        if closing is not None:
            with contextlib.suppress(Exception):
                await closing()
        outcome = self._on_close()
        if inspect.iscoroutine(outcome):
            await outcome

    def __del__(self) -> None:
        if self._over:
            return
        self._over = True
        outcome = self._on_close()
        if inspect.iscoroutine(outcome):
            try:
                asyncio.get_running_loop().create_task(outcome)
            except RuntimeError:  # no loop any more: nothing left to close on it
                outcome.close()
