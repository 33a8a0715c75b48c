"""What the model is told: accord against the model's own best plain call, on two models.

    python benchmarks/told.py [--quick] [--models embedded,second,DEPLOYMENT,...] [--tasks short|choices] [--limit N] [--json PATH]

The shipped short tasks (benchmarks/tasks.py: sentiment, yes/no, integers, dates, people; 62 items
with gold; ``--tasks choices``: benchmarks/choice_tasks.py, 38 held-out choices) on the embedded
SmolLM2-135M-Instruct and on a second small instruct model the project never tuned to
(Qwen2.5-Coder-0.5B-Instruct, tests/second_model.py), both float32 and greedy, each
item by every arm:

  strict, prompt alone, spaced   one constrained call of the prompt alone, in one-line JSON
                                 (``{"answer": "no"}``): what accord sent a local model before
                                 issue 42, and what a grammar library does by default
  strict, schema shown, spaced   the same call with the schema shown in the prompt
  strict, schema shown           ... and in the model's own layout: accord's first ballot now
                                 (the baseline "one plain strict call")
  own, schema shown              the model's own unconstrained greedy text with the schema shown,
                                 read by accord's reader: the model's best plain call
  accord                         ``Stabilizer(model, schema)``, the default policy

A served deployment (a name of benchmarks/learned_noise.py's, such as ``vllm-f32-compact`` or
``llama.cpp-second``: started here as that benchmark starts it) runs the arms that exist over the
OpenAI wire, where the server's grammar takes the schema as a ``json_schema`` response_format:

  strict, prompt alone           one call of the prompt alone (the benchmarks' "one plain strict call")
  strict, schema shown           the same call with the schema shown in the prompt (accord's first ballot;
                                 a choice, which goes wrapped as ``{"answer": ...}``, is not listed)
  strict, rendering appended     the prompt with the schema's rendering appended, a choice's list too
                                 (what accord sent before it stopped listing a wrapped choice)
  accord                         ``Stabilizer(models.openai(url, model), schema)``, the default policy

The strict and own arms are one call each (``Vote(k=1, gate=None)``, ``Retry(attempts=1)``), read
by accord's reader (lenient extraction, then the schema). Printed per model and arm: right on gold
(in all and by kind), valid, calls per answer; the answers accord and the own arm give differently where the own arm's
is valid; the targets of issue 42 met or not. ``--quick`` (the suite): three items on the embedded
model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # second_model.py

import accord  # noqa: E402
import choice_tasks  # noqa: E402
import tasks  # noqa: E402
from accord._types import Completion, Request  # noqa: E402
from accord.backends._base import Backend  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from apps import Unconstrained, attempted  # noqa: E402

MODELS = ("embedded", "second")
STRICT_ALONE, STRICT_SPACED, STRICT, OWN, ACCORD = (
    "strict, prompt alone, spaced", "strict, schema shown, spaced", "strict, schema shown", "own, schema shown", "accord")
WIRE_ALONE = "strict, prompt alone"  # a served deployment's plain call
LISTED = "strict, rendering appended"  # ... with the schema's rendering appended, a choice's too (as before the wrapped-choice rule)
WIRE_MAX_TOKENS = 48  # as benchmarks/learned_noise.py


class Spaced(Backend):
    """The model constrained as before issue 42: one-line JSON, one space after ``,`` and ``:``."""

    constrains = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fingerprint = f"{inner.fingerprint} [spaced]"

    def generate(self, request: Request) -> Completion:
        return self.inner.generate(request, whitespace="spaced")  # type: ignore[no-any-return]


def load(name: str) -> Any:
    if name == "embedded":
        return accord.models.local(dtype="float32")
    import second_model

    return second_model.load()


def gold_key(schema: accord.Schema[Any], gold: Any) -> str:
    return canonical_key(canonical_form(schema.dump(schema.validate(gold)), schema.json_schema))


def arms(model: Any) -> dict[str, Callable[[Any], accord.Stabilizer[Any]]]:
    one = {"vote": accord.Vote(k=1, gate=None), "retry": accord.Retry(attempts=1)}
    alone = accord.Prompting(schema_in_prompt=False)
    spaced, own = Spaced(model), Unconstrained(model)
    return {
        STRICT_ALONE: lambda schema: accord.Stabilizer(spaced, schema, prompting=alone, **one),
        STRICT_SPACED: lambda schema: accord.Stabilizer(spaced, schema, **one),
        STRICT: lambda schema: accord.Stabilizer(model, schema, **one),
        OWN: lambda schema: accord.Stabilizer(own, schema, **one),
        ACCORD: lambda schema: accord.Stabilizer(model, schema),
    }


def served_arms(backend: Any) -> dict[str, Callable[[Any], accord.Stabilizer[Any]]]:
    """The arms over the OpenAI wire (the server's grammar takes the schema as response_format)."""
    one = {"vote": accord.Vote(k=1, gate=None), "retry": accord.Retry(attempts=1)}
    settings = accord.Settings(max_tokens=WIRE_MAX_TOKENS)
    alone = accord.Prompting(schema_in_prompt=False)
    return {
        WIRE_ALONE: lambda schema: accord.Stabilizer(backend, schema, prompting=alone, settings=settings, **one),
        LISTED: lambda schema: accord.Stabilizer(backend, schema, prompting=alone, settings=settings, **one),  # the prompt: run_arms
        STRICT: lambda schema: accord.Stabilizer(backend, schema, settings=settings, **one),
        ACCORD: lambda schema: accord.Stabilizer(backend, schema, settings=settings),
    }


def decide(stab: accord.Stabilizer[Any], prompt: str, gold: str) -> dict[str, Any]:
    result, error, seconds = attempted(stab, prompt)
    if result is None:
        return {"valid": False, "right": False, "calls": 0, "key": None, "error": error, "seconds": round(seconds, 2)}
    key = result.key if result.error is None else None
    return {"valid": key is not None, "right": key == gold, "calls": result.calls, "key": key,
            "error": type(result.error).__name__ if result.error is not None else None,
            "text": result.ballots[0].text if result.ballots else None, "seconds": round(seconds, 2)}


def run_model(name: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    if name not in MODELS:
        return run_served(name, items)
    begin = time.perf_counter()
    model = load(name)
    layout = model.layout  # the probe, untimed by the arms
    print(f"{name}: {model.fingerprint}, layout {layout} (loaded and probed in {time.perf_counter() - begin:.0f} s)", flush=True)
    return {"model": model.fingerprint, "layout": layout, **run_arms(name, arms(model), items, begin)}


def run_served(name: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The wire arms on a deployment started as benchmarks/learned_noise.py starts it, learning from nothing."""
    import tempfile

    from learned_noise import started

    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="accord-told-") as scratch, started(name) as up:
        if isinstance(up, str):
            raise SystemExit(f"{name}: not measured: {up}")
        before = os.environ.get("ACCORD_NOISE_FILE")
        os.environ["ACCORD_NOISE_FILE"] = str(Path(scratch) / "noise.json")  # learns from nothing, as learned_noise.py does
        url, model_name, took = up
        print(f"{name}: {model_name} at {url} (started in {took:.0f} s)", flush=True)
        backend = accord.models.openai(base_url=url, model=model_name, timeout=600.0)
        try:
            return {"model": f"{name}: {model_name}", "layout": "the server's", **run_arms(name, served_arms(backend), items, begin)}
        finally:
            backend.close()
            if before is None:
                os.environ.pop("ACCORD_NOISE_FILE", None)
            else:
                os.environ["ACCORD_NOISE_FILE"] = before


def run_arms(name: str, made: dict[str, Callable[[Any], accord.Stabilizer[Any]]], items: list[dict[str, Any]],
             begin: float) -> dict[str, Any]:
    stabilizers: dict[tuple[str, str], accord.Stabilizer[Any]] = {}
    rows: dict[str, dict[str, Any]] = {arm: {} for arm in made}
    for n, item in enumerate(items, 1):
        module, schema_name = item["schema"].split(":")
        source = getattr(choice_tasks if module == "choice_tasks" else tasks, schema_name)
        gold = gold_key(accord.Schema(source), item["gold"])
        for arm, make in made.items():
            stab = stabilizers.setdefault((arm, item["schema"]), make(source))
            prompt = f"{item['prompt']}\n\n{accord.Schema(source).render()}" if arm == LISTED else item["prompt"]
            rows[arm][item["id"]] = decide(stab, prompt, gold)
        if n % 10 == 0 or n == len(items):
            print(f"  {name}: {n}/{len(items)} items ({time.perf_counter() - begin:.0f} s)", flush=True)
    kinds = {item["id"]: item["kind"] for item in items}
    return {"rows": rows, "kinds": kinds, "seconds": round(time.perf_counter() - begin, 1)}


def report(name: str, found: dict[str, Any]) -> list[str]:
    rows = found["rows"]
    n = len(rows[ACCORD])
    print(f"\n{name}: {found['model']} (own layout: {found['layout']}), {n} items, {found['seconds']:.0f} s")
    print("| arm | right on gold | valid | calls per answer |")
    print("|---|---|---|---|")
    for arm, outs in rows.items():
        right, valid = sum(o["right"] for o in outs.values()), sum(o["valid"] for o in outs.values())
        calls = sum(o["calls"] for o in outs.values()) / max(1, n)
        print(f"| {arm} | {right}/{n} | {valid}/{n} | {calls:.2f} |")
    by_kind(rows, found.get("kinds") or {})
    figure = {arm: sum(o["right"] for o in outs.values()) for arm, outs in rows.items()}
    valid = {arm: sum(o["valid"] for o in outs.values()) for arm, outs in rows.items()}
    alone = STRICT_ALONE if STRICT_ALONE in rows else WIRE_ALONE
    moved = [i for i in rows[STRICT] if rows[STRICT][i]["key"] != rows[alone][i]["key"]]
    print(f"strict answers that moved when the schema was shown: {len(moved)} of {n}")
    if OWN not in rows:  # a served deployment: the plain call is the prompt alone
        return [f"{name}: accord right on gold >= one plain strict call (the prompt alone): {figure[ACCORD]} vs {figure[WIRE_ALONE]}: "
                f"{'met' if figure[ACCORD] >= figure[WIRE_ALONE] else 'NOT met'}; with the schema shown, one call: {figure[STRICT]}"]
    differ = [i for i, o in rows[OWN].items() if o["valid"] and rows[ACCORD][i]["key"] != o["key"]]
    print(f"answers accord gives otherwise than the own arm, where its answer is valid: {len(differ)} of {n}"
          + (f" ({', '.join(differ)})" if differ else ""))
    lines = [
        f"{name}: accord right on gold >= one plain strict call: {figure[ACCORD]} vs {figure[STRICT]}: "
        f"{'met' if figure[ACCORD] >= figure[STRICT] else 'NOT met'}",
        f"{name}: accord right on gold >= the model's own answer with the schema shown: {figure[ACCORD]} vs {figure[OWN]}: "
        f"{'met' if figure[ACCORD] >= figure[OWN] else 'NOT met'}",
        f"{name}: accord valid >= the own answer's: {valid[ACCORD]} vs {valid[OWN]}: {'met' if valid[ACCORD] >= valid[OWN] else 'NOT met'}",
    ]
    if name == "second":
        bound = 3 * n / 40
        lines.append(f"{name}: answers differing from the own arm's (valid): {len(differ)} of {n} (target at most {bound:.1f}): "
                     f"{'met' if len(differ) <= bound else 'NOT met'}")
    return lines


def by_kind(rows: dict[str, dict[str, Any]], kinds: dict[str, str]) -> None:
    """Right on gold per kind of task, one column per arm."""
    names = sorted(set(kinds.values()))
    if not names:
        return
    print("| kind | " + " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))
    for kind in names:
        ids = [i for i, k in kinds.items() if k == kind]
        print(f"| {kind} ({len(ids)}) | " + " | ".join(str(sum(outs[i]["right"] for i in ids if i in outs)) for outs in rows.values()) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three items on the embedded model (the test suite)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)}, or a deployment of benchmarks/learned_noise.py")
    parser.add_argument("--tasks", choices=("short", "choices"), default="short",
                        help="short: benchmarks/tasks.py (62 items); choices: benchmarks/choice_tasks.py (38 held-out choices)")
    parser.add_argument("--limit", type=int, default=None, help="only N items, evenly spread over the list (so over the kinds)")
    parser.add_argument("--json", type=Path, default=ROOT / ".bench-cache" / "told.json", help="where every outcome is written")
    args = parser.parse_args(argv)
    names = ["embedded"] if args.quick else args.models.split(",")
    from learned_noise import DEPLOYMENTS

    if unknown := set(names) - set(MODELS) - set(DEPLOYMENTS):
        parser.error(f"unknown models {sorted(unknown)}; models are {', '.join(MODELS + DEPLOYMENTS)}")
    items = tasks.items() if args.tasks == "short" else choice_tasks.items()
    limit = 3 if args.quick else args.limit
    if limit:
        items = [items[i * len(items) // limit] for i in range(min(limit, len(items)))]
    found = {name: run_model(name, items) for name in names}
    lines = [line for name in names for line in report(name, found[name])]
    print("\ntargets (issue 42):")
    for line in lines:
        print(f"- {line}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(found, indent=1, default=str, ensure_ascii=False))
    print(f"\noutcomes: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
