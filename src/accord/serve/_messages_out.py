"""A ``message`` of the Messages API: for a decided Result (:func:`decided`), and for a chat
completion a request passed through was translated to (:func:`from_chat`).

    {"id": "msg_...", "type": "message", "role": "assistant", "model": ...,
     "content": [<one block>], "stop_reason": "end_turn", "stop_sequence": null,
     "usage": {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"},
     "accord": {"stable": ..., "agreement": ..., "calls": ..., ...}}       (a decided answer's)

A decided answer's block is a ``text`` block holding the decided value as JSON (for a free-text
vote, the text), or, when a tool_choice named the tool, a ``tool_use`` block whose ``input`` is
the decided object (``stop_reason`` ``tool_use``). ``usage`` is the sum over every ballot, as for
chat completions, in Anthropic's terms: ``input_tokens`` are the input tokens neither read from
nor written to the upstream's prompt cache, which ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` count (null where the upstream does not say); a ledger replay
uses none.

A chat completion's finish reason becomes a ``stop_reason``: ``stop`` -> ``end_turn`` (or
``stop_sequence``, with the sequence, where the upstream names the stop it met, as vLLM does),
``length`` -> ``max_tokens``, ``tool_calls`` -> ``tool_use``, ``content_filter`` -> ``refusal``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._responses import Reply

_STOPS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use", "content_filter": "refusal"}


def stop_reason(finish: str | None) -> str:
    """A chat completion's ``finish_reason`` as a Messages ``stop_reason``."""
    return _STOPS.get(finish or "stop", "end_turn")


def usage(prompt: int, completion: int, cached: int | None = None, written: int | None = None) -> dict[str, Any]:
    """Token counts in the Messages shape (``prompt`` counts every input token, the cached ones too)."""
    return {"input_tokens": max(0, prompt - (cached or 0) - (written or 0)), "output_tokens": completion,
            "cache_creation_input_tokens": written, "cache_read_input_tokens": cached}  # fmt: skip


def message(mid: str, model: str, content: list[dict[str, Any]], stop: str | None, spent: dict[str, Any], *,
            stop_sequence: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The message object (see the module docstring)."""
    return {"id": mid, "type": "message", "role": "assistant", "model": model, "content": content, "stop_reason": stop,
            "stop_sequence": stop_sequence, "usage": spent}  # fmt: skip


def tool_use_id(request_id: str, i: int = 0) -> str:
    return f"toolu_{request_id[:24]}" + (f"_{i}" if i else "")


def decided(reply: Reply, request_id: str) -> dict[str, Any]:
    """The message of a decided answer, with its ``accord`` summary."""
    job = reply.job
    if job.mode == "tool":
        block = {"type": "tool_use", "id": tool_use_id(request_id), "name": job.tool, "input": json.loads(reply.content)}
    else:
        block = {"type": "text", "text": reply.content}
    spent = usage(reply.usage["prompt_tokens"], reply.usage["completion_tokens"], reply.cached, reply.written)
    out = message(f"msg_{request_id}", reply.model, [block], stop_reason(reply.finish), spent)
    out["accord"] = reply.accord
    return out


def from_chat(completion: Any, request_id: str, model: str, stops: Sequence[str] = ()) -> dict[str, Any]:
    """The message of a chat completion (a request passed through, translated; ``stops``: its
    ``stop_sequences``); a ValueError when the completion cannot be read as one."""
    if not isinstance(completion, dict) or not isinstance(completion.get("choices"), list) or not completion["choices"]:
        raise ValueError("the upstream's chat completion has no choices")
    choice = completion["choices"][0]
    said = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    text = said.get("content") if isinstance(said.get("content"), str) else said.get("refusal")
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    for i, call in enumerate(said.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        given = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
        if not isinstance(given, dict):
            raise ValueError("a tool call's arguments are not a JSON object")
        content.append({"type": "tool_use", "id": call.get("id") or tool_use_id(request_id, i), "name": function.get("name") or "",
                        "input": given})  # fmt: skip
    stop, sequence = stopped(choice, stops)
    return message(f"msg_{request_id}", str(completion.get("model") or model), content, stop, billed(completion.get("usage")),
                   stop_sequence=sequence)


def stopped(choice: dict[str, Any], stops: Sequence[str]) -> tuple[str, str | None]:
    """The ``stop_reason`` and ``stop_sequence`` of a chat choice (vLLM names the stop string it met as ``stop_reason``)."""
    met = choice.get("stop_reason")
    if choice.get("finish_reason") == "stop" and isinstance(met, str) and met in stops:
        return "stop_sequence", met
    if choice.get("refusal") or (choice.get("message") or {}).get("refusal"):
        return "refusal", None
    return stop_reason(choice.get("finish_reason")), None


def billed(given: Any) -> dict[str, Any]:
    """A chat completion's ``usage`` in the Messages shape."""
    given = given if isinstance(given, dict) else {}
    cached = (given.get("prompt_tokens_details") or {}).get("cached_tokens")
    return usage(int(given.get("prompt_tokens") or 0), int(given.get("completion_tokens") or 0), cached if isinstance(cached, int) else None)
