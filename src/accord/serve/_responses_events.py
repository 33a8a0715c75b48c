"""``stream: true`` on ``/v1/responses``: a whole response object as the Responses API's
server-sent events, in OpenAI's documented order, each with its ``sequence_number``:

    response.created                      the response, in_progress, no output yet
    response.in_progress
    for each output item:
      response.output_item.added          the item, in_progress, empty
      a message:
        response.content_part.added       its output_text part, empty
        response.output_text.delta        the text, in pieces
        response.output_text.done         the whole text
        response.content_part.done
      a function call:
        response.function_call_arguments.delta   the arguments, in pieces
        response.function_call_arguments.done
      response.output_item.done           the item, whole
    response.completed                    the response, whole (``response.incomplete`` when it is)

As for chat completions, a decided answer streams once the vote is decided: what is streamed is
the decided value, never a ballot the vote might still overturn, and a failed vote is an error
answer with its status. The final response carries the ``accord`` summary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ._stream import pieces


class _Numbered:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.n, **fields}
        self.n += 1
        return f"event: {kind}\ndata: ".encode() + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def events(response: dict[str, Any]) -> Iterator[bytes]:
    """Every event of the stream of the complete ``response`` object."""
    event = _Numbered()
    opening = {**response, "status": "in_progress", "completed_at": None, "output": [], "usage": None, "incomplete_details": None}
    opening.pop("accord", None)
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            yield from _message(event, index, item)
        elif item["type"] == "function_call":
            yield from _function_call(event, index, item)
        else:  # pragma: no cover - the proxy builds only these two
            yield event("response.output_item.added", output_index=index, item=item)
            yield event("response.output_item.done", output_index=index, item=item)
    last = "response.incomplete" if response.get("status") == "incomplete" else "response.completed"
    yield event(last, response=response)


def _message(event: _Numbered, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    yield event("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []})
    for part_index, part in enumerate(item["content"]):
        where = {"item_id": item["id"], "output_index": index, "content_index": part_index}
        if part["type"] != "output_text":
            yield event("response.content_part.added", **where, part=part)
            yield event("response.content_part.done", **where, part=part)
            continue
        yield event("response.content_part.added", **where, part={**part, "text": "", "logprobs": []})
        for i, piece in enumerate(pieces(part["text"])):
            logprobs = part.get("logprobs") or [] if i == 0 else []  # the winning ballot's, once
            yield event("response.output_text.delta", **where, delta=piece, logprobs=logprobs)
        yield event("response.output_text.done", **where, text=part["text"], logprobs=part.get("logprobs") or [])
        yield event("response.content_part.done", **where, part=part)
    yield event("response.output_item.done", output_index=index, item=item)


def _function_call(event: _Numbered, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    yield event("response.output_item.added", output_index=index, item={**item, "status": "in_progress", "arguments": ""})
    for piece in pieces(item["arguments"]):
        yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece)
    yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index, name=item["name"],
                arguments=item["arguments"])  # fmt: skip
    yield event("response.output_item.done", output_index=index, item=item)
