"""Margin-gated voting against plain k=5 voting, under two deployments of the embedded model.

    python benchmarks/gating.py [--quick] [--limit N]

Over the shipped task set (benchmarks/tasks.py, 62 prompts, frozen before tuning), each prompt
is decided by k=5 voting with perturbation ensembles, with and without the margin gate, in two
deployments: float32 weights and bfloat16 weights. Prints, per policy: mean calls per answer and
the agreement of the final answers between the two deployments; and the share of prompts that
are fragile (the gate found a step below the noise floor, or the perturbed ballots disagreed).
Targets: gated calls per answer <= 1.5; agreement 100% and no lower than ungated k=5's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tasks  # noqa: E402

import accord  # noqa: E402

POLICIES = {
    "k=5, gated": accord.Vote(k=5, gate=accord.MarginGate()),
    "k=5, ungated": accord.Vote(k=5),
}
DEPLOYMENTS = ("float32", "bfloat16")


def decide(model: Any, item: dict[str, Any], vote: accord.Vote) -> accord.Result[Any]:
    schema = getattr(tasks, item["schema"].split(":")[1])
    stab = accord.Stabilizer(model, schema, vote=vote, max_tokens=64)
    try:
        return stab.run(item["prompt"])
    except accord.AccordError as error:
        return error.result  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 prompts (for the test suite)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    args = parser.parse_args(argv)
    items = tasks.items()
    limit = 2 if args.quick else args.limit
    if limit:
        items = items[::max(1, len(items) // limit)][:limit]  # spread over the kinds
    start = time.perf_counter()
    keys: dict[tuple[str, str], list[str]] = {}
    calls: dict[tuple[str, str], list[int]] = {}
    fragile: list[bool] = []
    for dtype in DEPLOYMENTS:
        model = accord.models.local(dtype=dtype)
        floor = model.noise_floor()
        print(f"{dtype}: noise floor {floor:.3g} (max over perturbations)", flush=True)
        for name, vote in POLICIES.items():
            for item in items:
                result = decide(model, item, vote)
                keys.setdefault((name, dtype), []).append(result.key if result.error is None else "<failed>")
                calls.setdefault((name, dtype), []).append(result.calls)
                if dtype == "float32" and name == "k=5, gated":
                    uncertified = result.stopped_because != "gate"
                    fragile.append(uncertified)
            print(f"  {name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    n = len(items)
    print(f"\n{n} prompts, deployments {' and '.join(DEPLOYMENTS)}; fragile (not certified by the gate): "
          f"{sum(fragile)}/{n} = {sum(fragile) / n:.0%}")
    print("| policy | calls per answer (float32) | calls per answer (bfloat16) | agreement float32 vs bfloat16 |")
    print("|---|---|---|---|")
    figures = {}
    for name in POLICIES:
        a, b = keys[(name, "float32")], keys[(name, "bfloat16")]
        agreement = sum(x == y for x, y in zip(a, b)) / n
        per = [sum(calls[(name, d)]) / n for d in DEPLOYMENTS]
        figures[name] = (per, agreement)
        print(f"| {name} | {per[0]:.2f} | {per[1]:.2f} | {agreement:.0%} |")
    gated, ungated = figures["k=5, gated"], figures["k=5, ungated"]
    print(f"\ntargets: gated calls per answer <= 1.5: {'met' if max(gated[0]) <= 1.5 else 'NOT met'}; "
          f"agreement 100%: {'met' if gated[1] == 1 else 'NOT met'}; "
          f"no lower than ungated: {'met' if gated[1] >= ungated[1] else 'NOT met'}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
