"""Quickstart: five texts a fluctuating model might write for one review, one stable answer.

Run: .venv/bin/python examples/quickstart.py   (no network, no model download)

The scripted backend returns the texts in turn, as a greedy model whose output forks between runs
might: fenced JSON, prose around JSON, a number written as a string, a capitalised label.
"""

from typing import Literal

from pydantic import BaseModel, Field

import accord


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


TEXTS = [
    '{"stars": 5, "sentiment": "positive"}',
    '{"stars": 4, "sentiment": "positive"}',  # the fork: a near-tie flipped one token
    '```json\n{"sentiment": "Positive", "stars": "5"}\n```',
    'Sure! Here is the rating: {"stars": 5.0, "sentiment": "positive"}',
    '{"stars": 5, "sentiment": "positive"}',
]

model = accord.models.scripted(TEXTS)
stab = accord.Stabilizer(model, schema=Review, vote=accord.Vote(k=5))
result = stab.run("Review: 'Great pen, writes smoothly.'")

print("value:          ", repr(result.value))
print("stable:         ", result.stable)
print("agreement:      ", f"{result.agreement:.2f}")
print("votes:          ", result.votes)
print("calls:          ", result.calls, "of at most", stab.policy.vote.k)
print("stopped because:", result.stopped_because)
print("ballots:")
for ballot in result.ballots:
    print(f"  slot {ballot.slot} attempt {ballot.attempt} {ballot.status:7} {ballot.text!r:62} -> {ballot.key}")

# The same value written three ways counts as three votes for one canonical form. accord starts
# the quorum (3 of 5) at once, sees 2 to 1, adds one ballot, and stops when 5 stars can no longer
# be overtaken: the fifth text is never requested.
assert result.value == Review(stars=5, sentiment="positive")
assert result.stopped_because == "unbeatable" and result.calls == 4

# The whole run as JSON (value, tally, every ballot, usage, environment).
print("to_json keys:   ", list(result.to_dict()))
