"""Every schema in bounded size and time (issue #28): what a schema costs before the model is asked.

    python benchmarks/schemas.py [--quick]

(The parsing tests import tests/data/malformed/schemas.py as ``schemas``: they put that folder
before benchmarks/ on the path, so this file does not shadow it.)

Over the real-world JSON Schemas of ../shared/jsonschemabench and the recursive models of
tests/recursive.py (trees, mutual recursion, unions of recursive models, a deep ``$defs``
chain, ``$ref`` graphs exponential when inlined), for each schema:

- construction plus first prompt: ``Schema(source)`` and the prompt with its schema hint
  (``build_input``), the hint cache cleared first, so each is the first rendering of its schema;
- prompt characters against the schema's compact JSON characters: the hint's form, its excess
  over the compact JSON (bound: at most 2,000), and the ratio;
- one run: ``Stabilizer(function, schema, budget=Budget(max_seconds=2)).run(...)`` with a
  function that answers a valid instance at once: runs over the budget + 1 s.

Then the recursive tree of the issue (``name``, ``kind``, ``children: list[Node]``,
``left``/``right: Node | None``, ``alt: Node | int | str | None``): its prompt characters and the
median seconds of a fresh ``Stabilizer(...).run("x")`` (3 ballots), in a process that has run
once already (imports done). Before #28: a 24,080,812-character prompt and 5.8 s a run.

The first construction of a JSON Schema dict in a process imports jsonschema (about 0.1 s; its
cost is measured by benchmarks/construction.py); it is made once before the figures. ``--quick``: every
tenth corpus schema, fewer tree runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from accord import AccordError, Budget, Schema, Stabilizer, Vote  # noqa: E402
from accord.prompt import _signature as signature  # noqa: E402
from accord.prompt._prompt import build_input  # noqa: E402
from recursive import SCHEMAS, Node  # noqa: E402

BENCH = ROOT.parent / "shared" / "jsonschemabench"
BUDGET = 2.0


def cases(step: int) -> list[tuple[str, Any, str]]:
    out: list[tuple[str, Any, str]] = []
    for path in sorted(BENCH.glob("*.json"))[::step]:
        case = json.loads(path.read_text())
        valid = next((t["data"] for t in case.get("tests", ()) if t.get("valid")), {})
        out.append((path.name, case["schema"], json.dumps(valid)))
    return out + SCHEMAS


def measure(source: Any, text: str) -> dict[str, Any]:
    signature._CACHE.clear()
    start = time.perf_counter()
    schema: Schema[Any] = Schema(source)
    prompt = build_input("x", schema, hint=True, feedback=None)
    first = time.perf_counter() - start
    stab = Stabilizer(lambda p: text, schema, vote=Vote(k=3), budget=Budget(max_seconds=BUDGET))
    start = time.perf_counter()
    with contextlib.suppress(AccordError):  # a run that ends in an error still counts its time
        stab.run("x")
    ran = time.perf_counter() - start
    hint = schema._hint
    return {"first": first, "run": ran, "prompt": len(prompt), "hint": len(hint.text), "schema": hint.schema_chars, "form": hint.form}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every tenth corpus schema, fewer tree runs")
    args = parser.parse_args()
    Schema({"type": "object"})  # jsonschema's import, once
    Stabilizer(lambda p: '{"name": "a"}', Node, vote=Vote(k=3)).run("warm")
    rows = [(name, measure(source, text)) for name, source, text in cases(10 if args.quick else 1)]
    firsts = [r["first"] for _, r in rows]
    excess = [r["hint"] - r["schema"] for _, r in rows]
    ratios = [r["hint"] / max(1, r["schema"]) for _, r in rows]
    over = [name for name, r in rows if r["run"] > BUDGET + 1.0]
    forms: dict[str, int] = {}
    for _, r in rows:
        forms[r["form"]] = forms.get(r["form"], 0) + 1
    slowest = max(rows, key=lambda row: row[1]["first"])
    corpus = len(rows) - len(SCHEMAS)
    print(f"schemas: {len(rows)} ({corpus} from jsonschemabench, {len(SCHEMAS)} recursive or deep)")
    print(f"construction + first prompt: p50 {quantile(firsts, 0.5) * 1e3:.1f} ms, p99 {quantile(firsts, 0.99) * 1e3:.1f} ms, "
          f"max {max(firsts) * 1e3:.1f} ms ({slowest[0]})   targets: p99 <= 50 ms, max <= 1 s")
    print(f"schema hint chars - schema compact JSON chars: p50 {quantile(excess, 0.5):+,.0f}, p99 {quantile(excess, 0.99):+,.0f}, "
          f"max {max(excess):+,}   bound: <= +2,000")
    print(f"schema hint chars / schema chars: p50 {quantile(ratios, 0.5):.2f}, p99 {quantile(ratios, 0.99):.2f}, max {max(ratios):.2f}")
    print(f"hint forms: {', '.join(f'{form} {n}' for form, n in sorted(forms.items(), key=lambda kv: -kv[1]))}")
    runs = [r["run"] for _, r in rows]
    print(f"one run (Budget(max_seconds={BUDGET:g})): p50 {quantile(runs, 0.5) * 1e3:.1f} ms, max {max(runs) * 1e3:.1f} ms; "
          f"over the budget + 1 s: {len(over)}{' ' + ', '.join(over) if over else ''}")
    signature._CACHE.clear()
    tree = Schema(Node).render()
    times = []
    for _ in range(5 if args.quick else 30):
        start = time.perf_counter()
        Stabilizer(lambda p: '{"name": "a"}', Node, vote=Vote(k=3)).run("x")
        times.append(time.perf_counter() - start)
    print(f"the recursive tree: prompt {len(tree):,} chars (target < 1,000), Stabilizer(...).run median "
          f"{statistics.median(times) * 1e3:.1f} ms over {len(times)} runs (target < 50 ms)")


if __name__ == "__main__":
    main()
