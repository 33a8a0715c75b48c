"""Parquet in, Parquet out on Ray Data: a Stabilizer per actor, the ledger replaying a second run.

Reads reviews from a Parquet file, decides each one's label on two Ray actors
(``accord.integrations.ray.stabilize_dataset``) and writes the answers as Parquet columns beside the
input's. Run again over the same file, every row replays from the ledger: no model call.

The "model" is a keyword rule (no network, no download); for a real one, make the recipe's
factory return ``accord.models.openai(base_url=..., model=...)``. On one host the ledger may be
an SQLite file; actors on many hosts share a ``postgresql://`` DSN (docs/scale.md).
Joins the Ray cluster of ``$ACCORD_TEST_RAY_ADDRESS`` when set (the test suite's), else starts
a local one with 2 CPUs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
import ray
import ray.data

import accord
from accord.integrations.ray import Recipe, stabilize_dataset

REVIEWS = [
    "Great pen, writes smoothly.",
    "Broke after two days. Awful.",
    "It is a pen.",
    "Love it, great value.",
    "Awful smell, returned it.",
    "Arrived on Tuesday.",
]


def label(prompt: str) -> str:
    """The model: a keyword rule that answers with one word."""
    review = prompt.split("Review:", 1)[1]
    return "positive" if "great" in review.lower() else "negative" if "awful" in review.lower() else "neutral"


def model() -> accord.models.Backend:
    """The recipe's backend factory: called once on each actor."""
    return accord.models.function(label, name="keyword-rule-v1")


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    source = folder / "reviews.parquet"
    prompts = [f"Label the sentiment. Review: {text}" for text in REVIEWS]
    pq.write_table(pa.table({"review_id": list(range(len(REVIEWS))), "prompt": prompts}), source)

    address = os.environ.get("ACCORD_TEST_RAY_ADDRESS")
    ray.init(address=address, log_to_driver=False) if address else ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    recipe = Recipe(model, Literal["positive", "negative", "neutral"], vote=accord.Vote(k=3), ledger=str(folder / "ledger.sqlite3"))
    try:
        for run in ("first", "second"):
            out = folder / f"{run}-out"
            stabilize_dataset(ray.data.read_parquet(str(source), override_num_blocks=2), recipe, actors=2, batch_size=3, num_cpus=0.5).write_parquet(str(out))
            table = pq.read_table(out).sort_by("review_id")
            rows = table.to_pylist()
            if run == "first":
                print("columns:", ", ".join(table.column_names))
                for row in rows:
                    print(f"  {row['review_id']}  {row['value']:<12} stable={row['stable']}  calls={row['calls']}  {REVIEWS[row['review_id']]}")
            replayed = sum(row["replayed"] for row in rows)
            print(f"{run} run: {len(rows)} rows out, {replayed} replayed from the ledger, {sum(row['calls'] for row in rows)} model calls")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
