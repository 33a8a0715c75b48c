"""The entry point: the sync and async drivers run ballots concurrently and agree; function backends; bad configuration."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import pytest

import accord
from accord import Completion, Stabilizer, Vote, models
from reviews import GOOD, Review


def test_async_ballots_run_concurrently() -> None:
    async def slow(prompt: str) -> str:
        await asyncio.sleep(0.2)
        return GOOD

    stab = Stabilizer(models.function(slow), schema=Review, vote=Vote(k=5, early_stop=False))
    start = time.perf_counter()
    result = asyncio.run(stab.arun("q"))
    assert result.calls == 5 and time.perf_counter() - start < 0.6


def test_sync_ballots_run_concurrently_too() -> None:
    def slow(prompt: str) -> str:
        time.sleep(0.2)
        return GOOD

    start = time.perf_counter()
    result = Stabilizer(models.function(slow), schema=Review, vote=Vote(k=3, early_stop=False)).run("q")
    assert result.calls == 3 and time.perf_counter() - start < 0.5


def _summary(result: accord.Result[Any]) -> tuple[Any, ...]:
    return (result.value, result.stable, result.agreement, result.votes, result.stopped_because, result.calls,
            [(b.slot, b.attempt, b.status, b.key) for b in result.ballots])


def test_sync_and_async_runs_of_one_script_give_equal_results() -> None:
    texts = ['{"stars": 9, "sentiment": "positive"}', GOOD, GOOD, '{"stars": 2, "sentiment": "negative"}', GOOD]

    def stab() -> Stabilizer[Review]:
        return Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5))

    assert _summary(stab().run("q")) == _summary(asyncio.run(stab().arun("q")))


def test_function_backend_receives_what_the_user_passed() -> None:
    seen: list[str] = []

    def fn(prompt: str) -> str:
        seen.append(prompt)
        return "positive"

    Stabilizer(fn, schema=Literal["positive", "negative"], vote=Vote(k=1)).run("How was it?")
    assert seen[0].startswith("How was it?\n\n") and "positive, negative" in seen[0]
    seen.clear()
    Stabilizer(fn, schema=Literal["positive", "negative"], vote=Vote(k=1), prompting=accord.Prompting(schema_in_prompt=False)).run("How was it?")
    assert seen == ["How was it?"]


def test_function_backend_may_take_the_request_and_return_a_completion() -> None:
    def fn(prompt: str, request: accord.Request | None = None) -> Completion:
        assert isinstance(request, accord.Request) and request.ballot == 0
        return Completion("yes", usage=accord.Usage(prompt_tokens=5, completion_tokens=1))

    result = Stabilizer(fn, schema=bool, vote=Vote(k=1)).run("ok?")
    assert result.value is True and result.usage.total_tokens == 6 and result.usage.calls == 1


def test_bad_prompt_and_policies_are_config_errors() -> None:
    stab = Stabilizer(models.scripted([]), schema=int)
    with pytest.raises(accord.ConfigError):
        stab.run(42)  # type: ignore[arg-type]  # a wrong type on purpose: it must be refused
    with pytest.raises(accord.ConfigError):
        Stabilizer(models.scripted([]), schema=int, vote=5)  # type: ignore[call-overload]  # a wrong type on purpose
    with pytest.raises(accord.UnsupportedSchema):
        Stabilizer(models.scripted([]), schema="not a schema")
    with pytest.raises(accord.ConfigError):
        accord.Budget(max_seconds=-1)


@pytest.mark.parametrize("given,says", [
    (object, "every value"),
    (Any, "every value"),
    (Review(stars=4, sentiment="positive"), "an instance of Review"),
    (print, "builtin_function_or_method"),
    (lambda text: text, "function"),
])
def test_a_schema_that_is_no_type_is_refused_naming_what_was_given(given: Any, says: str) -> None:
    with pytest.raises(accord.UnsupportedSchema, match="schema=") as info:
        Stabilizer(models.scripted([]), schema=given)
    assert says in str(info.value)


def test_types_pydantic_validates_are_still_schemas() -> None:
    for schema in (list[int], dict[str, int], int | None, tuple[int, str], Literal["a"]):
        assert Stabilizer(models.scripted([]), schema=schema).schema.kind in {"type", "choice", "scalar"}


@pytest.mark.parametrize("fn", [lambda *, prompt: "1", lambda: "1", lambda prompt, other: "1"])
def test_a_function_that_cannot_be_called_with_the_prompt_is_refused_at_construction(fn: Any) -> None:
    with pytest.raises(accord.ConfigError, match="prompt"):
        models.function(fn)
    with pytest.raises(accord.ConfigError, match="prompt"):
        Stabilizer(fn, schema=int)


def test_functions_that_take_the_prompt_are_accepted() -> None:
    for fn in (lambda prompt: "1", lambda prompt, request=None: "1", lambda *args: "1", lambda prompt, **kw: "1",
               lambda prompt, /, *, request: "1"):
        assert Stabilizer(fn, schema=int, vote=Vote(k=1)).run("q").value == 1
