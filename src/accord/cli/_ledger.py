"""``accord ledger``: list the runs of the decision ledger, show one key, export everything, migrate a file into PostgreSQL.

``--path`` takes a file or a ``postgresql://`` DSN (better without its password: libpq reads
``PGPASSWORD`` and ``~/.pgpass``); ``ACCORD_LEDGER`` is its default. Looking never creates a ledger.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import typer

from .._errors import AccordError
from ..ledger import Ledger, default_path, exists, migrate
from ..ledger._open import shown

T = TypeVar("T")

app = typer.Typer(help="Inspect the decision ledger (accepted answers, every run and ballot).", no_args_is_help=True)

_PATH = typer.Option(
    None, "--path", envvar="ACCORD_LEDGER",
    help="The ledger: a file, or a postgresql:// DSN (default: ledger.sqlite3 in the user data dir).",
)  # fmt: skip


class Format(str, enum.Enum):
    jsonl = "jsonl"


_FORMAT = typer.Option(Format.jsonl, "--format", help="Output format.")
_OUTPUT = typer.Option(None, "--output", "-o", help="Write here instead of stdout.")


@app.command("ls")
def list_runs(
    path: str | None = _PATH,
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="Show at most this many runs, newest first (at least 1)."),
    key: str | None = typer.Option(None, "--key", help="Only the runs of keys starting with this prefix."),
) -> None:
    """List runs, newest first; '*' marks the current answer of its key."""
    with _open(path) as ledger:
        rows = _guard(lambda: ledger.runs(limit=limit, key=key))
    if not rows:
        typer.echo(f"no runs in {ledger.where}")
        return
    typer.echo(
        f"{'RUN':>5}  {'KEY':<12}  {'DECIDED (UTC)':<19}  {'OUTCOME':<21} {'CALLS':>5}  {'STOPPED BECAUSE':<15}  {'VALUE':<30}  REQUEST"
    )
    for row in rows:
        mark = "*" if row["current"] else " "
        outcome = row["outcome"] if row["error"] is None else f"{row['outcome']}:{row['error']}"
        value = _clip(json.dumps(row["value"], ensure_ascii=False), 30)
        request = _clip(json.dumps(row["request"], ensure_ascii=False), 40)
        typer.echo(
            f"{row['run']:>5}{mark} {row['key'][:12]:<12}  {_when(row['created']):<19}  {outcome:<21} {row['calls']:>5}  "
            f"{row['stopped_because']:<15}  {value:<30}  {request}"
        )


@app.command()
def show(key: str = typer.Argument(..., help="A key, or a unique prefix of one."), path: str | None = _PATH) -> None:
    """Show one key as JSON: what it hashes (request, schema, policy, model) and every run with its ballots."""
    with _open(path) as ledger:
        found = _guard(lambda: ledger.show(key))
    typer.echo(json.dumps(found, ensure_ascii=False, indent=2))


@app.command()
def export(
    format: Format = _FORMAT,
    output: Path | None = _OUTPUT,
    path: str | None = _PATH,
) -> None:
    """Export every run (request, result, ballots) as one JSON object per line, oldest first."""
    with _open(path) as ledger:
        try:
            sink = output.open("w", encoding="utf-8") if output else sys.stdout
        except OSError as exc:
            typer.echo(f"error: cannot write {output}: {exc.strerror or exc}", err=True)
            raise typer.Exit(1) from None
        try:
            count, runs = 0, ledger.export()
            while (run := _guard(lambda: next(runs, None))) is not None:
                sink.write(json.dumps(run, ensure_ascii=False) + "\n")
                count += 1
        finally:
            if output:
                sink.close()
    if output:
        typer.echo(f"exported {count} runs to {output}")


@app.command("migrate")
def migrate_command(
    to: str = typer.Option(..., "--to", help="The PostgreSQL ledger to fill: a postgresql:// DSN (an empty one)."),
    path: str | None = _PATH,
) -> None:
    """Copy a ledger (an SQLite file) into an empty PostgreSQL ledger: every run, ballot and answer, ids kept."""
    source = path or str(default_path())
    copied = _guard(lambda: migrate(source, to))
    typer.echo(
        f"copied {copied.keys} keys, {copied.runs} runs, {copied.ballots} ballots and {copied.answers} answers "
        f"from {shown(source)} to {shown(to)}"
    )


def _open(path: str | None) -> Ledger:
    target = path or str(default_path())
    if not _guard(lambda: exists(target)):
        typer.echo(f"error: no ledger at {shown(target)}", err=True)
        raise typer.Exit(1)
    return _guard(lambda: Ledger(target))


def _guard(work: Callable[[], T]) -> T:
    try:
        return work()
    except AccordError as exc:  # LedgerError, and ConfigError for a DSN that cannot work
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _when(created: float) -> str:
    return datetime.fromtimestamp(created, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
