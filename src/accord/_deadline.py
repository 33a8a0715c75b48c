"""Bounded reading: the work of reading one output (extract -> normalize -> validate ->
canonicalize) ends by a deadline, so a huge or hostile output cannot outlast the run's budget.

    within(seconds, fn, *args)     fn(*args), or :class:`TimeUp` once ``seconds`` have passed
    search / fullmatch             a regular expression matched with the time that is left

Two mechanisms, because the work is of two kinds:

- Python-level work (the lenient parser, Lark's parsers, jsonschema, a user's validators) is
  interrupted where it stands: a watchdog thread raises an exception in the reading thread at the
  deadline (CPython's ``PyThreadState_SetAsyncExc``; on another interpreter nothing interrupts
  it). The exception derives from BaseException, so no ``except Exception`` on the way can
  swallow it, and :func:`within` turns it into :class:`TimeUp`.
- A regular expression runs in C and holds the interpreter, so nothing interrupts it from
  outside: user patterns (``accord.Regex``, JSON Schema ``pattern`` and ``patternProperties``)
  are matched with the ``regex`` package and its ``timeout``, the time left. (It also recognises
  many catastrophic patterns such as ``(a+)+`` and answers them at once.) A pattern only Python's
  ``re`` can compile is matched by ``re``, without a limit.

Measured (``python benchmarks/hostile.py``): the cost per bounded reading is a few microseconds;
``Regex("(a+)+")`` on ``"a" * 28 + "!"`` takes 45 s under ``re`` and under a millisecond here.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar("accord_read_until", default=None)


class TimeUp(Exception):
    """Reading an output ran past its deadline."""


class _Interrupt(BaseException):
    """Raised into a reading thread at its deadline (never escapes :func:`within`)."""


def left() -> float | None:
    """Seconds left to the current reading's deadline (None: no deadline)."""
    until = _UNTIL.get()
    return None if until is None else until - time.monotonic()


def within(seconds: float | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, interrupted with :class:`TimeUp` once ``seconds`` have passed (None: no limit).

    Nested calls keep the outer deadline when it is sooner. Work that ends after its deadline
    but before the interrupt lands is kept: it is done.
    """
    if seconds is None:
        return fn(*args)
    if seconds <= 0:
        raise TimeUp("no time left to read the output")
    until = time.monotonic() + seconds
    outer = _UNTIL.get()
    if outer is not None and outer <= until:
        return fn(*args)  # the outer deadline is sooner and already armed
    token = _UNTIL.set(until)
    alarm = _WATCHDOG.arm(until)
    try:
        try:
            return fn(*args)
        finally:
            _WATCHDOG.disarm(alarm)
    except _Interrupt:
        _WATCHDOG.disarm(alarm)  # the interrupt may have landed inside the first disarm
        raise TimeUp(f"reading the output took longer than {seconds:.3g} s") from None
    finally:
        _UNTIL.reset(token)


# -- regular expressions with the time left ------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    """The pattern compiled by the ``regex`` package (Python ``re`` semantics), else by ``re``."""
    try:
        import regex
    except ImportError:  # pragma: no cover - regex is a core dependency
        return re.compile(pattern)
    try:
        return regex.compile(pattern, flags=regex.VERSION0)
    except Exception:  # noqa: BLE001 - regex refuses what re accepts in rare syntax: re matches it, unbounded
        return re.compile(pattern)


def _match(how: str, pattern: str, text: str) -> bool:
    compiled = _compiled(pattern)
    if isinstance(compiled, re.Pattern):
        return getattr(compiled, how)(text) is not None
    time_left = left()
    if time_left is not None and time_left <= 0:
        raise TimeUp("no time left to match the pattern")
    try:
        return getattr(compiled, how)(text, timeout=time_left) is not None
    except TimeoutError:
        raise TimeUp(f"matching {pattern[:60]!r} took longer than the time left") from None


def search(pattern: str, text: str) -> bool:
    """``re.search(pattern, text) is not None``, within the time left."""
    return _match("search", pattern, text)


def fullmatch(pattern: str, text: str) -> bool:
    """``re.fullmatch(pattern, text) is not None``, within the time left."""
    return _match("fullmatch", pattern, text)


# -- the watchdog ----------------------------------------------------------------------------------


class _Alarm:
    __slots__ = ("fired", "thread", "until")

    def __init__(self, thread: int, until: float) -> None:
        self.thread = thread
        self.until = until
        self.fired = False


def _async_raise() -> tuple[Callable[[int, Any], int], Callable[[int, Any], int]] | None:
    """(raise an exception in a thread, clear a pending one), from CPython's C API; None elsewhere."""
    try:
        api = ctypes.pythonapi
        raise_in = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(("PyThreadState_SetAsyncExc", api))
        clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(("PyThreadState_SetAsyncExc", api))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not CPython
        return None
    return raise_in, clear


class _Watchdog:
    """One daemon thread that interrupts each reading thread at its deadline (one alarm per thread).

    A reading thread takes ``lock`` only in C (``with lock``), never through Python code, so an
    interrupt that lands while it holds the lock cannot leave the lock taken.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)  # waited on by the watchdog thread only
        self.alarms: dict[int, _Alarm] = {}
        self.wake: float | None = None  # when the watchdog wakes next (None: when told)
        self.thread: threading.Thread | None = None
        self.api = _async_raise()

    def arm(self, until: float) -> _Alarm | None:
        if self.api is None:
            return None
        alarm = _Alarm(threading.get_ident(), until)
        with self.lock:
            self.alarms[alarm.thread] = alarm
            if self.thread is None:
                self.thread = threading.Thread(target=self.watch, name="accord-read-watchdog", daemon=True)
                self.thread.start()
            if self.wake is None or until < self.wake:
                self.wake = until
                self.cond.notify()
        return alarm

    def disarm(self, alarm: _Alarm | None) -> None:
        if alarm is None:
            return
        with self.lock:
            if self.alarms.get(alarm.thread) is alarm:
                del self.alarms[alarm.thread]
            if alarm.fired and self.api is not None:
                self.api[1](alarm.thread, None)  # an interrupt that has not landed yet never will
                alarm.fired = False

    def watch(self) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                nearest: float | None = None
                for alarm in list(self.alarms.values()):
                    if alarm.until <= now:
                        del self.alarms[alarm.thread]
                        alarm.fired = True
                        assert self.api is not None
                        self.api[0](alarm.thread, _Interrupt)
                    elif nearest is None or alarm.until < nearest:
                        nearest = alarm.until
                self.wake = nearest
                self.cond.wait(None if nearest is None else nearest - now)


_WATCHDOG = _Watchdog()
