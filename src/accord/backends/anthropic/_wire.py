"""What goes over the wire to a Messages server, and what comes back. No I/O.

:func:`message_params` turns a :class:`~accord.Request` into the keyword arguments of
``messages.create``; :func:`parse` turns the answer (a ``Message``) into a
:class:`~accord.Completion`; :func:`refused` reads a 400 that refuses a parameter.

The schema travels one of three ways (``how``; :mod:`._caps`):

    "output_config"   ``output_config={"format": {"type": "json_schema", "schema": ...}}``, the
                      schema as the SDK's ``transform_schema`` makes it for Claude (constraints
                      Claude's structured outputs cannot enforce move into descriptions; accord
                      validates the full schema anyway)
    "tool"            one tool whose ``input_schema`` is the schema, and ``tool_choice`` naming
                      it: the answer is the tool call's input
    "off"             neither: the schema only in the prompt (where the core always shows it)

A schema with a root other than an object (a ``Literal``, an ``int``, a list) goes wrapped in
``{"answer": ...}`` either way, as the OpenAI backend sends it (:func:`accord.backends.openai._wire.format_for`),
and the answer is unwrapped. Sampling: the run's ``temperature`` (0 unless it asks for another)
and, when it sets them, ``top_p`` and ``top_k`` go in ``extra_body`` (the SDK names no sampling
parameters); a server that refuses one (a newer Claude may) gets it no more, and samples as it
will. Claude at temperature 0 still varies between calls: the vote, not the temperature, makes the
answer stable. ``seed`` has no Messages field.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..._types import Completion, Request, Usage
from ...prompt._prompt import render_feedback
from ...schema._schema import Schema
from ..openai._errors import Malformed
from ..openai._wire import format_for
from ._cache import Mark, mark
from ._caps import Known
from ._turns import turns

#: Parameters a server may refuse: the structure ones move it down a way, the sampling ones are dropped.
STRUCTURE = ("output_config", "tools")
SAMPLING = ("temperature", "top_p", "top_k")
#: Claude's stop reasons as accord's finish reasons ("length": the answer was cut off).
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
          "model_context_window_exceeded": "length"}
_REFUSAL = re.compile(
    r"unsupported|not supported|does not support|unexpected|unrecognized|unknown|not allowed|not permitted"
    r"|extra (?:fields|inputs)|invalid|not available", re.I,
)
_MENTIONS = {
    "output_config": re.compile(r"output_config|output_format|structured output|json_schema", re.I),
    "tools": re.compile(r"\btools?\b|tool_choice|tool use", re.I),
    **{name: re.compile(rf"(?<![\w.]){name}(?!\w)") for name in SAMPLING},
}


@dataclass(frozen=True)
class Options:
    """The backend's own settings that shape every request."""

    model: str
    max_tokens: int
    cache_min_tokens: int


@dataclass(frozen=True)
class Params:
    """One call's keyword arguments, and what was decided about the prompt cache."""

    kwargs: dict[str, Any]
    cache: Mark


def message_params(request: Request, options: Options, known: Known, *, how: str) -> Params:
    """The keyword arguments of ``messages.create`` for one request, the schema sent ``how``."""
    settings = request.settings
    system, sent = turns(request.messages)
    kwargs: dict[str, Any] = {"model": options.model, "max_tokens": settings.max_tokens or options.max_tokens}
    fmt, _ = format_for(request.schema)
    tool_chars = 0
    if fmt is not None and how == "output_config":
        kwargs["output_config"] = {"format": claude_format(request.schema)}
    elif fmt is not None and how == "tool":
        tool = {"name": fmt["json_schema"]["name"], "description": "Give the answer.", "input_schema": fmt["json_schema"]["schema"]}
        kwargs["tools"], kwargs["tool_choice"] = [tool], {"type": "tool", "name": tool["name"]}
        tool_chars = len(json.dumps(tool))
    feedback = render_feedback(request.feedback, request.schema) if request.feedback is not None else None
    cache = mark(system, sent, feedback=feedback, tool_chars=tool_chars, minimum=options.cache_min_tokens)
    kwargs["messages"] = sent
    if system:
        kwargs["system"] = system
    if settings.stop:
        kwargs["stop_sequences"] = list(settings.stop)
    extra: dict[str, Any] = {}
    if known.accepts("temperature"):
        extra["temperature"] = settings.temperature
    if settings.top_p is not None and known.accepts("top_p"):
        extra["top_p"] = settings.top_p
    if settings.top_k is not None and known.accepts("top_k"):
        extra["top_k"] = settings.top_k
    if extra:
        kwargs["extra_body"] = extra
    return Params(kwargs, cache)


@functools.lru_cache(maxsize=256)
def claude_format(schema: Schema[Any]) -> dict[str, Any] | None:
    """The ``output_config.format`` of a schema (wrapped when its root is not an object:
    :func:`format_for`), its JSON Schema as the SDK's ``transform_schema`` makes it for Claude, or
    as it is where that cannot; None for a schema with no JSON Schema. Made once per schema
    object: not to be changed in place."""
    import anthropic

    fmt, _ = format_for(schema)
    if fmt is None:
        return None
    root = fmt["json_schema"]["schema"]
    with contextlib.suppress(ValueError, TypeError, KeyError):  # a node without a type (an untyped value): sent as it is
        root = anthropic.transform_schema(root)
    return {"type": "json_schema", "schema": root}


def wire_names(kwargs: Mapping[str, Any]) -> set[str]:
    """The top-level field names the server receives."""
    return (set(kwargs) - {"extra_body"}) | set(kwargs.get("extra_body") or {})


def refused(exc: BaseException, sent: Mapping[str, Any], droppable: tuple[str, ...]) -> frozenset[str]:
    """The parameters a 400/422 refuses, among those sent and ``droppable``; empty if none."""
    if getattr(exc, "status_code", None) not in (400, 422):
        return frozenset()
    text = f"{getattr(exc, 'message', '')} {json.dumps(getattr(exc, 'body', None), default=str)}"
    if not _REFUSAL.search(text):
        return frozenset()
    names = wire_names(sent)
    return frozenset(name for name in droppable if name in names and _MENTIONS[name].search(text))


def usage_of(usage: Any) -> Usage:
    """A Message's usage: every input token (fresh, read from the prompt cache and written to it)
    as ``prompt_tokens``, the reads as ``cached_tokens``, the writes as ``cache_write_tokens``
    (each None where the server does not say)."""
    fresh, read, wrote = (_count(getattr(usage, name, None)) for name in
                          ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    prompt = None if fresh is None and read is None and wrote is None else (fresh or 0) + (read or 0) + (wrote or 0)
    return Usage(prompt, _count(getattr(usage, "output_tokens", None)), 0.0, 1, cached_tokens=read, cache_write_tokens=wrote)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Parsed:
    """One usable Message."""

    completion: Completion
    tool_used: bool  # the answer came as a tool call
    json_object: bool | None  # whether the whole text is one JSON object (None: cannot tell)


def parse(response: Any) -> Parsed:
    """Turn the client's answer into a Completion; raise :class:`Malformed` when unusable.

    The text is the first tool call's input (as JSON) when there is one, else the text blocks."""
    content = getattr(response, "content", None)
    if not isinstance(content, list):
        raise Malformed(f"expected a Message, got {_excerpt(response)}")
    tool = next((block for block in content if getattr(block, "type", None) == "tool_use"), None)
    if tool is not None:
        text = json.dumps(getattr(tool, "input", None), ensure_ascii=False)
    else:
        text = "".join(str(getattr(block, "text", "") or "") for block in content if getattr(block, "type", None) == "text")
    stop = getattr(response, "stop_reason", None)
    finish = FINISH.get(stop, stop) if isinstance(stop, str) else None
    answered = getattr(response, "model", None)
    model = answered if isinstance(answered, str) and answered else None
    meta: dict[str, Any] = {"stop_reason": stop, **({"model": model} if model else {})}
    if stop == "refusal":
        meta["refusal"] = text[:500]
    completion = Completion(text=text, finish_reason=finish, usage=usage_of(getattr(response, "usage", None)), meta=meta, model=model,
                            engine="anthropic")
    return Parsed(completion, tool is not None, _is_json_object(text, finish))


def _is_json_object(text: str, finish: str | None) -> bool | None:
    if finish != "stop" or not text.strip():
        return None
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _excerpt(value: Any) -> str:
    text = " ".join(str(value)[:120].split())
    return f"{type(value).__name__} {text!r}"
