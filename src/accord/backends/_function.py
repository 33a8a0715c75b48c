"""Any function that returns text: ``accord.models.function(fn)``."""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Callable

from .._errors import AccordError, BackendError
from .._request import Completion, Request, Usage
from ._base import Backend

_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


def backend_error(exc: BaseException) -> AccordError:
    """Map an exception raised by user code to a BackendError (transient faults are retryable)."""
    if isinstance(exc, AccordError):
        return exc
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    status = status if isinstance(status, int) else None
    retryable = isinstance(exc, (TimeoutError, ConnectionError)) or status in _RETRYABLE_STATUS
    error = BackendError(f"{type(exc).__name__}: {exc}", retryable=retryable, status=status)
    error.__cause__ = exc
    return error


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
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
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
