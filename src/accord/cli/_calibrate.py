"""``accord calibrate``: measure the embedded model's noise floors and write them down."""

from __future__ import annotations

import typer

_DTYPES = typer.Option(["float32", "bfloat16"], "--dtype", help="Deployment dtypes to measure.")


def calibrate(
    dtype: list[str] = _DTYPES,
    out: str = typer.Option(
        "", "--out", help="Where to write the floors (default: noise_floors.json in the user data dir, read before the shipped ones)."
    ),
) -> None:
    """Measure the embedded model's noise floors (what the margin gate compares margins with)."""
    from pathlib import Path

    from ..backends.local._calibrate import calibrate as run
    from ..backends.local._calibrate import calibrated_file
    from ..backends.local._embedded import local

    target = Path(out) if out else calibrated_file()
    backends = [local(dtype=d) for d in dtype]
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
