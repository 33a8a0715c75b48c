"""accord against the peers, in one run: the same prompts under the same deployment conditions.

    python benchmarks/stability.py [--quick] [--limit N] [--conditions N] [--arms a,a2,...] [--png PATH] [--no-instructor] [--threads]

Over the shipped task set (benchmarks/tasks.py, 62 items, 5 kinds, gold answers, frozen before
tuning), with the embedded SmolLM2-135M-Instruct. Deployment conditions, the same for every arm:
float32 weights; bfloat16 weights; float32 with a batch neighbour (every call left-padded next to
a long prompt, ``condition=accord.Perturbation("batch", reference=None)``); ``--threads`` adds
float32 on one torch thread (on this project's CPU the thread count moved no logit, see ``accord
calibrate``, so it is left out by default). Arms:

  (a) raw greedy + json.loads     the schema rendered in the prompt, no grammar; ``json.loads`` of
                                  the whole text, validated against the schema
  (a2) raw greedy + accord's reader  the same texts as (a), read by accord's extract stage
                                  (``accord.read._read.read``: strict, then schema-aligned repairs)
  (b) constrained greedy          one outlines-constrained call (k=1, no retry, no perturbation)
  (c) constrained + retry         k=1, up to 3 attempts with validation feedback (what instructor does)
  (d) k=5 majority vote           every ballot runs, ballots 1-4 under accord's perturbations, no gate
  (e) accord default              ``Stabilizer(model, schema)``: early stop + margin gate
  (f) instructor, JSON mode       instructor in its own venv against ``transformers serve`` with the
                                  same model (float32 and bfloat16 servers; threads=1 with --threads)

Per arm: validity (share of answers that validate), TARa (share of items whose answer is the same
under every condition; Atil et al. 2024), accuracy against gold (min / mean / max over conditions),
calls per answer, and model time (the generation seconds of the calls the arm made, each measured
when it first ran). Answers are compared by canonical key, gold through the schema's canonical form.

Every generation is cached in ``.bench-cache/stability.json`` (JSON) by (condition, request as
sent, schema, settings, perturbation), so arms that send the same request share it and a rerun
costs little. ``--quick`` (2 conditions, 5 items, no instructor arm) runs in the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # servers.py: the test servers

import accord  # noqa: E402
import tasks  # noqa: E402
from accord._types import Settings  # noqa: E402
from accord.cli._metrics import MISSING, Spread, accuracy_by_condition, total_agreement  # noqa: E402
from accord.prompt._prompt import build_input  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from generations import Cache, Deployment  # noqa: E402
from peers import instructor_python  # noqa: E402

CACHE_DIR = ROOT / ".bench-cache"
MAX_TOKENS = 48  # the longest gold answer (a person) is about 30 tokens of JSON
SETTINGS = Settings(max_tokens=MAX_TOKENS)
CONDITIONS: dict[str, dict[str, Any]] = {
    "float32": {"dtype": "float32"},
    "bfloat16": {"dtype": "bfloat16"},
    "float32 + batch neighbour": {"dtype": "float32", "condition": accord.Perturbation("batch", reference=None)},
    "float32, threads=1": {"dtype": "float32", "threads": 1},  # only with --threads
}
QUICK_ITEMS = 5
DEFAULT_CONDITIONS = 3  # threads moved no logit on this CPU (accord calibrate: floor 0), at half the speed
ARMS = {
    "a": "raw greedy + json.loads",
    "a2": "raw greedy + accord's reader",
    "b": "constrained greedy (outlines)",
    "c": "constrained + retry with feedback",
    "d": "k=5 majority vote, perturbed",
    "e": "accord default (early stop + gate)",
    "f": "instructor, JSON mode",
}


# -- the arms --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One item under one condition, decided by one arm."""

    key: str | None  # canonical key of the valid answer, None when there is none
    error: str | None  # why not (a typed accord error's class name, or the parse failure)
    typed: bool  # the failure is an explicit typed error (an AccordError with the ballots)
    calls: int
    seconds: float


def schema_of(item: dict[str, Any]) -> accord.Schema[Any]:
    return accord.Schema(getattr(tasks, item["schema"].split(":")[1]))


def key_of(schema: accord.Schema[Any], data: Any) -> str:
    """The canonical key of JSON data under the schema (raises ValidationFailure if invalid)."""
    value = schema.validate(data)
    return canonical_key(canonical_form(schema.dump(value), schema.json_schema))


def raw_arm(model: Deployment, item: dict[str, Any]) -> Outcome:
    schema = schema_of(item)
    before = model.model_seconds
    text = model.unconstrained(build_input(item["prompt"], schema, hint=True, feedback=None), SETTINGS).text
    try:
        return Outcome(key_of(schema, json.loads(text)), None, False, 1, model.model_seconds - before)
    except (ValueError, accord.ValidationFailure) as exc:
        kind = "not JSON" if isinstance(exc, json.JSONDecodeError) else "invalid"
        return Outcome(None, kind, False, 1, model.model_seconds - before)


def reader_arm(model: Deployment, item: dict[str, Any]) -> Outcome:
    """Arm (a)'s text, read by accord's extract stage instead of json.loads (one call, no retry)."""
    from accord.read._read import Misreading, read

    schema = schema_of(item)
    before = model.model_seconds
    text = model.unconstrained(build_input(item["prompt"], schema, hint=True, feedback=None), SETTINGS).text
    reading = read(text, schema)
    if isinstance(reading, Misreading):
        return Outcome(None, reading.errors[0].get("type", reading.stage) if reading.errors else reading.stage, False, 1,
                       model.model_seconds - before)
    return Outcome(reading.key, None, False, 1, model.model_seconds - before)


def stabilizer_arm(**options: Any) -> Callable[[Deployment, dict[str, Any]], Outcome]:
    def arm(model: Deployment, item: dict[str, Any]) -> Outcome:
        stab = accord.Stabilizer(model, schema_of(item).source, max_tokens=MAX_TOKENS, **options)
        before = model.model_seconds
        try:
            result = stab.run(item["prompt"])
        except accord.AccordError as error:
            result = getattr(error, "result", None)
            if result is None:
                return Outcome(None, type(error).__name__, True, 0, model.model_seconds - before)
            return Outcome(None, type(error).__name__, True, result.calls, model.model_seconds - before)
        return Outcome(result.key, None, False, result.calls, model.model_seconds - before)

    return arm


LOCAL_ARMS: dict[str, Callable[[Deployment, dict[str, Any]], Outcome]] = {
    "a": raw_arm,
    "a2": reader_arm,
    "b": stabilizer_arm(vote=accord.Vote(k=1, gate=None), retry=accord.Retry(attempts=1), perturb=accord.Perturb(())),
    "c": stabilizer_arm(vote=accord.Vote(k=1, gate=None), retry=accord.Retry(attempts=3), perturb=accord.Perturb(())),
    "d": stabilizer_arm(vote=accord.Vote(k=5, early_stop=False, gate=None), on_no_consensus="plurality"),
    "e": stabilizer_arm(),
}


# -- (f) instructor, in its own venv, against transformers serve -----------------------------------

INSTRUCTOR_RETRIES = 2  # instructor makes max_retries + 1 attempts: 3 in all, as arm (c)
CHILD = r'''
import importlib.util, json, sys, time
import instructor, openai, pydantic
job = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("tasks", job["tasks"])
tasks = importlib.util.module_from_spec(spec); sys.modules["tasks"] = tasks  # so pydantic resolves `date`
spec.loader.exec_module(tasks)
client = instructor.from_openai(openai.OpenAI(base_url=job["url"], api_key="none", timeout=600), mode=instructor.Mode.JSON)
calls = [0]
client.on("completion:kwargs", lambda *a, **k: calls.__setitem__(0, calls[0] + 1))
for item in job["items"]:
    calls[0] = 0
    start = time.perf_counter()
    out = {"id": item["id"], "data": None, "error": None}
    schema = getattr(tasks, item["schema"])
    # instructor takes pydantic models: a bare type (a Literal) goes in a one-field model, the
    # way its docs wrap one, and comes out unwrapped.
    bare = not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel))
    model = pydantic.create_model("Answer", answer=(schema, ...)) if bare else schema
    try:
        answer = client.chat.completions.create(
            model=job["model"], messages=[{"role": "user", "content": item["prompt"]}],
            response_model=model, max_retries=job["retries"],
            max_tokens=job["max_tokens"], temperature=0)
        out["data"] = answer.answer if bare else answer.model_dump(mode="json")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    out.update(calls=calls[0], seconds=round(time.perf_counter() - start, 4))
    print(json.dumps(out, default=str), flush=True)
'''
SERVER_CONDITIONS = {  # what transformers serve can reproduce of the deployment conditions
    "float32": {"extra_args": ("--dtype", "float32")},
    "bfloat16": {"extra_args": ("--dtype", "bfloat16")},
    "float32, threads=1": {"extra_args": ("--dtype", "float32"), "threads": 1},
}


def instructor_arm(items: list[dict[str, Any]], conditions: list[str], cache: Cache) -> tuple[dict[tuple[str, str], Outcome], str | None]:
    """Outcomes by (item id, condition) for the conditions a server can reproduce, or a skip reason."""
    from servers import model_folder, serve

    outcomes: dict[tuple[str, str], Outcome] = {}
    settings = {"mode": "JSON", "retries": INSTRUCTOR_RETRIES, "max_tokens": MAX_TOKENS, "temperature": 0,
                "harness": 2}  # 2: the task module registered, so pydantic resolves Day's `date`
    for condition in conditions:
        if condition not in SERVER_CONDITIONS:
            continue
        keys = {item["id"]: Cache.digest("instructor", condition, item["prompt"], item["schema"], settings,
                                         *(["wrapped in a model"] if is_bare(item) else [])) for item in items}
        todo = [item for item in items if cache.get(keys[item["id"]]) is None]
        if todo:
            try:
                python = instructor_python()
                with serve(model_folder(), **SERVER_CONDITIONS[condition]) as server:  # type: ignore[arg-type]
                    job = {"url": server.url, "model": server.model, "tasks": str(Path(tasks.__file__).resolve()),
                           "retries": INSTRUCTOR_RETRIES, "max_tokens": MAX_TOKENS,
                           "items": [{"id": i["id"], "prompt": i["prompt"], "schema": i["schema"].split(":")[1]} for i in todo]}
                    done = subprocess.run([str(python), "-c", CHILD], input=json.dumps(job), capture_output=True, text=True, timeout=3600, check=False)
                    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
                    if not lines:
                        raise RuntimeError(f"the instructor script failed: {done.stderr.strip()[-300:]}")
                    for line in lines:
                        cache.put(keys[line["id"]], line)
                    cache.save()
            except Exception as exc:
                return {}, f"{type(exc).__name__}: {exc}"[:300]
        for item in items:
            entry = cache.get(keys[item["id"]])
            if entry is None:
                return {}, f"no answer for {item['id']} under {condition}"
            outcomes[(item["id"], condition)] = instructor_outcome(item, entry)
    return outcomes, None


def is_bare(item: dict[str, Any]) -> bool:
    """A schema that is not a pydantic model (instructor gets it wrapped in one)."""
    from pydantic import BaseModel

    schema = getattr(tasks, item["schema"].split(":")[1])
    return not (isinstance(schema, type) and issubclass(schema, BaseModel))


def instructor_outcome(item: dict[str, Any], entry: dict[str, Any]) -> Outcome:
    if entry["error"] is not None:
        return Outcome(None, entry["error"].split(":")[0], True, entry["calls"], entry["seconds"])
    try:
        return Outcome(key_of(schema_of(item), entry["data"]), None, False, entry["calls"], entry["seconds"])
    except accord.ValidationFailure:
        return Outcome(None, "invalid", False, entry["calls"], entry["seconds"])


# -- figures ---------------------------------------------------------------------------------------


@dataclass
class Figures:
    conditions: list[str]
    validity: float
    typed_failures: int
    failures: int
    tara: float
    accuracy: Spread
    calls: float
    seconds: float


def figures(outcomes: dict[tuple[str, str], Outcome], items: list[dict[str, Any]], conditions: list[str], gold: dict[str, str]) -> Figures:
    cells = [outcomes[(i["id"], c)] for i in items for c in conditions]
    answers = {c: [outcomes[(i["id"], c)].key or MISSING for i in items] for c in conditions}
    per_item = [[outcomes[(i["id"], c)].key or MISSING for c in conditions] for i in items]
    failed = [o for o in cells if o.key is None]
    accuracy = accuracy_by_condition(answers, [gold[i["id"]] for i in items])
    return Figures(
        conditions, 1 - len(failed) / len(cells), sum(o.typed for o in failed), len(failed), total_agreement(per_item),
        Spread.of(list(accuracy.values())), sum(o.calls for o in cells) / len(cells), sum(o.seconds for o in cells),
    )


def gold_key(item: dict[str, Any]) -> str:
    schema = schema_of(item)
    return canonical_key(canonical_form(schema.dump(schema.validate(item["gold"])), schema.json_schema))


def table(results: dict[str, Figures], skipped: dict[str, str], n_items: int) -> str:
    lines = [
        "| arm | validity | TARa across conditions | accuracy min / mean / max | calls per answer | model time |",
        "|---|---|---|---|---|---|",
    ]
    for arm, name in ARMS.items():
        if arm in skipped:
            lines.append(f"| ({arm}) {name} | skipped: {skipped[arm]} | | | | |")
            continue
        if arm not in results:
            continue
        f = results[arm]
        typed = f" ({f.typed_failures}/{f.failures} typed errors)" if f.failures else ""
        note = "" if len(f.conditions) == len(next(iter(results.values())).conditions) else f" (over {', '.join(f.conditions)})"
        lines.append(
            f"| ({arm}) {name} | {f.validity:.1%}{typed} | {f.tara:.1%}{note} | "
            f"{f.accuracy.minimum:.1%} / {f.accuracy.mean:.1%} / {f.accuracy.maximum:.1%} | {f.calls:.2f} | "
            f"{f.seconds:.0f} s ({f.seconds / (n_items * len(f.conditions)):.1f} s per answer) |"
        )
    return "\n".join(lines)


def targets(results: dict[str, Figures]) -> list[str]:
    e, a, d = results["e"], results["a"], results["d"]
    verdict = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    return [
        f"TARa 100%: {e.tara:.1%}: {verdict(e.tara == 1)}",
        f"validity 100% or an explicit typed error: {e.validity:.1%} valid, {e.typed_failures}/{e.failures} failures typed: "
        f"{verdict(e.failures == e.typed_failures)}",
        f"accuracy at least (a)'s best condition ({a.accuracy.maximum:.1%}): (e) worst condition {e.accuracy.minimum:.1%}, "
        f"mean {e.accuracy.mean:.1%}: {verdict(e.accuracy.minimum >= a.accuracy.maximum)}",
        f"calls per answer <= 1.5 while matching (d)'s TARa ({d.tara:.1%}): {e.calls:.2f} calls, TARa {e.tara:.1%}: "
        f"{verdict(e.calls <= 1.5 and e.tara >= d.tara)}",
    ]


def plot(results: dict[str, Figures], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(results)
    labels = [f"({a})\n{ARMS[a].split(' (')[0].replace(', ', chr(10)).replace(' + ', chr(10) + '+ ')}" for a in arms]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 1.3]})
    width = 0.27
    xs = range(len(arms))
    for offset, (name, values) in zip((-width, 0, width), (
        ("validity", [results[a].validity for a in arms]),
        ("TARa across conditions", [results[a].tara for a in arms]),
        ("accuracy (mean; bar: min-max)", [results[a].accuracy.mean for a in arms]),
    ), strict=False):
        bars = left.bar([x + offset for x in xs], [v * 100 for v in values], width, label=name)
        if name.startswith("accuracy"):
            # max(0, ...): the mean of equal accuracies can land a rounding error below the minimum
            low = [max(0.0, results[a].accuracy.mean - results[a].accuracy.minimum) * 100 for a in arms]
            high = [max(0.0, results[a].accuracy.maximum - results[a].accuracy.mean) * 100 for a in arms]
            left.errorbar([b.get_x() + width / 2 for b in bars], [v * 100 for v in values], yerr=[low, high], fmt="none", ecolor="black", capsize=3)
    left.set_xticks(list(xs), labels, fontsize=8)
    left.set_ylabel("%")
    left.set_ylim(0, 118)
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=3, framealpha=1)
    left.set_title(title, fontsize=10)
    right.bar(list(xs), [results[a].calls for a in arms], color="gray")
    right.axhline(1.5, color="red", linestyle="--", linewidth=1, label="target for (e): 1.5")
    right.set_xticks(list(xs), [f"({a})" for a in arms])
    right.set_ylabel("model calls per answer")
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the run ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 conditions, 5 items, no instructor arm (for the test suite)")
    parser.add_argument("--limit", type=int, default=None, help="only N items, spread over the kinds")
    parser.add_argument("--png", type=Path, default=CACHE_DIR / "stability.png", help="where the figure goes")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR / "stability.json", help="the generation cache (JSON)")
    parser.add_argument("--no-instructor", action="store_true", help="skip arm (f)")
    parser.add_argument("--threads", action="store_true", help="add the condition float32 on one thread")
    parser.add_argument("--conditions", type=int, default=None, help="only the first N deployment conditions")
    parser.add_argument("--arms", default=None, help="only these local arms, comma-separated (e.g. a,a2); implies --no-instructor")
    args = parser.parse_args(argv)
    local = dict(LOCAL_ARMS)
    if args.arms:
        wanted = args.arms.split(",")
        unknown = [a for a in wanted if a not in LOCAL_ARMS]
        if unknown:
            parser.error(f"unknown arms {unknown}; local arms are {list(LOCAL_ARMS)}")
        local = {a: LOCAL_ARMS[a] for a in wanted}
        args.no_instructor = True
    items = tasks.items()
    if args.quick:
        # One item in six from the fourth on: all five kinds. (From the first on, the sixth pick is
        # a person record whose string the model never closes: 3 growing retries per ballot under
        # every condition, 9 of the 13 minutes such a run took here; the full run has them all.)
        items = items[3::6][:QUICK_ITEMS]
    elif args.limit:
        items = [items[i * len(items) // args.limit] for i in range(min(args.limit, len(items)))]  # spread over the kinds
    conditions = list(CONDITIONS) if args.threads else list(CONDITIONS)[:DEFAULT_CONDITIONS]
    if args.conditions or args.quick:
        conditions = conditions[: args.conditions or 2]  # --quick: float32 and bfloat16
    cache = Cache(args.cache)
    gold = {item["id"]: gold_key(item) for item in items}
    start = time.perf_counter()
    print(f"{len(items)} items x {len(conditions)} conditions ({', '.join(conditions)}); "
          f"SmolLM2-135M-Instruct on {os.cpu_count()} CPUs, greedy, max_tokens={MAX_TOKENS}", flush=True)

    outcomes: dict[str, dict[tuple[str, str], Outcome]] = {arm: {} for arm in local}
    for condition in conditions:
        model = Deployment(condition, CONDITIONS[condition], cache)
        for n, item in enumerate(items, 1):
            for arm, decide in local.items():
                outcomes[arm][(item["id"], condition)] = decide(model, item)
            if n % 5 == 0 or n == len(items):
                cache.save()
                print(f"  {condition}: {n}/{len(items)} items ({time.perf_counter() - start:.0f} s)", flush=True)
        del model

    results = {arm: figures(outcomes[arm], items, conditions, gold) for arm in local}
    skipped: dict[str, str] = {}
    if args.quick:
        skipped["f"] = "not in --quick (it starts transformers serve once per condition); see the full run"
    elif args.no_instructor:
        skipped["f"] = "--no-instructor"
    else:
        print("  (f) instructor: starting transformers serve per condition ...", flush=True)
        found, reason = instructor_arm(items, conditions, cache)
        if reason is not None:
            skipped["f"] = reason
        else:
            served = [c for c in conditions if c in SERVER_CONDITIONS]
            results["f"] = figures(found, items, served, gold)
    cache.save()

    print(f"\n{len(items)} items x {len(conditions)} deployment conditions; generations cached: "
          f"{cache.hits} reused, {cache.misses} new\n")
    print(table(results, skipped, len(items)))
    print("\nmodel time: the generation seconds of the calls an arm made, each measured when it first ran "
          "(cached and shared generations keep their time); accord's own cost per ballot is microseconds "
          "(benchmarks/overhead.py).")
    for arm in local:
        failed = {}
        for o in outcomes[arm].values():
            if o.key is None:
                failed[o.error] = failed.get(o.error, 0) + 1
        if failed:
            print(f"  ({arm}) failures: " + ", ".join(f"{k} x{v}" for k, v in sorted(failed.items())))
    if all(arm in results for arm in ("a", "d", "e")):
        print("\ntargets for (e):")
        for line in targets(results):
            print(f"- {line}")
    plot(results, args.png, f"accord vs peers: {len(items)} items x {len(conditions)} conditions, SmolLM2-135M")
    print(f"\nfigure: {args.png}")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
