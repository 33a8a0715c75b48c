"""``accord calibrate``: measure noise floors and write them down: the embedded model's (shipped),
or an OpenAI-compatible server's (``--model openai:URL``, kept in the user cache)."""

from __future__ import annotations

import typer

_DTYPES = typer.Option(
    [], "--dtype", help="Deployment dtypes to measure (local: default float32 and bfloat16); over HTTP, the server's."
)


def calibrate(
    dtype: list[str] = _DTYPES,
    out: str = typer.Option("", "--out", help="Where to write the floors (default: the file shipped with accord)."),
    model: str = typer.Option("local", "--model", help="local | openai:BASE_URL (a server's floor, kept in the user cache)"),
    model_name: str = typer.Option("", "--model-name", help="The model name on an OpenAI-compatible server."),
    load: int = typer.Option(8, "--load", help="Over HTTP: concurrent requests of other lengths beside each measured one."),
) -> None:
    """Measure noise floors (what the margin gate compares margins with): the embedded model's, or a server's."""
    from pathlib import Path

    if model.startswith("openai:"):
        from ..backends.openai._calibrate import calibrate_command

        dtype_name = dtype[0] if dtype else None
        raise typer.Exit(calibrate_command(model.removeprefix("openai:"), model_name or None, dtype_name, load, typer.echo))

    from ..backends.local._calibrate import SHIPPED
    from ..backends.local._calibrate import calibrate as run
    from ..backends.local._embedded import local

    backends = [local(dtype=d) for d in dtype or ["float32", "bfloat16"]]
    table = run(backends, Path(out) if out else SHIPPED)
    for backend in backends:
        entry = table["models"][backend.fingerprint][backend.dtype]
        floors = ", ".join(f"{k} {v:.3g}" for k, v in entry["floors"].items())
        typer.echo(f"{backend.fingerprint} {backend.dtype}: {floors} ({entry['seconds']} s)")
    typer.echo(f"written to {Path(out) if out else SHIPPED}")
