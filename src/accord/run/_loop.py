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
   ``Budget.max_calls``, and for a ``one_at_a_time`` backend one at a time (the admission: the
   drivers only call and wait); ``timeout`` is the time to the next backoff or to the end of
   ``Budget.max_seconds``. A driver that shares a concurrency limit (``amap``) says which calls
   wait for a free slot and when each reaches the model (:class:`Queued`): a call still waiting
   when the run ends was never a model call (no ballot), and time during which every call of
   the run waits does not count against ``Budget.max_seconds``.
3. ``absorb`` (``_absorb``) takes each Outcome, in call order: the text is read (extract ->
   normalize -> validate -> canonicalize, ``_read``, in :meth:`Absorb.read`) and the ballot
   recorded (:meth:`_Run.record`, the one place a ballot is made). Then the slot is finished
   (valid: cast in the ballot box), asked again (invalid, cut off, a transient fault), or ended:
   the rules are in ``_absorb``'s docstring. A call that raised KeyboardInterrupt or SystemExit
   is not a ballot: it is raised here, once the calls that finished beside it are recorded.
4. The ballot box (``_box``) gives the verdict: the margin gate, the vote (whole-object or
   fieldwise), the vote with predicted ballots counted, or hopeless. Else the budget (seconds,
   tokens, cost, calls: nothing left to run) ends the run. The run ends in :meth:`_Run.end`, the
   one place: calls still in flight are recorded as cancelled, and ``_outcome`` builds the Result.

A ``watch`` (``_watch``: hooks and spans), when the run has one, is told at the recording points:
a call starts (``take_ready``), a ballot is recorded (``record``), a slot asks again (``again``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from typing import Any

from .._result import Ballot, Result
from .._types import Feedback, Prompt, Request, Settings, Usage
from ..backends._base import Backend
from ..observe._hooks import RetryEvent
from ..prompt._examples import with_preamble
from ..prompt._prompt import build_input, shows_schema
from ..read._extract import shape_of
from ..schema._roles import render
from ..schema._schema import Schema
from ..schema._size import first_call_tokens
from ..vote._decisive import Decisions
from ..vote._gate import MarginGate
from ..vote._predict import Floors
from ..vote._vote import Vote
from . import _outcome as outcome
from . import _reference as referred
from ._absorb import Absorb
from ._box import BUDGET, Box, Verdict
from ._calls import Call, Outcome, Queued, Slot, Step
from ._policy import Policy
from ._unreadable import Unreadable
from ._watch import Watch

__all__ = ["Call", "Outcome", "Policy", "Queued", "Step", "ballot_fields", "decide"]  # the loop's names, wherever defined

log = logging.getLogger("accord")

SPENT = Verdict(BUDGET, None)
READ_GRACE = 0.05  # seconds a turn's outputs may still be read once the budget's time is up


def decide(
    prompt: Prompt,
    schema: Schema[Any],
    backend: Backend,
    policy: Policy,
    clock: Callable[[], float] = time.monotonic,
    *,
    watch: Watch | None = None,
) -> Generator[Step, Sequence[Outcome | Queued], Result[Any]]:
    """The decision loop for one prompt (see the module docstring)."""
    return _Run(prompt, schema, backend, policy, clock, watch=watch).loop()


class _Run(Absorb):
    def __init__(
        self, prompt: Prompt, schema: Schema[Any], backend: Backend, policy: Policy, clock: Callable[[], float], *,
        watch: Watch | None = None, deployment: str | None = None, hint: bool | None = None,
    ):
        self.schema, self.backend, self.policy, self.clock, self.watch = schema, backend, policy, clock, watch
        self.sized = first_call_tokens(schema.json_schema, backend.default_max_tokens, backend.sizes_max_tokens)
        self.asked_prompt = prompt
        # Which deployment runs the ballots: recorded on each when the backend has a reference.
        self.deployment = deployment or ("serving" if backend.reference is not None else None)
        self.target = backend if self.deployment == "reference" else None  # the calls' backend, when not the driver's
        self.prompt = with_preamble(prompt, policy.system, policy.examples)  # as asked: system and examples first
        # Prices look calls up by the model asked for (read once), then by the one that answered.
        asked = backend.telemetry().get("gen_ai.request.model") if policy.prices is not None else None
        self.asked = str(asked) if asked is not None else None
        vote = self.vote = policy.vote
        self.gate: MarginGate | None = vote.gate
        # The gate runs slot 0 alone only when it can certify it: margins and a known floor.
        self.gating = self.gate is not None and backend.gives_margins and self.gate.floor_for(backend) is not None
        # Unrun ballots the finished ones determine (local models with measured floors, early stop).
        floors = Floors.of(backend, self.gate) if self.gating and vote.stop_rule is not None and not vote.fieldwise else None
        computations = [floors.computation(self.perturbation(i)) for i in range(vote.k)] if floors is not None else []
        self.predicting = floors is not None
        decisions = Decisions(schema.roles(vote.role_overrides), source_text(prompt))
        self.box = Box(vote, schema, floors, computations, self.gating, decisions=decisions)
        closes = policy.retry.close_prose  # where a value that ran out is closed, not asked again (read/_close, local/_loops)
        self.prose = frozenset(render(pattern) for pattern in decisions.prose) if closes else frozenset()
        self.labels = frozenset(render(pattern) for pattern in decisions.roles.labels) if closes else frozenset()
        self.hint = policy.hint if hint is None else hint  # Prompting(schema_in_prompt=); a reference: as served (shown())
        self.shape = shape_of(schema)
        self.t0 = clock()
        if self.hint:
            schema.render()  # once per schema (bounded and cached; ``_signature``), on the run's clock
        self.slots: list[Slot] = []
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
        self.unreferred: dict[str, Any] | None = None  # the reference gave no valid value: the serving deployment votes
        self.unread = Unreadable()

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
                if done.error is None or not escapes(done.error):
                    self.absorb(done, now)
            for done in outcomes:
                if done.error is not None and escapes(done.error):
                    raise done.error  # a KeyboardInterrupt: the calls that finished beside it are recorded first
            now = self.clock()  # reading took time too: the budget is judged after it
            self.note_idle(now)
            verdict = self.box.verdict() or self.over_budget(now)
            if verdict is not None:
                return self.end(verdict)
            if self.referring():
                decided = yield from self.refer()
                if decided is not None:
                    return decided
            self.schedule()

    def take_ready(self, now: float) -> list[Call]:
        """The calls to start now: those ready or whose backoff is over, within ``Budget.max_calls``;
        for a ``one_at_a_time`` backend only one, once none of the run's is in flight (the others
        stay ready, in order, and take no slot of a concurrency limit meanwhile)."""
        due = [call for when, call in self.delayed if when <= now]
        self.delayed = [(when, call) for when, call in self.delayed if when > now]
        ready = self.ready + due
        room = len(ready) if not self.backend.one_at_a_time else 0 if self.in_flight else 1
        starts = []
        limit = self.policy.budget.max_calls
        for call in ready[:room]:
            if limit is not None and self.started >= limit:
                break  # over the call budget: never started; the run ends once nothing is left to run
            self.started += 1
            starts.append(call)
            self.in_flight[call.id] = call
            self.began[call.id] = now
            if self.watch is not None:
                self.watch.request(call)
        self.ready = ready[room:]
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
        over_tokens = budget.max_total_tokens is not None and (self.usage.total_tokens or 0) >= budget.max_total_tokens
        over_cost = budget.max_cost is not None and (self.usage.cost or 0.0) >= budget.max_cost
        return SPENT if over_time or over_tokens or over_cost else None

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
        checked = self.box.settle_check(verdict)
        learned = self.gate.learned(self.backend) if self.gate is not None and checked is not None else None
        if learned is not None and checked is not None:
            learned.checked(checked, self.box.checking or None)
        return outcome.result(
            self.box, verdict, ballots=self.ballots, usage=self.usage, backend=self.backend,
            settings=self.policy.settings, plurality=self.policy.plurality, strict=self.policy.strict, seconds=seconds,
            hint=self.schema._hint.note() if self.hint else None,
            unreferred=self.unreferred,
        )

    # -- a reference deciding (._reference) -----------------------------------------------------

    def referring(self) -> bool:
        """Slot 0 ran alone on a deployment with a reference, and the gate did not certify it
        (a step below the floor, or no valid output): the reference decides."""
        if not (self.gating and self.deployment == "serving" and len(self.slots) == 1) or self.unreferred is not None:
            return False
        if not referred.has_room(self.policy.budget, self.started):
            return False  # no call left for the reference: the run goes on (and ends) as without one
        seat = self.slots[0].seat
        return seat.finished and seat.fault is None and self.box.gate_key is None

    def refer(self) -> Generator[Step, Sequence[Outcome | Queued], Result[Any] | None]:
        """The reference decides: one greedy ballot on the reference backend, given as many
        attempts as the serving ballot it stands in for took (``_reference``),
        under what is left of the budget; its Result, with this deployment's ballots before it.
        None when the reference gave no valid value: its ballots are kept, and the serving
        deployment votes as it would without a reference (a reference that cannot answer never
        turns a valid serving answer into an error)."""
        reference = self.backend.reference
        assert reference is not None
        now = self.clock()
        policy = replace(self.policy, vote=Vote(k=1), perturb=None, retry=referred.held_to(self.policy.retry, self.slots[0].outputs),
                         budget=referred.budget_left(self.policy.budget, self.spent(now), self.started, self.usage))
        run = _Run(self.asked_prompt, self.schema, reference, policy, self.clock, watch=self.watch, deployment="reference", hint=self.shown())
        decided = yield from run.loop()
        if decided.key is None and decided.stopped_because != BUDGET and referred.has_room(self.policy.budget, self.started + len(decided.ballots)):
            self.ballots += [replace(b, slot=b.slot + self.vote.k) for b in decided.ballots]
            self.usage, self.started = self.usage + decided.usage, self.started + len(decided.ballots)
            self.unreferred = {"calls": len(decided.ballots), "stopped_because": decided.stopped_because,
                               "fingerprint": reference.fingerprint}
            return None
        return referred.merged(decided, self.ballots, self.usage, self.backend, reference, seconds=self.clock() - self.t0)

    # -- scheduling --------------------------------------------------------------------------

    def schedule(self) -> None:
        """Open new ballot slots: the first batch, then one at a time while undecided."""
        opened, k = len(self.slots), self.vote.k
        if opened >= k:
            return
        if self.gating and opened == 1 and not self.slots[0].seat.finished:
            return  # the gate may accept slot 0 alone: wait for it
        if (self.gating and (opened == 0 or not self.box.tally().valid)) or self.predicting:
            if self.box.all_done:  # one at a time: each finished ballot may predict the rest, or retrace a spent one (_absorb)
                self.open()
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
        slot = Slot(seat, request)
        self.slots.append(slot)
        self.call(slot, request)

    def shown(self) -> bool:  # per request (docs/prompting.md): a choice is listed once its format is refused (shows_schema)
        return self.hint if self.deployment == "reference" else shows_schema(self.hint, self.schema, self.backend)

    def request(self, index: int, feedback: Feedback | None, settings: Settings, perturbation: Any) -> Request:
        text = build_input(self.prompt, self.schema, hint=self.shown(), feedback=feedback)
        settings = replace(settings, max_tokens=self.sized) if settings.max_tokens is None and self.sized else settings
        return Request(self.prompt, text, self.schema, settings, index, 1, feedback, perturbation, prose=self.prose, labels=self.labels)

    def call(self, slot: Slot, request: Request, delay: float = 0.0) -> None:
        slot.calls += 1
        budget = self.policy.budget.max_seconds
        left = None if budget is None else max(0.0, budget - self.spent(self.clock()) - delay)
        slot.request = replace(request, ballot=slot.index, attempt=slot.calls, deadline=left)
        self.next_id += 1
        call = Call(self.next_id, slot.index, slot.request, self.target)
        if delay > 0:
            self.delayed.append((self.clock() + delay, call))
        else:
            self.ready.append(call)

    # -- recording (one finished call is read and acted on in ._absorb) ----------------------

    def again(self, slot: Slot, ballot: Ballot, reason: str, wait: float = 0.0) -> None:
        """The slot asks again (its next call is made right after): the watch is told."""
        if self.watch is not None:
            self.watch.retry(RetryEvent(slot.index, slot.calls + 1, reason, wait, ballot))

    def record(self, ballot: Ballot) -> None:
        """The one place a ballot is made: kept for the Result, handed to ``on_ballot`` and the watch."""
        self.ballots.append(ballot)
        if log.isEnabledFor(logging.DEBUG):
            shown = ballot.key or (ballot.error or {}).get("message", "")
            log.debug("ballot %d.%d %s %s", ballot.slot, ballot.attempt, ballot.status, shown, extra=ballot_fields(ballot))
        if self.policy.on_ballot is not None:
            try:
                self.policy.on_ballot(ballot)
            except Exception:  # a broken callback must not lose the run
                log.exception("on_ballot callback failed")
        if self.watch is not None:
            self.watch.ballot(ballot)


def escapes(error: BaseException) -> bool:
    """Whether a call's error must propagate (KeyboardInterrupt, SystemExit) rather than fail the call."""
    return not isinstance(error, Exception | asyncio.CancelledError)


def source_text(prompt: Prompt) -> str:
    """The text a prompt gives the model (every message's text): what a copied answer copies."""
    if isinstance(prompt, str):
        return prompt
    texts = []
    for message in prompt:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(part.get("text", "")) for part in content if isinstance(part, dict)]
    return "\n".join(texts)


def ballot_fields(ballot: Ballot) -> dict[str, Any]:
    """The structured fields of a ballot's log record (``extra=``; every name starts ``accord_``)."""
    error = ballot.error or {}
    return {
        "accord_event": "ballot",
        "accord_slot": ballot.slot,
        "accord_attempt": ballot.attempt,
        "accord_status": ballot.status,
        "accord_key": ballot.key,
        "accord_error": error.get("message"),
        "accord_finish_reason": ballot.finish_reason,
        "accord_seconds": round(ballot.seconds, 6),
        "accord_prompt_tokens": ballot.usage.prompt_tokens,
        "accord_completion_tokens": ballot.usage.completion_tokens,
        "accord_cost": ballot.usage.cost,
        "accord_min_margin": ballot.min_margin,
    }

