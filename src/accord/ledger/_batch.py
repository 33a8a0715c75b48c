"""Many workers, one batch: ``Stabilizer.map`` over a shared ledger decides each prompt once
(and ``run`` and ``stream`` claim their prompt as a batch of one).

Before a worker decides a prompt, it claims the prompt's key (:meth:`Store.claim`): a row that
names the worker and holds a lease. The other workers skip a claimed prompt and go on with the
rest; then they wait for it off their turns (one query per pause for all the keys they wait
on) and replay the answer its owner stored. A thread renews the worker's claims every third of
the lease; a worker that dies (SIGKILL) stops renewing, its claims run out, and the next worker
that looks takes them over. A claim names its owner's host, PID namespace and PID, so a worker on
the same host (a batch started again after a crash) takes over a dead owner's claims at once
instead of waiting out their lease. The same prompt twice in one batch is decided once, too. So each
worker returns a Result for every prompt, in input order: its own decisions and the others',
replayed. The run path asks :meth:`Batch.claim` for a prompt's :class:`Ticket` (its answer, or
the right to decide it, with the ledger run the claim opened) and hands it back to
:meth:`Batch.done` with the Result.

The ledger never costs an answer: a prompt that cannot be claimed (the store is unreachable) is
decided without a claim, and a worker stops waiting on claims it has not been able to see for a
whole lease, and decides those prompts itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from .._result import Result
from . import _codec
from ._keys import Subject
from ._pending import Pending, brief
from ._store import Answer, Entry, Holder

if TYPE_CHECKING:
    from ._ledger import Ledger

log = logging.getLogger("accord")

# How often a worker looks at the claims it waits on: one query for all of them. While it has
# prompts to decide (or still to take), the others' answers are not needed yet: every half second. Idle,
# it looks sooner (from 20 ms, slowing to 100 ms while nothing moves): the end of a batch.
_IDLE_PAUSE = (0.02, 0.1)
_BUSY_PAUSE = 0.5
# A worker looks at a prompt's answer and claim together with the next prompts of its batch (one
# read for up to this many), and goes by what it saw: an answer, or a claim held elsewhere (it then
# waits, and its polls see what became of it). That a prompt was free it believes only while fresh,
# since its claim would likely fail by then: a claim is a write, a look a read.
_LOOK_AHEAD = 32
_LOOK_FRESH = 0.02


@dataclass
class Ticket:
    """A prompt's place in a batch: its ``answer`` (replayed: nothing to decide), or the right to
    decide it, under this worker's claim on ``key`` (None: decided without a claim) and into
    ``pending``, the ledger run the claim opened (None: ``Ledger.begin`` opens one)."""

    answer: Result[Any] | None = None
    key: str | None = None
    pending: Pending | None = None
    turn: asyncio.Semaphore | None = None  # the turn held while it is decided, given back by ``done``


class Batch:
    """The claims of one ``map`` over a ledger (a context manager: it renews them while it is open)."""

    def __init__(self, ledger: Ledger, subject: Subject, *, refresh: bool) -> None:
        self.ledger = ledger
        self.subject = subject
        self.refresh = refresh
        self.owner = f"{_HERE}:{os.getpid()}:{secrets.token_hex(4)}"
        self._store = ledger._store
        self._lease = ledger.lease
        self._held: dict[str, asyncio.Future[int | None]] = {}  # claimed here -> the answer's run, once decided
        self._renewing: set[str] = set()  # the same keys, for the renewing thread
        self._pending: dict[str, Pending] = {}  # claimed here -> the run the claim opened
        self._upcoming: dict[str, None] = {}  # the keys of the prompts not taken yet, in the batch's order
        self._looked: dict[str, tuple[Answer | None, Holder | None, float]] = {}  # looked at ahead: when (monotonic)
        self._lock = threading.Lock()
        self._waiting: dict[str, list[asyncio.Future[tuple[int | None, Answer | None]]]] = {}  # another worker's -> who waits
        self._poller: asyncio.Task[None] | None = None
        self._deciding = 0  # prompts this worker is deciding now
        self._idle = asyncio.Event()  # set when it has none to decide nor to take: the poller looks at once
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def __enter__(self) -> Batch:
        self._renewer = threading.Thread(target=self._renew, name="accord-ledger-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=self.ledger.timeout + 1)
        if self._poller is not None:
            self._poller.cancel()
        for key in list(self._held):  # only when a decision crashed past its own handler
            self._done(key, None)

    async def claim(self, prompt: Any, turns: asyncio.Semaphore | None = None) -> Ticket:
        """``prompt``'s Ticket: its answer replayed when it has one (stored, or made meanwhile by
        another worker), else the right to decide it, with one of ``turns`` held until :meth:`done`.
        A claim held elsewhere is waited for without holding one of ``turns``."""
        entry = self._entry(prompt)
        if entry is not None:
            self._upcoming[entry.key] = None  # looked at with the prompts before it (one read for several)
        while True:
            if turns is not None:
                await turns.acquire()
            try:
                kind, found = self._take(entry)
            except BaseException:
                if turns is not None:
                    turns.release()
                raise
            if kind in ("mine", "unclaimed"):
                self._deciding += 1
                return Ticket(key=found, pending=self._pending.get(found) if found is not None else None, turn=turns)
            if turns is not None:
                turns.release()
            if isinstance(found, Result):
                return Ticket(answer=found)
            run, answer = await self._wait(found)
            if answer is not None and (replayed := self._decode(answer, "cannot replay another worker's answer")) is not None:
                return Ticket(answer=replayed)
            if run is not None and (replayed := self._replay(run)) is not None:
                return Ticket(answer=replayed)

    def done(self, ticket: Ticket, result: Result[Any] | None) -> None:
        """The ticket's prompt is decided (``result``; None when its decision raised): its turn and
        claim are let go, and the workers waiting on it get the answer."""
        if ticket.answer is not None:
            return
        if ticket.turn is not None:
            ticket.turn.release()
        self._deciding -= 1
        self._settle()
        if ticket.key is not None:
            self._done(ticket.key, result)

    # -- one prompt --------------------------------------------------------------------------

    def _entry(self, prompt: Any) -> Entry | None:
        try:
            return self.ledger._keys.entry(self.subject, prompt)
        except ConfigError:  # a model without an identity: refused, never a guess
            raise
        except Exception as exc:  # noqa: BLE001 - the run goes on; remember reports what it cannot store
            log.warning("accord ledger: no key for a prompt, deciding it without a claim (%s)", brief(exc))
            return None

    def _take(self, entry: Entry | None) -> tuple[str, Any]:
        """``("answer", Result)``, ``("mine", key)``, ``("wait", key)``, or ``("unclaimed", None)``: decide it without a claim."""
        if entry is None:
            return "unclaimed", None
        ledger, key = self.ledger, entry.key
        self._upcoming.pop(key, None)
        self._settle()
        if key in self._held:  # the same prompt again in this batch: wait for the first
            return "wait", key
        answer, holder = self._look(key)
        if answer is None and holder is None and entry.legacy is not None:  # stored under the key version before
            answer = self._legacy(entry.legacy)
        if answer is not None and (replayed := self._replayable(answer)) is not None:
            return "answer", replayed
        if holder is not None and holder.live and holder.owner != self.owner and not _gone(holder.owner):
            return "wait", key  # another worker decides it now: no need to try the claim
        try:
            claim = self._store.claim(entry, self.owner, lease=self._lease, ttl=ledger.ttl, refresh=self.refresh, begin=True)
        except Exception as exc:  # noqa: BLE001 - the ledger never costs the answer
            log.warning("accord ledger: cannot claim a prompt, deciding it without a claim (%s)", brief(exc))
            return "unclaimed", None
        if claim.state == "taken" and claim.holder is not None and self._take_over(key, claim.holder.owner):
            return self._take(entry)
        if claim.state == "taken":
            return "wait", key
        if claim.answer is not None:  # decided by another worker since the look
            replayed = self._decode(claim.answer, "cannot replay another worker's answer, deciding afresh")
            return ("answer", replayed) if replayed is not None else ("unclaimed", None)
        self._held[key] = asyncio.get_running_loop().create_future()
        if claim.run is not None:  # the run the claim opened: the decision's (its Ticket hands it on)
            self._pending[key] = Pending(ledger, claim.run, key=key, owner=self.owner)
        with self._lock:
            self._renewing.add(key)
        return "mine", key

    def _legacy(self, key: str) -> Answer | None:
        """The answer stored under a key of the version before (``Entry.legacy``); None when none
        is, or the ledger cannot be read (then the claim decides)."""
        try:
            return self._store.answer(key)
        except Exception as exc:  # noqa: BLE001 - the ledger never costs the answer
            log.warning("accord ledger: cannot look up an answer stored under the older key (%s)", brief(exc))
            return None

    def _replayable(self, answer: Answer) -> Result[Any] | None:
        """The stored answer, replayed, unless it is past the ledger's ttl or the batch refreshes."""
        if self.refresh or (self.ledger.ttl is not None and time.time() - answer.decided > self.ledger.ttl):
            return None
        return self._decode(answer, "recall failed, deciding afresh")

    def _look(self, key: str) -> tuple[Answer | None, Holder | None]:
        """``key``'s answer and claim: as looked at with the prompts before it, when that still tells
        (an answer, or a claim held elsewhere), else read again with the next prompts of the batch."""
        seen = self._looked.pop(key, None)
        if seen is not None and (seen[0] is not None or seen[1] is not None or time.monotonic() - seen[2] < _LOOK_FRESH):
            return seen[0], seen[1]
        keys = [key, *itertools.islice((k for k in self._upcoming if k != key), _LOOK_AHEAD - 1)]
        try:
            found = self._store.look(keys)
        except Exception as exc:  # noqa: BLE001 - then the claim says what it can
            log.warning("accord ledger: cannot look at a prompt's answer and claim (%s)", brief(exc))
            return None, None
        now = time.monotonic()
        for other in keys[1:]:
            answer, holder = found.get(other, (None, None))
            self._looked[other] = answer, holder, now
        return found.get(key, (None, None))

    def _decode(self, answer: Answer, failed: str) -> Result[Any] | None:
        try:
            return _codec.decode(answer, self.subject.schema)
        except Exception as exc:  # noqa: BLE001 - a stored answer that no longer validates: decided afresh
            log.warning("accord ledger: %s (%s)", failed, brief(exc))
            return None

    def _done(self, key: str, result: Result[Any] | None) -> None:
        """Let go of the claim on ``key``, naming the answer's run for the workers that wait on it
        (unless the decision's own ``remember`` let go of it, with the run)."""
        with self._lock:
            self._renewing.discard(key)
        pending = self._pending.pop(key, None)
        if pending is not None and pending.released:
            run = pending.answer
        else:
            run = None
            if result is not None and result.error is None and result.stable and result.ledger is not None and not result.ledger.failed:
                run = result.ledger.run  # this worker's run, or the first writer's
            try:
                self._store.release(key, self.owner, run)
            except Exception as exc:  # noqa: BLE001 - the claim then runs out with its lease
                log.warning("accord ledger: cannot let go of a claim, it runs out in %g s (%s)", self._lease, brief(exc))
        future = self._held.pop(key, None)
        if future is not None and not future.done():
            future.set_result(run)

    def _take_over(self, key: str, owner: str) -> bool:
        """Let go of a dead local owner's claim on its behalf; whether it was one."""
        if not _gone(owner):
            return False
        try:
            self._store.release(key, owner, None)
        except Exception as exc:  # noqa: BLE001 - then its lease runs out
            log.warning("accord ledger: cannot take over a dead worker's claim (%s)", brief(exc))
            return False
        return True

    def _replay(self, run: int) -> Result[Any] | None:
        try:
            return _codec.decode(self._store.replay(run), self.subject.schema)
        except Exception as exc:  # noqa: BLE001 - then the prompt is claimed again
            log.warning("accord ledger: cannot replay another worker's answer (%s)", brief(exc))
            return None

    # -- waiting for other workers -----------------------------------------------------------

    async def _wait(self, key: str) -> tuple[int | None, Answer | None]:
        """Until the claim on ``key`` is let go or runs out: the answer's run (and the run itself,
        when the poll read it), or None (then claim it again)."""
        mine = self._held.get(key)
        if mine is not None:
            return await asyncio.shield(mine), None
        future: asyncio.Future[tuple[int | None, Answer | None]] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._poll())
        return await future

    async def _poll(self) -> None:
        """Look at every claim waited on, once a pause, until no one waits (sooner once this worker goes idle)."""
        shortest, longest = _IDLE_PAUSE[0], min(_IDLE_PAUSE[1], self._lease / 4)
        pause, blind_since = shortest, None
        while self._waiting:
            if self._busy():
                self._idle.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), max(pause, min(_BUSY_PAUSE, self._lease / 4)))
            else:
                await asyncio.sleep(pause)
            now, keys = time.monotonic(), list(self._waiting)
            if not keys:
                break
            try:
                holders = self._store.holders(keys)
            except Exception as exc:  # noqa: BLE001 - keep waiting, up to a lease
                if blind_since is None:
                    blind_since = now
                    log.warning("accord ledger: cannot see other workers' claims (%s)", brief(exc))
                if now - blind_since >= self._lease:  # their claims would have run out by now: decide here
                    for key in keys:
                        self._wake(key, None, None)
                pause = min(pause * 2, longest)
                continue
            blind_since = None
            woken = 0
            for key in keys:
                holder = holders.get(key)
                if holder is None or not holder.live or holder.owner == self.owner or self._take_over(key, holder.owner):
                    self._wake(key, *((holder.run, holder.answer) if holder is not None else (None, None)))
                    woken += 1
            pause = shortest if woken else min(pause * 1.5, longest)

    def _busy(self) -> bool:
        return bool(self._deciding or self._upcoming)  # prompts of its own to decide still: not between two of them

    def _settle(self) -> None:
        if not self._busy():
            self._idle.set()

    def _wake(self, key: str, run: int | None, answer: Answer | None) -> None:
        for future in self._waiting.pop(key, []):
            if not future.done():
                future.set_result((run, answer))

    def _renew(self) -> None:
        """The renewing thread: every third of the lease, extend every claim held here."""
        failing = False
        while not self._stop.wait(self._lease / 3):
            with self._lock:
                keys = sorted(self._renewing)
            if not keys:
                continue
            try:
                self._store.renew(self.owner, keys, lease=self._lease)
                failing = False
            except Exception as exc:  # noqa: BLE001 - the claims may run out: then another worker decides them too
                if not failing:
                    log.warning("accord ledger: cannot renew this worker's claims, they run out in %g s (%s)", self._lease, brief(exc))
                failing = True


def _namespace() -> str:
    """This host's name and PID namespace: two owners with the same are processes of one host that can see each other."""
    try:
        space = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        space = 0
    return f"{socket.gethostname()}:{space}"


_HERE = _namespace()


def _gone(owner: str) -> bool:
    """Whether ``owner`` is a process of this host and PID namespace that no longer runs."""
    where, _, rest = owner.rpartition(":")[0].rpartition(":")
    if where != _HERE or not rest.isdigit():
        return False
    try:
        os.kill(int(rest), 0)
    except ProcessLookupError:
        return True
    except OSError:  # it runs, as another user
        return False
    return False
