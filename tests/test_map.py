"""``Stabilizer.map``: many prompts, order kept, failures isolated, concurrency bounded."""

from __future__ import annotations

import asyncio
import threading
import time

import accord
from accord import Budget, Retry, Stabilizer, Vote, models
from accord._types import Completion, Request
from accord.backends._base import Backend
from reviews import GOOD, Review


def test_map_keeps_order_and_survives_a_failing_prompt() -> None:
    def fn(prompt: str) -> str:
        if prompt.startswith("bad"):
            return "no idea"
        return prompt.split(maxsplit=1)[0]

    stab = Stabilizer(fn, schema=int, vote=Vote(k=3), prompting=accord.Prompting(schema_in_prompt=False), retry=Retry(attempts=1))
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

    stab = Stabilizer(fn, schema=int, vote=Vote(k=2), budget=Budget(max_seconds=1.5), prompting=accord.Prompting(schema_in_prompt=False))
    results = stab.map([f"p{i}" for i in range(8)], concurrency=2)
    assert all(r.value == 7 for r in results), [r.stopped_because for r in results]


def test_run_works_inside_a_running_event_loop() -> None:
    async def notebook() -> tuple[accord.Result[Review], list[accord.Result[Review]]]:
        stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review)
        return stab.run("q"), stab.map(["q"])  # map in a loop too

    result, mapped = asyncio.run(notebook())
    assert result.stable and mapped[0].error is not None  # scripted texts ran out for the second prompt


class OneAtATime(Backend):
    """A backend whose calls of one run must go one after another (as the OpenAI backend spreads
    ballots); it counts the calls in flight, in all and per prompt."""

    one_at_a_time = True

    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking
        self.lock = threading.Lock()
        self.active: dict[str, int] = {}
        self.peak, self.peak_per_prompt = 0, 0

    def _enter(self, request: Request) -> None:
        with self.lock:
            self.active[str(request.input)] = self.active.get(str(request.input), 0) + 1
            self.peak = max(self.peak, sum(self.active.values()))
            self.peak_per_prompt = max(self.peak_per_prompt, *self.active.values())

    def _leave(self, request: Request) -> Completion:
        with self.lock:
            self.active[str(request.input)] -= 1
        return Completion("7")

    def generate(self, request: Request) -> Completion:
        self._enter(request)
        time.sleep(0.02)
        return self._leave(request)

    async def agenerate(self, request: Request) -> Completion:
        self._enter(request)
        await asyncio.sleep(0.02)
        return self._leave(request)


def test_map_gives_a_one_at_a_time_backend_its_calls_in_turn_and_keeps_the_slots_busy() -> None:
    # the calls of one prompt wait in the driver, not in a slot: 8 prompts of 3 calls at
    # concurrency 4 keep 4 calls in flight, never 2 of one prompt
    backend = OneAtATime(blocking=False)
    stab = Stabilizer(backend, schema=int, vote=Vote(k=3, early_stop=False), prompting=accord.Prompting(schema_in_prompt=False))
    results = stab.map([f"p{i}" for i in range(8)], concurrency=4)
    assert all(r.value == 7 and r.calls == 3 for r in results)
    assert backend.peak_per_prompt == 1 and backend.peak == 4


def test_run_gives_a_one_at_a_time_backend_its_calls_in_turn() -> None:
    backend = OneAtATime(blocking=True)
    result = Stabilizer(backend, schema=int, vote=Vote(k=3, early_stop=False), prompting=accord.Prompting(schema_in_prompt=False)).run("p")
    assert result.value == 7 and result.calls == 3 and backend.peak == 1
