"""The Responses API on the wire (``models.openai(api="responses")``): what goes to
``POST /v1/responses`` and what comes back. No I/O; the second wire module beside :mod:`._wire`.

One request is the chat completion :func:`._wire.chat_params` decides (greedy ``temperature``,
``seed``, ``top_p``/``top_k`` only when asked, the schema, the logprobs), spelled for the
Responses API by :func:`spelled`:

    messages                      input (the same messages: the system prompt stays a system
                                  message, so the server renders the prompt the chat path renders)
    max_tokens                    max_output_tokens
    response_format json_schema   text={"format": {"type": "json_schema", "name", "schema", "strict"}}
    logprobs, top_logprobs        include=["message.output_text.logprobs"], top_logprobs
    seed, stop, top_k             extra_body (not in OpenAI's Responses API; vLLM reads them)
                                  store=False: accord never reads a response back, and a server
                                  should not keep every ballot

What a server refuses is dropped and remembered as on the chat path (:data:`DROPPABLE`, in this
API's words). :func:`parse` reads a response into the :class:`._wire.Parsed` the chat path reads:
the text of its ``output_text`` parts, the finish reason from its status (``completed`` is
"stop"; ``incomplete`` for ``max_output_tokens`` is "length"), the usage (``input_tokens``,
``output_tokens``, ``input_tokens_details.cached_tokens``), a refusal into the meta, and the
per-token logprobs of the ``output_text`` parts (``{token, logprob, bytes, top_logprobs}``,
the shape :func:`._wire.margins_of` reads), so the margin gate and the floor learner work as
they do over chat completions. :class:`Events` puts a streamed response back together.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from ..._types import Completion, Request, Usage
from . import _wire as wire
from ._caps import Known
from ._chunks import Chunks
from ._errors import Malformed
from ._probe import probe_params as chat_probe

#: What ``include`` asks for: the answer's tokens with their alternatives.
LOGPROBS = "message.output_text.logprobs"
#: Parameters a server may refuse, which accord then stops sending (``stop`` is the user's: never dropped).
DROPPABLE = ("temperature", "seed", "text", "include", "top_logprobs", "top_p", "top_k", "max_output_tokens", "store")
#: How an error names a refused parameter besides its own name (:func:`._wire.rejected_params`).
SPELLED = {"text": ("text.format",), "include": ("include", "logprobs")}
#: Where ``chat_params`` puts what the Responses API has no field for.
_EXTRA = ("seed", "stop")
_FINISH = {"max_output_tokens": "length"}


def params(request: Request, options: wire.Options, known: Known, *, structured: bool) -> dict[str, Any]:
    """The keyword arguments of ``responses.create`` for one request: the chat path's, spelled
    for this API (:func:`spelled`), without what the server refused."""
    chat = wire.chat_params(request, options, Known(logprobs=known.logprobs), structured=structured)
    return without(spelled(chat), known.rejected)


def probe_params(model: str, known: Known) -> dict[str, Any] | None:
    """The ``response_format`` probe (:func:`._probe.probe_params`) as a response: does the
    server honour ``text.format``? None when it refuses it."""
    chat = chat_probe(model, Known(logprobs=known.logprobs, response_format=known.response_format))
    return None if chat is None else without(spelled(chat), known.rejected)


def spelled(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion's keyword arguments as the Responses API's (see the module docstring)."""
    out: dict[str, Any] = {"model": chat["model"], "input": input_items(chat["messages"]), "store": False}
    extra = dict(chat.get("extra_body") or {})
    tokens = chat.get("max_tokens", chat.get("max_completion_tokens"))
    if tokens is not None:
        out["max_output_tokens"] = tokens
    for name in ("temperature", "top_p"):
        if name in chat:
            out[name] = chat[name]
    extra.update({name: chat[name] for name in _EXTRA if name in chat})
    fmt = chat.get("response_format")
    if fmt is not None:
        out["text"] = {"format": text_format(fmt)}
    if chat.get("logprobs"):
        out["include"] = [LOGPROBS]
        out["top_logprobs"] = chat["top_logprobs"]
    if extra:
        out["extra_body"] = extra
    return out


def text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """A chat ``response_format`` as the Responses API's ``text.format`` (the ``json_schema`` unwrapped)."""
    if response_format.get("type") != "json_schema":
        return dict(response_format)
    inner = response_format["json_schema"]
    return {"type": "json_schema", "name": inner["name"], "schema": inner["schema"], "strict": inner["strict"]}


def input_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as the Responses API's input messages: a string content as it is; content
    parts renamed (``text`` is ``input_text``, ``output_text`` in an assistant's; ``image_url``
    is ``input_image``)."""
    return [{**m, "content": _parts(m["content"], m.get("role"))} if isinstance(m.get("content"), list) else m for m in messages]


def _parts(parts: list[Any], role: Any) -> list[Any]:
    return [_part(part, role) for part in parts]


def _part(part: Any, role: Any) -> Any:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind == "text":
        return {"type": "output_text" if role == "assistant" else "input_text", "text": part.get("text", "")}
    if kind == "image_url":
        url = part.get("image_url")
        return {"type": "input_image", "image_url": url.get("url") if isinstance(url, dict) else url}
    return part


def without(sent: dict[str, Any], rejected: frozenset[str]) -> dict[str, Any]:
    """``sent`` without the parameters refused (in ``extra_body`` too)."""
    if not rejected:
        return sent
    out = {k: v for k, v in sent.items() if k not in rejected}
    if "extra_body" in out:
        extra = {k: v for k, v in out["extra_body"].items() if k not in rejected}
        if extra:
            out["extra_body"] = extra
        else:
            del out["extra_body"]
    return out


def rejected_params(exc: BaseException, sent: Mapping[str, Any]) -> frozenset[str]:
    """The parameters a 400/422 answer refuses, in this API's words (:func:`._wire.rejected_params`)."""
    return wire.rejected_params(exc, sent, DROPPABLE, SPELLED)


# -- what comes back ---------------------------------------------------------------------------


def parse(response: Any) -> wire.Parsed:
    """Turn a response into a Completion; raise :class:`Malformed` when unusable (not a
    response, or one that failed)."""
    if not hasattr(response, "output"):
        raise Malformed(f"expected a response, got {wire._excerpt(response)}")
    status = getattr(response, "status", None)
    if status in ("failed", "cancelled"):
        error = getattr(response, "error", None)
        raise Malformed(f"the response {status}" + (f": {getattr(error, 'message', error)}" if error else ""))
    texts, refusals = [], []
    for part in _parts_of(response):
        if getattr(part, "type", None) == "output_text":
            texts.append(str(getattr(part, "text", "") or ""))
        elif getattr(part, "type", None) == "refusal":
            refusals.append(str(getattr(part, "refusal", "") or ""))
    text, finish = "".join(texts), finish_of(response)
    logprobs = answer(response).logprobs
    margins, score = wire.margins_of(logprobs)
    answered = getattr(response, "model", None) or None
    meta: dict[str, Any] = {"system_fingerprint": None, **({"model": answered} if answered else {})}
    if refusals:
        meta["refusal"] = "".join(refusals)[:500]
    completion = Completion(
        text=text,
        finish_reason=finish,
        usage=usage_of(getattr(response, "usage", None)),
        margins=margins,
        score=score,
        meta=meta,
        pieces=wire.pieces_of(logprobs) if margins is not None else None,
        model=answered if isinstance(answered, str) else None,
        engine="openai-compatible",
    )
    return wire.Parsed(completion, margins is not None or score is not None, wire._is_json_object(text, finish))


def answer(response: Any) -> Any:
    """The answer's tokens as a chat choice holds them (``.logprobs.content``: what
    :func:`._wire.margins_of` and :func:`._calibrate.steps_of` read): the logprobs of every
    ``output_text`` part, in order."""
    tokens = [token for part in _parts_of(response) if getattr(part, "type", None) == "output_text"
              for token in getattr(part, "logprobs", None) or ()]
    return SimpleNamespace(logprobs=SimpleNamespace(content=tokens) if tokens else None)


def _parts_of(response: Any) -> list[Any]:
    """The content parts of the response's messages (reasoning and tool calls are not the answer)."""
    return [part for item in getattr(response, "output", None) or () if getattr(item, "type", None) == "message"
            for part in getattr(item, "content", None) or ()]


def finish_of(response: Any) -> str | None:
    """"stop" for a completed response; for an incomplete one, "length" when it ran out of
    ``max_output_tokens``, else its reason ("content_filter"; "loop" for a stream accord closed)."""
    status = getattr(response, "status", None)
    if status == "incomplete":
        reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
        return _FINISH.get(reason, reason) if reason else "length"
    return "stop" if status in ("completed", None) else str(status)


def usage_of(usage: Any) -> Usage:
    """A response's usage: ``input_tokens`` (all of them), ``output_tokens``, and of the input
    those read from the prompt cache (``input_tokens_details.cached_tokens``) and written to it
    (``cache_write_tokens``), where the server says."""
    details = getattr(usage, "input_tokens_details", None)
    return Usage(_count(getattr(usage, "input_tokens", None)), _count(getattr(usage, "output_tokens", None)), 0.0, 1,
                 cached_tokens=_count(getattr(details, "cached_tokens", None)),
                 cache_write_tokens=_count(getattr(details, "cache_write_tokens", None)))


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Events(Chunks):
    """A streamed response, as its events arrive (``stream=True``): the text deltas handed on,
    and the whole response from its last event (``response.completed`` or ``response.incomplete``).

    A stream closed on a loop (:meth:`._chunks.Chunks.looped`) has no last event: its response
    is the text so far, incomplete for the reason "loop", with the tokens the deltas listed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.final: Any = None

    def add(self, chunk: Any) -> str:
        kind = getattr(chunk, "type", None)
        self.model = getattr(getattr(chunk, "response", None), "model", None) or self.model
        if kind == "response.output_text.delta":
            self.tokens.extend(getattr(chunk, "logprobs", None) or ())
            text = getattr(chunk, "delta", None)
            if isinstance(text, str) and text:
                self.parts.append(text)
                self.text += text
                return text
        elif kind == "response.refusal.delta":
            self.refusal.append(str(getattr(chunk, "delta", "") or ""))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = getattr(chunk, "response", None)
            self.finish = finish_of(self.final)
        elif kind == "error":
            raise Malformed(f"the stream ended in an error: {getattr(chunk, 'message', None) or getattr(chunk, 'code', None)}")
        return ""

    def response(self) -> Any:
        if self.loop is None:
            if self.final is None:
                raise Malformed("the stream ended before its last event")
            return self.final
        part = SimpleNamespace(type="output_text", text="".join(self.parts), logprobs=self.tokens)
        content = [part, *([SimpleNamespace(type="refusal", refusal="".join(self.refusal))] if self.refusal else [])]
        usage = SimpleNamespace(input_tokens=None, output_tokens=len(self.tokens)) if self.tokens else None
        return SimpleNamespace(output=[SimpleNamespace(type="message", content=content)], status="incomplete",
                               incomplete_details=SimpleNamespace(reason="loop"), usage=usage, model=self.model)
