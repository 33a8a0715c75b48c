"""Budgets end to end: real hangs abandoned by the time budget, the call budget, the deadline each request carries."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import accord
from accord import Budget, Stabilizer, Vote, models
from reviews import GOOD, Review


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_hanging_function_is_cut_by_the_budget(driver: str) -> None:
    """A sync function that never returns, under run and under arun alike."""
    release = threading.Event()

    def hang(prompt: str) -> str:
        release.wait(30)
        return GOOD

    stabilizer = Stabilizer(models.function(hang), schema=Review, budget=Budget(max_seconds=0.3))
    start = time.perf_counter()
    with pytest.raises(accord.BudgetExceeded) as info:
        stabilizer.run("q") if driver == "run" else asyncio.run(stabilizer.arun("q"))
    assert time.perf_counter() - start < 2
    assert {b.status for b in info.value.result.ballots} == {"cancelled"}
    release.set()


def test_a_hanging_async_function_is_cut_by_the_budget() -> None:
    async def hang(prompt: str) -> str:
        await asyncio.sleep(30)
        return GOOD

    start = time.perf_counter()
    with pytest.raises(accord.BudgetExceeded) as info:
        asyncio.run(Stabilizer(models.function(hang), schema=Review, budget=Budget(max_seconds=0.3)).arun("q"))
    assert time.perf_counter() - start < 2
    assert {b.status for b in info.value.result.ballots} == {"cancelled"} and info.value.result.calls == 3


def test_call_budget() -> None:
    other = '{"stars": 2, "sentiment": "negative"}'
    model = models.scripted([GOOD, other, GOOD, other, GOOD])
    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(model, schema=Review, budget=Budget(max_calls=3)).run("q")
    assert info.value.result.calls == 3


def test_requests_carry_the_time_the_budget_has_left() -> None:
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1), budget=Budget(max_seconds=30)).run("q")
    deadline = model.requests[0].deadline
    assert deadline is not None
    assert 29 < deadline <= 30
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1)).run("q")
    assert model.requests[0].deadline == pytest.approx(Budget().max_seconds, abs=1.0)  # bounded by default
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1), budget=Budget(max_seconds=None)).run("q")
    assert model.requests[0].deadline is None  # the bound lifted


def test_budget_exceeded_names_the_dominant_cause() -> None:
    def slow(prompt: str) -> str:
        raise TimeoutError("the upstream read timed out")

    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(models.function(slow), schema=Review, budget=Budget(max_calls=4)).run("q")
    error = info.value
    assert error.cause == "TimeoutError" and error.causes == {"TimeoutError": 4}
    assert "TimeoutError" in str(error) and "4 of 4" in str(error) and "the upstream read timed out" in str(error)


def test_budget_exceeded_names_invalid_output_as_the_cause() -> None:
    model = models.scripted(["not json at all"] * 6)
    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(model, schema=Review, budget=Budget(max_calls=3)).run("q")
    assert info.value.cause is not None and info.value.cause.startswith("invalid output")
    assert info.value.cause in str(info.value)


def test_budget_exceeded_without_failed_calls_names_no_cause() -> None:
    other = '{"stars": 2, "sentiment": "negative"}'
    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(models.scripted([GOOD, other, GOOD]), schema=Review, budget=Budget(max_calls=2)).run("q")
    assert info.value.cause is None and info.value.causes == {}
