"""Retry and budget policies: small frozen objects; waits and stops are tenacity's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import Any

import tenacity

from . import _check
from ._errors import ConfigError


@dataclass
class _State:
    """The slice of tenacity's RetryCallState that stop and wait objects read."""

    attempt_number: int
    seconds_since_start: float = 0.0
    idle_for: float = 0.0
    outcome: Any = None
    upcoming_sleep: float = 0.0


@dataclass(frozen=True)
class Retry:
    """How one ballot retries.

    ``attempts``: calls per ballot for invalid output, the first included; each retry is a fresh
    request carrying one feedback block. ``transport_attempts``: calls per ballot for transient
    backend faults (timeouts, 429, 5xx), spaced by ``wait`` (a tenacity wait; exponential with
    jitter by default) or the server's Retry-After, whichever is longer. An honest cut-off
    (``finish_reason="length"``, no loop in the text) is retried with ``max_tokens`` times
    ``grow_max_tokens``. A loop (stopped early, ``finish_reason="loop"``, or found at the cut:
    ``accord.read._loops``) is retried with feedback that names it, never with more tokens:
    greedy decoding that repeats one stretch back to back repeats it to any length.
    ``grow_loops=True`` is deprecated: it still grows a loop found at a ``max_tokens`` cut, as
    before (a loop stopped early is always asked again with feedback).
    ``close_prose``: a ballot that ran out inside a prose field (``schema/_roles``: it looped in
    a summary, or was still writing one at ``max_tokens``) is closed there and kept when that is
    valid, in the same call: the string keeps what came before the loop (``read/_close``; a local
    model closes it while decoding, and a loop among a list of labels too,
    ``backends/local/_loops``), and ``Ballot.meta["closed_loops"]`` records it. ``False``: such a
    ballot is asked again like any other loop or cut.
    ``stop`` / ``transport_stop`` override the attempt counts with any tenacity stop.
    ``max_wait`` caps any single wait, a server's Retry-After included (seconds).
    """

    attempts: int = 3
    transport_attempts: int = 4
    wait: Any = field(default_factory=lambda: tenacity.wait_exponential_jitter(multiplier=0.5, max=20, jitter=0.5))
    grow_max_tokens: float = 2.0
    stop: Any = None
    transport_stop: Any = None
    max_wait: float = 60.0
    grow_loops: bool = False
    close_prose: bool = True

    def __post_init__(self) -> None:
        _check.retry(self)
        if self.grow_loops:
            warnings.warn("Retry(grow_loops=True) is deprecated: a loop is asked again with feedback, never with more "
                          "tokens; grow_loops only still grows a loop found at a max_tokens cut", DeprecationWarning, stacklevel=3)

    def again(self, attempt: int, seconds: float) -> bool:
        """May a ballot that made ``attempt`` calls with invalid output try once more?"""
        stop: Callable[[Any], bool] = self.stop or tenacity.stop_after_attempt(self.attempts)  # reads the _State slice
        return not stop(_State(attempt, seconds))

    def again_after_fault(self, faults: int, seconds: float) -> bool:
        stop: Callable[[Any], bool] = self.transport_stop or tenacity.stop_after_attempt(self.transport_attempts)
        return not stop(_State(faults, seconds))

    def backoff(self, faults: int, retry_after: float | None = None) -> float:
        """Seconds to wait before the next try after ``faults`` transient faults."""
        wait = float(self.wait(_State(faults)))
        return min(max(wait, retry_after or 0.0), self.max_wait)


def looping(text: str, repeats: int = 3, min_chars: int = 40, max_period: int = 200) -> bool:
    """Does ``text`` end in one stretch repeated back to back, at least ``repeats`` times and over
    at least ``min_chars`` characters (``"Spain.  #Maria is 34, ...Spain.  #Maria is 34, ..."``,
    forty spaces, ``"3000000000..."``)? A cut-off greedy output that does has entered a loop.

    With its defaults this is the rule :func:`accord.read._loops.find_loop` applies to a text
    cut at ``max_tokens``; ``find_loop`` also says where the loop is, finds counting runs, and
    has the stricter rules the backends use while a text is still being written."""
    n = len(text)
    for period in range(1, min(max_period, n // repeats) + 1):
        span = max(period * repeats, min_chars)
        if span > n:
            continue
        tail = text[n - span :]
        if tail[period:] == tail[: span - period]:  # periodic with this period
            return True
    return False


#: A run's time bound unless the Budget says otherwise (seconds; docs/budget.md says why this value).
DEFAULT_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class Budget:
    """Limits for one run: wall-clock seconds, model calls, total tokens, cost. None means no limit.

    ``max_seconds`` ends a run even while a sync backend hangs (the call is abandoned). It is
    bounded by default (``DEFAULT_MAX_SECONDS``, 300 s: a runaway ends in ``BudgetExceeded``
    rather than never); ``Budget(max_seconds=None)`` lifts the bound.
    ``max_cost`` ends it once the calls made cost that much (``Usage.cost``: the Stabilizer needs
    ``prices=``); like ``max_total_tokens`` (the tokens of every call of the run together, prompt
    and completion; one call's own limit is ``Settings(max_tokens=...)``), it is checked as calls
    finish, so the calls in flight then may take the run past it.
    ``max_tokens`` is the old name of ``max_total_tokens`` (deprecated: a ``DeprecationWarning``).
    """

    max_seconds: float | None = DEFAULT_MAX_SECONDS
    max_calls: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    max_tokens: InitVar[int | None] = None

    def __post_init__(self, max_tokens: int | None) -> None:
        if max_tokens is not None:
            _check.deprecated("Budget(max_tokens=...)", "Budget(max_total_tokens=...), the run's total", stacklevel=3)
            if self.max_total_tokens is not None:
                raise ConfigError("Budget takes max_total_tokens= (max_tokens= is its deprecated name), not both")
            object.__setattr__(self, "max_total_tokens", max_tokens)
        _check.budget(self)
        _check.number("Budget", "max_cost", self.max_cost, strict=True, optional=True)  # money: any positive amount
