"""What bounding the reading of an output by its deadline costs, and what it saves (issue #15).

    python benchmarks/hostile.py [--quick]

Prints, for one ordinary output read under a 10-field schema: the median CPU microseconds per
reading with a deadline (``Extract(max_seconds=10)``, the default: a watchdog alarm armed and
settled) and without one (``Extract(max_seconds=None)``), and their difference. Then a
catastrophic regular expression, ``(a+)+`` followed by a ``!`` that fails it: the seconds Python's
``re`` takes on ``"a" * n + "!"`` (n small enough to finish: each extra ``a`` doubles the time)
and the seconds ``accord.Regex("(a+)+")`` takes to answer the same text and ``"a" * 28 + "!"``
under a 1 s deadline. ``--quick`` reads fewer times and a shorter text under ``re``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from typing import Any, Literal

from pydantic import BaseModel

from accord import Extract, Regex, Schema
from accord.read._read import Misreading, Reading, read


class Order(BaseModel):
    id: int
    customer: str
    email: str
    total: float
    currency: Literal["EUR", "USD", "GBP"]
    paid: bool
    items: list[str]
    note: str | None = None
    priority: int
    region: str


ORDER = {"id": 7, "customer": "Ada", "email": "ada@example.com", "total": 12.5, "currency": "EUR", "paid": True,
         "items": ["a", "b"], "note": None, "priority": 2, "region": "eu"}


def per_reading(n: int) -> tuple[float, float]:
    """Median CPU microseconds of one reading of a valid 10-field object, with a deadline and
    without (alternated, so the machine's load falls on both alike; CPU time of the whole process,
    so the watchdog thread's work counts)."""
    schema: Schema[Order] = Schema(Order)
    text = "Here it is:\n```json\n" + json.dumps(ORDER) + "\n```"
    policies = (Extract(max_seconds=10.0), Extract(max_seconds=None))
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(n):
        for policy, seen in zip(policies, times, strict=True):
            start = time.process_time()
            reading = read(text, schema, policy=policy)
            seen.append(time.process_time() - start)
            assert isinstance(reading, Reading), reading
    return statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer readings, a shorter text under re")
    args = parser.parse_args()
    n = 300 if args.quick else 3000
    per_reading(50)  # warm up both paths
    bounded, unbounded = per_reading(n)
    print(f"one reading of a 10-field object ({n} readings each, median CPU time): with a deadline {bounded:.1f} us, "
          f"without {unbounded:.1f} us, the deadline's cost {bounded - unbounded:+.1f} us")

    short = 18 if args.quick else 22
    start = time.perf_counter()
    assert re.fullmatch("(a+)+", "a" * short + "!") is None
    plain = time.perf_counter() - start
    print(f"re.fullmatch('(a+)+', 'a' * {short} + '!'): {plain:.3f} s (each extra 'a' doubles it)")
    schema: Schema[Any] = Schema(Regex("(a+)+"))
    read("a!", schema, seconds=1.0)  # compiles the pattern: not part of the matching time
    for length in (short, 28):
        start = time.perf_counter()
        reading = read("a" * length + "!", schema, seconds=1.0)
        took = time.perf_counter() - start
        assert isinstance(reading, Misreading), reading
        print(f"accord.Regex('(a+)+') on 'a' * {length} + '!' under a 1 s deadline: {took * 1000:.2f} ms "
              f"({reading.errors[0]['type']})")


if __name__ == "__main__":
    main()
