"""A decided Result as OpenAI's ``chat.completion``, with accord's summary beside it.

    {"id": "chatcmpl-...", "object": "chat.completion", "created": ..., "model": ...,
     "system_fingerprint": <the upstream's>,
     "choices": [{"index": 0, "message": {"role": "assistant", "content": "<the decided value as JSON>"},
                  "logprobs": <the winning ballot's, when asked>, "finish_reason": "stop"}],
     "usage": <the sum over every ballot: what the upstream billed for the answer>,
     "accord": {"stable": ..., "agreement": ..., "calls": ..., "votes": {...}, "stopped_because": ...,
                "coercions": [...], "replayed": ..., "upstream_calls": ..., "upstream_usage": {...},
                "key": <the ledger key>}}

``upstream_calls`` and ``upstream_usage`` count every upstream answer received on the request's
behalf: the ballots, and the batch neighbours that answered before they were cancelled.
``upstream_requests`` counts every request sent (``Usage.requests``: the ballots and every batch
neighbour, answered or cancelled); ``neighbour_requests`` the neighbours alone.

A tool request's message carries ``tool_calls`` with the decided arguments instead of content
(``finish_reason`` ``"tool_calls"``). The official clients keep unknown fields, so
``completion.model_extra["accord"]`` reads the summary. Headers ``x-accord-calls``,
``x-accord-agreement`` and ``x-accord-stable`` say the same in brief.
"""

from __future__ import annotations

import json
import time
from typing import Any

from .. import Ballot, Result
from ._translate import Job
from ._wire import Tab


def winner(result: Result[Any]) -> Ballot | None:
    """The ballot the answer was taken from: the first valid one of the winning key (any valid one
    when fields were assembled)."""
    first = None
    for ballot in result.ballots:
        if ballot.status == "valid":
            if ballot.key == result.key:
                return ballot
            first = first or ballot
    return first


def summary(result: Result[Any], tab: Tab, ledger_key: str | None) -> dict[str, Any]:
    """The ``accord`` object of a response (an error's too)."""
    out: dict[str, Any] = {
        "stable": result.stable,
        "agreement": round(result.agreement, 6),
        "calls": result.calls,
        "votes": dict(result.votes),
        "stopped_because": result.stopped_because,
        "coercions": [dict(c) for c in result.coercions],
        "replayed": result.replayed,
        "upstream_calls": len(tab.calls),
        "upstream_usage": tab.usage(),
        "upstream_requests": 0 if result.replayed else result.usage.requests,
        "neighbour_requests": 0 if result.replayed else result.usage.neighbour_requests,
    }
    if result.field_agreement is not None:
        out["field_agreement"] = dict(result.field_agreement)
    if ledger_key is not None:
        out["key"] = ledger_key
    return out


def _usage(result: Result[Any]) -> dict[str, int]:
    """The sum over every ballot (the ``response_format`` probe a ballot made included); none for a replay."""
    if result.replayed:
        return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    prompt, completion = result.usage.prompt_tokens or 0, result.usage.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def headers(result: Result[Any], request_id: str) -> dict[str, str]:
    return {
        "x-accord-calls": str(result.calls),
        "x-accord-agreement": f"{result.agreement:.4f}",
        "x-accord-stable": "true" if result.stable else "false",
        "x-request-id": request_id,
    }


def content_of(job: Job, result: Result[Any]) -> str:
    """The decided value as the message says it: JSON, or the text itself for a free-text vote."""
    if job.mode == "text" and isinstance(result.value, str) and job.schema is None:
        return result.value
    return json.dumps(result.data, ensure_ascii=False, separators=(",", ":"))


class Reply:
    """What every shape of the answer shares: id, model, fingerprint, message parts."""

    def __init__(self, job: Job, result: Result[Any], tab: Tab, request_id: str, ledger_key: str | None) -> None:
        chosen = winner(result)
        self.job = job
        self.result = result
        self.id = f"chatcmpl-{request_id}"
        self.created = int(time.time())
        self.model = str((chosen.model if chosen is not None else None) or job.model)
        self.fingerprint = chosen.system_fingerprint if chosen is not None else None
        self.content = content_of(job, result)
        self.finish = "tool_calls" if job.mode == "tool" else (chosen.finish_reason if chosen and chosen.finish_reason else "stop")
        self.logprobs = tab.logprobs_of(chosen.text if chosen else None) if job.logprobs else None
        self.usage = _usage(result)
        # of the prompt tokens, those read from and written to the upstream's prompt cache (None: not said)
        self.cached, self.written = (0, 0) if result.replayed else (result.usage.cached_tokens, result.usage.cache_write_tokens)
        self.accord = summary(result, tab, ledger_key)
        self.call_id = f"call_{request_id[:24]}"

    def message(self) -> dict[str, Any]:
        if self.job.mode == "tool":
            call = {"id": self.call_id, "type": "function", "function": {"name": self.job.tool, "arguments": self.content}}
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": self.content}

    def completion(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "message": self.message(), "logprobs": self.logprobs, "finish_reason": self.finish}],
            "usage": self.usage,
            "accord": self.accord,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": extra.pop("logprobs", None), "finish_reason": finish}],
            **extra,
        }
