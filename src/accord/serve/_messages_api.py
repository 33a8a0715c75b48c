"""A Messages API request (``POST /v1/messages``, Anthropic's), read as the chat completion request
it asks for, and so as the same :class:`~._translate.Job` a chat request becomes.

    system                a string, or text blocks -> a system message, first
    messages              user and assistant turns, each a string or a list of content blocks:
                            text                 -> text
                            image                (a base64 or url source) -> an image_url part
                            tool_use             (assistant) -> the ``tool_calls`` of its message
                            tool_result          (user) -> a ``tool`` message, before the turn's other content
                            thinking, redacted_thinking -> left out (a chat upstream has no place for them)
    output_config         format json_schema: that JSON Schema is the schema; effort -> reasoning_effort
    tools, tool_choice    client tools (``input_schema``); a tool_choice naming one tool
                          (``{"type": "tool", "name": ...}``, or ``"any"`` with one tool) makes its
                          ``input_schema`` the schema: the ballots vote on its input
    max_tokens            required, as Anthropic requires it -> max_tokens
    temperature, top_p    as they are;  stop_sequences -> stop;  top_k: forwarded (vLLM reads it)
    metadata, service_tier, cache_control, inference_geo, speed
                          taken; nothing a chat upstream reads
    accord                the same policy and caps as chat completions (``._policy``)

Any other top-level field is forwarded on every ballot, as for chat completions. What the proxy
cannot honour is a 400 that names the field: server tools (web search, code execution, ...),
document blocks and file sources, ``container`` and ``mcp_servers`` need Anthropic's own
servers; ``thinking`` asks for reasoning a chat upstream does not return. (Sent unchanged to an
upstream that speaks Messages, a request passed through keeps all of them.) ``cache_control``
marks are dropped: a chat upstream caches on its own. A ``tool_result``'s ``is_error`` has no
place in a chat ``tool`` message and is not carried.

:func:`check` holds for every request (``model``, ``messages``, ``max_tokens``, ``stream``);
:func:`decides` says whether accord decides it (a schema, a named tool, or an ``accord`` field);
the rest passes through (``._app``): unchanged to an upstream that serves ``/messages``, or as
:func:`chat_body` to a chat completions upstream.
"""

from __future__ import annotations

import json
from typing import Any

from ._errors import ApiError
from ._policy import Ask
from ._translate import Job, model_of, read_translated, translated_tools

#: Messages fields taken, with nothing sent to a chat upstream.
TAKEN = frozenset({"metadata", "service_tier", "cache_control", "inference_geo", "speed", "diagnostics"})
#: Messages fields read into the chat request.
READ = frozenset({"model", "system", "messages", "max_tokens", "temperature", "top_p", "stop_sequences", "stream", "tools", "tool_choice",
                  "output_config", "thinking", "accord"})  # fmt: skip
_SERVERS_ONLY = {"container": "a container runs Anthropic's code execution", "mcp_servers": "MCP servers are called by Anthropic's API"}
_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def check(body: Any) -> None:
    """What every Messages request needs (a 400 naming the field)."""
    model_of(body)
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise _bad("messages must be a non-empty list of user and assistant turns", "messages", "invalid_messages")
    tokens = body.get("max_tokens")
    if tokens is None:
        raise _bad("max_tokens is required: the most tokens the answer may take (the Messages API requires it)", "max_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise _bad(f"max_tokens must be a positive integer, got {tokens!r}", "max_tokens")
    if not isinstance(body.get("stream", False), bool):
        raise _bad("stream must be true or false", "stream")


def decides(body: dict[str, Any]) -> bool:
    """Whether accord decides this request: an ``output_config.format``, a tool_choice naming one tool, or an ``accord`` field."""
    config = body.get("output_config")
    if isinstance(config, dict) and isinstance(config.get("format"), dict):
        return True
    return _named(body.get("tool_choice"), body.get("tools")) or "accord" in body


def _named(choice: Any, tools: Any) -> bool:
    """Whether ``tool_choice`` forces one tool: it names one, or says "any" with one tool."""
    kind = choice.get("type") if isinstance(choice, dict) else None
    return kind == "tool" or (kind == "any" and isinstance(tools, list) and len(tools) == 1)


def read_messages_job(body: dict[str, Any], base: Ask, *, max_k: int, max_seconds: float) -> Job:
    """The Job of a Messages request accord decides (see the module docstring)."""
    forced = _named(body.get("tool_choice"), body.get("tools"))
    return read_translated(chat_body(body), body, base, api="messages", forced=forced, max_k=max_k, max_seconds=max_seconds)


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion request a Messages request asks for (without ``stream`` and ``accord``)."""
    for name, what in _SERVERS_ONLY.items():
        if body.get(name):
            raise _bad(f"{what}, which a chat completions upstream does not have", name, "unsupported_tool")
    thinking = body.get("thinking")
    if thinking is not None and (not isinstance(thinking, dict) or thinking.get("type") != "disabled"):
        raise _bad("thinking is not supported here: a chat completions upstream returns no thinking blocks, and a vote reads the "
                   "answer alone (leave it out, or send {\"type\": \"disabled\"})", "thinking", "unsupported_thinking")  # fmt: skip
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages(body), "max_tokens": body["max_tokens"]}
    _output_config(body.get("output_config"), chat)
    _tools(body, chat)
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(stop, str) for stop in stops)):
        raise _bad("stop_sequences must be a list of strings", "stop_sequences")
    for name, to in (("temperature", "temperature"), ("top_p", "top_p"), ("stop_sequences", "stop")):
        if body.get(name) is not None:
            chat[to] = body[name]
    for name, value in body.items():  # fields the Messages API does not have (or top_k): forwarded, as for chat completions
        if name not in READ and name not in TAKEN and name not in _SERVERS_ONLY:
            chat.setdefault(name, value)
    return chat


def _output_config(config: Any, chat: dict[str, Any]) -> None:
    """``output_config`` in the chat request's shape: its ``format`` a ``response_format``, its ``effort`` a ``reasoning_effort``."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise _bad("output_config must be an object, e.g. {\"format\": {\"type\": \"json_schema\", \"schema\": {...}}}", "output_config")
    fmt = config.get("format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            raise _bad("output_config.format must be {\"type\": \"json_schema\", \"schema\": {...}}", "output_config.format")
        if not isinstance(fmt.get("schema"), dict):
            raise _bad("output_config.format.schema must be a JSON Schema object", "output_config.format.schema")
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt["schema"]}}
    if config.get("effort") is not None:
        chat["reasoning_effort"] = config["effort"]


def _tools(body: dict[str, Any], chat: dict[str, Any]) -> None:
    """``tools`` and ``tool_choice`` in the chat request's shape."""
    tools = translated_tools(body.get("tools"), _tool)
    if tools is not None:
        chat["tools"] = tools
    choice = body.get("tool_choice")
    if choice is None:
        return
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise _bad("tool_choice must name a tool: {\"type\": \"tool\", \"name\": ...}", "tool_choice")
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif kind in _CHOICES:
        chat["tool_choice"] = _CHOICES[kind]
    else:
        raise _bad("tool_choice must be {\"type\": \"auto\"}, {\"type\": \"any\"}, {\"type\": \"none\"} or {\"type\": \"tool\", \"name\": ...}",
                   "tool_choice")  # fmt: skip
    if choice.get("disable_parallel_tool_use") is True and tools:
        chat["parallel_tool_calls"] = False


def _tool(tool: Any, i: int) -> dict[str, Any]:
    where = f"tools[{i}]"
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(tool, dict) or kind not in (None, "custom") or not isinstance(tool.get("input_schema"), dict):
        raise _bad(f"{where}: only client tools with an input_schema are supported here; {kind!r} is a tool Anthropic's own servers "
                   "define or run", where, "unsupported_tool")  # fmt: skip
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise _bad(f"{where}.name is required: the tool's name", f"{where}.name")
    function = {"name": tool["name"], "parameters": tool["input_schema"]}
    for name in ("description", "strict"):
        if tool.get(name) is not None:
            function[name] = tool[name]
    return {"type": "function", "function": function}


def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """``system`` and ``messages`` as chat messages."""
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system is not None:
        text = system if isinstance(system, str) else _text_only(system, "system")
        if text:
            out.append({"role": "system", "content": text})
    for i, turn in enumerate(body["messages"]):
        where = f"messages[{i}]"
        if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant"):
            raise _bad(f"{where} must be an object with role user or assistant", f"{where}.role", "invalid_messages")
        content = turn.get("content")
        if isinstance(content, str):
            out.append({"role": turn["role"], "content": content})
        elif isinstance(content, list):
            (_assistant if turn["role"] == "assistant" else _user)(content, where, out)
        else:
            raise _bad(f"{where}.content must be a string or a list of content blocks", f"{where}.content", "invalid_messages")
    return out


def _user(blocks: list[Any], where: str, out: list[dict[str, Any]]) -> None:
    """A user turn: its tool results as ``tool`` messages, then the rest as one user message."""
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise _bad(f"{at}: a tool_result needs the tool_use_id of its call", f"{at}.tool_use_id", "invalid_messages")
            given = block.get("content", "")
            text = given if isinstance(given, str) else _text_only(given, f"{at}.content")
            out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        elif kind == "text" and isinstance(block.get("text"), str):
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append(_image(block.get("source"), at))
        elif kind not in ("thinking", "redacted_thinking"):
            raise _bad(f"{at}: a user turn's blocks must be text, image or tool_result here (documents, files and search results need "
                       f"Anthropic's servers), got {kind!r}", at, "unsupported_input")  # fmt: skip
    if parts:
        out.append({"role": "user", "content": parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts})


def _assistant(blocks: list[Any], where: str, out: list[dict[str, Any]]) -> None:
    """An assistant turn: its text, and its tool_use blocks as ``tool_calls``."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise _bad(f"{at}: a tool_use needs an id and a name", at, "invalid_messages")
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
            calls.append({"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}})
        elif kind not in ("thinking", "redacted_thinking"):
            raise _bad(f"{at}: an assistant turn's blocks must be text or tool_use here, got {kind!r}", at, "unsupported_input")
    if not texts and not calls:
        return
    said: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        said["tool_calls"] = calls
    out.append(said)


def _image(source: Any, at: str) -> dict[str, Any]:
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source.get("data"), str) and isinstance(source.get("media_type"), str):
        return {"type": "image_url", "image_url": {"url": f"data:{source['media_type']};base64,{source['data']}"}}
    if kind == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    raise _bad(f"{at}.source: an image must have a base64 or url source here (a file needs Anthropic's Files API), got {kind!r}",
               f"{at}.source", "unsupported_input")  # fmt: skip


def _text_only(value: Any, where: str) -> str:
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in value):
        return "".join(b["text"] for b in value)
    raise _bad(f"{where} must be a string or a list of text blocks", where, "invalid_messages")
