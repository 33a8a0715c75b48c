"""Any function that returns text: ``accord.models.function(fn)``."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .._errors import BackendError, ConfigError
from .._types import Completion, Request, Usage
from ._base import Backend, backend_error
from ._identity import Unnamed, model_identity, readable
from ._renamed import deprecated


class FunctionBackend(Backend):
    """Calls ``fn(prompt)`` (or ``fn(prompt, request=request)`` when fn accepts ``request=``).

    ``prompt`` is what the user passed, a string or a list of messages, with the schema hint and
    the retry feedback added (see ``accord.prompt._prompt``). fn may be sync or async and may return a
    string or a :class:`~accord.Completion`; a function that cannot be called so is a
    :class:`~accord.ConfigError` here.

    ``name`` names the model: in ledger keys, spans (``gen_ai.request.model``) and prices
    (``fingerprint=`` is its older spelling, deprecated), and it keeps the answers a ledger holds across
    edits of fn. Without it the identity follows fn's code: ``module:qualname#digest`` of its
    code, the values it holds and the module globals it reads (see ``_identity``), so an edited
    function is another model; where none can be derived, a ledger refuses the backend
    (:meth:`identity`) with a ConfigError that says to name it.
    """

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, fingerprint: str | None = None) -> None:
        if not callable(fn):
            raise ConfigError(f"models.function needs a function fn(prompt) -> str, got {_shown(fn)}, which cannot be called")
        if fingerprint is not None:
            deprecated("fingerprint", "name=", "models.function")
        given = given_name(name, fingerprint)
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)
        self.wants_request = _accepts_request(fn)
        _check_takes_prompt(fn, self.wants_request)
        self._name: str | None = given  # the fingerprint: given, or derived on first use
        self._unnamed: str | None = None  # why no identity could be derived
        self._how = 'accord.models.function(fn, name="my-model-v1")'

    @property
    def fingerprint(self) -> str:  # a property over Backend's attribute: derived on first use
        if self._name is None:
            try:
                self._name = model_identity(self.fn)
            except Unnamed as why:
                self._name, self._unnamed = readable(self.fn), why.reason
        return self._name

    @fingerprint.setter
    def fingerprint(self, value: str) -> None:
        self._name, self._unnamed = (value or None), None

    def identity(self) -> str:
        """The fingerprint, when it is the model's name or an identity derived soundly; else a
        ConfigError saying how to name the model."""
        name = self.fingerprint
        if self._unnamed is not None:
            raise ConfigError(
                f"the model function {name} has no identity a ledger can trust: {self._unnamed}. Name the model: {self._how} "
                "(the name goes into ledger keys, spans and prices; change it when the model behind it changes)"
            )
        return name

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


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:59] + '…'}"


def given_name(name: str | None, fingerprint: str | None) -> str | None:
    if name is not None and fingerprint is not None and name != fingerprint:
        raise ConfigError(f"models.function(name={name!r}, fingerprint={fingerprint!r}): give one (fingerprint= is name='s older spelling)")
    given = name if name is not None else fingerprint
    if given is not None and (not isinstance(given, str) or not given.strip()):
        raise ConfigError(f"models.function(name=...) must be a non-empty string naming the model, got {given!r}")
    return given


def _check_takes_prompt(fn: Callable[..., Any], wants_request: bool) -> None:
    """A ConfigError unless ``fn`` can be called as accord calls it: ``fn(prompt)``, plus
    ``request=`` when it takes that keyword (a signature Python cannot read is let through)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(None, **({"request": None} if wants_request else {}))
    except TypeError as exc:
        called = "fn(prompt, request=request)" if wants_request else "fn(prompt)"
        raise ConfigError(
            f"models.function: {readable(fn)}{signature} cannot be called as {called} ({exc}): accord passes the prompt "
            "as the first positional argument, e.g. def fn(prompt, request=None) -> str"
        ) from None


def named_call(fn: Callable[..., Any], name: str, unnamed: str | None, how: str) -> FunctionBackend:
    """A backend over ``fn`` (a call the decorator builds) named ``name``; ``unnamed``: why that
    name is no identity a ledger can trust (``how``: how to name it), or None."""
    backend = FunctionBackend(fn, name=name)
    backend._unnamed, backend._how = unnamed, how
    return backend


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
        return replace(out, usage=replace(out.usage, seconds=seconds, calls=1))
    if isinstance(out, str):
        return Completion(out, "stop", Usage(seconds=seconds, calls=1))
    raise BackendError(f"the model function returned {type(out).__name__}; expected str or accord.Completion")


def function(fn: Callable[..., Any], *, name: str | None = None, fingerprint: str | None = None) -> FunctionBackend:
    """A backend over any function ``fn(prompt) -> str`` (sync or async); ``name`` names the model
    (in ledger keys, spans and prices; ``fingerprint=`` is its older spelling, deprecated)."""
    return FunctionBackend(fn, name=name, fingerprint=fingerprint)
