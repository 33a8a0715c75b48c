"""Many prompts: ``map``/``amap`` with one concurrency bound; an async model function.

Run: .venv/bin/python examples/async_map.py   (no network, no model download)

``fake_llm`` is an async function that takes 50 ms per call and words its answers differently
each time. Results come back in input order; a prompt that fails keeps its Result (with
``.error``) instead of raising, so one bad prompt never loses the others.
"""

import asyncio
import itertools
import time
from typing import Literal

import accord

Sentiment = Literal["positive", "negative", "neutral"]

WORDINGS = {
    "great": itertools.cycle(["Positive!", "positive", "POSITIVE"]),
    "awful": itertools.cycle(["negative", "Negative.", "It is negative."]),
    "fine": itertools.cycle(["neutral", "Neutral", "neutral."]),
}
flight = {"now": 0, "peak": 0}  # calls running at once, and the most seen


async def fake_llm(prompt: str) -> str:
    flight["now"] += 1
    flight["peak"] = max(flight["peak"], flight["now"])
    try:
        await asyncio.sleep(0.05)
        for word, answers in WORDINGS.items():
            if word in prompt:
                return next(answers)
        return "I cannot tell."  # never valid: this prompt ends in InvalidOutput
    finally:
        flight["now"] -= 1


stab = accord.Stabilizer(accord.models.function(fake_llm), Sentiment,
                         vote=accord.Vote(k=5), retry=accord.Retry(attempts=2))
prompts = [f"Review: '{word} pen'" for word in ["great", "awful", "fine", "smells of cheese", "great", "fine"]]

start = time.perf_counter()
results = stab.map(prompts, concurrency=4)  # sync entry point; runs the async function on an event loop
elapsed = time.perf_counter() - start
for prompt, result in zip(prompts, results, strict=True):
    outcome = repr(result.value) if result.error is None else type(result.error).__name__
    print(f"{prompt:32} -> {outcome:12} calls={result.calls} stable={result.stable}")
print(f"{sum(r.calls for r in results)} model calls in {elapsed:.2f} s, at most {flight['peak']} in flight (concurrency=4)")
assert flight["peak"] <= 4
assert [r.value for r in results] == ["positive", "negative", "neutral", None, "positive", "neutral"]


async def main() -> None:
    # Inside async code: await the same API.
    one = await stab.arun("Review: 'awful pen'")
    many = await stab.amap(["Review: 'great pen'", "Review: 'fine pen'"], concurrency=2)
    print("arun ->", one)
    print("amap ->", [r.value for r in many])


asyncio.run(main())
