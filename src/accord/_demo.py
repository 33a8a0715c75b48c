"""``accord demo``: real tasks on the embedded model, the raw greedy text beside the stable value.

Each task runs twice: once with no grammar at all (what SmolLM2-135M-Instruct says when nothing
constrains it), and once through ``accord.Stabilizer`` with grammar-constrained decoding,
validation and a vote. Nothing is scripted: every figure comes from the model on this machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from . import models
from ._errors import AccordError, ModelNotInstalled
from ._request import Settings
from ._stabilizer import Stabilizer
from ._vote import Vote

RAW_TOKENS = 40
VOTES = 3


class Address(BaseModel):
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int
    address: Address


@dataclass(frozen=True)
class Task:
    name: str
    schema: Any
    shape: str
    prompt: str


TASKS = (
    Task("sentiment", Literal["positive", "negative", "neutral"], "Literal[3]",
         "What is the sentiment of this review? 'Terrible service, cold food, never again.'"),
    Task("extraction", Person, "Person{address{...}}",
         "Extract the person: John Smith is 42 years old and lives in Paris, France."),
    Task("yes/no", bool, "bool", "Can a dog drive a car?"),
    Task("integer", int, "int", "What year did humans first land on the Moon? Answer with the year only."),
)


def demo(console: Console | None = None) -> None:
    """Run the tasks on ``accord.models.local()`` and print a table and the total time."""
    console = console or Console()
    start = time.perf_counter()
    console.print("[bold]accord demo[/]: SmolLM2-135M-Instruct, local, grammar-constrained")
    try:
        model = models.local()
    except ModelNotInstalled as exc:
        console.print(f"[red]{exc.message}[/]")
        raise SystemExit(1) from None
    converted = getattr(model, "conversion_seconds", None)
    if converted:
        console.print(f"converted the GGUF to safetensors once, in {converted:.1f} s (excluded from the time below)")
    console.print(f"loaded {model.model_id} ({model.dtype}, {model.device}) from {model.path}")
    table = Table("task and prompt", "raw greedy text, no grammar", "stable value (validated)", "agreement",
                  "calls", "engine", show_lines=True)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("tasks", total=len(TASKS))
        for task in TASKS:
            progress.update(bar, description=f"{task.name}: raw text")
            raw = model.unconstrained(task.prompt, Settings(max_tokens=RAW_TOKENS)).text
            progress.update(bar, description=f"{task.name}: stabilizing")
            asked = Text.assemble((task.name, "bold"), f" -> {task.shape}\n", (task.prompt, "dim"))
            table.add_row(asked, _clip(raw), *_stabilized(model, task))
            progress.advance(bar)
    console.print(table)
    total = time.perf_counter() - start - (converted or 0.0)
    console.print(f"done in {total:.1f} s (model load {model.load_seconds:.1f} s; k={VOTES} votes, greedy)")


def _clip(text: str, limit: int = 110) -> Text:
    text = " ".join(text.split())
    return Text(text if len(text) <= limit else text[: limit - 1] + "…")


def _stabilized(model: Any, task: Task) -> tuple[Text, str, str, str]:
    """(value, agreement, calls, engine) of one Stabilizer run, or the error it ended with."""
    try:
        result = Stabilizer(model, schema=task.schema, vote=Vote(k=VOTES)).run(task.prompt)
    except AccordError as exc:
        result = getattr(exc, "result", None)
        calls = str(result.calls) if result is not None else "-"
        return Text(f"{type(exc).__name__}: {exc.message}", style="red"), "-", calls, "-"
    value = Text(json.dumps(result.data, ensure_ascii=False), style="green")
    return value, f"{result.agreement:.0%}", str(result.calls), str(result.engine or "-")
