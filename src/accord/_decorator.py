"""``@accord.stabilize(...)``: wrap an existing LLM call that returns text."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from ._errors import ConfigError, UnsupportedSchema
from ._result import Result
from ._stabilizer import Stabilizer
from .backends._function import FunctionBackend, given_name, named_call
from .backends._identity import Unnamed, digest_of, model_identity, readable
from .run._partial import Decided, Partial
from .schema._pydantic import undefined

_HOW = '@accord.stabilize(schema, ..., name="my-model-v1")'


class Stabilized:
    """A function whose calls return a stable, validated value.

    ``ask("...")`` returns the value (raising on failure); ``ask.run("...")`` returns the
    Result; ``await ask.arun("...")`` too; ``ask.stream("...")`` streams it. The first positional argument is the prompt; other
    arguments pass through to the wrapped function, and name another model call (their digest
    joins the fingerprint). An async function gives an async ``__call__``.

    ``fingerprint``: the model's name, ``name=`` when given, else an identity derived from the
    function's code and what it holds and reads (``module:qualname#digest``, see
    ``models.function``).
    """

    def __init__(self, fn: Callable[..., Any], schema: Any, options: dict[str, Any]) -> None:
        self.fn = fn
        self.schema = schema
        self.name = given_name(options.pop("name", None), options.pop("fingerprint", None))
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        _check_takes_prompt(fn)
        self._identity: tuple[str, str | None] | None = None  # (fingerprint, why it is no identity): once called
        functools.update_wrapper(self, fn)

    @property
    def fingerprint(self) -> str:
        return self._base()[0]

    def _base(self) -> tuple[str, str | None]:
        """The function's name, and why it is no identity a ledger can trust (None when it is);
        derived on the first call, once the decorated name is bound in its module."""
        if self.name is not None:
            return self.name, None
        if self._identity is None:
            try:
                self._identity = model_identity(self.fn), None
            except Unnamed as why:
                self._identity = readable(self.fn), why.reason
        return self._identity

    def stabilizer(self, *args: Any, **kwargs: Any) -> Stabilizer[Any]:
        fn = self.fn

        async def acall(prompt: Any) -> Any:
            return await fn(prompt, *args, **kwargs)

        def call(prompt: Any) -> Any:
            return fn(prompt, *args, **kwargs)

        fingerprint, unnamed = self._base()
        if args or kwargs:  # other arguments change the call, so they name a different model call
            try:
                fingerprint = f"{fingerprint}#{digest_of([list(args), kwargs], 'an argument of the call')}"
            except Unnamed as why:
                fingerprint, unnamed = f"{fingerprint}(...)", f"{why.reason} (pass the call's arguments as data, or name each model)"
        backend: FunctionBackend = named_call(acall if self.is_async else call, fingerprint, unnamed, _HOW)
        return Stabilizer(backend, self.schema, **self.options)

    def run(self, prompt: Any, *args: Any, **kwargs: Any) -> Result[Any]:
        return self.stabilizer(*args, **kwargs).run(prompt)

    async def arun(self, prompt: Any, *args: Any, **kwargs: Any) -> Result[Any]:
        return await self.stabilizer(*args, **kwargs).arun(prompt)

    def stream(self, prompt: Any, *args: Any, **kwargs: Any) -> Generator[Partial[Any] | Decided[Any], None, None]:
        """:meth:`Stabilizer.stream`: the first ballot as it is written, then the decision."""
        return self.stabilizer(*args, **kwargs).stream(prompt)

    def astream(self, prompt: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Partial[Any] | Decided[Any], None]:
        return self.stabilizer(*args, **kwargs).astream(prompt)

    def __call__(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return self._acall(prompt, *args, **kwargs)
        return self.run(prompt, *args, **kwargs).value

    async def _acall(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        return (await self.arun(prompt, *args, **kwargs)).value


def stabilize(schema: Any, **options: Any) -> Callable[[Callable[..., Any]], Stabilized]:
    """Decorate a function ``fn(prompt, ...) -> str`` so it returns a stable, validated value.

    ``options`` are :class:`~accord.Stabilizer`'s (``vote=``, ``retry=``, ``budget=``,
    ``settings=``, ``prompting=``, ...), plus ``name=`` naming the logical model (``fingerprint=`` is
    its older spelling). ``@accord.stabilize`` without its schema is a ConfigError here, at
    decoration.
    """
    if inspect.isfunction(schema) or inspect.ismethod(schema):
        raise ConfigError(
            f"@accord.stabilize was given the function {readable(schema)} as its schema: write "
            "@accord.stabilize(schema=...) with parentheses and the schema, e.g. @accord.stabilize(schema=int)"
        )
    given_name(options.get("name"), options.get("fingerprint"))
    rest = {k: v for k, v in options.items() if k not in ("name", "fingerprint")}
    try:
        Stabilizer(FunctionBackend(lambda prompt: "", name="accord-check"), schema, **rest)  # fail fast
    except UnsupportedSchema as exc:
        if not undefined(exc):  # a model whose forward reference is defined later in its module: checked at each call
            raise

    def wrap(fn: Callable[..., Any]) -> Stabilized:
        return Stabilized(fn, schema, dict(options))

    return wrap


def _check_takes_prompt(fn: Callable[..., Any]) -> None:
    """A ConfigError unless ``fn`` takes the prompt as its first positional argument."""
    if not callable(fn):
        raise ConfigError(f"@accord.stabilize decorates a function, got {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind_partial(None)
    except TypeError as exc:
        raise ConfigError(
            f"@accord.stabilize: {readable(fn)}{signature} cannot take the prompt as its first positional argument ({exc}): "
            "write def fn(prompt, ...) -> str"
        ) from None
