"""What building a Stabilizer costs for a real JSON Schema, the first of a process and the rest (issue #33).

    python benchmarks/construction.py [--quick]

Over the 948 real-world JSON Schemas of ../shared/jsonschemabench, each in fresh processes:
``import accord``, then ``Stabilizer(function, schema)`` (the default policy) for every schema
in turn, each timed alone. Prints the seconds of the import, of the first construction of the
process (jsonschema's import and its format checkers, the meta-schemas, the first validator),
and p50 / p90 / max of the constructions after the first, with the slowest schema named.
Targets: after the first, p50 under 100 ms; the first under 1 s. Several processes each begin
with another schema (the first of the corpus, the largest, and others spread over it), so the
first is measured on more than one schema; the after-first figures are those of the process that
began with the first schema of the corpus.

Before #33 the first took 1.4 s here (5.6 s on a loaded machine): importing jsonschema built
the parsers of ``rfc3987_syntax`` (see ``accord.schema._formats``). ``--quick``: every tenth
schema, two processes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "jsonschemabench"
TARGET_P50 = 0.100
TARGET_FIRST = 1.0


def measure(names: list[str]) -> dict[str, Any]:
    """In this process: the import, then one construction per schema, in order (seconds each)."""
    sources = [json.loads((BENCH / name).read_text())["schema"] for name in names]
    start = time.perf_counter()
    import accord

    imported = time.perf_counter() - start
    times: list[float] = []
    refused: list[str] = []
    for name, source in zip(names, sources, strict=True):
        start = time.perf_counter()
        try:
            accord.Stabilizer(lambda prompt: "{}", source)
        except accord.AccordError as exc:
            refused.append(f"{name}: {type(exc).__name__}")
        times.append(time.perf_counter() - start)
    return {"import": imported, "times": times, "refused": refused}


def in_a_process(names: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--measure"], input=json.dumps(names), capture_output=True, text=True,
                          timeout=1200, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]  # one object printed


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every tenth schema, two processes")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # a child: names on stdin
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(json.loads(sys.stdin.read()))))
        return
    files = sorted(BENCH.glob("*.json"))
    if not files:
        raise SystemExit(f"no jsonschemabench data at {BENCH}")
    names = [p.name for p in files][:: 10 if args.quick else 1]
    largest = max(names, key=lambda name: (BENCH / name).stat().st_size)
    firsts = [names[0], largest] + ([] if args.quick else [names[len(names) // 4], names[len(names) // 2], names[3 * len(names) // 4]])
    runs = []
    for first in firsts:
        order = [first] + [name for name in names if name != first]
        runs.append((first, in_a_process(order)))
    main_run = runs[0][1]
    rest = main_run["times"][1:]
    slowest = max(range(1, len(names)), key=lambda i: main_run["times"][i])
    print(f"schemas: {len(names)} from jsonschemabench, {len(runs)} fresh processes; refused: {len(main_run['refused'])}"
          + (f" ({', '.join(main_run['refused'][:5])})" if main_run["refused"] else ""))
    imports = " / ".join(f"{r['import'] * 1e3:.0f}" for _, r in runs)
    print(f"import accord: {imports} ms")
    worst = max(r["times"][0] for _, r in runs)
    print("first Stabilizer of a process: " + ", ".join(f"{r['times'][0] * 1e3:.0f} ms ({first})" for first, r in runs)
          + f"   target < {TARGET_FIRST:g} s: {'met' if worst < TARGET_FIRST else 'NOT MET'} (max {worst * 1e3:.0f} ms)")
    p50 = quantile(rest, 0.5)
    print(f"after the first: p50 {p50 * 1e3:.2f} ms, p90 {quantile(rest, 0.9) * 1e3:.2f} ms, max {max(rest) * 1e3:.1f} ms "
          f"({names[slowest]}, {(BENCH / names[slowest]).stat().st_size:,} bytes)   target p50 < {TARGET_P50 * 1e3:g} ms: "
          f"{'met' if p50 < TARGET_P50 else 'NOT MET'}")


if __name__ == "__main__":
    main()
