"""Field-level voting: ballots that differ in one field still agree on the others.

Run: .venv/bin/python examples/fieldwise.py   (no network, no model download)

Extractions of one invoice, as a fluctuating model might write them. Every ballot is valid, but
each misreads a different field, so no whole object reaches the quorum. ``Vote(fieldwise=True)`` votes each field
path separately, assembles the winners and validates the assembly.
"""

from typing import Literal

from pydantic import BaseModel, model_validator

import accord


class Invoice(BaseModel):
    vendor: str
    total: float
    currency: Literal["EUR", "USD"]
    tags: accord.Unordered[list[str]] = []  # order carries no meaning: voted as a set


TEXTS = [  # each ballot misreads a different field; no two are the same object
    '{"vendor": "ACME Gmbh", "total": 1250.0, "currency": "EUR", "tags": ["tools", "q3"]}',
    '```json\n{"vendor": "ACME GmbH", "total": "1205", "currency": "eur", "tags": ["q3", "tools"]}\n```',
    'Here it is: {"vendor": "ACME GmbH", "total": 1250, "currency": "USD", "tags": ["tools", "q3"]}',
    '{"vendor": " ACME GmbH", "total": 1250.00, "currency": "EUR", "tags": ["tools"]}',
    '{"vendor": "ACME GmbH", "total": 1250, "currency": "EUR", "tags": ["q3", "tools"]}',
]

print("== whole-object vote (k=5, quorum 3)")
try:
    accord.Stabilizer(accord.models.scripted(TEXTS), Invoice, vote=accord.Vote(k=5)).run("Extract the invoice.")
except accord.NoConsensus as error:
    print("NoConsensus; votes:")
    for key, count in error.result.votes.items():
        print(f"  {count} x {key}")

print("== fieldwise vote (k=5, quorum 3 per field)")
result = accord.Stabilizer(accord.models.scripted(TEXTS), Invoice, vote=accord.Vote(k=5, fieldwise=True)).run(
    "Extract the invoice."
)
print("value:          ", repr(result.value))
print("field agreement:", result.field_agreement)
print("agreement:      ", f"{result.agreement:.2f}", "(the weakest field)")
print("how:            ", result.fieldwise.how, "|", result.stopped_because, "after", result.calls, "calls")
assert result.value == Invoice(vendor="ACME GmbH", total=1250.0, currency="EUR", tags=["q3", "tools"])
assert all(b.value != result.value for b in result.ballots)  # no single ballot wrote this object


# When the per-field winners do not validate together, the whole-object winner is returned.
class Range(BaseModel):
    low: int
    high: int

    @model_validator(mode="after")
    def ordered(self) -> "Range":
        if self.low > self.high:
            raise ValueError("low must not exceed high")
        return self


RANGES = ['{"low": 6, "high": 9}', '{"low": 6, "high": 9}', '{"low": 1, "high": 5}', '{"low": 2, "high": 5}',
          '{"low": 3, "high": 5}']
print("== fieldwise vote whose assembly fails validation (k=5, quorum=2, early_stop=False)")
vote = accord.Vote(k=5, quorum=2, fieldwise=True, early_stop=False)
ranged = accord.Stabilizer(accord.models.scripted(RANGES), Range, vote=vote).run("Give the range.")
print("per-field winners would be low=6, high=5; field agreement:", ranged.field_agreement)
print("value:", repr(ranged.value), "|", ranged.fieldwise.how)
print("why:  ", ranged.fieldwise.errors[0]["msg"])
assert ranged.value == Range(low=6, high=9)
