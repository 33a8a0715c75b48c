"""``@accord.stabilize``: a wrapped function returns the value; other arguments pass through."""

from __future__ import annotations

import asyncio

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
    assert isinstance(result, accord.Result) and result.fingerprint.endswith("ask")


def test_stabilize_async_function() -> None:
    @accord.stabilize(schema=int, vote=Vote(k=3))
    async def ask(prompt: str) -> str:
        return "7"

    assert asyncio.run(ask("n?")) == 7
