"""The ``accord`` console script: the typer app and its wiring. Each command lives in its own module."""

from __future__ import annotations

import typer

from ..serve._command import serve_command
from ._audit_report import audit
from ._calibrate import calibrate
from ._demo import demo_command
from ._ledger import app as ledger_app

app = typer.Typer(help="accord: stable, validated answers from fluctuating LLM output.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")
app.command("demo")(demo_command)
app.command("calibrate")(calibrate)
app.command("audit")(audit)
app.command("serve")(serve_command)


@app.command()
def version() -> None:
    """Print accord's version."""
    from .._version import __version__

    typer.echo(__version__)


def main() -> None:  # pragma: no cover - console entry
    app()
