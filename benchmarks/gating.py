"""Margin-gated voting against plain k=5 voting, under two deployments of the embedded model.

    python benchmarks/gating.py [--quick] [--limit N] [--cache PATH]

Over the shipped task set (benchmarks/tasks.py, 62 prompts, frozen before tuning), each prompt
is decided by k=5 voting with perturbation ensembles, with and without the margin gate, in two
deployments: float32 weights and bfloat16 weights. Prints, per policy: mean calls per accepted answer (and per
prompt, failed runs included) and the agreement of the final answers between the two deployments; how the gated runs stopped
(the gate after one call; "settled" once the ballots run predict the rest of the vote from the
measured floors, see accord.vote._predict; or a vote); whether each gated answer is the ungated
vote's; and the share of prompts that are fragile (the first ballot had a step below the noise
floor, the largest over the perturbations).
Targets: gated calls per answer <= 1.5; agreement 100% and no lower than ungated k=5's.

Generations are cached per deployment (``.bench-cache/gating.json``, see generations.py): the
gated and ungated policies share the ballots they both ask for, and a rerun costs little.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import accord  # noqa: E402 - after the sys.path line above, like the next two
import tasks  # noqa: E402 - beside this file, found through sys.path
from generations import Cache, Deployment  # noqa: E402 - beside this file, found through sys.path

POLICIES = {
    "k=5, gated": accord.Vote(k=5, gate=accord.MarginGate()),
    "k=5, ungated": accord.Vote(k=5, gate=None),
}
DEPLOYMENTS = ("float32", "bfloat16")
MAX_TOKENS = 64


def decide(model: Any, item: dict[str, Any], vote: accord.Vote) -> accord.Result[Any]:
    schema = getattr(tasks, item["schema"].split(":")[1])
    stab = accord.Stabilizer(model, schema, vote=vote, max_tokens=MAX_TOKENS)
    try:
        return stab.run(item["prompt"])
    except accord.AccordError as error:
        if error.result is None:  # not an error of the run (a configuration error): nothing to count
            raise
        return error.result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 prompts (for the test suite)")
    parser.add_argument("--limit", type=int, default=None, help="only N prompts, spread over the kinds")
    parser.add_argument("--cache", type=Path, default=HERE.parent / ".bench-cache" / "gating.json", help="the generation cache")
    args = parser.parse_args(argv)
    items = tasks.items()
    limit = 3 if args.quick else args.limit
    if limit:
        items = items[:: max(1, len(items) // limit)][:limit]  # spread over the kinds
    cache = Cache(args.cache)
    start = time.perf_counter()
    keys: dict[tuple[str, str], list[str | None]] = {}
    calls: dict[tuple[str, str], list[int]] = {}
    accepted: dict[tuple[str, str], list[bool]] = {}
    stops: dict[str, Counter[str]] = {dtype: Counter() for dtype in DEPLOYMENTS}
    fragile: dict[str, list[bool]] = {dtype: [] for dtype in DEPLOYMENTS}
    for dtype in DEPLOYMENTS:
        model = Deployment(dtype, {"dtype": dtype}, cache)
        print(f"{dtype}: noise floor {model.noise_floor():.3g} (largest over the perturbations), "
              f"float32 reference floor {model.reference_floor():.3g}", flush=True)
        for n, item in enumerate(items, 1):
            for name, vote in POLICIES.items():
                result = decide(model, item, vote)
                keys.setdefault((name, dtype), []).append(result.key if result.error is None else "<failed>")
                calls.setdefault((name, dtype), []).append(result.calls)
                accepted.setdefault((name, dtype), []).append(result.error is None)
                if name == "k=5, gated":
                    stops[dtype][result.stopped_because] += 1
                    fragile[dtype].append(bool(result.ballots and result.ballots[0].fragile_steps))
            if n % 10 == 0 or n == len(items):
                cache.save()
                print(f"  {dtype}: {n}/{len(items)} prompts ({time.perf_counter() - start:.0f} s)", flush=True)
    n = len(items)
    print(f"\n{n} prompts, deployments {' and '.join(DEPLOYMENTS)}; generations cached: {cache.hits} reused, {cache.misses} new")
    for dtype in DEPLOYMENTS:
        share = sum(fragile[dtype]) / n
        how = ", ".join(f"{reason} {count}" for reason, count in stops[dtype].most_common())
        print(f"{dtype}: fragile first ballot {sum(fragile[dtype])}/{n} = {share:.0%}; gated runs stopped by: {how}")
    print("\n| policy | calls per accepted answer (float32 / bfloat16) | calls per prompt, failures included | "
          "failed (no valid answer) | agreement float32 vs bfloat16 |")
    print("|---|---|---|---|---|")
    figures = {}
    for name in POLICIES:
        a, b = keys[(name, "float32")], keys[(name, "bfloat16")]
        agreement = sum(x == y for x, y in zip(a, b, strict=True)) / n
        per_accepted = [_mean([c for c, ok in zip(calls[(name, d)], accepted[(name, d)], strict=True) if ok]) for d in DEPLOYMENTS]
        per_prompt = [sum(calls[(name, d)]) / n for d in DEPLOYMENTS]
        failed = [accepted[(name, d)].count(False) for d in DEPLOYMENTS]
        figures[name] = (per_accepted, agreement)
        print(f"| {name} | {per_accepted[0]:.2f} / {per_accepted[1]:.2f} | {per_prompt[0]:.2f} / {per_prompt[1]:.2f} | "
              f"{failed[0]} / {failed[1]} | {agreement:.0%} |")
        for item, x, y in zip(items, a, b, strict=True):
            if x != y:
                print(f"    {name}: {item['id']} differs: float32 {x} / bfloat16 {y}")
    for dtype in DEPLOYMENTS:
        same = sum(x == y for x, y in zip(keys[("k=5, gated", dtype)], keys[("k=5, ungated", dtype)], strict=True))
        print(f"{dtype}: the gated answer is the ungated k=5 vote's on {same}/{n} prompts")
    gated, ungated = figures["k=5, gated"], figures["k=5, ungated"]
    print(f"\ntargets: gated calls per accepted answer <= 1.5: {'met' if max(gated[0]) <= 1.5 else 'NOT met'}; "
          f"agreement 100%: {'met' if gated[1] == 1 else 'NOT met'}; "
          f"no lower than ungated: {'met' if gated[1] >= ungated[1] else 'NOT met'}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else float("nan")


if __name__ == "__main__":
    sys.exit(main())
