"""``accord serve``: the command line. Imports nothing of the server until it runs, so
``accord --help`` works without the ``serve`` extra."""

from __future__ import annotations

from typing import Any

import typer

from .. import ConfigError

_UPSTREAM = typer.Option([], "--upstream", help="An OpenAI-compatible base URL (ending in /v1); repeat for round-robin.")
_MODELS = typer.Option([], "--model", help="Route by model: NAME=URL[,URL...][;setting=value...] (repeatable), e.g. "
                       "'small=http://127.0.0.1:8001/v1;k=7;key_env=SMALL_KEY'. Instead of --upstream.")
_KEYS = typer.Option([], "--api-key", help="A client key (repeatable; or ACCORD_API_KEYS, comma-separated). Without keys only 127.0.0.1 may be bound.")


def serve_command(  # noqa: PLR0917 - a typer command: one parameter per option
    upstream: list[str] = _UPSTREAM,
    model: list[str] = _MODELS,
    wire: str = typer.Option(None, "--wire", help="What the --upstream URLs speak: chat (chat completions; default) or messages "
                             "(Anthropic's Messages API, through accord.models.anthropic)."),
    host: str = typer.Option(None, "--host", help="The address to bind (default 127.0.0.1)."),
    port: int = typer.Option(None, "--port", help="The port (default 8000)."),
    api_key: list[str] = _KEYS,
    ledger: str = typer.Option(None, "--ledger", help="An SQLite file or a postgresql:// DSN: the same request gets the same answer on every replica."),
    config: str = typer.Option(None, "--config", help="A TOML or JSON file: the flags' names, plus a policy table and a backend table."),
    max_k: int = typer.Option(None, "--max-k", help="The most ballots a request may ask for (default 9)."),
    max_seconds: float = typer.Option(None, "--max-seconds", help="The longest time budget a request may ask for, and the default (120)."),
    max_body: int = typer.Option(None, "--max-body", help="The largest request body in bytes (default 4 MiB)."),
    concurrency: int = typer.Option(None, "--concurrency", help="Upstream chat calls in flight, all requests together (default 64)."),
    queue: int = typer.Option(None, "--queue", help="Requests that may wait beyond --concurrency; one more gets a 429 (default 512)."),
    grace: float = typer.Option(None, "--grace", help="Seconds in-flight requests get after SIGTERM (default 30)."),
    insecure: bool = typer.Option(False, "--insecure", help="Allow binding an address other than loopback without client keys."),
    log_level: str = typer.Option(None, "--log-level", help="debug, info (one line per request; default), warning or error."),
) -> None:
    """A stabilizing OpenAI-compatible proxy: every request with a schema gets accord's validated, voted answer."""
    given: dict[str, Any] = {
        "upstreams": tuple(upstream), "models": tuple(model), "host": host, "port": port, "api_keys": tuple(api_key), "ledger": ledger, "max_k": max_k,
        "max_seconds": max_seconds, "max_body": max_body, "concurrency": concurrency, "queue": queue, "grace": grace,
        "insecure": insecure or None, "log_level": log_level, "wire": wire,
    }  # fmt: skip
    from ._config import build

    try:
        settings = build(given, config)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        from ._server import serve
    except ImportError as exc:
        typer.echo(f"error: accord serve needs the serve extra: pip install 'accord[serve]' ({exc.name} is missing)", err=True)
        raise typer.Exit(2) from None
    try:
        code = serve(settings)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)
