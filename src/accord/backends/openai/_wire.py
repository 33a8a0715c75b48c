"""What goes over the wire to an OpenAI-compatible server, and what comes back. No I/O.

:func:`chat_params` turns a :class:`~accord.Request` into the keyword arguments of
``chat.completions.create``, sending each server only the parameters it is known to honour;
:func:`parse` turns the server's answer into a :class:`~accord.Completion`;
:func:`rejected_params` reads a 400/422 that refuses a parameter.

Greedy means greedy over HTTP too: ``temperature`` is always sent (0 by default) and ``top_p`` /
``top_k`` only when the user asked for them.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..._types import Completion, Request, Usage
from ...schema._schema import Schema
from ._caps import Known
from ._errors import Malformed

#: Parameters a server may refuse, which accord then stops sending (``max_tokens`` is renamed).
DROPPABLE = ("temperature", "seed", "response_format", "logprobs", "top_logprobs", "top_p", "top_k", "max_tokens")
#: A logprob gap above this is recorded as this (a second choice at -inf is not JSON).
MAX_GAP = 1e4

_REFUSAL = re.compile(
    r"unsupported|not supported|does not support|unexpected|unrecognized|unknown|not allowed|not permitted"
    r"|extra (?:fields|inputs)|invalid (?:parameter|field)|only the default",
    re.I,
)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Options:
    """The backend's own settings that shape every request."""

    model: str
    max_tokens: int
    logprobs: bool
    top_logprobs: int


def response_format(schema: Schema[Any]) -> dict[str, Any] | None:
    """The ``json_schema`` response format for an object-rooted schema, else None.

    ``strict`` is set when the schema allows it (every object closed and every property
    required, as OpenAI's strict mode demands); objects without ``additionalProperties`` are
    closed first, which only forbids keys validation would ignore.
    """
    root = schema.json_schema
    if not isinstance(root, dict) or not (root.get("type") == "object" or "properties" in root):
        return None
    closed = copy.deepcopy(root)
    strict = _close(closed)
    name = _SCHEMA_NAME.sub("_", schema.name)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": closed, "strict": strict}}


#: The one property a bare schema (a choice, a scalar, a list, a pattern) is wrapped in.
WRAPPER = "answer"


@functools.lru_cache(maxsize=256)
def grammar_schema(schema: Schema[Any], labels: frozenset[str]) -> Schema[Any]:
    """The schema a server's grammar is sent for one request: the run's, with its lists of labels
    bounded (:func:`accord.schema._bounds.bounded_labels`: a list the model keeps adding to closes
    within the first call, not at ``max_tokens``)."""
    if not labels:
        return schema
    from ...schema._bounds import bounded_labels

    return bounded_labels(schema, labels)


def sent(request: Request) -> Request:
    """The request with the schema its ``response_format`` carries (:func:`grammar_schema`)."""
    schema = grammar_schema(request.schema, request.labels)
    return request if schema is request.schema else replace(request, schema=schema)


@functools.lru_cache(maxsize=256)
def format_for(schema: Schema[Any]) -> tuple[dict[str, Any] | None, bool]:
    """The response format to send for a schema, and whether the answer comes wrapped.

    Made once per schema object (a copy of its JSON Schema, closed: linear in the schema) and
    shared by every request that sends it: not to be changed in place.

    An object-rooted schema goes as it is (:func:`response_format`). Any other schema with a JSON
    Schema (``Literal[...]``, ``int``, ``list[int]``, ``accord.Regex``) goes wrapped in an object
    with one required property, ``{"answer": ...}``, since strict mode wants an object root
    (instructor wraps a bare type the same way); :func:`unwrap` takes the answer out again. A
    grammar has no JSON Schema: None.
    """
    direct = response_format(schema)
    if direct is not None:
        return direct, False
    inner = schema.json_schema
    if not isinstance(inner, dict):
        return None, False
    inner = copy.deepcopy(inner)
    root: dict[str, Any] = {"type": "object", "required": [WRAPPER], "additionalProperties": False}
    for key in ("$defs", "definitions"):
        if key in inner:
            root[key] = inner.pop(key)  # references (#/$defs/...) resolve from the root
    root["properties"] = {WRAPPER: inner}
    strict = _close(root)
    name = _SCHEMA_NAME.sub("_", schema.name)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": root, "strict": strict}}, True


def usage_of(usage: Any) -> Usage:
    """A chat completion's usage: its tokens, and of the prompt's those read from the server's
    prompt cache (``prompt_tokens_details.cached_tokens``, where the server says)."""
    details = getattr(usage, "prompt_tokens_details", None)
    if isinstance(details, dict):
        cached = details.get("cached_tokens")
    else:
        cached = getattr(details, "cached_tokens", None)
    return Usage(getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None), 0.0, 1,
                 cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else None)


def unwrap(text: str) -> str | None:
    """The answer inside a wrapped reply ``{"answer": X}``: X itself when it is a string, else its
    JSON; None when the text is not exactly such an object (cut off, or not wrapped)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or set(data) != {WRAPPER}:
        return None
    value = data[WRAPPER]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")


def _close(node: Any) -> bool:
    """Close every object in place; return whether the whole schema is strict-compatible."""
    if not isinstance(node, dict):
        return True
    strict = True
    if node.get("type") == "object" or isinstance(node.get("properties"), dict):
        node.setdefault("additionalProperties", False)
        strict = node["additionalProperties"] is False and set(node.get("required", ())) >= set(node.get("properties", {}))
    children: list[Any] = []
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            children += node[key].values()
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            children += node[key]
    for key in _SCHEMA_ONE:
        value = node.get(key)
        children += value if isinstance(value, list) else [value]
    return all([_close(child) for child in children]) and strict  # noqa: C419 - a list: every child is closed, none skipped


def chat_params(request: Request, options: Options, known: Known, *, structured: bool) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for one request.

    ``structured``: send ``response_format``. The messages are the request's as the core built
    them: the schema's rendering in them unless the policy left it out, with or without
    ``response_format`` (one prompt, whatever the server is later found to honour).
    """
    settings = request.settings
    params: dict[str, Any] = {"model": options.model, "messages": request.messages}
    extra: dict[str, Any] = {}
    max_tokens = settings.max_tokens or options.max_tokens
    if known.accepts("max_tokens"):
        params["max_tokens"] = max_tokens
    elif known.accepts("max_completion_tokens"):
        params["max_completion_tokens"] = max_tokens
    if known.accepts("temperature"):
        params["temperature"] = settings.temperature
    if settings.seed is not None and known.accepts("seed"):
        params["seed"] = settings.seed
    if settings.top_p is not None and known.accepts("top_p"):
        params["top_p"] = settings.top_p
    if settings.top_k is not None and known.accepts("top_k"):
        extra["top_k"] = settings.top_k  # not in OpenAI's API; vLLM, SGLang and llama.cpp read it
    if settings.stop:
        params["stop"] = list(settings.stop)
    if structured:
        fmt, _ = format_for(request.schema)
        if fmt is not None:
            params["response_format"] = fmt
    if options.logprobs and known.logprobs not in ("rejected", "ignored"):
        params["logprobs"] = True
        params["top_logprobs"] = options.top_logprobs
    if extra:
        params["extra_body"] = extra
    return params


def wire_names(params: Mapping[str, Any]) -> set[str]:
    """The top-level field names the server receives."""
    return (set(params) - {"extra_body"}) | set(params.get("extra_body") or {})


def rejected_params(
    exc: BaseException, sent: Mapping[str, Any], droppable: Sequence[str] = DROPPABLE, spelled: Mapping[str, tuple[str, ...]] | None = None,
) -> frozenset[str]:
    """The parameters a 400/422 answer refuses, among those sent and ``droppable``; empty if none.

    A parameter is named by the error's ``param`` (``text.format.schema`` names ``text``) or in
    its message, as itself or as one of its ``spelled`` names (the Responses API's ``include`` is
    refused as ``logprobs`` by vLLM; its ``text`` is looked for only as ``text.format``, the word
    alone being too common in a message)."""
    if getattr(exc, "status_code", None) not in (400, 422):
        return frozenset()
    spelled = spelled or {}
    candidates = [name for name in droppable if name in wire_names(sent)]
    param, code = getattr(exc, "param", None), getattr(exc, "code", None)
    text = f"{getattr(exc, 'message', '')} {json.dumps(getattr(exc, 'body', None), default=str)}"
    if isinstance(param, str):
        named = [name for name in candidates if param.split(".")[0] == name or param in spelled.get(name, ())]
        if named and (code in ("unsupported_parameter", "unsupported_value") or _REFUSAL.search(text)):
            return frozenset(named[:1])
    if not _REFUSAL.search(text):
        return frozenset()
    return frozenset(name for name in candidates
                     if any(re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", text) for word in spelled.get(name, (name,))))


@dataclass(frozen=True)
class Parsed:
    """One usable chat completion."""

    completion: Completion
    logprobs_seen: bool
    json_object: bool | None  # whether the whole text is one JSON object (None: cannot tell)


def parse(response: Any) -> Parsed:
    """Turn the client's answer into a Completion; raise :class:`Malformed` when unusable."""
    choices = getattr(response, "choices", None)
    if not hasattr(response, "choices"):
        raise Malformed(f"expected a chat completion, got {_excerpt(response)}")
    if not choices:
        raise Malformed("the completion has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise Malformed("the first choice has no message")
    text = _text(getattr(message, "content", None))
    finish = getattr(choice, "finish_reason", None)
    usage = getattr(response, "usage", None)
    logprobs = getattr(choice, "logprobs", None)
    margins, score = margins_of(logprobs)
    fingerprint, answered = getattr(response, "system_fingerprint", None), getattr(response, "model", None) or None
    meta: dict[str, Any] = {"system_fingerprint": fingerprint, **({"model": answered} if answered else {})}
    refusal = getattr(message, "refusal", None)
    if refusal:
        meta["refusal"] = str(refusal)[:500]
    completion = Completion(
        text=text,
        finish_reason=finish,
        usage=usage_of(usage),
        margins=margins,
        score=score,
        meta=meta,
        pieces=pieces_of(logprobs) if margins is not None else None,
        model=answered if isinstance(answered, str) else None,
        engine="openai-compatible",
        system_fingerprint=str(fingerprint) if fingerprint else None,
    )
    return Parsed(completion, margins is not None or score is not None, _is_json_object(text, finish))


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(getattr(p, "text", "")) for p in content)
    return str(content)


def margins_of(logprobs: Any) -> tuple[tuple[float, ...] | None, float | None]:
    """Per-token gap between the best and second-best log-probability, and the mean logprob.

    The gap between two log-probabilities equals the gap between their logits. Margins are None
    when any token comes with fewer than two alternatives (the gate then stands aside).
    """
    content = getattr(logprobs, "content", None)
    if not content:
        return None, None
    chosen: list[float] = []
    gaps: list[float] | None = []
    for token in content:
        chosen.append(float(getattr(token, "logprob", 0.0)))
        tops = sorted((float(t.logprob) for t in getattr(token, "top_logprobs", None) or ()), reverse=True)
        if gaps is not None and len(tops) >= 2 and math.isfinite(tops[0]):
            gap = tops[0] - tops[1]
            gaps.append(min(gap, MAX_GAP) if not math.isnan(gap) else MAX_GAP)
        else:
            gaps = None
    finite = [c for c in chosen if math.isfinite(c)]
    score = sum(finite) / len(finite) if finite else None
    return (tuple(gaps) if gaps else None), score


def pieces_of(logprobs: Any) -> tuple[str, ...] | None:
    """The text of each token the logprobs list (aligned with :func:`margins_of`'s margins).

    From the tokens' UTF-8 ``bytes`` where the server gives them (a character split across tokens
    belongs to the token holding its first byte), else from their ``token`` strings."""
    content = getattr(logprobs, "content", None)
    if not content:
        return None
    parts = [part for token in content if isinstance(part := getattr(token, "bytes", None), list)]
    if len(parts) == len(content):
        try:
            text = bytes(b for part in parts for b in part).decode("utf-8")
        except (UnicodeDecodeError, ValueError, TypeError):
            text = None
        if text is not None:
            return _split(text, [len(part) for part in parts])
    return tuple(str(getattr(token, "token", "") or "") for token in content)


def _split(text: str, sizes: list[int]) -> tuple[str, ...]:
    """``text`` cut into pieces of ``sizes`` UTF-8 bytes each (a character to the piece holding its first byte)."""
    starts, at = [], 0
    for ch in text:
        starts.append(at)
        at += len(ch.encode("utf-8"))
    pieces, first, end = [], 0, 0
    for size in sizes:
        end += size
        last = first
        while last < len(starts) and starts[last] < end:
            last += 1
        pieces.append(text[first:last])
        first = last
    return tuple(pieces)


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
