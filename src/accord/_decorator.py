"""``@accord.stabilize(...)``: wrap an existing LLM call that returns text."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

from ._result import Result
from ._stabilizer import Stabilizer
from .backends._function import FunctionBackend


class Stabilized:
    """A function whose calls return a stable, validated value.

    ``ask("...")`` returns the value (raising on failure); ``ask.run("...")`` returns the
    Result; ``await ask.arun("...")`` too. The first positional argument is the prompt; other
    arguments pass through to the wrapped function. An async function gives an async ``__call__``.
    """

    def __init__(self, fn: Callable[..., Any], schema: Any, options: dict[str, Any]) -> None:
        self.fn = fn
        self.schema = schema
        self.options = options
        self.is_async = inspect.iscoroutinefunction(fn)
        self.fingerprint = options.pop("fingerprint", None) or f"{fn.__module__}:{fn.__qualname__}"
        functools.update_wrapper(self, fn)

    def stabilizer(self, *args: Any, **kwargs: Any) -> Stabilizer[Any]:
        fn = self.fn

        async def acall(prompt: Any) -> Any:
            return await fn(prompt, *args, **kwargs)

        def call(prompt: Any) -> Any:
            return fn(prompt, *args, **kwargs)

        fingerprint = self.fingerprint
        if args or kwargs:  # other arguments change the call, so they name a different model call
            fingerprint += json.dumps([args, kwargs], sort_keys=True, default=repr, ensure_ascii=False)
        return Stabilizer(FunctionBackend(acall if self.is_async else call, fingerprint=fingerprint), self.schema, **self.options)

    def run(self, prompt: Any, *args: Any, **kwargs: Any) -> Result[Any]:
        return self.stabilizer(*args, **kwargs).run(prompt)

    async def arun(self, prompt: Any, *args: Any, **kwargs: Any) -> Result[Any]:
        return await self.stabilizer(*args, **kwargs).arun(prompt)

    def __call__(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        if self.is_async:
            return self._acall(prompt, *args, **kwargs)
        return self.run(prompt, *args, **kwargs).value

    async def _acall(self, prompt: Any, *args: Any, **kwargs: Any) -> Any:
        return (await self.arun(prompt, *args, **kwargs)).value


def stabilize(schema: Any, **options: Any) -> Callable[[Callable[..., Any]], Stabilized]:
    """Decorate a function ``fn(prompt, ...) -> str`` so it returns a stable, validated value.

    ``options`` are :class:`~accord.Stabilizer`'s (``vote=``, ``retry=``, ``budget=``,
    ``schema_in_prompt=``, ...), plus ``fingerprint=`` naming the logical model.
    """
    Stabilizer(FunctionBackend(lambda prompt: ""), schema, **{k: v for k, v in options.items() if k != "fingerprint"})  # fail fast

    def wrap(fn: Callable[..., Any]) -> Stabilized:
        return Stabilized(fn, schema, dict(options))

    return wrap
