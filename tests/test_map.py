"""``Stabilizer.map``: many prompts, order kept, failures isolated, concurrency bounded."""

from __future__ import annotations

import asyncio
import threading
import time

import accord
from accord import Budget, Retry, Stabilizer, Vote, models
from reviews import GOOD, Review


def test_map_keeps_order_and_survives_a_failing_prompt() -> None:
    def fn(prompt: str) -> str:
        if prompt.startswith("bad"):
            return "no idea"
        return prompt.split(maxsplit=1)[0]

    stab = Stabilizer(fn, schema=int, vote=Vote(k=3), schema_in_prompt=False, retry=Retry(attempts=1))
    results = stab.map(["1 a", "bad", "3 c", "4 d"], concurrency=2)
    assert [r.value for r in results] == [1, None, 3, 4]
    assert isinstance(results[1].error, accord.InvalidOutput) and results[1].calls >= 1


def test_map_bounds_concurrency_across_prompts() -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    async def fn(prompt: str) -> str:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        await asyncio.sleep(0.02)
        with lock:
            active -= 1
        return "7"

    stab = Stabilizer(models.function(fn), schema=int, vote=Vote(k=3, early_stop=False))
    results = stab.map([f"p{i}" for i in range(6)], concurrency=4)
    assert all(r.value == 7 for r in results) and peak == 4


def test_map_budget_clock_starts_with_the_prompts_turn() -> None:
    def fn(prompt: str) -> str:
        time.sleep(0.2)
        return "7"

    stab = Stabilizer(fn, schema=int, vote=Vote(k=2), budget=Budget(max_seconds=1.5), schema_in_prompt=False)
    results = stab.map([f"p{i}" for i in range(8)], concurrency=2)
    assert all(r.value == 7 for r in results), [r.stopped_because for r in results]


def test_run_works_inside_a_running_event_loop() -> None:
    async def notebook() -> tuple[accord.Result[Review], list[accord.Result[Review]]]:
        stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review)
        return stab.run("q"), stab.map(["q"])  # map in a loop too

    result, mapped = asyncio.run(notebook())
    assert result.stable and mapped[0].error is not None  # scripted texts ran out for the second prompt
