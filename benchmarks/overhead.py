"""The middleware's own cost per ballot, on a scripted backend, for a nested 10-field schema.

    python benchmarks/overhead.py [--quick]

Prints p50 / p90 microseconds per ballot (target: p50 <= 200 us). The scripted backend returns
at once, so the time measured is accord's: building the request, extracting, normalizing,
validating, canonicalizing, voting and assembling the Result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Literal

from pydantic import BaseModel

import accord


class Address(BaseModel):
    street: str
    city: str
    zip: str


class Order(BaseModel):
    id: int
    customer: str
    email: str
    total: float
    currency: Literal["EUR", "USD", "GBP"]
    paid: bool
    items: list[str]
    address: Address
    note: str | None = None
    priority: int


ANSWER = {
    "id": 1042, "customer": "Ada Lovelace", "email": "ada@example.com", "total": 99.5, "currency": "EUR",
    "paid": True, "items": ["book", "pen"], "address": {"street": "1 Main St", "city": "London", "zip": "N1"},
    "note": None, "priority": 2,
}
TEXT = "Here is the order:\n```json\n" + json.dumps(ANSWER) + "\n```"


def measure(runs: int, k: int) -> list[float]:
    per_ballot = []
    model = accord.models.scripted([TEXT] * k * runs)
    stab = accord.Stabilizer(model, schema=Order, vote=accord.Vote(k=k, early_stop=False))
    for _ in range(runs):
        start = time.perf_counter()
        result = stab.run("Extract the order.")
        per_ballot.append((time.perf_counter() - start) / result.calls)
    return per_ballot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (for the test suite)")
    args = parser.parse_args(argv)
    runs = 200 if args.quick else 2000
    measure(20, 5)  # warm-up: imports, pydantic schema caches
    samples = sorted(measure(runs, 5))
    p50 = statistics.median(samples) * 1e6
    p90 = samples[int(len(samples) * 0.9)] * 1e6
    print(f"overhead per ballot, nested 10-field schema, k=5, {runs} runs: p50 {p50:.0f} us, p90 {p90:.0f} us "
          f"(target p50 <= 200 us: {'met' if p50 <= 200 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
