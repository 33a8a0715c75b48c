"""``accord calibrate``: measure noise floors and write them down: the embedded model's, or an
OpenAI-compatible server's (``--model openai:URL``, kept in the user cache)."""

from __future__ import annotations

import typer

_DTYPES = typer.Option(
    [], "--dtype", help="Deployment dtypes to measure (local: default float32 and bfloat16); over HTTP, the server's."
)


def calibrate(
    dtype: list[str] = _DTYPES,
    out: str = typer.Option(
        "", "--out", help="Where to write the floors (default: noise_floors.json in the user data dir, read before the shipped ones)."
    ),
    model: str = typer.Option("local", "--model", help="local | openai:BASE_URL (a server's floor, kept in the user cache); anything else exits 2"),
    model_name: str = typer.Option("", "--model-name", help="The model name on an OpenAI-compatible server."),
    load: int = typer.Option(8, "--load", help="Over HTTP: concurrent requests of other lengths beside each measured one."),
) -> None:
    """Measure noise floors (what the margin gate compares margins with): the embedded model's, or a server's."""
    from pathlib import Path

    from .._errors import AccordError

    if model != "local" and not (model.startswith("openai:") and model.removeprefix("openai:").strip()):
        typer.echo(f"accord calibrate: --model {model!r}: expected local or openai:BASE_URL", err=True)
        raise typer.Exit(2)
    if model.startswith("openai:"):
        from ..backends.openai._calibrate import calibrate_command

        dtype_name = dtype[0] if dtype else None
        raise typer.Exit(calibrate_command(model.removeprefix("openai:"), model_name or None, dtype_name, load, typer.echo))

    from ..backends.local._calibrate import calibrate as run
    from ..backends.local._calibrate import calibrated_file
    from ..backends.local._embedded import local
    from ..backends.local._load import torch_dtype

    target = Path(out) if out else calibrated_file()
    try:
        dtypes = dtype or ["float32", "bfloat16"]
        for name in dtypes:
            torch_dtype(name)  # every dtype known before the first model loads
        backends = [local(dtype=d) for d in dtypes]
    except AccordError as exc:  # an unknown dtype, the model not installed: one line, no traceback
        typer.echo(f"accord calibrate: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        table = run(backends, target)
    except OSError as exc:
        typer.echo(f"error: cannot write {target}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    for backend in backends:
        entry = table["models"][backend.fingerprint][backend.dtype]
        floors = ", ".join(f"{k} {v:.3g}" for k, v in entry["floors"].items())
        typer.echo(f"{backend.fingerprint} {backend.dtype}: {floors} ({entry['seconds']} s)")
    typer.echo(f"written to {target}")
