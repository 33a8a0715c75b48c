"""The ``accord audit`` command and what it shows: rich tables and a progress bar, report.json, a
self-contained report.html. The measuring is in ``_audit``, the input in ``_audit_input``.

The HTML embeds its plots (matplotlib, PNG as base64) and styles inline: no external src or href.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # the measuring is imported when a command runs: ``accord --help`` stays quick
    from typing import TypeAlias

    from .._types import Settings
    from ..models import Backend
    from ._audit import Condition, Final, Run
    from ._audit_input import Item

    Phases: TypeAlias = "tuple[dict[str, list[Run]], dict[str, list[Final]], dict[str, dict[str, float]]]"

PLAIN_EVERY = 5.0  # seconds between two progress lines when stderr is no terminal


@contextmanager
def progress(total: int, label: str) -> Iterator[Callable[[], None]]:
    """The progress of one phase on stderr; yields the tick to call after each unit of work. A rich
    bar on a terminal; else (piped, logged) a plain line ``label done/total`` after the first
    unit, every :data:`PLAIN_EVERY` seconds, and after the last."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress

        with Progress(transient=False, console=Console(stderr=True)) as bar:
            task = bar.add_task(label, total=total)
            yield lambda: bar.advance(task)
        return
    done, shown = 0, time.monotonic()

    def tick() -> None:
        nonlocal done, shown
        done += 1
        if done in (1, total) or time.monotonic() - shown >= PLAIN_EVERY:
            shown = time.monotonic()
            typer.echo(f"accord audit: {label} {done}/{total}", err=True)

    yield tick


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else (f"{value:.{digits}g}" if isinstance(value, float) else str(value))


def headline_rows(audit: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, raw, stabilized) rows, shared by the terminal and the HTML."""
    raw, st = audit["raw"], audit.get("stabilized") or {}

    def acc(m: dict[str, Any], k: str) -> str:
        return _pct(m["accuracy"][k]) if m.get("accuracy") else "-"

    n = audit["n"]
    return [
        (f"TARr@{n} (identical raw text)", _pct(raw["TARr"]), "-"),
        (f"TARa@{n} (identical answer)", _pct(raw["TARa"]), _pct(st.get("TARa"))),
        ("distinct answers per prompt (mean)", _num(raw["distinct_answers_mean"]), _num(st.get("distinct_answers_mean"))),
        ("distinct raw texts per prompt (mean)", _num(raw["distinct_texts_mean"]), "-"),
        ("no answer (count)", str(raw["missing_answers"]), _num(st.get("missing_answers"))),
        ("prompts that diverged / first divergence (median, min)",
         f"{raw['diverged_prompts']} / {_num(raw['first_divergence_median'])}, {_num(raw['first_divergence_min'])}", "-"),
        ("smallest top-1/top-2 margin", _num(raw["min_margin"]), "-"),
        ("accuracy min / mean / max", " / ".join(acc(raw, k) for k in ("min", "mean", "max")),
         " / ".join(acc(st, k) for k in ("min", "mean", "max")) if st else "-"),
        ("calls per answer", "1", _num(st.get("calls_per_answer"))),
    ]


def verdict(audit: dict[str, Any]) -> str:
    """One line in plain words, the first thing the report says (terminal and HTML)."""
    st = audit.get("stabilized") or {}
    prompts, n = audit["prompts_audited"], audit["n"]
    moved = sum(1 for p in audit["prompts"] if not p["answer_agrees"])
    said = (f"The model alone gave the same answer on {prompts - moved} of {prompts} prompts across {n} conditions"
            + (f" (it changed on {moved})" if moved else ""))
    if not st:
        return said + "; accord's runs are not in this report."
    held = _pct(st.get("TARa"))
    return f"{said}; with accord the answer was the same on {held} of prompts, at {_num(st.get('calls_per_answer'))} calls per answer."


def print_report(audit: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    console.print(verdict(audit))
    table = Table(title=f"accord audit: {audit['prompts_audited']} prompts x {audit['n']} conditions ({', '.join(audit['conditions'])})")
    for column in ("metric", "raw", "stabilized"):
        table.add_column(column)
    for row in headline_rows(audit):
        table.add_row(*row)
    console.print(table)
    floors = audit.get("noise_floors") or {}
    if floors:
        ft = Table(title="measured noise floor (logit-gap change) per perturbation and dtype")
        kinds = sorted({k for f in floors.values() for k in f})
        ft.add_column("dtype")
        for kind in kinds:
            ft.add_column(kind)
        for dtype, f in floors.items():
            ft.add_row(dtype, *(_num(f.get(kind), 3) for kind in kinds))
        console.print(ft)
    pt = Table(title="per prompt")
    for column in ("id", "answers agree", "texts agree", "distinct answers", "first divergence", "min margin", "after", "calls"):
        pt.add_column(column)
    for p in audit["prompts"]:
        pt.add_row(p["id"], "yes" if p["answer_agrees"] else "NO", "yes" if p["text_agrees"] else "no", str(p["distinct_answers"]),
                   _num(p["first_divergence"]), _num(p["min_margin"]), _pct(p.get("agreement_after")), _num(p.get("calls_per_answer")))
    console.print(pt)


def write_reports(audit: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """report.json and report.html in ``out``; the plots need matplotlib (the ``report`` extra)."""
    from .._errors import ConfigError

    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError("--out draws plots with matplotlib: pip install 'accord[report]'") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create it ({exc})") from exc
    js = out / "report.json"
    js.write_text(json.dumps(audit, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    page = out / "report.html"
    page.write_text(render_html(audit), encoding="utf-8")
    return js, page


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def plots(audit: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, data URI) for each plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = audit["prompts"]
    ids = [p["id"] for p in rows]
    x = range(len(rows))
    height = max(3.0, 0.25 * len(rows) + 1)
    shown = []
    fig, ax = plt.subplots(figsize=(7, height))
    ax.barh([i + 0.2 for i in x], [p["agreement_before"] for p in rows], height=0.4, label="raw (before)")
    if "stabilized" in audit:
        ax.barh([i - 0.2 for i in x], [p["agreement_after"] for p in rows], height=0.4, label="accord (after)")
    ax.set_yticks(list(x), ids, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("agreement across conditions (share of the most common answer)")
    ax.legend(loc="lower right")
    shown.append(("Agreement before and after, per prompt", _png(fig)))

    fig, ax = plt.subplots(figsize=(7, height))
    margins = [p["min_margin"] if p["min_margin"] is not None else float("nan") for p in rows]
    colours = ["tab:red" if not p["answer_agrees"] else "tab:blue" for p in rows]
    ax.scatter(margins, list(x), c=colours, s=18)
    for dtype, floors in (audit.get("noise_floors") or {}).items():
        if floors:
            ax.axvline(max(floors.values()), linestyle="--", label=f"noise floor {dtype} (max over kinds)",
                       color="tab:orange" if "bfloat" in dtype else "tab:green")
    ax.set_yticks(list(x), ids, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlim(left=0)
    ax.set_xlabel("smallest top-1/top-2 margin (red: answers differed across conditions)")
    if audit.get("noise_floors"):
        ax.legend(loc="lower right", fontsize=7)
    shown.append(("Margins against the noise floor", _png(fig)))

    if "stabilized" in audit:
        fig, ax = plt.subplots(figsize=(7, height))
        ax.barh(list(x), [p["calls_per_answer"] for p in rows])
        ax.set_yticks(list(x), ids, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("model calls per answer (mean over conditions)")
        shown.append(("Calls per answer", _png(fig)))
    return shown


def _ballots_html(p: dict[str, Any], conditions: list[str]) -> str:
    """The <details> of one prompt: the raw text under each condition, then each accord run's ballots."""
    e = html.escape
    raw = "".join(
        f"<tr><td>{e(c)}</td><td><pre>{e(p['raw'][c]['text'])}</pre></td><td><code>{e(p['raw'][c]['answer'])}</code></td>"
        f"<td>{e(_num(p['raw'][c]['min_margin']))}</td></tr>"
        for c in conditions
    )
    runs = []
    for c, run in (p.get("stabilized") or {}).items():
        ballots = "".join(
            f"<tr><td>{e(c)}</td><td>{b['slot']}</td><td>{b['attempt']}</td><td>{e(b['status'])}</td><td><pre>{e(b['text'] or '')}</pre></td>"
            f"<td><code>{e(b['answer'])}</code></td></tr>"
            for b in run.get("ballots", ())
        )
        runs.append(f"<tr class='run'><td>{e(c)}</td><td colspan='5'>accord: <code>{e(run['answer'])}</code> after {run['calls']} calls"
                    f" ({e(run['stopped_because'])})</td></tr>{ballots}")
    stabilized = (
        "<table><tr><th>condition</th><th>slot</th><th>attempt</th><th>status</th><th>text</th><th>answer</th></tr>" + "".join(runs) + "</table>"
        if runs else ""
    )
    count = len(conditions) + sum(len(r.get("ballots", ())) for r in (p.get("stabilized") or {}).values())
    return (
        f"<details><summary>{count} texts: the raw call under each condition"
        f"{', then the ballots of each accord run' if runs else ''}</summary>"
        f"<table><tr><th>condition</th><th>raw text</th><th>answer</th><th>min margin</th></tr>{raw}</table>{stabilized}</details>"
    )


def render_html(audit: dict[str, Any]) -> str:
    """The self-contained page: headline table, plots, and one row per prompt whose ballots expand."""
    e = html.escape
    head = "".join(f"<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td></tr>" for a, b, c in headline_rows(audit))
    floors = "".join(
        f"<tr><td>{e(d)}</td><td>{e(', '.join(f'{k} {v:.3g}' for k, v in f.items()))}</td></tr>"
        for d, f in (audit.get("noise_floors") or {}).items()
    )
    figures = "".join(f"<h2>{e(title)}</h2><img alt='{e(title)}' src='{uri}'>" for title, uri in plots(audit))
    conditions = audit["conditions"]
    prompt_rows = []
    for p in audit["prompts"]:
        cells = "".join(f"<td><code>{e(p['raw'][c]['answer'])}</code></td>" for c in conditions)
        after = e(", ".join(sorted({s['answer'] for s in p.get("stabilized", {}).values()})))
        prompt_rows.append(
            f"<tr class='{'ok' if p['answer_agrees'] else 'bad'}' id='prompt-{e(p['id'])}'><td>{e(p['id'])}</td><td>{e(p['prompt'])}"
            f"{_ballots_html(p, conditions)}</td>"
            f"<td>{e(json.dumps(p['gold'], ensure_ascii=False)) if p['gold'] is not None else '-'}</td>{cells}<td><code>{after}</code></td></tr>"
        )
    condition_heads = "".join(f"<th>{e(c)}</th>" for c in conditions)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>accord audit</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px;vertical-align:top}}tr.bad{{background:#fde8e8}}img{{max-width:100%}}
details{{margin-top:4px}}summary{{cursor:pointer;color:#1a4f9c}}details table{{background:#fff;margin:4px 0}}
pre{{margin:0;white-space:pre-wrap;max-width:40em}}tr.run td{{background:#eef3fb}}</style>
</head><body>
<h1>accord audit</h1>
<p class="verdict"><strong>{e(verdict(audit))}</strong></p>
<p>{audit['prompts_audited']} prompts, {audit['n']} conditions: {e(', '.join(conditions))}. Model: {e(str(audit.get('model', '')))}.
TARr/TARa@N after Atil et al. 2024, "Non-Determinism of 'Deterministic' LLM Settings".</p>
<table><tr><th>metric</th><th>raw</th><th>stabilized (accord)</th></tr>{head}</table>
{'<h2>Noise floor per perturbation and dtype</h2><table>' + floors + '</table>' if floors else ''}
{figures}
<h2>Every prompt</h2>
<p>Open a prompt's texts to read what the model wrote under each condition and every ballot of accord's runs.</p>
<table id="prompts"><tr><th>id</th><th>prompt</th><th>gold</th>{condition_heads}<th>accord</th></tr>{''.join(prompt_rows)}</table>
</body></html>
"""


def audit(
    prompts: str = typer.Argument(..., help="PROMPTS.jsonl: one {prompt, id?, schema?, gold?} a line."),
    *,
    model: str = typer.Option("local", "--model", help="local | transformers:PATH | openai:BASE_URL"),
    model_name: str = typer.Option("", "--model-name", help="Over HTTP: the model name on the server."),
    schema: str = typer.Option("", "--schema", help="module:Model for lines without a schema (default: str)."),
    runs: int | None = typer.Option(None, "--runs", help="Over HTTP: concurrent repeated requests per prompt (default 5, at least 2)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Audit only the first N prompts of the file."),
    out: str = typer.Option("", "--out", help="Write report.json and a self-contained report.html here."),
    quick: bool = typer.Option(False, "--quick", help="Three conditions, few tokens."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Over HTTP: send each request alone, then among N requests of other lengths."),
) -> None:
    """Measure how much a model's answers fluctuate, raw and through accord (progress on stderr)."""
    from .._errors import AccordError

    try:
        audit_command(prompts, model, model_name or None, schema or None, runs=runs, out=out or None, quick=quick,
                      concurrency=concurrency, limit=limit)
    except AccordError as exc:
        typer.echo(f"accord audit: {exc}", err=True)
        raise typer.Exit(2) from None


def audit_command(
    prompts: str, model: str, model_name: str | None, schema: str | None, *, runs: int | None, out: str | None, quick: bool,
    concurrency: int | None = 0, limit: int | None = None,
) -> dict[str, Any]:
    """The whole ``accord audit`` run: options checked, load, both phases with progress, print, write.

    ``runs``, ``concurrency`` and ``model_name`` apply over HTTP only: checked there, and named on
    stderr as unused for a local model. ``limit``: the first N prompts only.
    """
    from rich.console import Console

    from .._types import Settings
    from . import _audit
    from ._audit_input import load_items

    http = model.partition(":")[0] == "openai"
    runs = _checked_options(http, runs, concurrency, model_name, limit)
    console = Console(stderr=True)
    items = load_items(prompts, schema)[:limit]
    loading = "" if http else " (loading a local model takes a while)"
    typer.echo(f"accord audit: {len(items)} prompt{'s' if len(items) != 1 else ''}; opening {model}{loading}", err=True)
    start = time.monotonic()
    target = _audit.open_target(model, model_name, quick=quick)
    typer.echo(f"accord audit: opened {target.label} in {time.monotonic() - start:.1f} s", err=True)
    tokens = _audit.QUICK_TOKENS if quick else _audit.FULL_TOKENS
    settings = Settings(max_tokens=tokens)
    if target.http is not None:
        raw, stable, floors = _http_phases(items, target.http, settings, tokens, n=runs if runs is not None else 5, spread=concurrency or 0)
    else:
        raw, stable, floors = _local_phases(items, list(target.conditions), settings, tokens)
    audit = _audit.summarize(items, raw, stable, floors)
    audit["model"] = target.label
    audit["max_tokens"] = tokens
    print_report(audit, Console())
    if out:
        js, page = write_reports(audit, Path(out))
        console.print(f"written: {js} and {page}")
    return audit


def _checked_options(http: bool, runs: int | None, concurrency: int | None, model_name: str | None, limit: int | None) -> int | None:
    """``runs`` as the audit uses it (5 over HTTP when not given), once the options are checked;
    the options that apply over HTTP only are named on stderr for a local model."""
    from .._errors import ConfigError

    if http:
        runs = 5 if runs is None else runs
        if runs < 2:
            raise ConfigError(f"--runs must be at least 2, got {runs}")
        if concurrency is not None and concurrency < 0:
            raise ConfigError(f"--concurrency must be 0 (all at once) or more, got {concurrency}")
    else:
        unused = [name for name, value in (("--runs", runs), ("--concurrency", concurrency), ("--model-name", model_name)) if value]
        for name in unused:
            typer.echo(f"accord audit: {name} applies over HTTP only (--model openai:URL); a local model runs each prompt "
                       "once per deployment condition", err=True)
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    return runs


def _http_phases(items: Sequence[Item], backend: Backend, settings: Settings, tokens: int, *, n: int, spread: int) -> Phases:
    """Both phases over HTTP (``n`` requests per prompt, alone and among ``spread``), and the server's noise floor."""
    from . import _audit

    with progress(len(items), f"raw: {n} requests, " + (f"alone and among {spread}" if spread else "concurrent")) as tick:
        raw = _audit.http_raw_phase(items, backend, n, settings, tick, concurrency=spread)
    with progress(len(items), "stabilized") as tick:
        stable = _audit.http_stabilized_phase(items, backend, n, tokens, tick, concurrency=spread)
    noise = backend.noise()
    floor = noise.floor if noise is not None and noise.learned is None else None  # a learned noise has no floor
    floors = {backend.dtype or "server": {"calibrated": floor}} if floor is not None and math.isfinite(floor) else {}
    return raw, stable, floors


def _local_phases(items: Sequence[Item], conditions: list[Condition], settings: Settings, tokens: int) -> Phases:
    """Both phases under every local deployment condition, and each condition's measured noise floor."""
    from . import _audit

    with progress(len(items) * len(conditions), "raw: every condition") as tick:
        raw = _audit.raw_phase(items, conditions, settings, tick)
    with progress(len(items) * len(conditions), "stabilized") as tick:
        stable = _audit.stabilized_phase(items, conditions, tokens, tick)
    typer.echo("accord audit: measuring the noise floors", err=True)
    return raw, stable, _audit.measured_floors(conditions)
