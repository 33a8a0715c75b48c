"""``accord calibrate``: measure the embedded model's noise floors and write them down."""

from __future__ import annotations

import typer

_DTYPES = typer.Option(["float32", "bfloat16"], "--dtype", help="Deployment dtypes to measure.")


def calibrate(
    dtype: list[str] = _DTYPES,
    out: str = typer.Option("", "--out", help="Where to write the floors (default: the file shipped with accord)."),
) -> None:
    """Measure the embedded model's noise floors (what the margin gate compares margins with)."""
    from pathlib import Path

    from ..backends.local._calibrate import SHIPPED
    from ..backends.local._calibrate import calibrate as run
    from ..backends.local._embedded import local

    backends = [local(dtype=d) for d in dtype]
    table = run(backends, Path(out) if out else SHIPPED)
    for backend in backends:
        entry = table["models"][backend.fingerprint][backend.dtype]
        floors = ", ".join(f"{k} {v:.3g}" for k, v in entry["floors"].items())
        typer.echo(f"{backend.fingerprint} {backend.dtype}: {floors} ({entry['seconds']} s)")
    typer.echo(f"written to {Path(out) if out else SHIPPED}")
