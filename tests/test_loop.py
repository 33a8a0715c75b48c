"""The run loop driven by hand: no driver, no threads, no sleeps; time is a fake clock.

Each test plays the driver: it reads the calls a Step asks to start, answers some of them with
Outcomes it builds, moves the clock, and reads the Result from StopIteration.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import pytest

import accord
from accord import Budget, Completion, MarginGate, Result, Retry, Schema, Settings, Usage, Vote, models
from accord._retry import DEFAULT_MAX_SECONDS
from accord.backends._base import Backend, Noise
from accord.run._loop import Call, Outcome, Policy, Step, decide
from reviews import GOOD, OTHER, Review

Flow = Generator[Step, Sequence[Outcome], Result[Any]]
REVIEW = Schema.of(Review)
INVALID = '{"stars": 34, "sentiment": "positive"}'


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Margined(Backend):
    """A backend that reports margins (never called: the tests answer for it)."""

    gives_margins = True


class Measured(Margined):
    """Margins and measured noise floors, ballots perturbable: unrun ballots can be predicted."""

    perturbable = True

    def noise(self) -> Noise:
        return Noise.measured("float32", {"precision": 0.4, "batch": 0.01, "attention": 0.01, "threads": 0.0}, 0.01)


def start(policy: Policy, backend: Backend | None = None, clock: Clock | None = None) -> tuple[Flow, Step]:
    flow = decide("review this", REVIEW, backend or models.scripted([]), policy, clock or Clock())
    return flow, next(flow)


def answer(call: Call, item: str | Completion | BaseException, seconds: float = 0.0) -> Outcome:
    """The Outcome of ``call``: a text or a Completion came back, or an exception was raised."""
    if isinstance(item, BaseException):
        return Outcome(call, None, item, seconds)
    completion = item if isinstance(item, Completion) else Completion(item)
    return Outcome(call, completion, None, seconds)


def answers(calls: Sequence[Call], texts: Sequence[str]) -> list[Outcome]:
    """One text for each call, in turn."""
    return [answer(call, text) for call, text in zip(calls, texts, strict=True)]


def finish(flow: Flow, outcomes: Sequence[Outcome]) -> Result[Any]:
    """Send the last outcomes; the run must end, with its Result as StopIteration's value."""
    with pytest.raises(StopIteration) as stop:
        flow.send(outcomes)
    result = stop.value.value
    assert isinstance(result, Result)
    return result


def test_the_first_step_starts_the_quorum_at_once() -> None:
    _, step = start(Policy(vote=Vote(k=5)))
    assert [call.slot for call in step.start] == [0, 1, 2] and step.timeout == DEFAULT_MAX_SECONDS  # only the time bound wakes it
    _, step = start(Policy(vote=Vote(k=5), budget=Budget(max_seconds=None)))
    assert step.timeout is None  # the bound lifted: nothing wakes it but a finished call
    assert [call.id for call in step.start] == [1, 2, 3]
    assert all(call.request.attempt == 1 and call.request.ballot == call.slot for call in step.start)
    assert all(call.request.feedback is None and call.request.deadline is None for call in step.start)
    first = step.start[0].request.input
    assert isinstance(first, str) and first.startswith("review this\n\n") and "stars" in first  # the schema hint


def test_without_early_stopping_every_slot_starts_at_once() -> None:
    _, step = start(Policy(vote=Vote(k=4, early_stop=False)))
    assert [call.slot for call in step.start] == [0, 1, 2, 3]


def test_a_gate_that_can_certify_slot_0_runs_it_alone() -> None:
    gated = Policy(vote=Vote(k=5, gate=MarginGate(floor=1.0)))
    flow, step = start(gated, Margined())
    assert [call.slot for call in step.start] == [0]
    result = finish(flow, [answer(step.start[0], Completion(GOOD, margins=(5.0, 2.0)))])
    assert result.stopped_because == "gate" and result.stable and result.calls == 1
    assert result.value == Review(stars=4, sentiment="positive") and result.fragile_steps == 0


def test_a_fragile_slot_0_opens_the_rest_of_the_quorum() -> None:
    flow, step = start(Policy(vote=Vote(k=5, gate=MarginGate(floor=1.0))), Margined())
    step = flow.send([answer(step.start[0], Completion(GOOD, margins=(5.0, 0.1)))])
    assert [call.slot for call in step.start] == [1, 2]


def test_while_a_certifiable_slot_0_retries_nothing_else_starts() -> None:
    flow, step = start(Policy(vote=Vote(k=5, gate=MarginGate(floor=1.0))), Margined())
    step = flow.send([answer(step.start[0], Completion(INVALID, margins=(5.0, 2.0)))])
    assert [(call.slot, call.request.attempt) for call in step.start] == [(0, 2)]
    result = finish(flow, [answer(step.start[0], Completion(GOOD, margins=(5.0, 2.0)))])
    assert result.stopped_because == "gate" and [b.status for b in result.ballots] == ["invalid", "valid"]


def test_a_gate_without_a_floor_stands_aside() -> None:
    _, step = start(Policy(vote=Vote(k=5, gate=MarginGate())), Margined())  # no floor: nothing to certify with
    assert [call.slot for call in step.start] == [0, 1, 2]


def test_with_measured_floors_slots_run_one_at_a_time_and_may_settle() -> None:
    flow, step = start(Policy(vote=Vote(k=5, gate=MarginGate()), perturb=accord.Perturb()), Measured())
    assert [call.slot for call in step.start] == [0]
    step = flow.send([answer(step.start[0], Completion(GOOD, margins=(5.0, 0.005)))])  # too close to predict anything
    assert [call.slot for call in step.start] == [1]
    assert step.start[0].request.perturbation == accord.Perturb().for_ballot(1)
    # Ballot 1 runs in bfloat16: it predicts the float32 ballots 2-4 once clear of both floors (0.4 + 0.01).
    result = finish(flow, [answer(step.start[0], Completion(GOOD, margins=(5.0, 0.5)))])
    assert result.stopped_because == "settled" and result.calls == 2 and result.meta["predicted"] == {result.key: 3}


def test_equal_valid_ballots_stop_early() -> None:
    flow, step = start(Policy(vote=Vote(k=5)))
    texts = [GOOD, '{"sentiment": "Positive", "stars": "4"}', f"Here: {GOOD}"]
    result = finish(flow, answers(step.start, texts))
    assert result.stopped_because == "unanimous" and result.stable and result.error is None
    assert result.value == Review(stars=4, sentiment="positive") and result.agreement == 1.0
    assert [(b.slot, b.attempt, b.status) for b in result.ballots] == [(0, 1, "valid"), (1, 1, "valid"), (2, 1, "valid")]


def test_a_dissent_opens_one_more_slot() -> None:
    flow, step = start(Policy(vote=Vote(k=5)))
    step = flow.send(answers(step.start, [GOOD, OTHER, GOOD]))
    assert [call.slot for call in step.start] == [3] and step.start[0].id == 4
    result = finish(flow, [answer(step.start[0], GOOD)])
    assert result.stopped_because == "unbeatable" and result.agreement == 0.75 and result.calls == 4


def test_outcomes_are_absorbed_in_call_order_whatever_order_they_come_in() -> None:
    flow, step = start(Policy(vote=Vote(k=3, early_stop=False)))
    result = finish(flow, answers(step.start[::-1], [OTHER, GOOD, GOOD]))
    assert [(b.slot, b.key == result.key) for b in result.ballots] == [(0, True), (1, True), (2, False)]


def test_an_invalid_output_is_asked_again_with_feedback() -> None:
    flow, step = start(Policy(vote=Vote(k=1)))
    first = step.start[0]
    step = flow.send([answer(first, INVALID)])
    assert step.timeout == DEFAULT_MAX_SECONDS and len(step.start) == 1
    again = step.start[0]
    assert again.slot == 0 and again.request.attempt == 2 and again.id == 2
    assert again.request.feedback is not None and again.request.feedback.kind == "validate"
    assert isinstance(again.request.input, str) and "34" in again.request.input and again.request.input != first.request.input
    result = finish(flow, [answer(again, GOOD)])
    assert [b.status for b in result.ballots] == ["invalid", "valid"] and result.stable
    assert result.ballots[0].error is not None and result.ballots[0].error["stage"] == "validate"


def test_an_invalid_output_out_of_attempts_ends_the_slot() -> None:
    flow, step = start(Policy(vote=Vote(k=1), retry=Retry(attempts=1)))
    result = finish(flow, [answer(step.start[0], "no idea")])
    assert isinstance(result.error, accord.InvalidOutput) and result.error.result is result
    assert result.stopped_because == "no valid ballot" and result.value is None and not result.stable


def test_a_truncated_output_is_asked_again_with_more_tokens() -> None:
    flow, step = start(Policy(vote=Vote(k=1), settings=Settings(max_tokens=100)))
    first = step.start[0]
    step = flow.send([answer(first, Completion('{"stars": 4, "sent', "length"))])
    again = step.start[0].request
    assert again.settings.max_tokens == 200 and again.feedback is None and again.input == first.request.input
    flow, step = start(Policy(vote=Vote(k=1)))  # no max_tokens set: the backend's default grows
    step = flow.send([answer(step.start[0], Completion('{"stars": 4, "sent', "length"))])
    assert step.start[0].request.settings.max_tokens == 2 * Backend.default_max_tokens


def test_a_retryable_fault_is_retried_after_the_backoff() -> None:
    clock = Clock()
    flow, step = start(Policy(vote=Vote(k=1), retry=Retry(wait=lambda state: 2.0)), clock=clock)
    first = step.start[0]
    clock.now += 0.5
    step = flow.send([answer(first, accord.BackendError("503", retryable=True, status=503), seconds=0.5)])
    assert step.start == () and step.timeout == 2.0  # nothing to start: wake me when the backoff is over
    clock.now += 1.5
    step = flow.send([])
    assert step.start == () and step.timeout == 0.5
    clock.now += 0.5
    step = flow.send([])
    assert [(call.slot, call.request.attempt) for call in step.start] == [(0, 2)] and step.timeout == DEFAULT_MAX_SECONDS - 2.5
    assert step.start[0].request.input == first.request.input
    result = finish(flow, [answer(step.start[0], GOOD)])
    assert [b.status for b in result.ballots] == ["error", "valid"] and result.stable
    assert result.ballots[0].error == {"stage": "backend", "message": "503", "type": "BackendError", "cause": "BackendError",
                                       "retryable": True}


def test_a_server_retry_after_longer_than_the_wait_is_the_delay() -> None:
    flow, step = start(Policy(vote=Vote(k=1), retry=Retry(wait=lambda state: 0.0)))
    step = flow.send([answer(step.start[0], accord.BackendError("429", retryable=True, status=429, retry_after=0.05))])
    assert step.start == () and step.timeout == pytest.approx(0.05)


def test_retry_after_is_capped_by_max_wait() -> None:
    clock = Clock()
    retry = Retry(wait=lambda state: 0.0, max_wait=0.1)
    flow, step = start(Policy(vote=Vote(k=1), retry=retry), clock=clock)
    step = flow.send([answer(step.start[0], accord.BackendError("429", retryable=True, status=429, retry_after=3600))])
    assert step.timeout == pytest.approx(0.1)
    clock.now += 0.1
    step = flow.send([])
    result = finish(flow, [answer(step.start[0], GOOD)])
    assert result.value is not None and result.value.stars == 4


def test_a_non_retryable_fault_ends_the_slot() -> None:
    flow, step = start(Policy(vote=Vote(k=1)))
    result = finish(flow, [answer(step.start[0], ValueError("bad key"))])
    assert isinstance(result.error, accord.BackendError) and "bad key" in str(result.error)
    assert result.ballots[0].status == "error" and result.ballots[0].error is not None
    assert result.ballots[0].error["retryable"] is False
    flow, step = start(Policy(vote=Vote(k=3)))  # two slots fail: no answer can reach the quorum of 2
    result = finish(flow, [answer(call, ValueError("bad key")) for call in step.start])
    assert isinstance(result.error, accord.BackendError) and result.calls == 2


def test_transport_attempts_run_out() -> None:
    flow, step = start(Policy(vote=Vote(k=1), retry=Retry(transport_attempts=2, wait=lambda state: 0.0)))
    fault = accord.BackendError("503", retryable=True, status=503)
    step = flow.send([answer(step.start[0], fault)])
    assert [call.request.attempt for call in step.start] == [2] and step.timeout == DEFAULT_MAX_SECONDS  # no wait: started at once
    result = finish(flow, [answer(step.start[0], fault)])
    assert isinstance(result.error, accord.BackendError) and [b.status for b in result.ballots] == ["error", "error"]


def test_the_budget_s_timeout_cancels_the_calls_in_flight() -> None:
    clock = Clock()
    flow, step = start(Policy(vote=Vote(k=5), budget=Budget(max_seconds=10)), clock=clock)
    assert step.timeout == 10.0 and all(call.request.deadline == 10.0 for call in step.start)
    clock.now += 4
    step = flow.send([answer(step.start[0], GOOD, seconds=4.0)])
    assert step.start == () and step.timeout == 6.0
    clock.now += 6
    result = finish(flow, [])
    assert result.stopped_because == "budget" and isinstance(result.error, accord.BudgetExceeded)
    assert [(b.slot, b.status) for b in result.ballots] == [(0, "valid"), (1, "cancelled"), (2, "cancelled")]
    assert [b.started for b in result.ballots] == [0.0, 0.0, 0.0] and result.meta["seconds"] == 10.0
    assert [b.seconds for b in result.ballots] == [4.0, 10.0, 10.0]  # the cancelled calls ran 10 s
    assert result.calls == result.usage.calls == 3


def test_the_token_budget_ends_the_run() -> None:
    flow, step = start(Policy(vote=Vote(k=5), budget=Budget(max_total_tokens=10)))
    spend = Usage(prompt_tokens=3, completion_tokens=3)
    result = finish(flow, [answer(step.start[0], Completion(GOOD, usage=spend)), answer(step.start[1], Completion(OTHER, usage=spend))])
    assert result.stopped_because == "budget" and result.usage.total_tokens == 12
    assert [b.status for b in result.ballots] == ["valid", "valid", "cancelled"]


def test_max_calls_stops_starting_calls() -> None:
    flow, step = start(Policy(vote=Vote(k=5), budget=Budget(max_calls=3)))
    result = finish(flow, answers(step.start, [GOOD, OTHER, GOOD]))
    assert result.calls == 3 and result.stopped_because == "budget" and isinstance(result.error, accord.BudgetExceeded)
    assert result.votes == {result.ballots[0].key: 2, result.ballots[1].key: 1}


def test_ballot_times_come_from_the_injected_clock() -> None:
    clock = Clock(50.0)
    flow, step = start(Policy(vote=Vote(k=1)), clock=clock)
    clock.now += 3
    result = finish(flow, [answer(step.start[0], GOOD, seconds=2.0)])
    ballot = result.ballots[0]
    assert ballot.started == 1.0 and ballot.seconds == 2.0 and ballot.usage.seconds == 2.0
    assert result.meta["seconds"] == 3.0 and result.usage.seconds == 2.0 and result.usage.calls == 1


def test_on_ballot_sees_every_ballot_and_a_broken_one_loses_nothing() -> None:
    seen: list[accord.Ballot] = []

    def broken(ballot: accord.Ballot) -> None:
        seen.append(ballot)
        raise RuntimeError("a bug in the callback")

    flow, step = start(Policy(vote=Vote(k=3), on_ballot=broken))
    step = flow.send([answer(step.start[0], "no idea"), answer(step.start[1], GOOD)])
    result = finish(flow, [answer(step.start[0], GOOD)])
    assert result.stable and seen == list(result.ballots) and [b.status for b in seen] == ["invalid", "valid", "valid"]


class OneAtATime(Backend):
    """A backend whose calls of one run go one after another (never called: the tests answer for it)."""

    one_at_a_time = True


def test_a_one_at_a_time_backend_gets_one_call_per_step_from_the_loop_itself() -> None:
    # admission lives in the loop: the next call starts once the one in flight is answered
    flow, step = start(Policy(vote=Vote(k=3, early_stop=False)), OneAtATime())
    for _ in range(3):
        assert len(step.start) == 1
        (call,) = step.start
        assert flow.send([]).start == (), "nothing answered: nothing more starts"
        try:
            step = flow.send([answer(call, GOOD)])
        except StopIteration as stop:
            result = stop.value
    assert result.stable and result.calls == 3 and [b.slot for b in result.ballots] == [0, 1, 2]


def test_a_keyboard_interrupt_from_a_call_is_raised_once_the_calls_beside_it_are_recorded() -> None:
    seen: list[accord.Ballot] = []
    flow, step = start(Policy(vote=Vote(k=2, early_stop=False), on_ballot=seen.append))
    first, second = step.start
    with pytest.raises(KeyboardInterrupt):
        flow.send([answer(second, KeyboardInterrupt()), answer(first, GOOD)])
    assert [(b.slot, b.status) for b in seen] == [(first.slot, "valid")]
