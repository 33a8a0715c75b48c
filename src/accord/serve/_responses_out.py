"""A ``response`` object of the Responses API: for a decided Result (:func:`decided`), and for a
chat completion a request passed through was translated to (:func:`from_chat`).

    {"id": "resp_...", "object": "response", "created_at": ..., "status": "completed",
     "model": ..., "output": [<one item>], "usage": {"input_tokens", "output_tokens", "total_tokens", ...},
     "instructions": ..., "metadata": {...}, "text": {...}, "tools": [...], ...   (the request's settings)
     "accord": {"stable": ..., "agreement": ..., "calls": ..., ...}}               (a decided answer's)

The output item is a ``message`` whose one ``output_text`` part is the decided value (as JSON;
for a free-text vote, the text), or a ``function_call`` (``call_id``, ``name``, ``arguments``)
when a tool_choice named the function. ``usage`` is the sum over every ballot, as for chat
completions: what the upstream billed for the answer; a ledger replay uses none.

A decided answer is ``completed`` (its value was read and validated whole, even from a ballot the
token limit cut off); a translated chat completion cut off by its limit is ``incomplete``, with
``incomplete_details.reason`` ``max_output_tokens``, as OpenAI says it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._responses import Reply


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0, written: int = 0) -> dict[str, Any]:
    """Token counts in the Responses shape."""
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": prompt + completion}  # fmt: skip


def response(rid: str, created: int, model: str, output: list[dict[str, Any]], *, spent: dict[str, Any] | None, echo: dict[str, Any],
             status: str = "completed", reason: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The response object (see the module docstring); ``spent``: its usage (None while in progress)."""
    out = {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "completed_at": int(time.time()) if status == "completed" else None,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": model,
        "output": output,
        "usage": spent,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        **echo,
    }
    out["tool_choice"] = out.get("tool_choice") or "auto"
    out.setdefault("tools", [])
    out.setdefault("parallel_tool_calls", True)
    return out


def message(item_id: str, text: str, logprobs: list[dict[str, Any]] | None = None, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}


def function_call(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name, "arguments": arguments}


def decided(reply: Reply, request_id: str) -> dict[str, Any]:
    """The response object of a decided answer, with its ``accord`` summary."""
    job = reply.job
    if job.mode == "tool":
        item = function_call(f"fc_{request_id}", reply.call_id, job.tool or "", reply.content)
    else:
        item = message(f"msg_{request_id}", reply.content, _logprobs(reply.logprobs) if job.logprobs else None)
    spent = usage(reply.usage["prompt_tokens"], reply.usage["completion_tokens"], reply.cached or 0, written=reply.written or 0)
    out = response(f"resp_{request_id}", reply.created, reply.model, [item], spent=spent, echo=job.echo)
    out["accord"] = reply.accord
    return out


def from_chat(completion: Any, echo: dict[str, Any], request_id: str, model: str) -> dict[str, Any]:
    """The response object of a chat completion (a request passed through, translated); a
    ValueError when the completion has no choice to read."""
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list) or not completion["choices"]:
        raise ValueError("the upstream's chat completion has no choices")
    choice = completion["choices"][0]
    status, reason = ("incomplete", "max_output_tokens") if choice.get("finish_reason") == "length" else ("completed", None)
    output = _said(choice, request_id, status) + _calls(choice.get("message") or {}, request_id)
    return response(f"resp_{request_id}", int(completion.get("created") or time.time()), str(completion.get("model") or model), output,
                    spent=_billed(completion.get("usage") or {}), echo=echo, status=status, reason=reason)  # fmt: skip


def _said(choice: dict[str, Any], request_id: str, status: str) -> list[dict[str, Any]]:
    """The choice's text (or refusal) as a message item, none when it only calls tools."""
    said = choice.get("message") or {}
    text = said.get("content")
    if isinstance(text, str) and (text or not said.get("tool_calls")):
        logprobs = _logprobs(choice.get("logprobs")) if choice.get("logprobs") else None
        return [message(f"msg_{request_id}", text, logprobs, status)]
    if said.get("refusal"):
        return [{**message(f"msg_{request_id}", "", None, status), "content": [{"type": "refusal", "refusal": said["refusal"]}]}]
    return []


def _calls(said: dict[str, Any], request_id: str) -> list[dict[str, Any]]:
    """The message's tool calls as function_call items."""
    output = []
    for i, call in enumerate(said.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        output.append(function_call(f"fc_{request_id}_{i}", call.get("id") or f"call_{request_id}_{i}", function.get("name") or "",
                                    arguments if isinstance(arguments, str) else json.dumps(arguments)))  # fmt: skip
    return output


def _billed(billed: dict[str, Any]) -> dict[str, Any]:
    """A chat completion's ``usage`` in the Responses shape."""
    details = billed.get("prompt_tokens_details") or {}
    thought = billed.get("completion_tokens_details") or {}
    return usage(int(billed.get("prompt_tokens") or 0), int(billed.get("completion_tokens") or 0), int(details.get("cached_tokens") or 0),
                 int(thought.get("reasoning_tokens") or 0))  # fmt: skip


def _logprobs(chat: Any) -> list[dict[str, Any]]:
    """A chat completion's ``logprobs`` (``{"content": [...]}``) as an output_text part's."""
    tokens = (chat or {}).get("content") or [] if isinstance(chat, dict) else []
    return [_token(t, with_top=True) for t in tokens if isinstance(t, dict)]


def _token(token: dict[str, Any], with_top: bool) -> dict[str, Any]:
    text = str(token.get("token", ""))
    given = token.get("bytes")
    out: dict[str, Any] = {"token": text, "logprob": float(token.get("logprob") or 0.0),
                           "bytes": given if isinstance(given, list) else list(text.encode())}  # fmt: skip
    if with_top:
        out["top_logprobs"] = [_token(t, with_top=False) for t in token.get("top_logprobs") or [] if isinstance(t, dict)]
    return out
