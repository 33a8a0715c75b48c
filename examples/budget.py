"""Budgets: a run ends on time even when a sync model call hangs; calls and tokens are capped too.

Run: .venv/bin/python examples/budget.py   (no network, no model download)

Every BudgetExceeded carries the Result with every ballot, so nothing the model said is lost.
"""

import time
from typing import Literal

import accord

Sentiment = Literal["positive", "negative", "neutral"]


def hanging_llm(prompt: str) -> str:
    time.sleep(60)  # a stuck HTTP call, a deadlocked client...
    return "positive"


print("== max_seconds cuts a hung sync call")
start = time.perf_counter()
try:
    accord.Stabilizer(hanging_llm, Sentiment, budget=accord.Budget(max_seconds=0.5)).run("Review: 'Great pen.'")
except accord.BudgetExceeded as error:
    elapsed = time.perf_counter() - start
    print(f"BudgetExceeded after {elapsed:.2f} s: {error}")
    print("  stopped because:", error.result.stopped_because)
    print("  ballots:", [(b.slot, b.status) for b in error.result.ballots])
    assert elapsed < 5

print("== max_calls caps model calls (retries included)")
model = accord.models.scripted(["positive", "neutral", "negative", "positive", "positive"])
try:
    accord.Stabilizer(model, Sentiment, vote=accord.Vote(k=5),
                      budget=accord.Budget(max_calls=3)).run("Review: 'ok pen'")
except accord.BudgetExceeded as error:
    print(f"BudgetExceeded: {error}")
    print("  calls made:", error.result.calls, "| votes:", error.result.votes)

print("== max_tokens caps prompt + completion tokens (as the backend reports them)")
replies = iter(["positive", "neutral"] * 10)


def counting_llm(prompt: str) -> accord.Completion:
    return accord.Completion(next(replies), usage=accord.Usage(prompt_tokens=40, completion_tokens=2))


try:
    accord.Stabilizer(counting_llm, Sentiment, vote=accord.Vote(k=9),
                      budget=accord.Budget(max_total_tokens=100)).run("Review: 'ok pen'")
except accord.BudgetExceeded as error:
    usage = error.result.usage
    print(f"BudgetExceeded: {error}")
    print(f"  tokens used: {usage.total_tokens} in {usage.calls} calls (the quorum of 5 was already in flight)")

print("== a decision inside the budget is returned as usual")
model = accord.models.scripted(["positive"] * 3)
result = accord.Stabilizer(model, Sentiment,
                           budget=accord.Budget(max_seconds=30, max_calls=10)).run("Review: 'Great pen.'")
print(result)
