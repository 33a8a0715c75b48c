"""``@accord.stabilize``: a wrapped function returns the value; other arguments pass through."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import accord
from accord import Vote
from reviews import GOOD, Review


def test_stabilize_decorator_passes_other_arguments_through() -> None:
    calls = []

    @accord.stabilize(schema=Review, vote=Vote(k=3))
    def ask(prompt: str, temperature: float = 0.0) -> str:
        calls.append(temperature)
        return GOOD

    assert ask("review", temperature=0.5) == Review(stars=4, sentiment="positive")
    assert calls == [0.5] * 2  # quorum of 2 reached unanimously
    result = ask.run("review")
    assert isinstance(result, accord.Result) and ".<locals>.ask#" in result.fingerprint  # a local function: by its code


def test_stabilize_async_function() -> None:
    @accord.stabilize(schema=int, vote=Vote(k=3))
    async def ask(prompt: str) -> str:
        return "7"

    assert asyncio.run(ask("n?")) == 7


def test_the_bare_decorator_is_refused_at_decoration_saying_how_to_write_it() -> None:
    with pytest.raises(accord.ConfigError, match=r"@accord.stabilize\(schema"):

        @accord.stabilize  # type: ignore[arg-type]  # the mistake under test: no parentheses, no schema
        def ask(prompt: str) -> str:
            return "1"


def test_a_function_that_cannot_take_the_prompt_is_refused_at_decoration() -> None:
    with pytest.raises(accord.ConfigError, match="prompt"):

        @accord.stabilize(schema=int)
        def ask(*, prompt: str) -> str:
            return "1"


def test_other_arguments_name_another_model_call_in_the_ledger(tmp_path: Path) -> None:
    @accord.stabilize(schema=int, vote=Vote(k=1), ledger=accord.Ledger(tmp_path / "ledger.sqlite3"))
    def ask(prompt: str, client: Any) -> str:
        return client.answer

    class Client:
        def __init__(self, answer: str) -> None:
            self.answer = answer

    assert ask("q", Client("1")) == 1
    assert ask("q", Client("2")) == 2, "another client object is another model call, never a replay of the first"
    assert ask.run("q", Client("1")).replayed
