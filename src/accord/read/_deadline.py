"""Bounded reading: the work of reading one output (extract -> normalize -> validate ->
canonicalize) ends by a deadline, so a huge or hostile output cannot outlast the run's budget.

    within(seconds, fn, *args)     fn(*args), or :class:`TimeUp` once ``seconds`` have passed
    search / fullmatch             a regular expression matched with the time that is left

Two mechanisms, because the work is of two kinds:

- Python-level work (the lenient parser, Lark's parsers, jsonschema, a user's validators) is
  interrupted where it stands: a watchdog thread raises an exception in the reading thread at the
  deadline, and again until the reading is over (CPython's ``PyThreadState_SetAsyncExc``; on
  another interpreter nothing interrupts it). The exception derives from BaseException, so no
  ``except Exception`` on the way can swallow it, and :func:`within` turns it into
  :class:`TimeUp`.
- A regular expression runs in C and holds the interpreter, so nothing interrupts it from
  outside: user patterns (``accord.Regex``, JSON Schema ``pattern`` and ``patternProperties``)
  are matched with the ``regex`` package and its ``timeout``. That timeout counts CPU time (on
  this 2-core machine under load, a 0.5 s timeout took 0.73 s of wall time), so a match gets
  ``SLICE`` (10 ms of CPU) in place, where nearly every match ends; one that needs more runs
  again in a worker thread that releases the interpreter, and the reader waits for it by the
  wall clock, up to the deadline. The package also recognises many catastrophic patterns such
  as ``(a+)+`` and answers them at once. A pattern only Python's ``re`` can compile is matched
  by ``re``, without a limit.

Measured (``python benchmarks/hostile.py``): a bounded reading costs about 7 us of CPU more than
an unbounded one (112 against 105 us for a 10-field object); ``(a+)+`` on ``"a" * 22 + "!"``
takes 0.7 s under ``re`` (doubling with each ``a``: about 45 s at 28), and ``Regex("(a+)+")``
answers ``"a" * 28 + "!"`` in under a millisecond here.
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import re
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar("accord_read_until", default=None)


class TimeUp(Exception):
    """Reading an output ran past its deadline."""


class Interrupt(BaseException):
    """Raised into a reading thread at its deadline; :func:`within` turns it into :class:`TimeUp`.

    A BaseException, so no ``except Exception`` on the way swallows it. One that lands in a
    destructor or a weakref callback is swallowed by the interpreter: the watchdog raises it
    again every ``REFIRE`` seconds until the reading is over.
    """


REFIRE = 0.05


def left() -> float | None:
    """Seconds left to the current reading's deadline (None: no deadline)."""
    until = _UNTIL.get()
    return None if until is None else until - time.monotonic()


def within(seconds: float | None, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, interrupted with :class:`TimeUp` once ``seconds`` have passed (None: no limit).

    A nested call runs under the outer deadline alone. Work that ends after its deadline but
    before the interrupt lands is kept: it is done. An :class:`Interrupt` could still land in the
    instant the alarm ends (a raise repeated ``REFIRE`` after one that was swallowed): a caller
    that must never see one catches it and calls :func:`settle` (``_read.read`` does).
    """
    if seconds is None or _UNTIL.get() is not None:
        return fn(*args)
    if seconds <= 0:
        raise TimeUp("no time left to read the output")
    until = time.monotonic() + seconds
    token = _UNTIL.set(until)
    try:
        try:
            _WATCHDOG.arm(until)  # inside the try: the interrupt may land as it returns
            return fn(*args)
        finally:
            _WATCHDOG.settle()
    except Interrupt:
        # In the work, or in the first settle when the watchdog raised it as the work ended (then
        # the alarm may still be set: settled again; a repeated raise comes only REFIRE later).
        _WATCHDOG.settle()
        raise TimeUp(f"reading the output took longer than {seconds:.3g} s") from None
    finally:
        _UNTIL.reset(token)


def settle() -> None:
    """End this thread's alarm, if one is left (after an :class:`Interrupt` escaped :func:`within`)."""
    _WATCHDOG.settle()


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
    """Match in place for up to ``SLICE`` seconds of CPU (nearly every match ends long before);
    a match that needs more runs again in a worker thread that releases the interpreter, waited
    for by the wall clock, so its time is the deadline's even when the cores are shared."""
    compiled = _compiled(pattern)
    time_left = left()
    if isinstance(compiled, re.Pattern) or time_left is None:
        return getattr(compiled, how)(text) is not None
    if time_left <= 0:
        raise TimeUp("no time left to match the pattern")
    try:
        return getattr(compiled, how)(text, timeout=min(time_left, SLICE)) is not None
    except TimeoutError:
        if time_left <= SLICE:
            raise TimeUp(f"matching {pattern[:60]!r} took longer than the time left") from None
    return _aside(compiled, how, text, pattern)


SLICE = 0.01  # seconds of CPU a pattern may take in place


def _aside(compiled: Any, how: str, text: str, pattern: str) -> bool:
    """A slow match in its own daemon thread (``concurrent=True``: the interpreter is released),
    given up at the deadline; the thread ends by the same time of CPU (the regex timeout)."""
    limit = left() or 0.0
    if limit <= 0:
        raise TimeUp("no time left to match the pattern")
    found: Future[bool] = Future()

    def work() -> None:
        try:
            found.set_result(getattr(compiled, how)(text, timeout=limit, concurrent=True) is not None)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting reader
            found.set_exception(exc)

    threading.Thread(target=work, name="accord-regex", daemon=True).start()
    try:
        return found.result(timeout=limit)
    except TimeoutError:  # the wait's, or the match's own
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
        self.fired: float | None = None  # when the watchdog last raised the interrupt


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
    """One daemon thread that interrupts each reading thread at its deadline, and again every
    ``REFIRE`` seconds until the reading ends (one alarm per thread).

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

    def arm(self, until: float) -> None:
        """Interrupt this thread at ``until`` (and again every ``REFIRE`` seconds) until :meth:`settle`."""
        if self.api is None:
            return
        alarm = _Alarm(threading.get_ident(), until)
        with self.lock:
            self.alarms[alarm.thread] = alarm
            if self.thread is None:
                _quiet_when_swallowed()
                self.thread = threading.Thread(target=self.watch, name="accord-read-watchdog", daemon=True)
                self.thread.start()
            if self.wake is None or until < self.wake:
                self.wake = until
                self.cond.notify()

    def settle(self) -> None:
        """This thread's reading is over: no interrupt is raised for it any more, and one raised
        but not landed yet is withdrawn."""
        thread = threading.get_ident()
        with self.lock:
            alarm = self.alarms.pop(thread, None)
            if alarm is not None and alarm.fired is not None and self.api is not None:
                self.api[1](thread, None)

    def watch(self) -> None:
        assert self.api is not None
        with self.lock:
            while True:
                now = time.monotonic()
                nearest: float | None = None
                for alarm in self.alarms.values():
                    due = alarm.until if alarm.fired is None else alarm.fired + REFIRE
                    if due <= now:
                        alarm.fired = now
                        self.api[0](alarm.thread, Interrupt)
                        due = now + REFIRE
                    nearest = due if nearest is None else min(nearest, due)
                self.wake = nearest
                self.cond.wait(None if nearest is None else max(0.0, nearest - now))


def _quiet_when_swallowed() -> None:
    """An Interrupt that lands in a destructor or a weakref callback is swallowed, and the
    interpreter prints "Exception ignored in ..."; it is raised again anyway, so that line says
    nothing: sys.unraisablehook is wrapped to drop it (and only it)."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if unraisable.exc_type is not Interrupt:
            previous(unraisable)

    sys.unraisablehook = hook


_WATCHDOG = _Watchdog()
