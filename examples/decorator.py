"""@accord.stabilize: wrap an existing function that calls an LLM and returns text.

Run: .venv/bin/python examples/decorator.py   (no network, no model download)

``fake_llm`` stands in for a real client: it answers the same prompt in a different wording on
each call, as a greedy model behind a batching server may. The decorated function returns a
validated value; ``.run`` returns the whole Result.
"""

import itertools
import threading
from typing import Literal

import accord

Sentiment = Literal["positive", "negative", "neutral"]

_WORDINGS = itertools.cycle(["Positive.", "positive", "**POSITIVE**", "The sentiment is positive.", "neutral"])
_lock = threading.Lock()  # sync calls of one vote run in worker threads
seen_prompts: list[str] = []


def fake_llm(prompt: str, temperature: float) -> str:
    with _lock:
        seen_prompts.append(prompt)
        return next(_WORDINGS)


@accord.stabilize(schema=Sentiment, vote=accord.Vote(k=5))
def classify(prompt: str, temperature: float = 0.0) -> str:
    """The first positional argument is the prompt; the others pass through unchanged."""
    return fake_llm(prompt, temperature)


label = classify("Review: 'Great pen, writes smoothly.'")
print("classify(...)      ->", repr(label))
print("prompt the LLM saw ->", repr(seen_prompts[0]))

result = classify.run("Review: 'Great pen, writes smoothly.'", temperature=0.0)
print("classify.run(...)  ->", result)
print("raw texts          ->", [b.text for b in result.ballots])
print("votes              ->", result.votes)

# Write your own instructions? Turn the schema hint off.
@accord.stabilize(schema=Sentiment, vote=accord.Vote(k=3), prompting=accord.Prompting(schema_in_prompt=False))
def classify_plain(prompt: str) -> str:
    seen_prompts.append(prompt)
    return "Neutral"


print("Prompting(schema_in_prompt=False) ->", repr(classify_plain("Is 'ok pen' positive, negative or neutral?")),
      "| prompt sent:", repr(seen_prompts[-1]))

assert label == "positive" and result.value == "positive"
