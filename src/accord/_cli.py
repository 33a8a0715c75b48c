"""The ``accord`` console script."""

from __future__ import annotations

import typer

from ._ledger_cli import app as ledger_app

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
def version() -> None:
    """Print accord's version."""
    from . import __version__

    typer.echo(__version__)


def main() -> None:  # pragma: no cover - console entry
    app()
