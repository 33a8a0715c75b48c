"""Any function that returns text: ``accord.models.function(fn)``."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any

from .._errors import BackendError
from .._types import Completion, Request, Usage
from ._base import Backend, backend_error


class FunctionBackend(Backend):
    """Calls ``fn(prompt)`` (or ``fn(prompt, request=request)`` when fn accepts ``request=``).

    ``prompt`` is what the user passed, a string or a list of messages, with the schema hint and
    the retry feedback added (see ``accord._prompt``). fn may be sync or async and may return a
    string or a :class:`~accord.Completion`.
    """

    def __init__(self, fn: Callable[..., Any], *, fingerprint: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"models.function needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
        self.wants_request = _accepts_request(fn)
        self.fingerprint = fingerprint or f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__qualname__)}"

    def _args(self, request: Request) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (request.input,), ({"request": request} if self.wants_request else {})

    def generate(self, request: Request) -> Completion:
        args, kwargs = self._args(request)
        start = time.perf_counter()
        try:
            out = asyncio.run(self.fn(*args, **kwargs)) if self.is_async else self.fn(*args, **kwargs)
        except Exception as exc:
            raise backend_error(exc) from exc
        return _completion(out, time.perf_counter() - start)

    async def agenerate(self, request: Request) -> Completion:
        if not self.is_async:
            return await super().agenerate(request)
        args, kwargs = self._args(request)
        start = time.perf_counter()
        try:
            out = await self.fn(*args, **kwargs)
        except Exception as exc:
            raise backend_error(exc) from exc
        return _completion(out, time.perf_counter() - start)


def _accepts_request(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "request" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _completion(out: Any, seconds: float) -> Completion:
    if isinstance(out, Completion):
        if out.usage.seconds:
            return out
        usage = Usage(out.usage.prompt_tokens, out.usage.completion_tokens, seconds, 1)
        return Completion(out.text, out.finish_reason, usage, out.margins, out.score, out.meta)
    if isinstance(out, str):
        return Completion(out, "stop", Usage(seconds=seconds, calls=1))
    raise BackendError(f"the model function returned {type(out).__name__}; expected str or accord.Completion")


def function(fn: Callable[..., Any], *, fingerprint: str | None = None) -> FunctionBackend:
    """A backend over any function ``fn(prompt) -> str`` (sync or async)."""
    return FunctionBackend(fn, fingerprint=fingerprint)
