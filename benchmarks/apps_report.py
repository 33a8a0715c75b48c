"""The figures of benchmarks/apps.py, printed as tables and returned as JSON data.

Per schema: a table by deployment and arm; then TARa on the decisive fields across deployments
and loads, accord's median seconds against raw's, the carried fields whose ballots differed,
and which fields were decisive and which prose (and where that came from: the roles API, or the
FALLBACK rule of benchmarks/apps_fields.py until it lands). Then the issue's targets.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

import accord
from accord.cli._metrics import MISSING
from accord.read._canonical import canonical_form, canonical_key
from apps_data import App
from apps_fields import decisive_key, decisive_paths, gold_fields, normal_path, right_on_gold, roles_of, versions

PAIRS = (("embedded float32", "embedded bfloat16"), ("vLLM quiet", "vLLM loaded"))
TIME_RATIO, CALLS_EMBEDDED, CALLS_REFERENCE = 1.3, 1.3, 1.5  # the targets
OWN = "own, schema shown"  # benchmarks/apps.py's arm: the model's own unconstrained answer, the schema shown


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole}" if whole else "n/a"


def _cells(runs: dict[str, Any], app: App) -> dict[tuple[str, str], dict[str, Any]]:
    """{(deployment, arm): {item id: Outcome}} for this schema's inputs that were reached."""
    ids = {i["id"] for i in app.items}
    return {(dep, arm): {i: o for i, o in cells.items() if i in ids} for dep, run in runs.items() for arm, cells in run["outcomes"].items()}


def schema_figures(app: App, runs: dict[str, Any], default_bound: float | None) -> dict[str, Any]:
    schema = accord.Schema.of(app.model)
    roles, source = roles_of(schema)
    cells = _cells(runs, app)
    gold = {i["id"]: i["gold"] for i in app.items}
    paths = {i["id"]: decisive_paths(roles, [o.voted for c in cells.values() for k, o in c.items() if k == i["id"]]) for i in app.items}

    def key(item: str, outcome: Any) -> str:
        return decisive_key(schema, outcome.data, paths[item]) if outcome.data is not None else MISSING

    rows = []
    for (dep, arm), found in cells.items():
        outs = list(found.items())
        if not outs:
            continue
        n = len(outs)
        seconds = [o.seconds for _, o in outs]
        blocked = [i for i, o in outs if o.error == "NoConsensus" and _prose_blocked(schema, o.ballots, paths[i])]
        fields = [gold_fields(schema, gold[i], o.data) if o.data is not None else (0, gold_fields(schema, gold[i], {})[1]) for i, o in outs]
        rows.append({
            "deployment": dep, "arm": arm, "answers": n,
            "valid": sum(o.data is not None for _, o in outs),
            "right": sum(o.data is not None and right_on_gold(schema, gold[i], o.data) for i, o in outs),
            "gold_fields": [sum(r for r, _ in fields), sum(t for _, t in fields)],
            "serving_calls": sum(o.serving for _, o in outs) / n, "reference_calls": sum(o.reference for _, o in outs) / n,
            "referred": sum(o.reference > 0 for _, o in outs),
            "median_s": statistics.median(seconds), "p90_s": _p90(seconds),
            "gate": sum(o.stopped == "gate" for _, o in outs) if arm != "raw" else None,
            "errors": dict(Counter(o.error for _, o in outs if o.error)),
            "prose_blocked": blocked,
            "over_bound": None if default_bound is None else sum(s > default_bound for s in seconds),
            "carried": _carried(schema, roles, paths, outs) if arm != "raw" else {},
            "carried_from": "result.carried" if any(o.carried is not None for _, o in outs) else "measured from the valid ballots (FALLBACK)",
        })
    tara = []
    for a, b in PAIRS:
        for arm in sorted({arm for dep, arm in cells if dep == a} & {arm for dep, arm in cells if dep == b}):
            both = sorted(set(cells[(a, arm)]) & set(cells[(b, arm)]))
            split = [i for i in both if key(i, cells[(a, arm)][i]) != key(i, cells[(b, arm)][i])]
            failed = [i for i in both if cells[(a, arm)][i].data is None and cells[(b, arm)][i].data is None]
            if both:
                tara.append({"between": f"{a} / {b}", "arm": arm, "items": len(both), "agree": len(both) - len(split), "split": split,
                             "both_failed": failed})
    medians = {(r["deployment"], r["arm"]): r["median_s"] for r in rows}
    ratios = [{"deployment": dep, "arm": arm, "ratio": medians[(dep, arm)] / medians[(dep, "raw")]}
              for dep, arm in medians if arm != "raw" and (dep, "raw") in medians and medians[(dep, "raw")] > 0]
    decisive = sorted(p for p, r in roles.items() if r == "decisive")
    voted_auto = Counter(p for c in cells.values() for o in c.values() for p in {normal_path(v, roles) for v in o.voted or ()})
    return {"schema": app.model.__name__, "inputs": len(app.items), "roles_from": source, "roles": roles, "decisive": decisive,
            "prose": sorted(p for p, r in roles.items() if r == "prose"),
            "auto": {p: voted_auto.get(p, 0) for p, r in roles.items() if r == "auto"},
            "rows": rows, "tara": tara, "time_ratio": ratios}


def _prose_blocked(schema: accord.Schema[Any], ballots: list[Any], paths: tuple[str, ...]) -> bool:
    """Two or more valid ballots, one answer on every decisive field, apart elsewhere: prose split the vote."""
    whole = {canonical_key(canonical_form(b, schema.json_schema)) for b in ballots}
    return len(ballots) >= 2 and len({decisive_key(schema, b, paths) for b in ballots}) == 1 and len(whole) > 1


def _carried(schema: accord.Schema[Any], roles: dict[str, str], paths: dict[str, tuple[str, ...]], outs: list[tuple[str, Any]]) -> dict[str, list[int]]:
    """{carried path: [answers whose valid ballots differed there, answers with valid ballots]}: from
    ``result.carried`` when accord has it, else measured from the ballots (FALLBACK)."""
    found: dict[str, list[int]] = {}
    for item, o in outs:
        if not o.ballots:
            continue
        for path in (p for p in roles if p not in paths[item]):
            if o.carried is not None:
                counts = {normal_path(p, roles): n for p, n in o.carried.items()}
                differed = counts.get(path, 1) > 1
            else:
                differed = versions(schema, o.ballots, path) > 1
            tally = found.setdefault(path, [0, 0])
            tally[0] += differed
            tally[1] += 1
    return found


def _print_schema(app: App, f: dict[str, Any], default_bound: float | None) -> None:
    print(f"\n## {app.name}: {f['schema']}, {f['inputs']} inputs")
    marked = "the roles API (Schema.describe()['roles'])" if f["roles_from"] == "api" else (
        "FALLBACK rule (no roles API yet): decisive = every leaf but a free str named summary/bio/notes/task/description")
    print(f"roles, from {marked}:")
    print(f"  decisive: {', '.join(f['decisive']) or '-'}")
    print(f"  prose: {', '.join(f['prose']) or '-'}")
    if f["auto"]:
        print("  auto (voted in how many answers): " + ", ".join(f"{p} {n}" for p, n in f["auto"].items()))
    print("\n| deployment | arm | valid | right on gold (gold fields right) | calls per answer: serving + reference (referred) | s per answer: median / p90 | gate | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for r in f["rows"]:
        n = r["answers"]
        errors = ", ".join(f"{k} x{v}" for k, v in sorted(r["errors"].items())) or "-"
        if r["prose_blocked"]:
            errors += f" (NoConsensus with every decisive field agreed: {', '.join(r['prose_blocked'])})"
        gate = "-" if r["gate"] is None else _share(r["gate"], n)
        print(f"| {r['deployment']} | {r['arm']} | {_share(r['valid'], n)} | {_share(r['right'], n)} ({_share(*r['gold_fields'])}) | "
              f"{r['serving_calls']:.2f} + {r['reference_calls']:.2f} ({_share(r['referred'], n)}) | "
              f"{r['median_s']:.1f} / {r['p90_s']:.1f} | {gate} | {errors} |")
    for t in f["tara"]:
        split = f"; split: {', '.join(t['split'])}" if t["split"] else ""
        print(f"TARa on decisive fields, {t['between']}, {t['arm']}: {_share(t['agree'], t['items'])} "
              f"(both without an answer, counted as agreeing: {len(t['both_failed'])}{split})")
    for t in f["time_ratio"]:
        print(f"median seconds, {t['arm']} / raw, {t['deployment']}: {t['ratio']:.2f}x (target <= {TIME_RATIO}x: "
              f"{'met' if t['ratio'] <= TIME_RATIO else 'NOT met'})")
    bound = "no default time bound (accord.Budget().max_seconds is None)" if default_bound is None else f"the default time bound {default_bound:g} s"
    over = [f"{r['deployment']} {r['arm']} {r['over_bound']}" for r in f["rows"] if r["over_bound"]]
    print(f"answers over {bound}: {', '.join(over) or ('none' if default_bound is not None else 'n/a')}")
    for r in f["rows"]:
        if r["carried"]:
            print(f"carried fields, {r['deployment']}, {r['arm']}, answers whose ballots differed ({r['carried_from']}): "
                  + ", ".join(f"{p} {_share(d, n)}" for p, (d, n) in sorted(r["carried"].items())))


def show(apps: list[App], runs: dict[str, Any], default_bound: float | None) -> dict[str, Any]:
    """Print every schema's figures and the targets; return them as JSON data."""
    for name, run in runs.items():
        if run["left_out"]:
            print(f"{name}: {run['left_out']} inputs not reached within --seconds, left out of every figure")
    figures = {app.name: schema_figures(app, runs, default_bound) for app in apps}
    for app in apps:
        _print_schema(app, figures[app.name], default_bound)
    print("\n## targets (issues 36 and 42)")
    for line in targets(figures):
        print(f"- {line}")
    return figures


def targets(figures: dict[str, Any]) -> list[str]:
    rows = [dict(r, schema=s) for s, f in figures.items() for r in f["rows"]]
    tara = [dict(t, schema=s) for s, f in figures.items() for t in f["tara"] if t["arm"] == "accord"]
    verdict = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    lines = []
    blocked = sum(len(r["prose_blocked"]) for r in rows if r["arm"] != "raw")
    lines.append(f"prose the reason for NoConsensus: {blocked} answers: {verdict(blocked == 0)}")
    if tara:
        low = min(tara, key=lambda t: t["agree"] / t["items"] if t["items"] else 1)
        ok = all(t["agree"] == t["items"] for t in tara)
        failed = sum(len(t["both_failed"]) for t in tara)
        lines.append(f"accord TARa 100% on decisive fields: lowest {low['schema']} {low['between']} {_share(low['agree'], low['items'])} "
                     f"({failed} pairs without an answer on both sides counted as agreeing): {verdict(ok)}")
    for r in (r for r in rows if r["arm"] == "accord"):
        calls = r["serving_calls"] + r["reference_calls"]
        bound = CALLS_REFERENCE if r["deployment"].startswith("vLLM") else CALLS_EMBEDDED
        lines.append(f"calls per answer <= {bound}, {r['schema']} {r['deployment']}: {calls:.2f} "
                     f"(reference {r['reference_calls']:.2f}): {verdict(calls <= bound)}")
    by = {(r["schema"], r["deployment"], r["arm"]): r for r in rows}
    for (schema, dep, arm), r in by.items():
        raw = by.get((schema, dep, "raw"))
        if arm in ("raw", OWN) or raw is None:
            continue
        lines.append(f"{arm} valid >= raw's and right on gold >= raw's, {schema} {dep}: valid {r['valid']} vs {raw['valid']}, "
                     f"right {r['right']} vs {raw['right']} of {r['answers']}: {verdict(r['valid'] >= raw['valid'] and r['right'] >= raw['right'])}")
        own = by.get((schema, dep, OWN))
        if own is not None:  # issue 42: never less often right than the model's own best plain call
            lines.append(f"{arm} valid >= and right on gold >= the model's own answer with the schema shown, {schema} {dep}: valid "
                         f"{r['valid']} vs {own['valid']}, right {r['right']} vs {own['right']} (gold fields {_share(*r['gold_fields'])} vs "
                         f"{_share(*own['gold_fields'])}): {verdict(r['valid'] >= own['valid'] and r['right'] >= own['right'])}")
    return lines


def show_tasks(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The hidden-task kind of prompt: right on gold and calls per arm."""
    asked = len(next(iter(found.values()), {}))
    print(f"\n## the hidden-task kind of prompt ({asked} of the 20 named items of benchmarks/tasks.py, apps.TASK_IDS; vLLM quiet)")
    print("| arm | right on gold | valid | calls per answer: serving + reference (referred) |")
    print("|---|---|---|---|")
    figures = {}
    for arm, outs in found.items():
        n = len(outs) or 1
        f = {"right": sum(o["right"] for o in outs.values()), "valid": sum(o["data"] is not None for o in outs.values()), "answers": len(outs),
             "serving_calls": sum(o["serving"] for o in outs.values()) / n, "reference_calls": sum(o["reference"] for o in outs.values()) / n,
             "referred": sum(o["reference"] > 0 for o in outs.values()), "wrong": sorted(i for i, o in outs.items() if not o["right"])}
        figures[arm] = f
        print(f"| {arm} | {_share(f['right'], len(outs))} | {_share(f['valid'], len(outs))} | {f['serving_calls']:.2f} + "
              f"{f['reference_calls']:.2f} ({_share(f['referred'], len(outs))}) |")
    for arm, f in figures.items():
        if f["wrong"]:
            print(f"  {arm} wrong on: {', '.join(f['wrong'])}")
    if "raw" in figures:
        for arm in (a for a in figures if a != "raw"):
            ok = figures[arm]["right"] >= figures["raw"]["right"]
            print(f"- {arm} right on gold at least as often as one plain strict call: {figures[arm]['right']} vs "
                  f"{figures['raw']['right']}: {'met' if ok else 'NOT met'}")
    return figures
