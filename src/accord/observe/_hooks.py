"""Hooks: user code called as a run goes, ``Stabilizer(..., hooks=accord.Hooks(...))``.

    before_request(request)   before each model call starts (every retry included)
    after_ballot(ballot)      after each call is recorded as a Ballot (valid, invalid, error,
                              cancelled): the moment ``on_ballot`` sees it
    on_retry(event)           a ballot slot asks again: invalid output, a cut-off output, or a
                              transient fault (a :class:`RetryEvent`, with the wait before it)
    on_result(result)         a run ended with a Result, ledger replays and plurality included
    on_error(error)           a run failed: the typed error, its ``.result`` with every ballot

A hook may be a plain function or an ``async def``; an async hook is awaited before the run goes
on (``before_request`` before the call starts, so it may pace calls), in the caller's event loop
under ``arun``/``amap``/``astream``, in a private one under ``run``. Hooks observe: what they
return is ignored, and a hook that raises is logged (logger ``accord``) and never breaks the run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError

if TYPE_CHECKING:
    from .._errors import AccordError
    from .._result import Ballot, Result
    from .._types import Request

log = logging.getLogger("accord")


@dataclass(frozen=True)
class RetryEvent:
    """A ballot slot asks again. ``ballot``: the call that failed; ``attempt``: the number of the
    next call in the slot; ``reason``: "invalid", "loop" (asked again with feedback naming the
    loop), "truncated" (with more ``max_tokens``) or "fault"; ``wait``: seconds before it starts
    (a backoff after a fault, else 0)."""

    slot: int
    attempt: int
    reason: str
    wait: float
    ballot: Ballot


@dataclass(frozen=True)
class Hooks:
    """User code called as a run goes; see the module docstring. Every hook is optional."""

    before_request: Callable[[Request], Any] | None = None
    after_ballot: Callable[[Ballot], Any] | None = None
    on_retry: Callable[[RetryEvent], Any] | None = None
    on_result: Callable[[Result[Any]], Any] | None = None
    on_error: Callable[[AccordError], Any] | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            hook = getattr(self, f.name)
            if hook is not None and not callable(hook):
                raise ConfigError(f"Hooks({f.name}=...) must be a function (sync or async), got {hook!r}")


def call(name: str, hook: Callable[[Any], Any], arg: Any, pending: list[Awaitable[None]]) -> None:
    """Call one hook, isolated: an exception is logged; an awaitable is kept in ``pending``."""
    try:
        out = hook(arg)
    except Exception:  # a broken hook must not lose the run
        log.exception("accord: the %s hook failed", name)
        return
    if inspect.isawaitable(out):
        pending.append(_guarded(name, out))


async def _guarded(name: str, awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except Exception:  # an async hook that fails must not lose the run either
        log.exception("accord: the %s hook failed", name)
