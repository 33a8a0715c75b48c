"""A chat completion request, read: what to decide, under which policy, and what goes upstream.

    response_format json_schema       "schema": that JSON Schema is the schema, the messages
                                      (every turn kept) the prompt
    tools + tool_choice naming one    "tool": that function's ``parameters`` are the schema; the
    function                          ballots vote on its arguments
    neither, with an ``accord`` field "text": a vote on the normalized text (``response_format``
                                      json_object: on a JSON object)
    neither, without one              "pass": the request goes upstream unchanged

The fields accord reads are taken here; every other top-level field is forwarded to the
upstream on each call (the ``extra_body`` convention). Each refusal is a 400 that says why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ._errors import ApiError
from ._policy import Ask, read

#: Top-level fields accord reads (the rest are forwarded).
READ = frozenset({
    "model", "messages", "response_format", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "n",
    "temperature", "max_tokens", "max_completion_tokens", "seed", "stop", "logprobs", "top_logprobs", "accord",
})  # fmt: skip
TEXT_NORMALIZERS = ("nfkc", "collapse_whitespace")  # what "the normalized text" means


@dataclass(frozen=True)
class Job:
    """One request to decide (``mode`` "schema", "tool" or "text"), or to pass through ("pass")."""

    mode: str
    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    schema: dict[str, Any] | None = None
    tool: str | None = None
    ask: Ask = field(default_factory=Ask)
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    forward: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    top_logprobs: int | None = None
    api: str = "chat"  # the API asked: "chat" (chat completions), "responses" (``._responses_api``) or "messages" (``._messages_api``)
    echo: dict[str, Any] = field(default_factory=dict)  # a Responses request's settings its response repeats

    @property
    def schema_param(self) -> str:
        return _PARAMS[self.api][0]

    @property
    def messages_param(self) -> str:
        return _PARAMS[self.api][1]

    @property
    def forward_tag(self) -> str:
        """A short digest of the forwarded fields (they shape the answer, so the ledger key too)."""
        if not self.forward:
            return ""
        text = json.dumps(self.forward, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return "fields:" + hashlib.sha256(text.encode()).hexdigest()[:16]


# each API's names for the schema and the prompt (a 400 names them as the client wrote them)
_PARAMS = {"chat": ("response_format", "messages"), "responses": ("text.format", "input"), "messages": ("output_config.format", "messages")}


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def model_of(body: Any) -> str:
    """The ``model`` a parsed request body names (a 400 when it names none, or is no JSON object)."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model is required: the upstream's model name", "model", "missing_model")
    return model


def read_job(body: Any, base: Ask, *, max_k: int, max_seconds: float) -> Job:
    """The Job of a parsed request body (see the module docstring)."""
    model = model_of(body)
    messages = _messages(body.get("messages"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad("stream must be true or false", "stream")
    schema, tool = _schema_of(body)
    fmt = body.get("response_format")
    json_object = isinstance(fmt, dict) and fmt.get("type") == "json_object"
    if schema is None and "accord" not in body:
        return Job("pass", model, stream=stream)
    if schema is None and body.get("tools"):
        raise _bad("a vote needs one answer shape: a response_format json_schema, or a tool_choice naming one function; "
                   "free text with tools cannot be voted on (leave out the accord field to pass it through)", "tools")  # fmt: skip
    ask = read(body.get("accord"), base, max_k=max_k, max_seconds=max_seconds)
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise _bad("n must be 1 when accord decides the answer: the vote replaces n (ask for accord.k ballots instead)", "n",
                   "n_not_supported")  # fmt: skip
    options = _options(body)
    forward = {k: v for k, v in body.items() if k not in READ}
    if json_object and schema is None:
        forward["response_format"] = fmt  # JSON mode as asked; the vote reads a JSON object
    mode = "tool" if tool is not None else "schema" if schema is not None else "text"
    if mode == "text" and not json_object:
        ask = _with_text_normalizers(ask)
    return Job(mode, model, messages, schema if schema is not None else ({"type": "object"} if json_object else None), tool, ask,
               forward=forward, stream=stream, **options)  # fmt: skip


def read_translated(chat: dict[str, Any], body: Mapping[str, Any], base: Ask, *, api: str, forced: bool, max_k: int,
                    max_seconds: float) -> Job:  # fmt: skip
    """The Job of a request of another ``api`` ("responses", "messages"), read as the chat request
    ``chat`` it asks for: its ``stream`` and ``accord`` fields carried over from ``body``, one
    answer shape required (``forced``: its tool_choice names one tool), and every 400 naming the
    field as that API calls it."""
    chat = {**chat, "stream": body.get("stream", False)}
    if "accord" in body:
        chat["accord"] = body["accord"]
    schema = f"{_PARAMS[api][0]} json_schema"
    json_schema = (chat.get("response_format") or {}).get("type") == "json_schema"
    if json_schema and forced:
        raise _bad(f"give a {schema} or a tool_choice naming one tool, not both", "tool_choice")
    if chat.get("tools") and not forced:
        if json_schema:
            raise _bad(f"a vote needs one answer shape: a {schema} with tools the model may call instead cannot be voted on "
                       "(name one tool in tool_choice, or leave the tools out)", "tools")  # fmt: skip
        raise _bad(f"a vote needs one answer shape: a {schema}, or a tool_choice naming one tool; free text with tools cannot be "
                   "voted on (leave out the accord field to pass it through)", "tools")  # fmt: skip
    try:
        job = read_job(chat, base, max_k=max_k, max_seconds=max_seconds)
    except ApiError as exc:
        exc.param = _renamed(exc.param, api)
        raise
    return replace(job, api=api)


def translated_tools(tools: Any, each: Callable[[Any, int], dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Another API's ``tools`` as chat tools, each read by ``each(tool, index)``; None when not given."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    return [each(tool, i) for i, tool in enumerate(tools)]


def _renamed(param: str | None, api: str) -> str | None:
    """A chat request's parameter name as ``api`` calls it."""
    for chat, other in _RENAMED.get(api, ()):
        if param is not None and param.startswith(chat):
            return other
    return param


# chat request fields -> what another API calls them (prefixes: a field's parts are named by the field)
_RENAMED = {
    "responses": (("response_format", "text.format"), ("messages", "input"), ("max_tokens", "max_output_tokens")),
    "messages": (("response_format", "output_config.format"), ("stop", "stop_sequences")),
}


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise _bad("messages must be a non-empty list of chat messages", "messages", "invalid_messages")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a role", f"messages[{i}]", "invalid_messages")
        out.append(message if "content" in message else {**message, "content": None})  # a tool-calling turn may leave it out
    return out


def _schema_of(body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The schema to decide by and the tool it came from (None, None: free text)."""
    fmt = body.get("response_format")
    choice = body.get("tool_choice")
    named = _named_tool(choice, body.get("tools"))
    if fmt is not None and not isinstance(fmt, dict):
        raise _bad("response_format must be an object", "response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise _bad("response_format.json_schema.schema must be a JSON Schema object", "response_format.json_schema.schema")
        if named is not None:
            raise _bad("give a response_format json_schema or a tool_choice naming a function, not both", "tool_choice")
        if body.get("tools"):
            raise _bad("a vote needs one answer shape: a response_format json_schema with tools the model may call instead "
                       "cannot be voted on (name one function in tool_choice, or leave the tools out)", "tools")  # fmt: skip
        schema = dict(spec["schema"])
        if isinstance(spec.get("name"), str) and "title" not in schema:
            schema["title"] = spec["name"]
        return schema, None
    if named is None:
        return None, None
    function = named.get("function") or {}
    params = function.get("parameters")
    schema = dict(params) if isinstance(params, dict) else {"type": "object", "properties": {}}
    name = function["name"]
    schema.setdefault("title", name)
    if isinstance(function.get("description"), str) and "description" not in schema:
        schema["description"] = function["description"]
    return schema, name


def _named_tool(choice: Any, tools: Any) -> dict[str, Any] | None:
    """The tool a ``tool_choice`` forces: one named, or "required" with a single function."""
    if tools is not None and not isinstance(tools, list):
        raise _bad("tools must be a list", "tools")
    functions = [t for t in tools or [] if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
                 and isinstance(t["function"].get("name"), str)]  # fmt: skip
    name = None
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if not isinstance(name, str):
            raise _bad("tool_choice must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice")
    elif choice == "required" and len(functions) == 1:
        name = functions[0]["function"]["name"]
    if name is None:
        return None
    for tool in functions:
        if tool["function"]["name"] == name:
            return tool
    raise _bad(f"tool_choice names {name!r}, which is not among the tools", "tool_choice")


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request's sampling and output options, each checked, under the names the job takes."""
    out: dict[str, Any] = {}
    for name, (to, check) in _OPTIONS.items():
        value = body.get(name)
        if value is not None:
            out[to] = check(name, value)
    return out


def _temperature(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 2:
        raise _bad("temperature must be a number from 0 to 2", name)
    return float(value)


def _tokens(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(f"{name} must be a positive integer", name)
    return value


def _seed(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad("seed must be an integer", name)
    return value


def _stop(name: str, value: Any) -> tuple[str, ...] | None:
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop must be a string or a list of strings", name)
    return tuple(stops) or None


def _include_usage(name: str, value: Any) -> bool:
    if not isinstance(value, dict):
        raise _bad("stream_options must be an object", name)
    return bool(value.get("include_usage"))


def _logprobs(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad("logprobs must be true or false", name)
    return value


def _top_logprobs(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20:
        raise _bad("top_logprobs must be an integer from 0 to 20", name)
    return value


# a request's option: (the job's name for it, the check that reads it), in the order they are read
# (``max_tokens`` after ``max_completion_tokens``, so that the older name wins when both are given)
_OPTIONS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "temperature": ("temperature", _temperature),
    "max_completion_tokens": ("max_tokens", _tokens),
    "max_tokens": ("max_tokens", _tokens),
    "seed": ("seed", _seed),
    "stop": ("stop", _stop),
    "stream_options": ("include_usage", _include_usage),
    "logprobs": ("logprobs", _logprobs),
    "top_logprobs": ("top_logprobs", _top_logprobs),
}


def _with_text_normalizers(ask: Ask) -> Ask:
    return replace(ask, normalize=tuple(dict.fromkeys((*TEXT_NORMALIZERS, *ask.normalize))))
