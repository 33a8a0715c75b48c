"""``accord demo``: real tasks on the embedded model, the raw greedy text beside the stable value.

``accord demo --scripted`` runs the same tasks on a scripted backend instead: the texts a
fluctuating model might write for each (another case, markdown, a code fence, a number as a
string, one dissenting answer) become one stable value. No model is needed.

On the embedded model, each task runs with no grammar at all (what SmolLM2-135M-Instruct says when nothing constrains
it), once as deployed and once under each perturbation of the default ensemble (the numeric
noise a serving stack varies: precision, batch neighbours, attention kernel, threads), then
through ``accord.Stabilizer`` with its default policy (grammar-constrained decoding, validation,
the margin gate and a perturbed vote). A raw text that differs from the deployed one is shown in
yellow. Nothing is scripted: every figure comes from the model on this machine.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .. import models
from .._errors import AccordError, ModelNotInstalled
from .._stabilizer import Stabilizer
from .._types import Settings
from ..vote._perturb import Perturb
from ..vote._vote import Vote

RAW_TOKENS = 24


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
    prompt: str  # for the embedded model
    texts: tuple[str, ...]  # for the scripted backend: the same answer written many ways, and one dissent


# Prompts whose raw text moves under the noise here (the first three are from benchmarks/tasks.py).
TASKS = (
    Task("sentiment", Literal["positive", "negative", "neutral"], "Literal[3]",
         "Classify the sentiment of this text as positive, negative or neutral.\nText: The meeting is scheduled for 3 pm.",
         ("Neutral.", "neutral", "**neutral**", "NEUTRAL")),
    Task("extraction", Person, "Person{address{...}}",
         "Extract the person's name, age and home city and country.\nText: Sofia Rossi is 30 and lives in Rome, Italy.",
         ('{"name": "Sofia Rossi", "age": 30, "address": {"city": "Rome", "country": "Italy"}}',
          '```json\n{"address": {"country": "Italy", "city": "Rome"}, "age": "30", "name": "Sofia Rossi"}\n```',
          'Here you go: {"name": "Sofia Rossi", "age": 30.0, "address": {"city": "Rome", "country": "Italy"}}',
          '{"name": "Sofia Rossi", "age": 31, "address": {"city": "Rome", "country": "Italy"}}')),
    Task("yes/no", bool, "bool", "Answer yes or no. Is the sun cold?", ("No.", "no, it is not", "False", "Yes")),
    Task("integer", int, "int", "What year did humans first land on the Moon? Answer with the year only.",
         ("1969", "The answer is 1969.", "1969.0", "1968")),
)


def demo_command(scripted: bool = typer.Option(False, "--scripted", help="Run on a scripted backend (no model needed).")) -> None:
    """Show raw greedy output beside accord's stabilized value, on the embedded model."""
    if scripted:
        scripted_demo()
    else:
        demo()


def demo(console: Console | None = None, model: Any = None) -> None:
    """Run the tasks on ``model`` (default ``accord.models.local()``); print a table and the time."""
    console = console or Console()
    start = time.perf_counter()
    console.print("[bold]accord demo[/]: SmolLM2-135M-Instruct, local, grammar-constrained")
    try:
        model = model or models.local()
    except ModelNotInstalled as exc:
        console.print(f"[red]{exc.message}[/]")
        raise SystemExit(1) from None
    converted = model.conversion_seconds
    if converted:
        console.print(f"converted the GGUF to safetensors once, in {converted:.1f} s (excluded from the time below)")
    console.print(f"loaded {model.model_id} ({model.dtype}, {model.device}) from {model.path}")
    perturbations = Perturb().kinds
    table = Table("task", "run", "output")
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("tasks", total=len(TASKS))
        for task in TASKS:
            progress.update(bar, description=f"{task.name}: raw text")
            settings = Settings(max_tokens=RAW_TOKENS)
            raw = model.unconstrained(task.prompt, settings).text
            asked = Text.assemble((task.name, "bold"), f" -> {task.shape}\n", (task.prompt, "dim"))
            table.add_row(asked, "raw greedy, as deployed", _clip(raw))
            for perturbation in perturbations:
                progress.update(bar, description=f"{task.name}: raw text, {perturbation.describe()}")
                text = model.unconstrained(task.prompt, settings, perturbation).text
                table.add_row("", f"raw, perturbed: {perturbation.describe()}", _clip(text, raw))
            progress.update(bar, description=f"{task.name}: stabilizing")
            value, how = _stabilized(model, task)
            table.add_row("", Text(f"accord ({how})", style="bold"), value, end_section=True)
            progress.advance(bar)
    console.print(table)
    total = time.perf_counter() - start - (converted or 0.0)
    console.print(f"done in {total:.1f} s (model load {model.load_seconds:.1f} s; greedy, {RAW_TOKENS} raw tokens; yellow: "
                  "the raw text differs from the deployed one; accord: the default policy's validated value)")


def _clip(text: str, deployed: str | None = None, limit: int = 72) -> Text:
    text = " ".join(text.split())
    differs = deployed is not None and text != " ".join(deployed.split())
    return Text(text if len(text) <= limit else text[: limit - 1] + "…", style="yellow" if differs else "")


def _stabilized(model: Any, task: Task) -> tuple[Text, str]:
    """(value, how it was decided) of one default Stabilizer run, or the error it ended with."""
    try:
        result = Stabilizer(model, schema=task.schema).run(task.prompt)
    except AccordError as exc:
        failed = getattr(exc, "result", None)
        calls = f"{failed.calls} calls" if failed is not None else "-"
        return Text(f"{type(exc).__name__}: {exc.message}", style="red"), calls
    value = Text(json.dumps(result.data, ensure_ascii=False), style="green")
    how = f"{result.calls} call{'s' if result.calls > 1 else ''}, {result.stopped_because}"
    return value, how


def scripted_demo(console: Console | None = None) -> None:
    """Each task's scripted texts through a Stabilizer that votes on all of them."""
    console = console or Console()
    console.print("[bold]accord demo[/] on a [yellow]scripted backend[/] (texts as a fluctuating model might write them)")
    start = time.perf_counter()
    table = Table("task", "raw outputs", "stable value", "agreement", "calls", "stopped because")
    for task in TASKS:
        texts = list(task.texts)
        result = Stabilizer(models.scripted(texts), task.schema, vote=Vote(k=len(texts), early_stop=False)).run("demo")
        raw = "\n".join(repr(t) for t in texts)
        table.add_row(task.name, raw, repr(result.value), f"{result.agreement:.0%}", str(result.calls), result.stopped_because)
    console.print(table)
    console.print(f"done in {time.perf_counter() - start:.2f} s")
