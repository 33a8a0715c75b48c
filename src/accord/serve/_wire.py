"""The proxy's way to the upstream, under the openai clients of ``accord.models.openai``.

Every chat completion the backend sends (a ballot, the ``response_format`` probe, a batch
neighbour, a retry) goes through :class:`Wire`: :meth:`Wire.post_chat` for the lean
``chat.completions.create`` of ``._client`` (over ``._http``), and the transport interface
(``handle_async_request``) for anything else the openai client sends, and for the Messages calls
of ``accord.models.anthropic`` (an upstream that speaks Messages). It

- bounds them: at most ``--concurrency`` upstream chat calls in flight, all requests together
  (one shared bound, as ``Stabilizer.map`` has; a call waits for a free slot);
- adds the request's forwarded fields (the top-level fields accord does not read, the
  ``extra_body`` convention), and a larger ``top_logprobs`` when the client asked for one;
- writes down what came back on the request's :class:`Tab` (a context variable set around the
  run: the calls a run starts inherit it): status, usage, the message text and its logprobs,
  a ``retry-after``. So ``accord.upstream_usage`` says everything the upstream answered, the
  winning ballot's ``logprobs`` can be returned, and an upstream 429 is passed on with its wait;
- times each call (the ``/metrics`` upstream latency).

It never reads or writes a key: the openai client puts the upstream's key on the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends.openai._wire import unwrap
from ._http import Answer, LeanClient, Target

#: The Tab of the proxied request being decided (None outside one).
CURRENT: contextvars.ContextVar[Tab | None] = contextvars.ContextVar("accord_serve_tab", default=None)


def http_module() -> Any:
    """The HTTP package the installed ``openai`` client is built on (``httpx``, or its successor)."""
    import openai

    for klass in type.mro(openai.DefaultAsyncHttpxClient):
        root = klass.__module__.split(".")[0]
        if root not in ("openai", "builtins"):
            return importlib.import_module(root)
    return importlib.import_module("httpx")  # pragma: no cover - every openai release has one


@dataclass
class Answered:
    """One upstream chat call as it came back."""

    status: int
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    content: str | None = None
    logprobs: Any = None
    retry_after: float | None = None


@dataclass
class Tab:
    """What the upstream was asked and answered on behalf of one proxied request."""

    forward: dict[str, Any] = field(default_factory=dict)  # fields added to every chat call
    top_logprobs: int | None = None  # at least this many alternatives when logprobs are sent
    calls: list[Answered] = field(default_factory=list)

    def usage(self) -> dict[str, int]:
        prompt = sum(c.prompt_tokens for c in self.calls)
        completion = sum(c.completion_tokens for c in self.calls)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def retry_after(self) -> float | None:
        """The wait the upstream's last 429 asked for."""
        for call in reversed(self.calls):
            if call.status == 429:
                return call.retry_after
        return None

    def logprobs_of(self, text: str | None) -> Any:
        """The logprobs of the call whose message was ``text`` (as read: a wrapped answer unwrapped)."""
        if text is None:
            return None
        for call in self.calls:
            if call.content is not None and (call.content == text or unwrap(call.content) == text):
                return call.logprobs
        return None


class Wire:
    """The way to the upstream (see the module docstring): :meth:`post_chat` for the proxy's lean
    openai client (``._client``), over ``lean`` (``._http``) when it may be used; and an async HTTP
    transport around ``inner`` for whatever else the openai client sends."""

    def __init__(self, inner: Any, concurrency: int, observe: Callable[[int | None, float], None], lean: LeanClient | None = None) -> None:
        self.inner = inner
        self.lean = lean
        self.http = http_module()
        self.bound = asyncio.Semaphore(concurrency)
        self.observe = observe
        self.in_flight = 0

    async def post_chat(self, target: Target, headers: list[tuple[str, str]], body: dict[str, Any], timeout: float) -> tuple[Answer, Any]:
        """One chat completion: the answer, and its JSON when it is a 2xx that parses (else None)."""
        tab = CURRENT.get()
        if tab is not None:
            _add_fields(body, tab)
        content = json.dumps(body, ensure_ascii=False).encode()
        async with self.bound:
            self.in_flight += 1
            start = time.perf_counter()
            try:
                if self.lean is not None:
                    answer = await self.lean.post(target, headers, content, timeout)
                else:
                    answer = await self._through_inner(target, headers, content, timeout)
            except BaseException:
                self.observe(None, time.perf_counter() - start)
                raise
            finally:
                self.in_flight -= 1
        seconds = time.perf_counter() - start
        self.observe(answer.status, seconds)
        data = None
        if 200 <= answer.status < 300:
            with contextlib.suppress(ValueError):
                data = json.loads(answer.body)
        if tab is not None:
            tab.calls.append(_answered_data(answer.status, data, seconds, retry_after(_Headers(answer.headers))))
        return answer, data

    async def _through_inner(self, target: Target, headers: list[tuple[str, str]], content: bytes, timeout: float) -> Answer:
        extensions = {"timeout": {"connect": min(timeout, 10.0), "read": timeout, "write": timeout, "pool": timeout}}
        request = self.http.Request("POST", target.url, headers=headers, content=content, extensions=extensions)
        response = await self.inner.handle_async_request(request)
        try:
            body = await response.aread()
        finally:
            await response.aclose()
        return Answer(response.status_code, list(response.headers.raw), body)

    async def handle_async_request(self, request: Any) -> Any:
        if request.method != "POST" or not request.url.path.endswith(("/chat/completions", "/messages")):
            return await self.inner.handle_async_request(request)
        tab = CURRENT.get()
        if tab is not None and (tab.forward or tab.top_logprobs):
            request = self._with_fields(request, tab)
        async with self.bound:
            self.in_flight += 1
            start = time.perf_counter()
            response = None
            try:
                response = await self.inner.handle_async_request(request)
                await response.aread()  # the slot is held until the answer is in
            except BaseException:
                if response is not None:
                    await response.aclose()
                self.observe(None, time.perf_counter() - start)
                raise
            finally:
                self.in_flight -= 1
        seconds = time.perf_counter() - start
        self.observe(response.status_code, seconds)
        if tab is not None:
            tab.calls.append(_answered(response, seconds))
        return response

    def _with_fields(self, request: Any, tab: Tab) -> Any:
        try:
            body = json.loads(request.content)
        except ValueError:
            return request
        if not isinstance(body, dict):
            return request
        _add_fields(body, tab)
        headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
        content = json.dumps(body, ensure_ascii=False).encode()
        return self.http.Request(request.method, request.url, headers=headers, content=content, extensions=request.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _add_fields(body: dict[str, Any], tab: Tab) -> None:
    for name, value in tab.forward.items():
        body.setdefault(name, value)  # never over what accord itself sends
    if tab.top_logprobs and body.get("logprobs"):
        body["top_logprobs"] = max(int(body.get("top_logprobs") or 0), tab.top_logprobs)


class _Headers:
    """Raw header pairs, read by name (case-insensitive) as ``retry_after`` reads them."""

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw

    def get(self, name: str) -> str | None:
        wanted = name.encode()
        for key, value in self.raw:
            if key.lower() == wanted:
                return value.decode("latin-1")
        return None


def _answered(response: Any, seconds: float) -> Answered:
    data = None
    with contextlib.suppress(ValueError):
        data = json.loads(response.content)
    return _answered_data(response.status_code, data, seconds, retry_after(response.headers))


def _answered_data(status: int, data: Any, seconds: float, wait: float | None) -> Answered:
    answered = Answered(status, seconds, retry_after=wait)
    try:
        if not isinstance(data, dict):
            return answered
        if data.get("type") == "message":
            return _answered_message(answered, data)
        usage = data.get("usage") or {}
        answered.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        answered.completion_tokens = int(usage.get("completion_tokens") or 0)
        choice = (data.get("choices") or [{}])[0]
        content = (choice.get("message") or {}).get("content")
        answered.content = content if isinstance(content, str) else None
        answered.logprobs = choice.get("logprobs")
    except (ValueError, TypeError, AttributeError, IndexError):
        pass  # an unusable body (or none): the backend maps it; only the status is kept
    return answered


def _answered_message(answered: Answered, data: dict[str, Any]) -> Answered:
    """A Messages answer: every input token (the cache's reads and writes too), and its text (or a tool call's input)."""
    usage = data.get("usage") or {}
    names = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    answered.prompt_tokens = sum(int(usage.get(name) or 0) for name in names)
    answered.completion_tokens = int(usage.get("output_tokens") or 0)
    blocks = [b for b in data.get("content") or [] if isinstance(b, dict)]
    texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
    calls = [json.dumps(b.get("input"), ensure_ascii=False) for b in blocks if b.get("type") == "tool_use"]
    answered.content = "".join(texts) if texts else calls[0] if calls else None
    return answered


def retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds; an HTTP date is left to the backend)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None
