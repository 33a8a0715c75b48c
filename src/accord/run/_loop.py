"""The run loop: an I/O-free generator that decides one prompt.

:func:`decide` yields a :class:`Step` ("start these calls, wake me within ``timeout`` seconds"),
receives the :class:`Outcome` of every call that finished (an empty list once the timeout passed)
and returns the :class:`~accord.Result`. It never calls a model, sleeps, or reads a clock other
than the one injected, so the sync and async drivers of ``_drive`` share it and a test can drive
it by hand (the httpx auth-flow pattern)::

    flow = decide(prompt, schema, backend, policy, clock)
    step = next(flow)                        # the first calls
    step = flow.send([outcome, ...])         # ... until StopIteration(value=Result)

Each turn of the loop:

1. ``schedule`` opens ballot slots: ``quorum`` at once (``k`` without early stopping), then one
   more at a time while the vote is open. When the margin gate can certify slot 0 alone it runs
   first, alone; when unrun ballots may be predicted (a local model with measured noise floors,
   ``_predict``), the slots run one at a time.
2. ``take_ready`` starts the calls that are ready or whose backoff is over, within
   ``Budget.max_calls``; ``timeout`` is the time to the next backoff or to the end of
   ``Budget.max_seconds``. A driver that shares a concurrency limit (``amap``) says which calls
   wait for a free slot and when each reaches the model (:class:`Queued`): a call still waiting
   when the run ends was never a model call (no ballot), and time during which every call of
   the run waits does not count against ``Budget.max_seconds``.
3. ``absorb`` takes each Outcome, in call order: the text is read (extract -> normalize ->
   validate -> canonicalize, ``_read``, in :meth:`_Run.read`) and the ballot recorded
   (:meth:`_Run.record`, the one place a ballot is made). Then, per slot:

       valid              cast in the ballot box; the slot is finished
       invalid            asked again with the errors as feedback, while ``Retry.attempts`` allow
       cut off (length)   asked again with ``max_tokens`` times ``Retry.grow_max_tokens``, not
                          re-asked; unless the text ends in a loop (``Retry.grow_loops``)
       backend fault      a transient one is retried after a backoff (``Retry.backoff``, a
                          server's Retry-After), while ``Retry.transport_attempts`` allow; any
                          other ends the slot

4. The ballot box (``_box``) gives the verdict: the margin gate, the vote (whole-object or
   fieldwise), the vote with predicted ballots counted, or hopeless. Else the budget (seconds,
   tokens, calls: nothing left to run) ends the run. The run ends in :meth:`_Run.end`, the one
   place: calls still in flight are recorded as cancelled, and ``_outcome`` builds the Result.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._errors import AccordError, BackendError
from .._extract import Extract, shape_of
from .._gate import MarginGate
from .._predict import Floors
from .._prompt import build_input
from .._read import Misreading, Reading, read
from .._result import Ballot, Result
from .._retry import Budget, Retry, looping
from .._schema import Schema
from .._types import Completion, Feedback, Prompt, Request, Settings, Usage
from .._vote import Vote
from ..backends._base import Backend
from . import _outcome as outcome
from ._box import BUDGET, Box, Seat, Verdict

log = logging.getLogger("accord")

SPENT = Verdict(BUDGET, None)
UNGATED = MarginGate()  # reads the smallest margin only
TRUNCATED = ({"loc": (), "msg": "the output was cut off at max_tokens", "type": "truncated"},)


@dataclass(frozen=True)
class Call:
    """One model call to start: ``id`` orders outcomes, ``slot`` is the ballot it is for."""

    id: int
    slot: int
    request: Request


@dataclass(frozen=True)
class Step:
    """Start these calls; send back what finishes, or an empty list after ``timeout`` seconds."""

    start: tuple[Call, ...]
    timeout: float | None


@dataclass(frozen=True)
class Outcome:
    """A finished call: its completion, or the exception it raised, and how long it took."""

    call: Call
    completion: Completion | None
    error: BaseException | None
    seconds: float


@dataclass(frozen=True)
class Queued:
    """A driver's notice, sent beside the Outcomes: ``call`` waits for a free slot of a shared
    concurrency limit (``started=False``), or has just reached the model (``started=True``). A
    driver that starts every call at once (``drive``, a test) sends none."""

    call: Call
    started: bool


READ_GRACE = 0.05  # seconds a turn's outputs may still be read once the budget's time is up


@dataclass(frozen=True)
class Policy:
    """Everything that shapes a run besides the prompt, schema and backend."""

    vote: Vote = field(default_factory=Vote)
    retry: Retry = field(default_factory=Retry)
    budget: Budget = field(default_factory=Budget)
    settings: Settings = field(default_factory=Settings)
    hint: bool = True
    normalizers: tuple[Callable[[str], str], ...] = ()
    plurality: bool = False
    on_ballot: Callable[[Ballot], Any] | None = None
    perturb: Any = None
    extract: Extract = field(default_factory=Extract)


@dataclass
class _Slot:
    """One ballot slot's calls: the latest request and the attempts so far; ``seat`` is its vote."""

    seat: Seat
    request: Request
    calls: int = 0
    outputs: int = 0
    faults: int = 0

    @property
    def index(self) -> int:
        return self.seat.index


def decide(
    prompt: Prompt,
    schema: Schema[Any],
    backend: Backend,
    policy: Policy,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[Step, Sequence[Outcome | Queued], Result[Any]]:
    """The decision loop for one prompt (see the module docstring)."""
    return _Run(prompt, schema, backend, policy, clock).loop()


class _Run:
    def __init__(self, prompt: Prompt, schema: Schema[Any], backend: Backend, policy: Policy, clock: Callable[[], float]):
        self.prompt, self.schema, self.backend, self.policy, self.clock = prompt, schema, backend, policy, clock
        vote = self.vote = policy.vote
        self.gate: MarginGate | None = vote.gate
        # The gate runs slot 0 alone only when it can certify it: margins and a known floor.
        self.gating = self.gate is not None and backend.gives_margins and self.gate.floor_for(backend) is not None
        # Unrun ballots the finished ones determine (local models with measured floors, early stop).
        floors = Floors.of(backend, self.gate) if self.gating and vote.stop_rule is not None and not vote.fieldwise else None
        computations = [floors.computation(self.perturbation(i)) for i in range(vote.k)] if floors is not None else []
        self.predicting = floors is not None
        self.box = Box(vote, schema, floors, computations, self.gating)
        self.hint = policy.hint and not backend.constrains_for(schema)
        self.shape = shape_of(schema)
        self.t0 = clock()
        self.slots: list[_Slot] = []
        self.ready: list[Call] = []
        self.delayed: list[tuple[float, Call]] = []  # (when, call): retries after a backoff
        self.in_flight: dict[int, Call] = {}
        self.ballots: list[Ballot] = []
        self.next_id = 0
        self.started = 0
        self.usage = Usage()
        self.began: dict[int, float] = {}  # call id -> when it reached the model
        self.queued: set[int] = set()  # calls waiting for a free slot (never on the model yet)
        self.idle = 0.0  # seconds every call of the run waited for a slot: not spent from the budget
        self.idle_since: float | None = None
        self.read_until: float | None = None

    # -- the loop ----------------------------------------------------------------------------

    def loop(self) -> Generator[Step, Sequence[Outcome | Queued], Result[Any]]:
        self.schedule()
        while True:
            now = self.clock()
            starts = self.take_ready(now)
            if not starts and not self.in_flight and not self.delayed:
                return self.end(self.box.verdict() or SPENT)  # nothing left to run
            self.note_idle(now)
            received = yield Step(tuple(starts), self.timeout(now))
            now = self.clock()
            outcomes = [item for item in received if not isinstance(item, Queued)]
            if len(outcomes) < len(received):
                self.heard_queue([item for item in received if isinstance(item, Queued)], now)
            budget = self.policy.budget.max_seconds
            self.read_until = None if budget is None else max(now + budget - self.spent(now), now + READ_GRACE)
            for done in sorted(outcomes, key=lambda o: o.call.id):  # the same order under any driver
                self.absorb(done, now)
            now = self.clock()  # reading took time too: the budget is judged after it
            self.note_idle(now)
            verdict = self.box.verdict() or self.over_budget(now)
            if verdict is not None:
                return self.end(verdict)
            self.schedule()

    def take_ready(self, now: float) -> list[Call]:
        due = [call for when, call in self.delayed if when <= now]
        self.delayed = [(when, call) for when, call in self.delayed if when > now]
        starts = []
        limit = self.policy.budget.max_calls
        for call in self.ready + due:
            if limit is not None and self.started >= limit:
                break  # over the call budget: never started; the run ends once nothing is left to run
            self.started += 1
            starts.append(call)
            self.in_flight[call.id] = call
            self.began[call.id] = now
        self.ready = []
        return starts

    def timeout(self, now: float) -> float | None:
        waits = [when - now for when, _ in self.delayed]
        if self.policy.budget.max_seconds is not None and self.idle_since is None:
            waits.append(self.policy.budget.max_seconds - self.spent(now))
        return max(0.0, min(waits)) if waits else None

    def spent(self, now: float) -> float:
        """Seconds of the budget spent: the run's time, less the time every call waited for a slot."""
        idle = self.idle + (now - self.idle_since if self.idle_since is not None else 0.0)
        return now - self.t0 - idle

    def heard_queue(self, notices: Sequence[Queued], now: float) -> None:
        """Note which calls wait for a slot and which reached the model; the budget's clock stops
        while every call of the run waits (and nothing else, a backoff, is pending)."""
        for notice in notices:
            if notice.started:
                self.queued.discard(notice.call.id)
                self.began[notice.call.id] = now
            elif notice.call.id in self.in_flight:
                self.queued.add(notice.call.id)
                self.began.pop(notice.call.id, None)

    def note_idle(self, now: float) -> None:
        """Stop or restart the budget's clock: it stops while every call of the run waits for a slot."""
        waiting = bool(self.in_flight) and not self.delayed and self.in_flight.keys() <= self.queued
        if waiting and self.idle_since is None:
            self.idle_since = now
        elif not waiting and self.idle_since is not None:
            self.idle += now - self.idle_since
            self.idle_since = None

    def over_budget(self, now: float) -> Verdict | None:
        budget = self.policy.budget
        over_time = budget.max_seconds is not None and self.spent(now) >= budget.max_seconds
        over_tokens = budget.max_tokens is not None and (self.usage.total_tokens or 0) >= budget.max_tokens
        return SPENT if over_time or over_tokens else None

    def end(self, verdict: Verdict) -> Result[Any]:
        """The one place a run ends: calls on the model become cancelled ballots (how long they
        ran, in the usage too), calls that never reached it are dropped; then the Result."""
        now = self.clock()
        seconds = now - self.t0
        running = [(call, self.began[call.id] - self.t0, now - self.began[call.id])
                   for call in self.in_flight.values() if call.id not in self.queued and call.id in self.began]
        for ballot in outcome.cancelled(running):
            self.usage = self.usage + ballot.usage
            self.record(ballot)
        return outcome.result(
            self.box, verdict, ballots=self.ballots, usage=self.usage, backend=self.backend,
            settings=self.policy.settings, plurality=self.policy.plurality, seconds=seconds,
        )

    # -- scheduling --------------------------------------------------------------------------

    def schedule(self) -> None:
        """Open new ballot slots: the first batch, then one at a time while undecided."""
        opened, k = len(self.slots), self.vote.k
        if opened >= k:
            return
        if self.gating and opened == 1 and not self.slots[0].seat.finished:
            return  # the gate may accept slot 0 alone: wait for it
        if (self.gating and opened == 0) or self.predicting:
            if self.box.all_done:
                self.open()  # one at a time: each finished ballot may predict the rest
            return
        target = self.box.quorum if self.vote.stop_rule else k
        if opened < target:
            for _ in range(target - opened):
                self.open()
        elif self.box.all_done:
            self.open()

    def perturbation(self, index: int) -> Any:
        return self.policy.perturb.for_ballot(index) if self.policy.perturb is not None else None

    def open(self) -> None:
        seat = self.box.seat()
        request = self.request(seat.index, None, self.policy.settings, self.perturbation(seat.index))
        slot = _Slot(seat, request)
        self.slots.append(slot)
        self.call(slot, request)

    def request(self, index: int, feedback: Feedback | None, settings: Settings, perturbation: Any) -> Request:
        text = build_input(self.prompt, self.schema, hint=self.hint, feedback=feedback)
        return Request(self.prompt, text, self.schema, settings, index, 1, feedback, perturbation)

    def call(self, slot: _Slot, request: Request, delay: float = 0.0) -> None:
        slot.calls += 1
        budget = self.policy.budget.max_seconds
        left = None if budget is None else max(0.0, budget - self.spent(self.clock()) - delay)
        slot.request = replace(request, ballot=slot.index, attempt=slot.calls, deadline=left)
        self.next_id += 1
        call = Call(self.next_id, slot.index, slot.request)
        if delay > 0:
            self.delayed.append((self.clock() + delay, call))
        else:
            self.ready.append(call)

    # -- one finished call -------------------------------------------------------------------

    def absorb(self, done: Outcome, now: float) -> None:
        call = done.call
        self.in_flight.pop(call.id, None)
        self.began.pop(call.id, None)
        self.queued.discard(call.id)
        slot = self.slots[call.slot]
        started = max(0.0, now - self.t0 - done.seconds)
        if done.completion is None:
            error = self.backend.map_error(done.error or RuntimeError("no completion"))
            self.fault(slot, call, error, done.seconds, started)
        else:
            self.output(slot, call, done.completion, done.seconds, started)

    def read(self, completion: Completion) -> Reading | Misreading:
        """The one place a model's text is read into a value (or why not)."""
        left = None if self.read_until is None else self.read_until - self.clock()  # bounded by the budget
        reading = read(completion.text, self.schema, self.policy.normalizers, self.vote.float_digits, self.policy.extract, seconds=left)
        if completion.finish_reason == "length" and not isinstance(reading, Misreading) and (self.shape != "json" or reading.open_ended):
            # A cut-off scalar or text can look valid ("12" of "123"); a JSON value that closed cannot.
            return Misreading("truncated", TRUNCATED)
        return reading

    def output(self, slot: _Slot, call: Call, completion: Completion, seconds: float, started: float) -> None:
        usage = Usage(completion.usage.prompt_tokens, completion.usage.completion_tokens, seconds, 1)
        self.usage = self.usage + usage
        # Without a gate, only the smallest margin is kept: no noise floor is looked up (for a
        # model without shipped floors that would start a calibration nobody asked for).
        margins = self.gate.check(completion.margins, self.backend) if self.gate else UNGATED.check(completion.margins)
        reading = self.read(completion)
        slot.outputs += 1
        self.box.heard(slot.seat, margins.min_margin)
        perturbation = call.request.perturbation
        meta = {**completion.meta, "perturbation": _describe(perturbation)} if perturbation is not None else dict(completion.meta)
        loop = False
        error: dict[str, Any] | None = None
        if isinstance(reading, Misreading):
            error = {"stage": reading.stage, "message": reading.message, "errors": [dict(e) for e in reading.errors]}
            loop = completion.finish_reason == "length" and looping(completion.text or "")
            if loop:
                error["loop"] = True  # cut off inside a repeated stretch: not grown
            coercions: tuple[dict[str, str], ...] = ()
            status, value, data, key = "invalid", None, None, None
        else:
            status, value, data, key = "valid", reading.value, reading.data, reading.key
            coercions = reading.coercions
        ballot = Ballot(
            slot.index, call.request.attempt, status, completion.text, value, data, key, error, completion.finish_reason,
            usage, started, seconds, margins.min_margin, margins.fragile_steps, meta, coercions,
        )
        self.record(ballot)
        if isinstance(reading, Misreading):
            self.retry_output(slot, call, completion, reading, loop)
        else:
            self.box.cast(slot.seat, ballot, reading, completion.score, margins.certified)

    def retry_output(self, slot: _Slot, call: Call, completion: Completion, reading: Misreading, loop: bool) -> None:
        retry = self.policy.retry
        if not retry.again(slot.outputs, self.clock() - self.t0) or (loop and not retry.grow_loops):
            self.box.spoil(slot.seat)
            return
        request = call.request
        if completion.finish_reason == "length":
            # Truncated: same question, more room; not re-asked with feedback.
            current = request.settings.max_tokens or self.backend.default_max_tokens
            self.call(slot, request.with_settings(max_tokens=math.ceil(current * retry.grow_max_tokens)))
            return
        feedback = Feedback(reading.stage, reading.errors, (completion.text or "")[:200])
        self.call(slot, self.request(slot.index, feedback, request.settings, request.perturbation))

    def fault(self, slot: _Slot, call: Call, error: AccordError, seconds: float, started: float) -> None:
        usage = Usage(seconds=seconds, calls=1)
        self.usage = self.usage + usage
        retryable = isinstance(error, BackendError) and error.retryable
        info = {"stage": "backend", "message": str(error), "type": type(error).__name__, "retryable": retryable}
        self.record(Ballot(slot.index, call.request.attempt, "error", error=info, usage=usage, started=started, seconds=seconds))
        slot.faults += 1
        if retryable and self.policy.retry.again_after_fault(slot.faults, self.clock() - self.t0):
            retry_after = error.retry_after if isinstance(error, BackendError) else None
            self.call(slot, call.request, delay=self.policy.retry.backoff(slot.faults, retry_after))
            return
        self.box.spoil(slot.seat, error)

    def record(self, ballot: Ballot) -> None:
        """The one place a ballot is made: kept for the Result and handed to ``on_ballot``."""
        self.ballots.append(ballot)
        log.debug("ballot %d.%d %s %s", ballot.slot, ballot.attempt, ballot.status, ballot.key or (ballot.error or {}).get("message", ""))
        if self.policy.on_ballot is not None:
            try:
                self.policy.on_ballot(ballot)
            except Exception:  # a broken callback must not lose the run
                log.exception("on_ballot callback failed")


def _describe(value: Any) -> Any:
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value
