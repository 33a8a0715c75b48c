"""The openai client the proxy hands ``accord.models.openai``: the official ``openai.AsyncOpenAI``,
with one call made lean.

``chat.completions.create`` (not streamed) sends the parameters as JSON and validates the answer
into the SDK's own ``ChatCompletion`` (pydantic-core), instead of the SDK's generic request
transform and response construction, which walk every parameter and every token's logprobs in
Python and cost several times the HTTP call itself on a small machine (benchmarks/serve.py). The
same request goes out, the same types come back, and failures are the SDK's exceptions
(``APIStatusError`` and its subclasses with the body, ``APITimeoutError``, ``APIConnectionError``),
so the backend maps them as it maps the SDK's. Everything else (streaming, ``models.list``,
``with_options``) is the SDK's, unchanged.
"""

from __future__ import annotations

import functools
import json
from functools import cached_property
from typing import Any

import openai
from openai.resources.chat import AsyncChat
from openai.types.chat import ChatCompletion

from ._http import Target

_NOT_SENT = ("timeout", "extra_headers", "extra_query", "extra_body")


class LeanAsyncOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` with a lean non-streamed ``chat.completions.create`` (see the module docstring)."""

    @cached_property
    def chat(self) -> Any:  # the SDK's AsyncChat, its completions wrapped
        return _Chat(AsyncChat(self))


class _Chat:
    def __init__(self, chat: Any) -> None:
        self._chat = chat
        self.completions = _Completions(chat.completions, chat._client)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._chat, name)


class _Completions:
    def __init__(self, completions: Any, client: LeanAsyncOpenAI) -> None:
        self._completions = completions
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)

    async def create(self, **params: Any) -> Any:
        client = self._client
        wire = getattr(client._client, "accord_wire", None)  # the proxy's way to the upstream (``._wire.Wire``)
        if wire is None or params.get("stream") or params.get("extra_headers") or params.get("extra_query"):
            return await self._completions.create(**params)
        body = {k: v for k, v in params.items() if k not in _NOT_SENT and not isinstance(v, openai.NotGiven)}
        body.update(params.get("extra_body") or {})
        timeout = params.get("timeout", client.timeout)
        seconds = float(timeout) if isinstance(timeout, (int, float)) else getattr(timeout, "read", None) or 600.0
        target = _target(str(client.base_url))
        headers = [("content-type", "application/json"), ("accept", "application/json"), ("user-agent", client.user_agent)]
        if client.api_key:
            headers.append(("authorization", f"Bearer {client.api_key}"))
        http = wire.http
        try:
            answer, data = await wire.post_chat(target, headers, body, seconds)
        except http.TimeoutException as exc:
            raise openai.APITimeoutError(request=http.Request("POST", target.url)) from exc
        except http.TransportError as exc:
            raise openai.APIConnectionError(request=http.Request("POST", target.url)) from exc
        if answer.status >= 300:
            response = http.Response(answer.status, headers=answer.headers, content=answer.body, request=http.Request("POST", target.url))
            raise client._make_status_error_from_response(response)
        if data is None:
            data = json.loads(answer.body)  # not JSON: the backend maps the JSONDecodeError
        try:
            return ChatCompletion.model_validate(data)
        except ValueError:  # off the spec (a field missing): built as the SDK builds it
            return ChatCompletion.construct(**data)


@functools.lru_cache(maxsize=64)
def _target(base_url: str) -> Target:
    return Target.of(f"{base_url.rstrip('/')}/chat/completions")
