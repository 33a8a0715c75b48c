"""``stream: true`` on ``/v1/messages``: a message as the Messages API's server-sent events, in
Anthropic's documented order:

    message_start          the message, its content empty (its usage as known)
    for each content block:
      content_block_start  the block, empty
      content_block_delta  its text as text_delta, or a tool_use block's input as input_json_delta, in pieces
      content_block_stop
    message_delta          the stop_reason and stop_sequence, and the usage
    message_stop

:func:`events` streams a whole message: a decided answer, once the vote is decided (as for the
other APIs, what is streamed is the decided value, never a ballot the vote might still overturn,
and a failed vote is an error answer with its status). Its ``accord`` summary rides on the
message of message_start, so the client's accumulated message carries it, and on message_delta.

:class:`FromChat` translates a chat completion's stream as it comes in (a request passed through
to a chat completions upstream): its text as a text block, each tool call as a tool_use block, the
finish reason and the usage (the translated request asks for it) at the end. An upstream error in
the stream becomes an ``error`` event, as Anthropic sends one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ._messages_out import billed, stopped, tool_use_id
from ._stream import pieces


def _event(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def events(message: dict[str, Any]) -> Iterator[bytes]:
    """Every event of the stream of the complete ``message``."""
    yield _event("message_start", message={**message, "content": [], "stop_reason": None, "stop_sequence": None})
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            yield _event("content_block_start", index=index, content_block={**block, "input": {}})
            for piece in pieces(json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))):
                yield _event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        else:
            yield _event("content_block_start", index=index, content_block={**block, "text": ""})
            for piece in pieces(block["text"]):
                yield _event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        yield _event("content_block_stop", index=index)
    summary = {"accord": message["accord"]} if "accord" in message else {}
    yield _event("message_delta", delta={"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
                 usage=message["usage"], **summary)  # fmt: skip
    yield _event("message_stop")


def error_event(kind: str, message: str) -> bytes:
    return _event("error", error={"type": kind, "message": message})


class FromChat:
    """A chat completion's stream (its raw server-sent event bytes) as Messages events, as it comes
    in (see the module docstring); ``model`` names it until the upstream does, ``stops`` are the
    request's ``stop_sequences``."""

    def __init__(self, request_id: str, model: str, stops: Sequence[str] = ()) -> None:
        self.request_id = request_id
        self.model = model
        self.stops = stops
        self.started = False
        self.blocks = 0  # content blocks opened so far
        self.open: str | None = None  # the open block: "text", or a tool call's chat index as "tool:N"
        self.choice: dict[str, Any] = {}  # the finish_reason (and vLLM's stop_reason) as they came
        self.usage: Any = None

    async def translate(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The Messages events of the chat ``chunks``, ``message_stop`` last (or an ``error`` event)."""
        buffer = b""
        try:
            async for raw in chunks:
                buffer += raw
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    for out in self._line(line.strip()):
                        yield out
        except ValueError as exc:  # an error the upstream put in its stream, or a chunk that is no JSON
            yield error_event("api_error", f"the upstream's stream failed: {exc}")
            return
        for out in self._end():
            yield out

    def _line(self, line: bytes) -> Iterator[bytes]:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        chunk = json.loads(data)
        if not isinstance(chunk, dict) or chunk.get("error") is not None:
            error = chunk.get("error") if isinstance(chunk, dict) else chunk
            raise ValueError(str(error.get("message") if isinstance(error, dict) else error))
        yield from self._start(chunk.get("model"))
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                yield from self._open("text", {"type": "text", "text": ""})
                yield _event("content_block_delta", index=self.blocks - 1, delta={"type": "text_delta", "text": text})
            for call in delta.get("tool_calls") or []:
                yield from self._call(call)
            if choice.get("finish_reason"):
                self.choice = choice

    def _start(self, model: Any) -> Iterator[bytes]:
        if self.started:
            return
        self.started = True
        message: dict[str, Any] = {"id": f"msg_{self.request_id}", "type": "message", "role": "assistant", "model": str(model or self.model), "content": [],
                   "stop_reason": None, "stop_sequence": None, "usage": billed(None)}  # fmt: skip
        yield _event("message_start", message=message)

    def _open(self, which: str, block: dict[str, Any]) -> Iterator[bytes]:
        """Open ``block`` unless ``which`` is open already (the one open before is closed)."""
        if self.open == which:
            return
        yield from self._close()
        self.open = which
        yield _event("content_block_start", index=self.blocks, content_block=block)
        self.blocks += 1

    def _close(self) -> Iterator[bytes]:
        if self.open is not None:
            yield _event("content_block_stop", index=self.blocks - 1)
            self.open = None

    def _call(self, call: dict[str, Any]) -> Iterator[bytes]:
        function = call.get("function") or {}
        which = f"tool:{call.get('index', 0)}"
        if self.open != which:
            block: dict[str, Any] = {"type": "tool_use", "id": call.get("id") or tool_use_id(self.request_id, self.blocks), "name": function.get("name") or "",
                     "input": {}}  # fmt: skip
            yield from self._open(which, block)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            yield _event("content_block_delta", index=self.blocks - 1, delta={"type": "input_json_delta", "partial_json": arguments})

    def _end(self) -> Iterator[bytes]:
        yield from self._start(None)
        yield from self._close()
        stop, sequence = stopped(self.choice, self.stops)
        yield _event("message_delta", delta={"stop_reason": stop, "stop_sequence": sequence}, usage=billed(self.usage))
        yield _event("message_stop")
