"""A Responses API request (``POST /v1/responses``), read as the chat completion request it asks
for, and so as the same :class:`~._translate.Job` a chat request becomes.

    input                 a string (one user message), or a list of items:
                            message              (role user, system, developer, assistant; content
                                                 a string, or input_text / output_text / refusal
                                                 / input_image parts) -> a chat message
                            function_call        -> the ``tool_calls`` of an assistant message
                            function_call_output -> a ``tool`` message
                            reasoning            -> left out (a chat upstream has no place for it)
    instructions          -> a system message, first
    text.format           json_schema: that JSON Schema is the schema; json_object: JSON mode; text
    tools, tool_choice    function tools; a tool_choice naming one function (or "required" with
                          one function) makes its ``parameters`` the schema: the ballots vote on
                          its arguments
    max_output_tokens     -> max_tokens;  temperature, top_p, user: as they are
    include               "message.output_text.logprobs" (with ``top_logprobs``): the winning
                          ballot's logprobs
    metadata, store: false, truncation, parallel_tool_calls, service_tier, prompt_cache_key,
    safety_identifier     taken, and repeated in the response; nothing a chat upstream reads
    accord                the same policy and caps as chat completions (``._policy``)

Any other top-level field is forwarded on every ballot, as for chat completions. What the proxy
cannot honour is a 400 that says why: ``previous_response_id``, ``conversation``,
``store: true``, ``background: true`` and ``item_reference`` items ask for state it does not
keep; built-in tools (web search, files, ...) and file inputs need OpenAI's own servers.

:func:`decides` says whether accord decides a request (a schema, a named function, or an
``accord`` field); the rest passes through (``._app``): to the upstream's own ``/responses``,
or, where it has none, as :func:`chat_body` to its ``/chat/completions``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ._errors import ApiError
from ._policy import Ask
from ._translate import Job, read_translated, translated_tools

#: Responses fields taken and repeated in the response, with nothing sent upstream.
TAKEN = frozenset({"metadata", "store", "truncation", "parallel_tool_calls", "service_tier", "prompt_cache_key", "safety_identifier",
                   "stream_options", "max_tool_calls", "prompt_cache_retention"})  # fmt: skip
#: Responses fields read into the chat request.
READ = frozenset({"model", "input", "instructions", "text", "tools", "tool_choice", "max_output_tokens", "temperature", "top_p", "user",
                  "stream", "include", "top_logprobs", "reasoning", "accord"})  # fmt: skip
_STATEFUL = {
    "previous_response_id": "previous_response_id names a stored response",
    "conversation": "conversation names a stored conversation",
    "prompt": "prompt names a stored prompt template",
}
_LOGPROBS = "message.output_text.logprobs"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def refuse_state(body: dict[str, Any]) -> None:
    """The 400 for a request that asks for state this proxy does not keep."""
    for name, what in _STATEFUL.items():
        if body.get(name) is not None:
            raise _bad(f"{what}, and accord serve keeps no state between requests: send the whole conversation in input instead",
                       name, "stateful_not_supported")  # fmt: skip
    if body.get("store") is True:
        raise _bad("store: true asks the server to keep the response, and accord serve keeps no state between requests: "
                   "send store: false (or leave it out)", "store", "stateful_not_supported")  # fmt: skip
    if body.get("background") is True:
        raise _bad("background: true needs a stored response to poll, and accord serve keeps no state: leave it out", "background",
                   "stateful_not_supported")  # fmt: skip


def decides(body: dict[str, Any]) -> bool:
    """Whether accord decides this request: a json_schema format, a tool_choice naming a function, or an ``accord`` field."""
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return True
    return _named(body.get("tool_choice"), body.get("tools")) or "accord" in body


def _named(choice: Any, tools: Any) -> bool:
    """Whether ``tool_choice`` forces one function: it names one, or says "required" with one function tool."""
    if isinstance(choice, dict):
        return choice.get("type") == "function"
    functions = [t for t in tools if isinstance(t, dict) and t.get("type") == "function"] if isinstance(tools, list) else []
    return choice == "required" and len(functions) == 1


def read_responses_job(body: dict[str, Any], base: Ask, *, max_k: int, max_seconds: float) -> Job:
    """The Job of a Responses request accord decides (see the module docstring)."""
    forced = _named(body.get("tool_choice"), body.get("tools"))
    job = read_translated(chat_body(body), body, base, api="responses", forced=forced, max_k=max_k, max_seconds=max_seconds)
    return replace(job, echo=echo(body))


def echo(body: dict[str, Any]) -> dict[str, Any]:
    """The request's settings a response object repeats (OpenAI's response carries them)."""
    return {
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "text": body.get("text") or {"format": {"type": "text"}},
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "truncation": body.get("truncation") or "disabled",
        "user": body.get("user"),
        "top_logprobs": body.get("top_logprobs"),
        "service_tier": body.get("service_tier"),
        "store": False,
    }


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion request a Responses request asks for (without ``stream`` and ``accord``)."""
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages(body)}
    fmt = _format(body.get("text"))
    if fmt is not None:
        chat["response_format"] = fmt
    _tools(body, chat)
    for name, to in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p"), ("user", "user")):
        if body.get(name) is not None:
            chat[to] = body[name]
    effort = (body.get("reasoning") or {}).get("effort") if isinstance(body.get("reasoning"), dict) else None
    if effort is not None:
        chat["reasoning_effort"] = effort
    _logprobs(body, chat)
    for name, value in body.items():  # fields the Responses API does not have: forwarded, as for chat completions
        if name not in READ and name not in TAKEN and name not in _STATEFUL and name != "background":
            chat.setdefault(name, value)
    return chat


def _tools(body: dict[str, Any], chat: dict[str, Any]) -> None:
    """``tools``, ``tool_choice`` and ``parallel_tool_calls`` in the chat request's shape."""
    tools = translated_tools(body.get("tools"), _tool)
    if tools is not None:
        chat["tools"] = tools
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    if isinstance(body.get("parallel_tool_calls"), bool) and tools:
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]


def _logprobs(body: dict[str, Any], chat: dict[str, Any]) -> None:
    """``include`` asking for the output's logprobs: ``logprobs`` (and ``top_logprobs``) on the chat request."""
    include = body.get("include")
    if include is not None and (not isinstance(include, list) or not all(isinstance(i, str) for i in include)):
        raise _bad("include must be a list of strings", "include")
    if include and _LOGPROBS in include:
        chat["logprobs"] = True
        if body.get("top_logprobs") is not None:
            chat["top_logprobs"] = body["top_logprobs"]


def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages."""
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise _bad("instructions must be a string", "instructions")
        if instructions:
            out.append({"role": "system", "content": instructions})
    given = body.get("input")
    if isinstance(given, str):
        out.append({"role": "user", "content": given})
    elif isinstance(given, list) and given:
        for i, item in enumerate(given):
            _item(item, i, out)
    else:
        raise _bad("input must be a string or a non-empty list of input items", "input", "invalid_input")
    if not out:
        raise _bad("input holds no message a model can read", "input", "invalid_input")
    return out


def _item(item: Any, i: int, out: list[dict[str, Any]]) -> None:
    where = f"input[{i}]"
    if not isinstance(item, dict):
        raise _bad(f"{where} must be an object", where, "invalid_input")
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        role = _ROLES.get(item.get("role", ""))
        if role is None:
            raise _bad(f"{where}.role must be user, assistant, system or developer, got {item.get('role')!r}", f"{where}.role", "invalid_input")
        out.append({"role": role, "content": _content(item.get("content"), where)})
    elif kind == "function_call":
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments")
        if not isinstance(call_id, str) or not isinstance(name, str) or not isinstance(arguments, str):
            raise _bad(f"{where}: a function_call needs call_id, name and arguments (strings)", where, "invalid_input")
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        last = out[-1] if out else None
        if last is not None and last["role"] == "assistant" and (last.get("tool_calls") or isinstance(last.get("content"), str)):
            last.setdefault("tool_calls", []).append(call)  # calls made in one turn: one assistant message
        else:
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind == "function_call_output":
        call_id, output = item.get("call_id"), item.get("output")
        if not isinstance(call_id, str):
            raise _bad(f"{where}: a function_call_output needs the call_id of its call", where, "invalid_input")
        text = output if isinstance(output, str) else _text_only(output, f"{where}.output")
        out.append({"role": "tool", "tool_call_id": call_id, "content": text})
    elif kind == "reasoning":
        return
    elif kind == "item_reference":
        raise _bad(f"{where}: an item_reference names a stored item, and accord serve keeps no state: send the item itself", where,
                   "stateful_not_supported")  # fmt: skip
    else:
        raise _bad(f"{where}: items of type {kind!r} are not supported here (accord serve takes messages, function_call and "
                   "function_call_output items)", where, "unsupported_input")  # fmt: skip


def _content(content: Any, where: str) -> Any:
    """A message's content as a chat message's: a string, or a list of text and image parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise _bad(f"{where}.content must be a string or a non-empty list of content parts", f"{where}.content", "invalid_input")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": part["refusal"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            image = {"url": part["image_url"], **({"detail": part["detail"]} if part.get("detail") else {})}
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise _bad(f"{at}: a content part must be input_text, output_text, refusal or input_image with an image_url "
                       f"(files and stored images need OpenAI's servers), got {kind!r}", at, "unsupported_input")  # fmt: skip
    if all(p["type"] == "text" for p in parts):
        return parts[0]["text"] if len(parts) == 1 else parts
    return parts


def _text_only(value: Any, where: str) -> str:
    if isinstance(value, list) and all(isinstance(p, dict) and p.get("type") in ("input_text", "output_text") for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    raise _bad(f"{where} must be a string or a list of input_text parts", where, "invalid_input")


def _format(text: Any) -> dict[str, Any] | None:
    """``text.format`` as a chat ``response_format`` (None: free text)."""
    if text is None:
        return None
    if not isinstance(text, dict):
        raise _bad("text must be an object, e.g. {\"format\": {\"type\": \"json_schema\", ...}}", "text")
    fmt = text.get("format")
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise _bad("text.format.schema must be a JSON Schema object", "text.format.schema")
        spec = {"name": fmt.get("name") or "response", "schema": fmt["schema"]}
        for name in ("strict", "description"):
            if fmt.get(name) is not None:
                spec[name] = fmt[name]
        return {"type": "json_schema", "json_schema": spec}
    raise _bad(f"text.format.type must be text, json_object or json_schema, got {kind!r}", "text.format")


def _tool(tool: Any, i: int) -> dict[str, Any]:
    where = f"tools[{i}]"
    if not isinstance(tool, dict) or tool.get("type") != "function":
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise _bad(f"{where}: only function tools are supported here; {kind!r} is a tool OpenAI's own servers run", where,
                   "unsupported_tool")  # fmt: skip
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise _bad(f"{where}.name is required: the function's name", f"{where}.name")
    function = {"name": tool["name"]}
    for name in ("description", "parameters", "strict"):
        if tool.get(name) is not None:
            function[name] = tool[name]
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function":
        if not isinstance(choice.get("name"), str):
            raise _bad("tool_choice must name a function: {\"type\": \"function\", \"name\": ...}", "tool_choice")
        return {"type": "function", "function": {"name": choice["name"]}}
    raise _bad("tool_choice must be auto, none, required or {\"type\": \"function\", \"name\": ...}", "tool_choice")
