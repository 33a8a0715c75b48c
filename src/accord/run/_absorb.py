"""One finished call, in the run loop (:mod:`._loop`): its text read into a value (``_read``:
extract -> normalize -> validate -> canonicalize), the ballot recorded, and then, per slot:

    valid              cast in the ballot box; the slot is finished
    invalid            asked again with the errors as feedback, while ``Retry.attempts`` allow;
                       while every output of the run is unreadable (no value in it at all), one
                       slot's retries stand for all (``_unreadable``); an output that repeats,
                       byte for byte, what a slot that spent every attempt without a valid value
                       wrote at the same attempt ends its slot (its retries would be the requests
                       that slot made)
    looped             stopped in a loop (``finish_reason="loop"``, the backend saw it) or cut
                       off at ``max_tokens`` inside one (``read._loops``): asked again with one
                       feedback block naming the field and the stretch, never with more tokens,
                       under a grammar that bounds that field to what came before the loop
                       (``schema._bounds``; validation is still the run's own schema)
    cut off (length)   asked again with ``max_tokens`` times ``Retry.grow_max_tokens``, not
                       re-asked (an honest cut-off: no loop in it)
    backend fault      a transient one is retried after a backoff (``Retry.backoff``, a
                       server's Retry-After), while ``Retry.transport_attempts`` allow; any
                       other ends the slot

A text that looped or was cut off is read first: a JSON value that closed before the end is
kept; one that ran out inside a prose string (a summary that looped, or was still being written
at ``max_tokens``) is closed there (``read/_close``: the string keeps what came before the loop)
and kept when that is a valid value, in one call. Else its error says what happened (:class:`Cut`: "the output looped in `summary`: ...",
"the output was cut off at max_tokens=256 inside `summary`"), not what a reader made of the
remains ("Field required" for every field the cut left out).

:class:`Absorb` is the half of the loop's run that does this; the loop (scheduling, the budget,
recording) is the other half.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._errors import AccordError, BackendError
from .._result import Ballot
from .._types import Completion, Feedback, Request, Settings, Usage
from ..backends._base import Backend
from ..read._close import closed_completion
from ..read._loops import LOOP, Loop, find_loop, path_at, shown
from ..read._read import Misreading, Reading, read
from ..read._runaway import find_runaway
from ..schema._bounds import bounded, iso_dates
from ..schema._schema import Schema
from ..vote._gate import MarginGate
from ..vote._prefix import prefix
from ..vote._vote import Vote
from ._box import Box
from ._calls import Call, Outcome, Slot
from ._policy import Policy
from ._unreadable import DROP, HOLD, RETRY, Held, Unreadable

UNGATED = MarginGate()  # reads the smallest margin only


class Cut(Misreading):
    """A text that ran out before its value did: ``stage`` "loop" (``loop``: where, when found)
    or "truncated" (cut off at ``max_tokens``); ``message`` says so in words."""

    __slots__ = ("loop", "said")

    def __init__(self, stage: str, errors: tuple[dict[str, Any], ...], said: str, loop: Loop | None = None) -> None:
        super().__init__(stage, errors)
        self.said = said
        self.loop = loop

    @property
    def message(self) -> str:
        return self.said


def cut(text: str, finish: str | None, max_tokens: int | None) -> Cut:
    """Why a text that looped (``finish`` "loop") or ran to ``max_tokens`` ("length") has no value.

    A list that ran away (``read/_runaway``: items that keep coming, or a cut inside a list) is
    a loop too: asked again with feedback under a bound on the list, never with more tokens."""
    early = finish == LOOP
    loop = (find_loop(text, early=True) if early else None) or find_loop(text) or find_runaway(text, early=early)
    if loop is not None or early:
        path = loop.path if loop is not None else path_at(text, len(text))[0]
        said = loop.message() if loop is not None else "the output was stopped in a loop" + (f" in `{path}`" if path else "")
        what = "repeated itself" if loop is None else said if loop.runaway else f"{shown(loop.stretch)} repeated {loop.repeats} times"
        kind = "runaway" if loop is not None and loop.runaway else "loop"
        return Cut("loop", ({"loc": _loc(path), "msg": what, "type": kind},), said, loop)
    path = path_at(text, len(text))[0]
    limit = f"max_tokens={max_tokens}" if max_tokens else "max_tokens"
    said = f"the output was cut off at {limit}" + (f" inside `{path}`" if path else "")
    return Cut("truncated", ({"loc": _loc(path), "msg": f"cut off at {limit}", "type": "truncated"},), said)


def _loc(path: str | None) -> tuple[str, ...]:
    """A path (``items[].task``) as an error's ``loc`` (``("items", "task")``)."""
    return tuple(part for part in (path or "").replace("[]", "").split(".") if part)


class Absorb:
    """Reading one finished call and acting on it, for the run (``_loop._Run``) that sets the state."""

    schema: Schema[Any]
    backend: Backend
    policy: Policy
    clock: Callable[[], float]
    vote: Vote
    gate: MarginGate | None
    box: Box
    shape: str
    t0: float
    slots: list[Slot]
    in_flight: dict[int, Call]
    began: dict[int, float]
    queued: set[int]
    usage: Usage
    asked: str | None
    read_until: float | None
    deployment: str | None  # "serving" or "reference" when the backend has a reference
    prose: frozenset[str]  # the run's prose paths: where a text that ran out is closed (read/_close)
    unread: Unreadable  # while every output is unreadable, one slot's retries stand for all (_unreadable)
    ballots: list[Ballot]

    if TYPE_CHECKING:  # the loop's own, where the run asks again and records a ballot

        def request(self, index: int, feedback: Feedback | None, settings: Settings, perturbation: Any) -> Request: ...
        def call(self, slot: Slot, request: Request, delay: float = 0.0) -> None: ...
        def again(self, slot: Slot, ballot: Ballot, reason: str, wait: float = 0.0) -> None: ...
        def record(self, ballot: Ballot) -> None: ...

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

    def read(self, completion: Completion, max_tokens: int | None = None) -> Reading | Misreading:
        """The one place a model's text is read into a value (or why not). ``max_tokens``: what
        the call was allowed, named when the text was cut off there."""
        left = None if self.read_until is None else self.read_until - self.clock()  # bounded by the budget
        reading = read(completion.text, self.schema, self.policy.normalizers, self.vote.float_digits, self.policy.extract, seconds=left)
        if completion.finish_reason not in ("length", LOOP):
            return reading
        if isinstance(reading, Reading) and self.shape == "json" and not reading.open_ended:
            return reading  # a JSON value that closed before the end was not cut
        # A cut-off scalar or text can look valid ("12" of "123"); a cut-off JSON value reads as "Field required".
        return cut(completion.text or "", completion.finish_reason, max_tokens)

    def output(self, slot: Slot, call: Call, completion: Completion, seconds: float, started: float) -> None:
        usage = replace(completion.usage, seconds=seconds, calls=1, cost=self.cost(completion))  # its tokens and neighbours
        self.usage = self.usage + usage
        # Without a gate, only the smallest margin is kept: no noise floor is looked up (for a
        # model without shipped floors that would start a calibration nobody asked for).
        completion, reading = self.close(completion, call.request.settings.max_tokens or self.backend.default_max_tokens)
        steps = completion.margins
        if steps and isinstance(reading, Reading):  # the gate reads the steps up to the last decisive value
            steps = steps[: prefix(completion.text, completion.pieces, len(steps), self.box.decisions, reading.form)]
        margins = self.gate.check(steps, self.backend, completion.load) if self.gate else UNGATED.check(steps)
        slot.outputs += 1
        self.box.heard(slot.seat, margins.min_margin)
        perturbation = call.request.perturbation
        read = len(steps) if steps is not None and completion.margins is not None and len(steps) < len(completion.margins) else None
        error: dict[str, Any] | None = None
        if isinstance(reading, Misreading):
            error = {"stage": reading.stage, "message": reading.message, "errors": [dict(e) for e in reading.errors]}
            if reading.stage == LOOP:
                found = reading.loop.describe() if isinstance(reading, Cut) and reading.loop is not None else {}
                stopped = "early" if completion.finish_reason == LOOP else "at max_tokens"
                error.update(type=LOOP, loop={**found, "stopped": stopped, "tokens": completion.usage.completion_tokens})
            coercions: tuple[dict[str, str], ...] = ()
            status, value, data, key = "invalid", None, None, None
        else:
            status, value, data, key = "valid", reading.value, reading.data, self.box.key_of(reading)
            coercions = reading.coercions
        ballot = Ballot(
            slot.index, call.request.attempt, status, completion.text, value, data, key, error, completion.finish_reason,
            usage, started, seconds, margins.min_margin, margins.fragile_steps, _meta(completion), coercions,
            model=completion.model, engine=completion.engine, system_fingerprint=completion.system_fingerprint,
            perturbation=_describe(perturbation) if perturbation is not None else None,
            fragile_at=tuple(margins.steps),  # the steps below the floor (the first few)
            decisive_steps=read,  # the gate read these; the rest wrote prose
            deployment=self.deployment,
        )
        self.record(ballot)
        released = self.unread.read(reading)
        if released is not None:  # the run's first readable output: the retries held wait no more
            self.box.unreadable = False
            for held in released:
                self.retry_output(held.slot, held.call, held.completion, held.reading, ballot=held.ballot)
        if isinstance(reading, Misreading):
            self.retry_output(slot, call, completion, reading, ballot=ballot)
        else:
            self.box.cast(slot.seat, ballot, reading, completion.score, margins.certified, risk=margins.risk)
        self.box.gated(slot.seat, margins, completion.server)

    def close(self, completion: Completion, max_tokens: int) -> tuple[Completion, Reading | Misreading]:
        """The completion and how it reads; one that ran out inside prose (looped there, or cut
        off while writing it) is closed there first (``read/_close``) and kept closed when that
        reads as a valid value."""
        reading = self.read(completion, max_tokens)
        if not isinstance(reading, Cut) or not self.prose:
            return completion, reading
        closed = closed_completion(completion, reading.loop, self.prose) if reading.loop or reading.stage != LOOP else None
        again = self.read(closed, max_tokens) if closed is not None else None
        return (closed, again) if closed is not None and isinstance(again, Reading) else (completion, reading)

    def cost(self, completion: Completion) -> float | None:
        """What a call cost: as the backend reports it, else under ``Policy.prices``."""
        tokens = completion.usage
        if tokens.cost is not None or self.policy.prices is None:
            return tokens.cost
        return self.policy.prices.cost(tokens.prompt_tokens, tokens.completion_tokens, self.asked, completion.model,
                                       cached=tokens.cached_tokens, written=tokens.cache_write_tokens)

    def retry_output(self, slot: Slot, call: Call, completion: Completion, reading: Misreading, *, ballot: Ballot) -> None:
        retry = self.policy.retry
        then = self.unread.retry(slot.index)  # while every output is unreadable: the lead retries, the others wait
        if then == RETRY and self.retraced(slot, call, completion):
            then = DROP  # its retries are the requests another slot already made, and they failed
            # a first request retraced: a slot not yet opened would send it too (a reference still decides)
            self.box.retraced = self.box.retraced or (call.request.attempt == 1 and self.deployment != "serving")
        if then == HOLD:
            self.unread.held.append(Held(slot, call, completion, reading, ballot))
            return
        if then == DROP or not retry.again(slot.outputs, self.clock() - self.t0):
            self.box.spoil(slot.seat)
            self.box.unasked += then == DROP
            dropped = self.unread.ended(slot.index)
            if dropped is not None:  # the lead's retries found nothing either: the others are not asked again
                for held in dropped:
                    self.box.spoil(held.slot.seat)
                self.box.unasked += len(dropped)
                self.box.unreadable = self.deployment != "serving"  # (a reference still decides)
            return
        request = call.request
        loop = reading.stage == LOOP
        if completion.finish_reason == "length" and (not loop or retry.grow_loops):  # grow_loops: deprecated
            # An honest cut-off: same question, more room; not re-asked with feedback.
            current = request.settings.max_tokens or self.backend.default_max_tokens
            self.again(slot, ballot, "truncated")
            again = self.request(slot.index, request.feedback, request.settings, request.perturbation)  # as shown now (shows_schema)
            self.call(slot, replace(again, schema=request.schema).with_settings(max_tokens=math.ceil(current * retry.grow_max_tokens)))
            return
        # Invalid, or looped: asked again with one feedback block (a loop's names the field and
        # the stretch), the same max_tokens: a greedy loop repeats to any length. A loop's retry
        # decodes under a grammar that bounds the field it looped in (schema._bounds), on top of
        # the bounds this slot's earlier loops set.
        feedback = Feedback(reading.stage, reading.errors, (completion.text or "")[:200])
        self.again(slot, ballot, LOOP if loop else "invalid")
        found = reading.loop if isinstance(reading, Cut) else None
        tighter = bounded(request.schema, completion.text or "", found) if found is not None else iso_dates(request.schema, reading.errors)
        again = self.request(slot.index, feedback, request.settings, request.perturbation)
        self.call(slot, replace(again, schema=tighter or request.schema))

    def retraced(self, slot: Slot, call: Call, completion: Completion) -> bool:
        """This failed output repeats, byte for byte, what another slot wrote at the same attempt,
        and that slot made every attempt it had without a valid value: this slot's retries would
        send the requests it sent (the same feedback on the same prompt), so they are not sent."""
        text, attempt = completion.text, call.request.attempt
        if not text:
            return False
        for other in self.slots:
            if other is slot or not other.seat.finished or other.seat.fault is not None or self.policy.retry.again(other.outputs, 0.0):
                continue
            mine = [b for b in self.ballots if b.slot == other.index]
            if not any(b.status == "valid" for b in mine) and any(b.attempt == attempt and b.text == text for b in mine):
                return True
        return False

    def fault(self, slot: Slot, call: Call, error: AccordError, seconds: float, started: float) -> None:
        usage = Usage(seconds=seconds, calls=1)
        self.usage = self.usage + usage
        retryable = isinstance(error, BackendError) and error.retryable
        cause = error.__cause__ if error.__cause__ is not None else error
        info = {"stage": "backend", "message": str(error), "type": type(error).__name__, "cause": type(cause).__name__, "retryable": retryable}
        ballot = Ballot(slot.index, call.request.attempt, "error", error=info, usage=usage, started=started, seconds=seconds,
                        deployment=self.deployment)
        self.record(ballot)
        slot.faults += 1
        if retryable and self.policy.retry.again_after_fault(slot.faults, self.clock() - self.t0):
            retry_after = error.retry_after if isinstance(error, BackendError) else None
            delay = self.policy.retry.backoff(slot.faults, retry_after)
            self.again(slot, ballot, "fault", delay)
            self.call(slot, call.request, delay=delay)
            return
        self.box.spoil(slot.seat, error)
        handed = self.unread.handed(slot.index)  # a lead that faulted: the first held slot leads
        if handed is not None:
            self.retry_output(handed.slot, handed.call, handed.completion, handed.reading, ballot=handed.ballot)


def _meta(completion: Completion) -> dict[str, Any]:
    """A ballot's meta: the backend's record, and the values closed where they ran out."""
    meta = dict(completion.meta)
    if completion.closed_loops:
        meta["closed_loops"] = [dict(record) for record in completion.closed_loops]
    return meta


def _describe(value: Any) -> Any:
    describe = getattr(value, "describe", None)
    return describe() if callable(describe) else value
