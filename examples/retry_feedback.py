"""Retries: invalid output is re-asked with one feedback block; faults back off; truncation grows;
a loop is re-asked with feedback, never with more room.

Run: .venv/bin/python examples/retry_feedback.py   (no network, no model download)

The scripted backend records every Request it receives, so we can print exactly what a retry
sends: the original prompt plus one short block naming the failing fields, never the history.
"""

import time
from typing import Literal

import tenacity
from pydantic import BaseModel, Field

import accord


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


GOOD = '{"stars": 5, "sentiment": "positive"}'
PLAIN = accord.Prompting(schema_in_prompt=False)  # these scripted models cannot constrain: no schema in the prompt

print("== 1. invalid output: the next attempt carries the errors (as data, rendered once)")
model = accord.models.scripted(['{"stars": 7, "sentiment": "great"}', '{"stars": 9, "sentiment": "positive"}', GOOD])
stab = accord.Stabilizer(model, Review, vote=accord.Vote(k=1), retry=accord.Retry(attempts=3), prompting=PLAIN)
result = stab.run("Review: 'Great pen, writes smoothly.'")
for request in model.requests:
    print(f"--- attempt {request.attempt} sends:")
    print(request.input)
feedback = model.requests[1].feedback
assert feedback is not None
print("--- feedback kept as data on the Request:", feedback.errors[0])
print("--- statuses:", [b.status for b in result.ballots], "->", repr(result.value))
third = model.requests[2].input
assert isinstance(third, str) and third.count("Your previous answer") == 1 and "(got 9)" in third and "(got 7)" not in third

print("\n== 2. unreadable output: the block says so")
model = accord.models.scripted(["I would say it is a very good review overall.", GOOD])
accord.Stabilizer(model, Review, vote=accord.Vote(k=1), prompting=PLAIN).run("Review: 'Great pen.'")
print(model.requests[1].input)

print("\n== 3. transient faults: backoff (tenacity wait) or the server's Retry-After, whichever is longer")
model = accord.models.scripted([
    TimeoutError("read timed out"),                                              # retryable
    accord.BackendError("HTTP 429", retryable=True, status=429, retry_after=0.3),  # Retry-After: 0.3 s
    GOOD, GOOD,
])
retry = accord.Retry(wait=tenacity.wait_fixed(0.1), transport_attempts=4)
start = time.perf_counter()
result = accord.Stabilizer(model, Review, vote=accord.Vote(k=3), retry=retry).run("Review: 'Great pen.'")
for b in result.ballots:
    print(f"  slot {b.slot} attempt {b.attempt} {b.status:5} started {b.started:.2f} s",
          (b.error or {}).get("message", ""))
print(f"  -> {result.value!r} after {time.perf_counter() - start:.2f} s")
print("  default wait after 1..5 faults (0.5 * 2**(n-1) s + up to 0.5 s jitter, at most 20 s):",
      [round(accord.Retry().backoff(n), 2) for n in range(1, 6)])

print("\n== 4. truncated output (finish_reason='length'): same request, max_tokens times 2")
model = accord.models.scripted([accord.Completion('{"stars": 5, "senti', finish_reason="length"), GOOD])
result = accord.Stabilizer(model, Review, vote=accord.Vote(k=1), settings=accord.Settings(max_tokens=64)).run("Review: 'Great pen.'")
for request in model.requests:
    print(f"  attempt {request.attempt}: max_tokens={request.settings.max_tokens} feedback={request.feedback}")
assert [r.settings.max_tokens for r in model.requests] == [64, 128]

print("\n== 5. a loop (finish_reason='loop'): feedback that names it, the same max_tokens")
looped = '{"stars": 5, "sentiment": "' + "so good, so smooth " * 4
model = accord.models.scripted([accord.Completion(looped, finish_reason="loop"), GOOD])
result = accord.Stabilizer(model, Review, vote=accord.Vote(k=1), settings=accord.Settings(max_tokens=64),
                           prompting=PLAIN).run("Review: 'Great pen.'")
print("  ballot 1:", result.ballots[0].error["message"])
print(f"  attempt 2: max_tokens={model.requests[1].settings.max_tokens}, sends:")
print(model.requests[1].input)
assert [r.settings.max_tokens for r in model.requests] == [64, 64]
