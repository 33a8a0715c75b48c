"""Hooks beside ``on_ballot`` (before each request, after each ballot, on retry, on result or
error), sync or async, each isolated; and the structured ``logging`` records of runs and ballots."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import accord
from accord import BackendError, Hooks, Request, Retry, RetryEvent, Stabilizer, Vote, models
from reviews import GOOD, OTHER, Review

BAD = '{"stars": 9, "sentiment": "positive"}'


class Seen:
    """Records what every hook was called with, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def hooks(self) -> Hooks:
        return Hooks(
            before_request=lambda r: self.events.append(("request", (r.ballot, r.attempt))),
            after_ballot=lambda b: self.events.append(("ballot", (b.slot, b.attempt, b.status))),
            on_retry=lambda e: self.events.append(("retry", (e.slot, e.attempt, e.reason))),
            on_result=lambda r: self.events.append(("result", r.value)),
            on_error=lambda e: self.events.append(("error", type(e).__name__)),
        )


def test_every_hook_sees_the_run_in_order() -> None:
    seen = Seen()
    stab = Stabilizer(models.scripted([BAD, GOOD]), schema=Review, vote=Vote(k=1, gate=None), hooks=seen.hooks())
    result = stab.run("q")
    assert seen.events == [
        ("request", (0, 1)),
        ("ballot", (0, 1, "invalid")),
        ("retry", (0, 2, "invalid")),
        ("request", (0, 2)),
        ("ballot", (0, 2, "valid")),
        ("result", result.value),
    ]


def test_on_retry_gets_the_failed_ballot_and_the_wait() -> None:
    events: list[RetryEvent] = []
    fault = BackendError("busy", retryable=True, status=429, retry_after=0.05)
    stab = Stabilizer(models.scripted([fault, GOOD]), schema=Review, vote=Vote(k=1, gate=None), hooks=Hooks(on_retry=events.append))
    stab.run("q")
    [event] = events
    assert event.reason == "fault" and event.attempt == 2 and event.wait >= 0.05
    assert event.ballot.status == "error" and event.ballot.error is not None and event.ballot.error["message"] == "busy"


def test_on_error_gets_the_typed_error_with_every_ballot() -> None:
    errors: list[accord.AccordError] = []
    results: list[Any] = []
    stab = Stabilizer(models.scripted(["no"] * 4), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=2),
                      hooks=Hooks(on_error=errors.append, on_result=results.append))
    with pytest.raises(accord.InvalidOutput) as raised:
        stab.run("q")
    assert errors == [raised.value] and results == []
    assert isinstance(raised.value, accord.OutputError) and raised.value.result is not None
    assert raised.value.result.calls == 2


def test_async_hooks_are_awaited_before_the_call_starts() -> None:
    order: list[str] = []

    async def pace(request: Request) -> None:  # a rate limiter, say
        await asyncio.sleep(0.02)
        order.append(f"paced {request.ballot}")

    async def answer(prompt: Any, request: Request) -> str:
        order.append(f"called {request.ballot}")
        return GOOD

    async def after(ballot: accord.Ballot) -> None:
        order.append(f"ballot {ballot.slot}")

    stab = Stabilizer(models.function(answer), schema=Review, vote=Vote(k=2, early_stop=False, gate=None),
                      hooks=Hooks(before_request=pace, after_ballot=after))
    asyncio.run(stab.arun("q"))
    assert order[:2] == ["paced 0", "paced 1"] and sorted(order[2:4]) == ["called 0", "called 1"]
    assert sorted(order[4:]) == ["ballot 0", "ballot 1"]


def test_async_hooks_work_under_the_sync_run_too() -> None:
    done: list[Any] = []

    async def result_hook(result: accord.Result[Any]) -> None:
        await asyncio.sleep(0)
        done.append(result.value)

    async def request_hook(request: Request) -> None:
        done.append(request.ballot)

    stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), hooks=Hooks(before_request=request_hook, on_result=result_hook))
    result = stab.run("q")
    assert done == [0, 1, result.value]


def test_a_hook_that_raises_is_logged_and_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    def broken(_: Any) -> None:
        raise ValueError("hook bug")

    async def broken_async(_: Any) -> None:
        raise ValueError("async hook bug")

    hooks = Hooks(before_request=broken, after_ballot=broken_async, on_retry=broken, on_result=broken)
    stab = Stabilizer(models.scripted([BAD, GOOD]), schema=Review, vote=Vote(k=1, gate=None), hooks=hooks)
    with caplog.at_level(logging.ERROR, logger="accord"):
        result = stab.run("q")
        arun = asyncio.run(Stabilizer(models.scripted([GOOD]), schema=Review, vote=Vote(k=1, gate=None), hooks=hooks).arun("q"))
    assert result.value == Review(stars=4, sentiment="positive") and arun.value == result.value
    failed = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    for name in ("before_request", "after_ballot", "on_retry", "on_result"):
        assert f"accord: the {name} hook failed" in failed
    assert any(r.exc_info and "async hook bug" in str(r.exc_info[1]) for r in caplog.records)


def test_map_calls_the_hooks_of_every_prompt() -> None:
    values: list[Any] = []
    errors: list[str] = []

    async def answer(prompt: Any) -> str:
        await asyncio.sleep(0.01)
        return "nope" if "bad" in str(prompt) else GOOD

    stab = Stabilizer(models.function(answer), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=1),
                      hooks=Hooks(on_result=lambda r: values.append(r.value), on_error=lambda e: errors.append(type(e).__name__)))
    results = stab.map(["a", "bad", "c"], concurrency=2)
    assert [r.ok for r in results] == [True, False, True]
    assert len(values) == 2 and errors == ["InvalidOutput"]


def test_a_ledger_replay_ends_in_on_result(tmp_path: Any) -> None:
    values: list[bool] = []
    with accord.Ledger(tmp_path / "l.sqlite3") as ledger:
        stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), ledger=ledger,
                          hooks=Hooks(on_result=lambda r: values.append(r.replayed)))
        stab.run("q")
        stab.run("q")
    assert values == [False, True]


def test_hooks_are_checked_when_the_stabilizer_is_made() -> None:
    with pytest.raises(accord.ConfigError):
        Hooks(before_request=3)  # type: ignore[arg-type]
    with pytest.raises(accord.ConfigError):
        Stabilizer(models.scripted([GOOD]), schema=Review, hooks=lambda r: None)  # type: ignore[call-overload]


def test_hooks_do_not_change_the_result() -> None:
    texts = [GOOD, OTHER, GOOD, OTHER, GOOD]

    def summary(result: accord.Result[Any]) -> tuple[Any, ...]:
        return result.value, result.votes, result.stopped_because, [(b.slot, b.attempt, b.status) for b in result.ballots]

    plain = Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5, gate=None)).run("q")
    hooked = Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5, gate=None), hooks=Seen().hooks()).run("q")
    assert summary(plain) == summary(hooked)


# -- logging ------------------------------------------------------------------------------------


def test_runs_and_ballots_are_logged_with_structured_fields(caplog: pytest.LogCaptureFixture) -> None:
    stab = Stabilizer(models.scripted([BAD, GOOD, GOOD]), schema=Review, vote=Vote(k=2, gate=None))
    with caplog.at_level(logging.DEBUG, logger="accord"):
        result = stab.run("q")
    ballots = [r for r in caplog.records if getattr(r, "accord_event", None) == "ballot"]
    [run] = [r for r in caplog.records if getattr(r, "accord_event", None) == "run"]
    assert [(r.accord_slot, r.accord_attempt, r.accord_status) for r in ballots] == [(0, 1, "invalid"), (1, 1, "valid"), (0, 2, "valid")]  # type: ignore[attr-defined]
    assert ballots[0].levelno == logging.DEBUG and "stars" in ballots[0].accord_error  # type: ignore[attr-defined]
    assert run.levelno == logging.INFO and run.accord_outcome == "stable" and run.accord_calls == result.calls == 3  # type: ignore[attr-defined]
    assert run.accord_key == result.key and run.accord_schema == "Review" and run.accord_trace_id is None  # type: ignore[attr-defined]
    assert run.getMessage().startswith("decided ")


def test_a_failed_run_is_logged_with_its_error_type(caplog: pytest.LogCaptureFixture) -> None:
    stab = Stabilizer(models.scripted(["no"] * 2), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=2))
    with caplog.at_level(logging.INFO, logger="accord"), pytest.raises(accord.InvalidOutput):
        stab.run("q")
    [run] = [r for r in caplog.records if getattr(r, "accord_event", None) == "run"]
    assert run.accord_outcome == "failed" and run.accord_error == "InvalidOutput"  # type: ignore[attr-defined]


def test_logging_off_costs_no_field_building(monkeypatch: pytest.MonkeyPatch) -> None:
    from accord.run import _loop

    built: list[int] = []
    original = _loop.ballot_fields
    def counted(ballot: accord.Ballot) -> dict[str, Any]:
        built.append(1)
        return original(ballot)

    monkeypatch.setattr(_loop, "ballot_fields", counted)
    logging.getLogger("accord").setLevel(logging.WARNING)
    try:
        Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None)).run("q")
    finally:
        logging.getLogger("accord").setLevel(logging.NOTSET)
    assert built == []


# -- the real backends ---------------------------------------------------------------------------


@pytest.mark.model
def test_the_local_model_calls_every_hook_and_logs_each_ballot(local_model: Any, caplog: pytest.LogCaptureFixture) -> None:
    seen = Seen()
    awaited: list[int] = []

    async def after(ballot: accord.Ballot) -> None:
        await asyncio.sleep(0)
        awaited.append(ballot.slot)

    stab = Stabilizer(local_model, schema=Review, vote=Vote(k=2, early_stop=False, gate=None), hooks=seen.hooks())
    with caplog.at_level(logging.DEBUG, logger="accord"):
        result = stab.run("Review: 'Great pen, writes smoothly, five stars.' Give stars and sentiment.")
    kinds = [kind for kind, _ in seen.events]
    assert kinds.count("request") == kinds.count("ballot") == result.calls >= 2
    assert kinds[-1] == "result" and seen.events[-1][1] == result.value
    ballots = [r for r in caplog.records if getattr(r, "accord_event", None) == "ballot"]
    assert len(ballots) == result.calls and all(r.accord_prompt_tokens > 0 for r in ballots)  # type: ignore[attr-defined]
    asynced = Stabilizer(local_model, schema=Review, vote=Vote(k=2, early_stop=False, gate=None), hooks=Hooks(after_ballot=after))
    again = asyncio.run(asynced.arun("Review: 'Great pen, writes smoothly, five stars.' Give stars and sentiment."))
    assert sorted(awaited) == sorted(b.slot for b in again.ballots)


@pytest.mark.server
def test_the_server_calls_every_hook_and_a_raising_hook_breaks_nothing(openai_server: str, caplog: pytest.LogCaptureFixture) -> None:
    from accord.backends.openai._caps import Capabilities

    def broken(request: Request) -> None:
        raise RuntimeError("hook bug")

    seen = Seen()
    model = models.openai(base_url=openai_server, capabilities=Capabilities(), max_tokens=8)
    hooks = Hooks(before_request=broken, after_ballot=seen.hooks().after_ballot, on_result=seen.hooks().on_result, on_error=seen.hooks().on_error)
    stab = Stabilizer(model, schema=int, vote=Vote(k=2, quorum=1, early_stop=False, gate=None), hooks=hooks)
    with caplog.at_level(logging.INFO, logger="accord"):
        [result] = stab.map(["What is 2 + 2? Answer with the number only."])  # map: a failed run is a Result too
    assert [kind for kind, _ in seen.events].count("ballot") == result.calls >= 2
    assert seen.events[-1][0] in ("result", "error")
    failed = [r for r in caplog.records if r.getMessage() == "accord: the before_request hook failed"]
    assert len(failed) == result.calls and all(r.exc_info and str(r.exc_info[1]) == "hook bug" for r in failed)
    [run] = [r for r in caplog.records if getattr(r, "accord_event", None) == "run"]
    assert run.accord_calls == result.calls  # type: ignore[attr-defined]
