"""The ``accord`` console script."""

from __future__ import annotations

import typer

from ._ledger import app as ledger_app

app = typer.Typer(help="accord: stable, validated answers from fluctuating LLM output.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


@app.command()
def demo(scripted: bool = typer.Option(False, "--scripted", help="Run on a scripted backend (no model needed).")) -> None:
    """Show raw greedy output beside accord's stabilized value, on the embedded model."""
    if not scripted:
        try:
            from ._demo import demo as local_demo
        except ImportError:
            typer.echo("The local backend is not available in this build; running the scripted demo.")
        else:
            local_demo()
            return
    from ._scripted_demo import scripted_demo

    scripted_demo()


@app.command()
def calibrate(
    dtype: list[str] = typer.Option([], "--dtype", help="Deployment dtypes to measure (local: float32 and bfloat16); over HTTP, the server's."),
    out: str = typer.Option("", "--out", help="Where to write the floors (default: the file shipped with accord)."),
    model: str = typer.Option("local", "--model", help="local | openai:BASE_URL (a server's floor, kept in the user cache)"),
    model_name: str = typer.Option("", "--model-name", help="The model name on an OpenAI-compatible server."),
    load: int = typer.Option(8, "--load", help="Over HTTP: concurrent requests of other lengths beside each measured one."),
) -> None:
    """Measure noise floors (what the margin gate compares margins with): the embedded model's, or a server's."""
    from pathlib import Path

    from .. import models
    from ..backends.local._calibrate import SHIPPED, calibrate as run

    if model.startswith("openai:"):
        from ..backends.openai._calibrate import calibrate_command

        raise typer.Exit(calibrate_command(model.removeprefix("openai:"), model_name or None, dtype[0] if dtype else None, load, typer.echo))
    backends = [models.local(dtype=d) for d in dtype or ["float32", "bfloat16"]]
    table = run(backends, Path(out) if out else SHIPPED)
    for backend in backends:
        entry = table["models"][backend.fingerprint][backend.dtype]
        floors = ", ".join(f"{k} {v:.3g}" for k, v in entry["floors"].items())
        typer.echo(f"{backend.fingerprint} {backend.dtype}: {floors} ({entry['seconds']} s)")
    typer.echo(f"written to {Path(out) if out else SHIPPED}")


@app.command()
def audit(
    prompts: str = typer.Argument(..., help="PROMPTS.jsonl: one {prompt, id?, schema?, gold?} a line."),
    model: str = typer.Option("local", "--model", help="local | transformers:PATH | openai:BASE_URL"),
    model_name: str = typer.Option("", "--model-name", help="The model name on an OpenAI-compatible server."),
    schema: str = typer.Option("", "--schema", help="module:Model for lines without a schema (default: str)."),
    runs: int = typer.Option(5, "--runs", help="Concurrent repeated requests per prompt over HTTP."),
    out: str = typer.Option("", "--out", help="Write report.json and a self-contained report.html here."),
    quick: bool = typer.Option(False, "--quick", help="Three conditions, few tokens."),
    concurrency: int = typer.Option(0, "--concurrency", help="Over HTTP: send each request alone, then among N requests of other lengths."),
) -> None:
    """Measure how much a model's answers fluctuate, raw and through accord."""
    from ._audit_report import audit_command
    from .._errors import AccordError

    try:
        audit_command(prompts, model, model_name or None, schema or None, runs, out or None, quick, concurrency)
    except AccordError as exc:
        typer.echo(f"accord audit: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def version() -> None:
    """Print accord's version."""
    from .. import __version__

    typer.echo(__version__)


def main() -> None:  # pragma: no cover - console entry
    app()
