"""Retry and budget policies: small frozen objects; waits and stops are tenacity's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tenacity

from . import _check


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
    jitter by default) or the server's Retry-After, whichever is longer. A truncated output
    (``finish_reason="length"``) is retried with ``max_tokens`` times ``grow_max_tokens``, unless
    it ends in a loop (``grow_loops=False``, the default): greedy decoding that repeats one stretch
    back to back repeats it to any length, so more room buys nothing (see :func:`looping`).
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

    def __post_init__(self) -> None:
        _check.retry(self)

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
    forty spaces, ``"3000000000..."``)? A cut-off greedy output that does has entered a loop."""
    n = len(text)
    for period in range(1, min(max_period, n // repeats) + 1):
        span = max(period * repeats, min_chars)
        if span > n:
            continue
        tail = text[n - span :]
        if tail[period:] == tail[: span - period]:  # periodic with this period
            return True
    return False


@dataclass(frozen=True)
class Budget:
    """Limits for one run: wall-clock seconds, model calls, total tokens. None means no limit.

    ``max_seconds`` ends a run even while a sync backend hangs (the call is abandoned).
    """

    max_seconds: float | None = None
    max_calls: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        _check.budget(self)
