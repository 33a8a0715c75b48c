"""A demo on a scripted backend: the same answer written many ways becomes one stable value."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from .. import models
from .._stabilizer import Stabilizer
from .._vote import Vote


class Review(BaseModel):
    stars: int
    sentiment: Literal["positive", "negative", "neutral"]


TASKS = [
    ("sentiment", Literal["positive", "negative", "neutral"], ["Positive.", "positive", "**positive**", "POSITIVE"]),
    ("review", Review, ['{"stars": 4, "sentiment": "Positive"}', '```json\n{"sentiment": "positive", "stars": "4"}\n```',
                        'Here you go: {"stars": 4.0, "sentiment": "positive"}', '{"stars": 3, "sentiment": "positive"}']),
    ("yes/no", bool, ["Yes.", "yes, it is", "True", "No"]),
    ("integer", int, ["42", "The answer is 42.", "42.0", "41"]),
]


def scripted_demo(console: Console | None = None) -> None:
    console = console or Console()
    console.print("[bold]accord demo[/] on a [yellow]scripted backend[/] (texts as a fluctuating model might write them)")
    start = time.perf_counter()
    table = Table("task", "raw outputs", "stable value", "agreement", "calls", "stopped because")
    for name, schema, texts in TASKS:
        result = Stabilizer(models.scripted(texts), schema, vote=Vote(k=len(texts), early_stop=False)).run("demo")
        raw = "\n".join(repr(t) for t in texts)
        table.add_row(name, raw, repr(result.value), f"{result.agreement:.0%}", str(result.calls), result.stopped_because)
    console.print(table)
    console.print(f"done in {time.perf_counter() - start:.2f} s")
