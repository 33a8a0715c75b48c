"""The run loop: an I/O-free generator that decides one prompt.

It yields :class:`Step` ("start these calls, wake me within ``timeout`` seconds") and receives the
:class:`Outcome` of every call that finished; it returns the :class:`~accord.Result`. It never
calls a model, sleeps or reads a clock other than the one injected, so the sync and async drivers
in ``_drive`` share it, and tests can drive it by hand (the httpx auth-flow pattern).

Per ballot slot: call, read the output (``_pipeline``), retry invalid output with feedback,
retry transient faults with backoff, grow ``max_tokens`` after a truncation. Across slots: start
``quorum`` slots at once, then one at a time while undecided; when a margin gate may accept slot
0 alone, slot 0 first. On a local model with measured noise floors the run goes one slot at a
time and counts the unrun ballots the finished ones predict (``_predict``). Stop as soon as the
vote policy decides (or the predicted vote is settled), no answer can reach the quorum, or the
budget runs out.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Generator, Sequence

from .. import _fieldwise as fieldwise
from .._canonical import canonical_form, canonical_key
from ..determinism import environment
from .._errors import AccordError, BackendError, BudgetExceeded, InvalidOutput, NoConsensus
from .._gate import MarginGate, Margins
from .._extract import Extract, shape_of
from .._read import Misreading, read
from .._predict import Computation, Floors
from .._prompt import build_input
from .._types import Completion, Feedback, Prompt, Request, Settings, Usage
from .._result import Ballot, Result
from .._retry import Budget, Retry, looping
from .._schema import Schema, ValidationFailure
from .._vote import Tally, Vote
from ..backends._base import Backend

log = logging.getLogger("accord")

FAILED = {"no quorum", "no valid ballot", "budget"}  # any other reason (a stop rule's own too) accepts


@dataclass(frozen=True)
class Call:
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
    call: Call
    completion: Completion | None
    error: BaseException | None
    seconds: float


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
    index: int
    request: Request
    calls: int = 0
    outputs: int = 0
    faults: int = 0
    finished: bool = False
    fault: AccordError | None = None
    computation: Computation | None = None  # where it computes (None: not predictable)
    low: float = math.inf  # the smallest margin over its attempts
    blind: bool = False  # an attempt without margins: predicts nothing
    key: str | None = None  # its answer once finished valid


def decide(
    prompt: Prompt,
    schema: Schema[Any],
    backend: Backend,
    policy: Policy,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[Step, Sequence[Outcome], Result[Any]]:
    """The decision loop for one prompt (see the module docstring)."""
    return _Run(prompt, schema, backend, policy, clock).loop()


class _Run:
    def __init__(self, prompt: Prompt, schema: Schema[Any], backend: Backend, policy: Policy, clock: Callable[[], float]):
        self.prompt, self.schema, self.backend, self.policy, self.clock = prompt, schema, backend, policy, clock
        self.vote = policy.vote
        self.quorum = self.vote.needed
        self.gate: MarginGate | None = self.vote.gate
        # The gate runs slot 0 alone only when it can certify it: margins and a known floor.
        self.gating = (
            self.gate is not None and backend.gives_margins and self.gate.floor_for(backend) is not None
        )
        # Unrun ballots the finished ones determine (local models with measured floors, early stop).
        self.floors = (
            Floors.of(backend, self.gate) if self.gating and self.vote.stop_rule is not None and not self.vote.fieldwise else None
        )
        self.predicted: dict[str, int] = {}
        self.hint = policy.hint and not backend.constrains_for(schema)
        self.shape = shape_of(schema)
        self.t0 = clock()
        self.slots: list[_Slot] = []
        self.ready: list[Call] = []
        self.delayed: list[tuple[float, Call]] = []
        self.in_flight: dict[int, Call] = {}
        self.ballots: list[Ballot] = []
        self.counts: dict[str, int] = {}
        self.first: dict[str, Ballot] = {}
        self.scores: dict[str, list[float]] = {}
        self.gate_key: str | None = None
        self.flats: list[dict[Any, str]] = []
        self.field_agreement: dict[str, float] | None = None
        self.assembled: tuple[str, Any, Any] | None = None  # (key, value, data) of a fieldwise assembly
        self.fallback: list[dict[str, Any]] | None = None
        self.next_id = 0
        self.started = 0
        self.usage = Usage()

    # -- the loop ----------------------------------------------------------------------------

    def loop(self) -> Generator[Step, Sequence[Outcome], Result[Any]]:
        self.schedule()
        while True:
            now = self.clock()
            starts = self.take_ready(now)
            if not starts and not self.in_flight and not self.delayed:
                return self.finish(*self.verdict(now, stalled=True))
            outcomes = yield Step(tuple(starts), self.timeout(now))
            now = self.clock()
            for outcome in sorted(outcomes, key=lambda o: o.call.id):  # same order under any driver
                self.absorb(outcome, now)
            verdict = self.verdict(now)
            if verdict is not None:
                return self.finish(*verdict)
            self.schedule()

    def take_ready(self, now: float) -> list[Call]:
        due = [call for when, call in self.delayed if when <= now]
        self.delayed = [(when, call) for when, call in self.delayed if when > now]
        starts = []
        limit = self.policy.budget.max_calls
        for call in self.ready + due:
            if limit is not None and self.started >= limit:
                break  # over the call budget: never started; the verdict ends the run
            self.started += 1
            starts.append(call)
            self.in_flight[call.id] = call
        self.ready = []
        return starts

    def timeout(self, now: float) -> float | None:
        waits = [when - now for when, _ in self.delayed]
        if self.policy.budget.max_seconds is not None:
            waits.append(self.t0 + self.policy.budget.max_seconds - now)
        return max(0.0, min(waits)) if waits else None

    # -- scheduling --------------------------------------------------------------------------

    def schedule(self) -> None:
        """Open new ballot slots: the first batch, then one at a time while undecided."""
        opened, k = len(self.slots), self.vote.k
        if opened >= k:
            return
        if self.gating and opened == 1 and not self.slots[0].finished:
            return  # the gate may accept slot 0 alone: wait for it
        if (self.gating and opened == 0) or self.floors is not None:
            if all(slot.finished for slot in self.slots):
                self.open()  # one at a time: each finished ballot may predict the rest
            return
        target = self.quorum if self.vote.stop_rule else k
        if opened < target:
            for _ in range(target - opened):
                self.open()
        elif all(slot.finished for slot in self.slots):
            self.open()

    def perturbation(self, index: int) -> Any:
        return self.policy.perturb.for_ballot(index) if self.policy.perturb is not None else None

    def open(self) -> None:
        index = len(self.slots)
        perturbation = self.perturbation(index)
        request = self.request(index, None, self.policy.settings, perturbation)
        slot = _Slot(index, request)
        if self.floors is not None:
            slot.computation = self.floors.computation(perturbation)
        self.slots.append(slot)
        self.call(slot, request)

    def request(self, index: int, feedback: Feedback | None, settings: Settings, perturbation: Any) -> Request:
        text = build_input(self.prompt, self.schema, hint=self.hint, feedback=feedback)
        return Request(self.prompt, text, self.schema, settings, index, 1, feedback, perturbation)

    def call(self, slot: _Slot, request: Request, delay: float = 0.0) -> None:
        slot.calls += 1
        budget = self.policy.budget.max_seconds
        left = None if budget is None else max(0.0, self.t0 + budget - self.clock() - delay)
        slot.request = replace(request, ballot=slot.index, attempt=slot.calls, deadline=left)
        self.next_id += 1
        call = Call(self.next_id, slot.index, slot.request)
        if delay > 0:
            self.delayed.append((self.clock() + delay, call))
        else:
            self.ready.append(call)

    # -- one finished call -------------------------------------------------------------------

    def absorb(self, outcome: Outcome, now: float) -> None:
        call = outcome.call
        self.in_flight.pop(call.id, None)
        slot = self.slots[call.slot]
        started = max(0.0, now - self.t0 - outcome.seconds)
        if outcome.completion is None:
            self.fault(slot, call, self.backend.map_error(outcome.error or RuntimeError("no completion")), outcome, started)
            return
        completion = outcome.completion
        usage = completion.usage
        usage = Usage(usage.prompt_tokens, usage.completion_tokens, outcome.seconds, 1)
        self.usage = self.usage + usage
        # Without a gate, only the smallest margin is kept: no noise floor is looked up (for a
        # model without shipped floors that would start a calibration nobody asked for).
        margins = self.gate.check(completion.margins, self.backend) if self.gate else MarginGate().check(completion.margins)
        reading = read(completion.text, self.schema, self.policy.normalizers, self.vote.float_digits, self.policy.extract)
        if completion.finish_reason == "length" and not isinstance(reading, Misreading) and (self.shape != "json" or reading.open_ended):
            # A cut-off scalar or text can look valid ("12" of "123"); a JSON value that closed cannot.
            reading = Misreading("truncated", ({"loc": (), "msg": "the output was cut off at max_tokens", "type": "truncated"},))
        slot.outputs += 1
        if margins.min_margin is None:
            slot.blind = True
        else:
            slot.low = min(slot.low, margins.min_margin)
        common = dict(
            slot=slot.index, attempt=call.request.attempt, text=completion.text,
            finish_reason=completion.finish_reason, usage=usage, started=started, seconds=outcome.seconds,
            min_margin=margins.min_margin, fragile_steps=margins.fragile_steps,
            meta={**completion.meta, **({"perturbation": _describe(call.request.perturbation)} if call.request.perturbation is not None else {})},
        )
        if isinstance(reading, Misreading):
            error = {"stage": reading.stage, "message": reading.message, "errors": [dict(e) for e in reading.errors]}
            loop = completion.finish_reason == "length" and looping(completion.text or "")
            if loop:
                error["loop"] = True  # cut off inside a repeated stretch: not grown
            self.record(Ballot(status="invalid", error=error, **common))
            self.retry_output(slot, call, completion, reading, loop)
            return
        ballot = Ballot(status="valid", value=reading.value, data=reading.data, key=reading.key, coercions=reading.coercions, **common)
        self.record(ballot)
        slot.finished = True
        slot.key = reading.key
        self.counts[reading.key] = self.counts.get(reading.key, 0) + 1
        self.first.setdefault(reading.key, ballot)
        if self.vote.fieldwise:
            self.flats.append(fieldwise.flatten(reading.form, self.schema.json_schema))
        if completion.score is not None:
            self.scores.setdefault(reading.key, []).append(completion.score)
        if self.gating and slot.index == 0 and len(self.slots) == 1 and margins.certified:
            self.gate_key = reading.key

    def retry_output(self, slot: _Slot, call: Call, completion: Completion, reading: Misreading, loop: bool) -> None:
        if not self.policy.retry.again(slot.outputs, self.clock() - self.t0) or loop and not self.policy.retry.grow_loops:
            slot.finished = True
            return
        request = call.request
        if completion.finish_reason == "length":
            # Truncated: same question, more room; not re-asked with feedback.
            current = request.settings.max_tokens or self.backend.default_max_tokens
            grown = math.ceil(current * self.policy.retry.grow_max_tokens)
            self.call(slot, request.with_settings(max_tokens=grown))
            return
        feedback = Feedback(reading.stage, reading.errors, (completion.text or "")[:200])
        self.call(slot, self.request(slot.index, feedback, request.settings, request.perturbation))

    def fault(self, slot: _Slot, call: Call, error: AccordError, outcome: Outcome, started: float) -> None:
        self.usage = self.usage + Usage(seconds=outcome.seconds, calls=1)
        info = {"stage": "backend", "message": str(error), "type": type(error).__name__}
        retryable = isinstance(error, BackendError) and error.retryable
        info["retryable"] = retryable
        self.record(Ballot(slot.index, call.request.attempt, "error", error=info, usage=Usage(seconds=outcome.seconds, calls=1),
                           started=started, seconds=outcome.seconds))
        slot.faults += 1
        if retryable and self.policy.retry.again_after_fault(slot.faults, self.clock() - self.t0):
            wait = self.policy.retry.backoff(slot.faults, getattr(error, "retry_after", None))
            self.call(slot, call.request, delay=wait)
            return
        slot.finished = True
        slot.fault = error

    def record(self, ballot: Ballot) -> None:
        self.ballots.append(ballot)
        log.debug("ballot %d.%d %s %s", ballot.slot, ballot.attempt, ballot.status, ballot.key or (ballot.error or {}).get("message", ""))
        if self.policy.on_ballot is not None:
            try:
                self.policy.on_ballot(ballot)
            except Exception:  # a broken callback must not lose the run
                log.exception("on_ballot callback failed")

    # -- the verdict -------------------------------------------------------------------------

    def tally(self) -> Tally:
        return Tally(dict(self.counts), sum(s.finished for s in self.slots), self.vote.k, self.quorum)

    def verdict(self, now: float, stalled: bool = False) -> tuple[str, str | None] | None:
        """``(stopped_because, winner key)`` once the run is over, else None."""
        if self.gate_key is not None:
            return "gate", self.gate_key
        tally = self.tally()
        decided = self.decide_fields(tally) if self.vote.fieldwise and self.flats else self.decide_whole(tally)
        if decided:
            return decided
        settled = self.settle()
        if settled:
            return settled
        if tally.hopeless and not (self.vote.fieldwise and tally.valid):
            return ("no quorum" if tally.valid else "no valid ballot"), None
        budget = self.policy.budget
        over_time = budget.max_seconds is not None and now - self.t0 >= budget.max_seconds
        tokens = self.usage.total_tokens or 0
        over_tokens = budget.max_tokens is not None and tokens >= budget.max_tokens
        if over_time or over_tokens or stalled:
            return "budget", None
        return None

    def settle(self) -> tuple[str, str | None] | None:
        """The vote with the predicted ballots counted: settled once the leader holds the quorum
        and cannot be caught, or hopeless once no answer can reach it."""
        if self.floors is None:
            return None
        tally, extra, predicted = self.predict()
        if not predicted:
            return None
        if tally.lead >= tally.quorum and tally.lead > tally.runner_up + tally.remaining:
            self.predicted = extra
            return "settled", self.vote.winner(tally, self.score_map())
        if tally.hopeless:
            return ("no quorum" if tally.valid else "no valid ballot"), None
        return None

    def predict(self) -> tuple[Tally, dict[str, int], int]:
        """The tally with every unrun ballot that exactly one finished outcome predicts."""
        assert self.floors is not None
        sources = [s for s in self.slots if s.finished and s.fault is None and not s.blind and s.computation is not None]
        counts, extra, predicted = dict(self.counts), {}, 0
        for index in range(len(self.slots), self.vote.k):
            here = self.floors.computation(self.perturbation(index))
            if here is None:
                continue
            outcomes = set()
            for source in sources:
                distance = self.floors.distance(here, source.computation)  # type: ignore[arg-type]
                if distance is not None and (distance == 0.0 or source.low > distance):
                    outcomes.add(source.key)
            if len(outcomes) == 1:
                key = outcomes.pop()
                predicted += 1
                if key is not None:  # None: the same invalid output
                    counts[key] = counts.get(key, 0) + 1
                    extra[key] = extra.get(key, 0) + 1
        done = sum(s.finished for s in self.slots) + predicted
        return Tally(counts, done, self.vote.k, self.quorum), extra, predicted

    def decide_whole(self, tally: Tally) -> tuple[str, str | None] | None:
        reason = self.vote.decide(tally)
        return (reason, self.vote.winner(tally, self.score_map())) if reason else None

    def decide_fields(self, tally: Tally) -> tuple[str, str | None] | None:
        """Fieldwise: decided when every assembled path is; falls back to the whole-object vote."""
        outcome = fieldwise.decide(self.flats, tally.done, self.vote)
        self.field_agreement = outcome.agreement
        if outcome.hopeless:
            return "no quorum", None
        if outcome.reason is None:
            return None
        try:
            value = self.schema.validate(outcome.data)
        except ValidationFailure as failure:
            self.fallback = failure.errors
            whole = self.decide_whole(tally)
            return whole or (("no quorum", None) if tally.hopeless else None)
        data = self.schema.dump(value)
        key = canonical_key(canonical_form(data, self.schema.json_schema, self.vote.float_digits))
        self.assembled = (key, value, data)
        return outcome.reason, key

    def score_map(self) -> dict[str, tuple[float, ...]]:
        return {key: tuple(values) for key, values in self.scores.items()}

    def finish(self, reason: str, winner: str | None) -> Result[Any]:
        for call in self.in_flight.values():
            self.record(Ballot(call.slot, call.request.attempt, "cancelled", started=self.clock() - self.t0))
        tally = self.tally()
        stable = reason not in FAILED
        if winner is None and self.policy.plurality and tally.counts:
            winner = self.vote.winner(tally, self.score_map())
        chosen = self.first.get(winner) if winner is not None else None
        value = chosen.value if chosen else None
        data = chosen.data if chosen else None
        votes = dict(tally.ranked)
        agreement = (votes[winner] / tally.valid) if chosen and tally.valid else 0.0
        fields: dict[str, Any] = {}
        if self.vote.fieldwise:
            if self.assembled is not None and winner == self.assembled[0]:
                value, data = self.assembled[1], self.assembled[2]
                agreement = min(self.field_agreement.values(), default=1.0) if self.field_agreement else 1.0
                fields["fieldwise"] = "assembled"
            elif self.fallback is not None:
                fields["fieldwise"] = "fell back to the whole-object winner"
                fields["fieldwise_errors"] = [dict(e) for e in self.fallback]
            else:
                fields["fieldwise"] = "undecided"
        found = chosen is not None or "fieldwise" in fields and fields["fieldwise"] == "assembled"
        error = None if stable or (self.policy.plurality and found) else self.error(reason, tally, votes)
        result: Result[Any] = Result(
            value=value,
            data=data,
            stable=stable,
            agreement=agreement,
            votes=votes,
            ballots=tuple(self.ballots),
            stopped_because=reason,
            usage=self.usage,
            schema=self.schema.name,
            fingerprint=self.backend.fingerprint,
            key=winner if found else None,
            error=error,
            field_agreement=self.field_agreement if self.vote.fieldwise else None,
            min_margin=chosen.min_margin if chosen else None,
            fragile_steps=chosen.fragile_steps if chosen else None,
            environment=self.environment(chosen),
            meta={
                **({"engine": chosen.meta["engine"]} if chosen and "engine" in chosen.meta else {}),
                "seconds": round(self.clock() - self.t0, 6),
                "k": self.vote.k,
                "quorum": self.quorum,
                **({"predicted": dict(self.predicted)} if self.predicted else {}),
                **fields,
            },
        )
        if error is not None:
            error.result = result
        return result

    def environment(self, chosen: Ballot | None) -> dict[str, Any]:
        """Where this answer was decided: versions, backend, settings, perturbations."""
        perturbations = sorted({str(b.meta["perturbation"]) for b in self.ballots if "perturbation" in b.meta})
        engines = sorted({str(b.meta["engine"]) for b in self.ballots if "engine" in b.meta})
        return {
            **environment(),
            **_describe_backend(self.backend),
            **({"engine": chosen.meta["engine"]} if chosen and "engine" in chosen.meta else {}),
            **({"engines": engines} if len(engines) > 1 else {}),
            "settings": {k: v for k, v in asdict(self.policy.settings).items() if v is not None},
            "perturbations": perturbations,
        }

    def error(self, reason: str, tally: Tally, votes: dict[str, int]) -> AccordError:
        shown = ", ".join(f"{key} x{count}" for key, count in list(votes.items())[:5])
        if reason == "budget":
            return BudgetExceeded(f"budget ran out before a decision ({len(self.ballots)} calls; votes: {shown or 'none'})")
        if tally.valid:
            return NoConsensus(f"no answer can reach the quorum of {self.quorum} of {self.vote.k} (votes: {shown})")
        faults = [slot.fault for slot in self.slots if slot.fault is not None]
        if faults and len(faults) == sum(s.finished for s in self.slots):
            last = faults[-1]
            return BackendError(f"every ballot failed in the backend; last: {last}", status=getattr(last, "status", None))
        last_error = next((b.error for b in reversed(self.ballots) if b.error), None)
        detail = f"; last: {last_error['message']}" if last_error else ""
        return InvalidOutput(f"no valid output in {len(self.ballots)} calls{detail}")


def _describe(value: Any) -> Any:
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value


def _describe_backend(backend: Backend) -> dict[str, Any]:
    try:
        return dict(backend.describe())
    except Exception:  # describing must never lose a result
        return {"backend": type(backend).__name__}
