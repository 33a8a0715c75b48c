"""accord on the schemas applications write: four of them, on two local models and on vLLM.

    python benchmarks/apps.py [--quick] [--only embedded,second,vllm,tasks] [--limit N] [--apps tickets,...]
                              [--dtypes float32,bfloat16] [--load 16] [--seconds S] [--compact]
                              [--base-url URL --model NAME] [--json PATH] [--report PATH]

The schemas and their inputs (benchmarks/apps_data: ticket triage, an invoice, a person profile,
meeting notes; 42 inputs with gold, frozen before the first run) are decided under these
deployments, each input by every arm:

  embedded float32, embedded bfloat16   ``accord.models.local(dtype=...)``, one after the other
  second                                a second small instruct model the project never tuned to,
                                        Qwen2.5-Coder-0.5B-Instruct in float32 (tests/second_model.py)
  vLLM quiet, vLLM loaded               the project's vLLM (tests/servers.py ``serve_vllm``, bfloat16)
                                        started as users start it, WITHOUT the compact-JSON flag
                                        (``--compact`` adds it); loaded: ``--load`` (16) other
                                        requests always in flight (benchmarks/vllm.py's Load)

Arms, every call greedy, at the backend's default ``max_tokens``:

  raw                    one strict call, read strictly (``json.loads``, then the schema): on a
                         local model one constrained ``generate`` of the request accord's first
                         ballot sends (the schema shown, the model's own layout); on vLLM one call
                         with the schema as a strict ``response_format`` and the prompt alone
  own, schema shown      on a local model: its own unconstrained greedy text with the schema shown,
                         read by accord's reader (``Vote(k=1, gate=None)``, ``Retry(attempts=1)``):
                         the model's best plain call, which accord must never be less often right than
  accord                 ``Stabilizer(model, schema=M)``, the default policy; on vLLM through
                         ``models.openai(..., reference=models.local(dtype="float32"))``
  accord, no reference   on vLLM only: ``models.openai(...)`` without a reference

Printed per schema, deployment and arm (benchmarks/apps_report.py): valid %, right on gold,
calls per answer (serving and reference apart, the share of answers referred), seconds per
answer (median, p90; accord's median against raw's, target 1.3x), answers over
``accord.Budget().max_seconds``, the share the gate settled, typed errors by type and the
NoConsensus whose valid ballots agreed on every decisive field (prose the cause); TARa on the
decisive fields between float32 and bfloat16 and between quiet and loaded; for each carried
field the share of answers whose ballots differed; which fields were decisive and which prose.

``tasks``: the hidden-task kind of prompt (short extraction and classification), 20 named items
of benchmarks/tasks.py (:data:`TASK_IDS`), quiet on the same vLLM: right on gold of one plain
strict ``response_format`` call, accord with the float32 reference, accord without.

``--quick`` (the test suite): the first input of the ticket schema (:data:`QUICK_APPS`;
``--apps`` names others), embedded float32 only. ``--seconds``
bounds each deployment: inputs not reached in it are left out of every figure (and counted).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # servers.py: the test servers

import accord  # noqa: E402
import apps_report  # noqa: E402
import tasks  # noqa: E402
from accord._types import Completion, Request, Settings  # noqa: E402
from accord.backends._base import Backend  # noqa: E402
from accord.prompt._prompt import build_input  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from apps_data import APPS, App  # noqa: E402

CACHE_DIR = ROOT / ".bench-cache"
REUSE_URL, REUSE_MODEL = "ACCORD_TEST_VLLM_URL", "ACCORD_TEST_VLLM_MODEL"
SECTIONS = ("embedded", "second", "vllm", "tasks")
OWN = apps_report.OWN  # the model's own unconstrained answer, the schema shown: its best plain call
VLLM_DTYPE = "bfloat16"
QUICK_APPS = ("tickets",)  # --quick: a ticket (prose, labels); invoices' line items are runaway.py's
TASK_IDS = tuple(f"{kind}-{n}" for kind in ("sentiment", "yesno", "integer", "date", "person") for n in range(4))


@dataclass
class Outcome:
    """One input decided by one arm under one deployment."""

    data: Any  # the valid answer's JSON data (schema.dump), None when there is none
    error: str | None  # why not: a typed accord error's class name, or "not JSON" / "invalid" / "cut at max_tokens"
    typed: bool  # the failure is a typed accord error
    serving: int  # calls to the serving deployment
    reference: int  # calls to the reference
    seconds: float  # wall time of the answer
    stopped: str | None = None  # result.stopped_because (accord arms)
    voted: list[str] | None = None  # result.voted, when accord has it
    carried: dict[str, int] | None = None  # result.carried, when accord has it
    ballots: list[Any] = field(default_factory=list)  # the valid ballots' JSON data (accord arms)
    trail: list[str] = field(default_factory=list)  # each call in a few words: what a reader checks first


def strict(schema: accord.Schema[Any], text: str, finish: str | None, seconds: float, wrapped: bool = False) -> Outcome:
    """A raw call's text read strictly: ``json.loads``, then the schema (a wrapped bare type: its ``answer``)."""
    try:
        data = json.loads(text)
        if wrapped:
            data = data["answer"] if isinstance(data, dict) and set(data) == {"answer"} else {"not wrapped": data}
        return Outcome(schema.dump(schema.validate(data)), None, False, 1, 0, seconds, trail=[f"{finish} {len(text)} chars"])
    except (ValueError, accord.ValidationFailure) as exc:
        why = "cut at max_tokens" if finish == "length" else "not JSON" if isinstance(exc, json.JSONDecodeError) else "invalid"
        return Outcome(None, why, False, 1, 0, seconds, trail=[f"{finish} {len(text)} chars: {text[:300]!r}"])


def attempted(stab: accord.Stabilizer[Any], prompt: str) -> tuple[accord.Result[Any] | None, str | None, float]:
    """One accord run: its Result (a typed error's too; None when the error holds none), the error's
    class name when there is no Result, and the seconds it took."""
    start = time.perf_counter()
    try:
        return stab.run(prompt), None, time.perf_counter() - start
    except accord.AccordError as exc:
        return getattr(exc, "result", None), type(exc).__name__, time.perf_counter() - start


def decided(schema: accord.Schema[Any], stab: accord.Stabilizer[Any], prompt: str) -> Outcome:
    """One accord run; a typed error's Result is kept."""
    result, error, seconds = attempted(stab, prompt)
    if result is None:
        return Outcome(None, error, True, 0, 0, seconds)
    reference = sum(1 for b in result.ballots if b.meta.get("deployment") == "reference")
    valid = [schema.dump(b.value) for b in result.ballots if b.status == "valid" and b.value is not None]
    voted, carried = getattr(result, "voted", None), getattr(result, "carried", None)  # the roles API (issue 36), once it lands
    return Outcome(None if result.error is not None else result.data, None if result.error is None else type(result.error).__name__,
                   result.error is not None, len(result.ballots) - reference, reference, seconds, result.stopped_because,
                   None if voted is None else list(voted), None if carried is None else dict(carried), valid,
                   [_said(b) for b in result.ballots])


def _said(ballot: accord.Ballot) -> str:
    """One call in a few words: slot/attempt, where it ran, status, finish, seconds, the error's first words."""
    where = ballot.meta.get("deployment") or "serving"
    error = ballot.error or {}
    why = (" loop" if error.get("loop") else "") + (f" {error.get('stage')}: {str(error.get('message', ''))[:100]}" if error else "")
    return (f"{ballot.slot}.{ballot.attempt} {where} {ballot.status} {ballot.finish_reason} {ballot.seconds:.1f}s "
            f"{len(ballot.text or '')} chars{why}")


# -- the arms ---------------------------------------------------------------------------------------

Arm = Callable[[App, dict[str, Any]], Outcome]


def local_arms(model: Any) -> dict[str, Arm]:
    stabilizers: dict[Any, accord.Stabilizer[Any]] = {}

    def raw(app: App, item: dict[str, Any]) -> Outcome:
        schema, prompt = accord.Schema.of(app.model), app.prompt(item)
        # The request accord's first ballot sends: the schema shown in the prompt (on every backend,
        # run/_loop.py), decoded in the model's own layout, at the default max_tokens.
        request = Request(prompt, build_input(prompt, schema, hint=True, feedback=None), schema, Settings())
        start = time.perf_counter()
        try:
            completion = model.generate(request)
        except accord.AccordError as exc:
            return Outcome(None, type(exc).__name__, True, 1, 0, time.perf_counter() - start)
        return strict(schema, completion.text or "", completion.finish_reason, time.perf_counter() - start)

    def own(app: App, item: dict[str, Any]) -> Outcome:
        """The model's own unconstrained greedy text with the schema shown, read by accord's reader."""
        if (app.name, "own") not in stabilizers:
            stabilizers[(app.name, "own")] = accord.Stabilizer(Unconstrained(model), schema=app.model, vote=accord.Vote(k=1, gate=None),
                                                               retry=accord.Retry(attempts=1))  # fmt: skip
        stab = stabilizers[(app.name, "own")]
        return decided(stab.schema, stab, app.prompt(item))

    def stabilized(app: App, item: dict[str, Any]) -> Outcome:
        if app.name not in stabilizers:
            stabilizers[app.name] = accord.Stabilizer(model, schema=app.model)
        return decided(stabilizers[app.name].schema, stabilizers[app.name], app.prompt(item))

    return {"raw": raw, OWN: own, "accord": stabilized}


class Unconstrained(Backend):
    """A local model's own text: greedy, no grammar (``TransformersBackend.unconstrained``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fingerprint = f"{inner.fingerprint} [unconstrained]"
        self.default_max_tokens = inner.default_max_tokens

    def generate(self, request: Request) -> Completion:
        return self.inner.unconstrained(request.input, request.settings)  # type: ignore[no-any-return]


def http_arms(url: str, name: str, reference: Any) -> dict[str, Arm]:
    import openai

    from accord.backends.openai import _wire as wire

    client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
    with_ref = accord.models.openai(base_url=url, model=name, margins=accord.models.Margins(dtype_label=VLLM_DTYPE), reference=reference, timeout=600.0)
    plain = accord.models.openai(base_url=url, model=name, margins=accord.models.Margins(dtype_label=VLLM_DTYPE), timeout=600.0)
    stabilizers: dict[tuple[str, int], accord.Stabilizer[Any]] = {}

    def raw(app: App, item: dict[str, Any]) -> Outcome:
        schema, prompt = accord.Schema.of(app.model), app.prompt(item)
        fmt, wrapped = wire.format_for(schema)
        start = time.perf_counter()
        response = client.chat.completions.create(model=name, temperature=0, max_tokens=plain.default_max_tokens, response_format=fmt,
                                                  messages=[{"role": "user", "content": build_input(prompt, schema, hint=False, feedback=None)}])
        choice = response.choices[0]
        return strict(schema, choice.message.content or "", choice.finish_reason, time.perf_counter() - start, wrapped)

    def through(backend: Any) -> Arm:
        def arm(app: App, item: dict[str, Any]) -> Outcome:
            key = (app.name, id(backend))
            if key not in stabilizers:
                stabilizers[key] = accord.Stabilizer(backend, schema=app.model)
            return decided(stabilizers[key].schema, stabilizers[key], app.prompt(item))

        return arm

    return {"raw": raw, "accord": through(with_ref), "accord, no reference": through(plain)}


# -- the run ----------------------------------------------------------------------------------------


def warm(model: Any, apps: list[App]) -> float:
    """Untimed: torch's first generation, and each schema's grammar compiled (cached per schema), so
    neither lands on whichever arm happens to run first. Returns the seconds it took."""
    start = time.perf_counter()
    constrainer = getattr(model, "constrainer", None)  # the local backend's (not on the declared Backend surface)
    for app in apps:
        layouts = (model.layout, "compact", "free") if constrainer is not None else ()  # its own (the probe), as a reference decodes
        for whitespace in layouts:
            constrainer.processor(accord.Schema.of(app.model), whitespace)
    schema = accord.Schema.of(tasks.YesNo)
    model.generate(Request("Is water wet?", "Is water wet?", schema, Settings(max_tokens=8)))
    return time.perf_counter() - start


def run_deployment(name: str, arms: dict[str, Arm], apps: list[App], seconds: float | None, into: dict[str, Any]) -> None:
    """Every input of every schema, each by every arm, until the time bound (then the rest is left out)."""
    begin = time.perf_counter()
    cells: dict[str, dict[str, dict[str, Any]]] = {arm: {} for arm in arms}
    left = 0
    for app in apps:
        for item in app.items:
            if seconds is not None and time.perf_counter() - begin > seconds:
                left += 1
                continue
            for arm, decide in arms.items():
                cells[arm][item["id"]] = decide(app, item)
        print(f"  {name}: {app.name} done ({time.perf_counter() - begin:.0f} s)", flush=True)
    into[name] = {"outcomes": cells, "left_out": left, "seconds": time.perf_counter() - begin}


def load_class() -> Any:
    """benchmarks/vllm.py's ``Load`` (loaded by path: a module named ``vllm`` would shadow the real one)."""
    spec = importlib.util.spec_from_file_location("accord_bench_vllm", Path(__file__).resolve().parent / "vllm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.Load


@contextlib.contextmanager
def vllm_server(args: argparse.Namespace) -> Iterator[tuple[str, str, str] | None]:
    """(url, model, how it runs), or None when vLLM is skipped (ACCORD_SKIP_VLLM=1, model not installed)."""
    if args.base_url:
        import openai

        name = args.model or openai.OpenAI(base_url=args.base_url, api_key="none").models.list().data[0].id
        yield args.base_url, name, f"a running server, {args.base_url} (its JSON format as it was started)"
        return
    if os.environ.get("ACCORD_SKIP_VLLM") == "1":
        print("vllm: skipped, ACCORD_SKIP_VLLM=1")
        yield None
        return
    from servers import model_folder, serve_vllm

    try:
        folder = model_folder()
    except accord.ModelNotInstalled as exc:
        print(f"vllm: skipped, {exc}")
        yield None
        return
    with serve_vllm(folder, dtype=VLLM_DTYPE, compact_json=args.compact) as server:
        how = "with" if args.compact else "without"
        yield server.url, server.model, f"vLLM {VLLM_DTYPE} started in {server.started_in:.0f} s, {how} the compact-JSON flag"


def task_outcomes(arms: dict[str, Arm], items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The hidden-task kind of prompt: each item by each arm, right on gold or not."""
    found: dict[str, dict[str, Any]] = {arm: {} for arm in arms}
    for item in items:
        model = getattr(tasks, item["schema"].split(":")[1])
        app = App(item["id"], model, "", ({"id": item["id"], "text": item["prompt"]},))
        schema = accord.Schema.of(model)
        gold = _key(schema, schema.dump(schema.validate(item["gold"])))
        for arm, decide in arms.items():
            outcome = decide(app, app.items[0])
            found[arm][item["id"]] = {**asdict(outcome), "right": outcome.data is not None and _key(schema, outcome.data) == gold}
    return found


def reprint(path: Path) -> int:
    """The figures of a stored run, computed again from its outcomes (the roles as accord has them now)."""
    stored = json.loads(path.read_text())
    runs = {name: {"left_out": run["left_out"], "seconds": run["seconds"],
                   "outcomes": {arm: {i: Outcome(**o) for i, o in cells.items()} for arm, cells in run["outcomes"].items()}}
            for name, run in stored["runs"].items()}
    ids = {name: set(found) for name, found in stored["apps"].items()}
    apps = [App(a.name, a.model, a.instruction, tuple(i for i in a.items if i["id"] in ids[a.name])) for a in APPS if a.name in ids]
    if runs:
        apps_report.show(apps, runs, default_bound=getattr(accord.Budget(), "max_seconds", None))
    if "tasks" in stored:
        apps_report.show_tasks(stored["tasks"]["outcomes"])
    return 0


def _key(schema: accord.Schema[Any], data: Any) -> str:
    return canonical_key(canonical_form(data, schema.json_schema))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"the first input of {' and '.join(QUICK_APPS)} (or --apps), embedded float32 only")
    parser.add_argument("--only", default=None, help=f"comma-separated sections, of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N inputs of each schema (and N hidden tasks)")
    parser.add_argument("--apps", default=None, help=f"only these schemas, of {', '.join(a.name for a in APPS)}")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="the embedded deployments (default float32,bfloat16)")
    parser.add_argument("--load", type=int, default=16, help="requests in flight beside each call when loaded (default 16)")
    parser.add_argument("--seconds", type=float, default=None, help="time bound per deployment: inputs not reached are left out")
    parser.add_argument("--compact", action="store_true", help="start vLLM with the compact-JSON flag (default: as users start it, without)")
    parser.add_argument("--base-url", default=None, help="measure a running vLLM instead of starting one")
    parser.add_argument("--model", default=None, help="the model name on --base-url")
    parser.add_argument("--json", type=Path, default=CACHE_DIR / "apps.json", help="where the figures and every outcome are written")
    parser.add_argument("--report", type=Path, default=None, help="print the figures of a run's --json again (nothing is run)")
    args = parser.parse_args(argv)
    if args.report is not None:
        return reprint(args.report)
    sections = ["embedded"] if args.quick else (args.only.split(",") if args.only else list(SECTIONS))
    if unknown := set(sections) - set(SECTIONS):
        parser.error(f"unknown sections {sorted(unknown)}; sections are {', '.join(SECTIONS)}")
    dtypes = ["float32"] if args.quick else args.dtypes.split(",")
    wanted = args.apps.split(",") if args.apps else list(QUICK_APPS) if args.quick else [a.name for a in APPS]
    if unknown := set(wanted) - {a.name for a in APPS}:
        parser.error(f"unknown schemas {sorted(unknown)}; schemas are {', '.join(a.name for a in APPS)}")
    limit = 1 if args.quick else args.limit
    apps = [App(a.name, a.model, a.instruction, a.items[:limit] if limit else a.items) for a in APPS if a.name in wanted]
    begin = time.perf_counter()
    runs: dict[str, Any] = {}
    report: dict[str, Any] = {"apps": {a.name: [i["id"] for i in a.items] for a in apps}, "sections": sections}
    print(f"apps: {', '.join(f'{a.name} ({len(a.items)})' for a in apps)}; SmolLM2-135M-Instruct (and second: Qwen2.5-Coder-0.5B-Instruct) "
          f"on {os.cpu_count()} CPUs; "
          f"sections: {', '.join(sections)}", flush=True)
    if "embedded" in sections:
        for dtype in dtypes:
            model = accord.models.local(dtype=dtype)
            print(f"  embedded {dtype}: warmed up in {warm(model, apps):.0f} s (untimed: first generation, grammars compiled)", flush=True)
            run_deployment(f"embedded {dtype}", local_arms(model), apps, args.seconds, runs)
            del model
    if "second" in sections:  # a second small instruct model the project never tuned to (tests/second_model.py)
        import second_model

        model = second_model.load()
        print(f"  second ({model.fingerprint}, float32): warmed up in {warm(model, apps):.0f} s", flush=True)
        run_deployment(f"second {second_model.MODEL_ID}", local_arms(model), apps, args.seconds, runs)
        del model
    task_found: dict[str, Any] | None = None
    if "vllm" in sections or "tasks" in sections:
        reference = accord.models.local(dtype="float32")  # loaded before the cache dir moves (its converted folder is the user's)
        os.environ["ACCORD_CACHE_DIR"] = str(CACHE_DIR / "accord")  # floors learned for a fresh server's port stay here
        with vllm_server(args) as server:
            if server is not None:
                url, name, how = server
                print(f"vllm: {how}", flush=True)
                report["vllm"] = how
                arms = http_arms(url, name, reference)
                begin_warm = time.perf_counter()
                warm(reference, apps)
                for app in apps:  # the server's first request and its grammar for each schema, untimed
                    arms["raw"](app, app.items[0])
                print(f"  warmed up in {time.perf_counter() - begin_warm:.0f} s (untimed: the reference, one raw call per schema)", flush=True)
                if "vllm" in sections:
                    Load = load_class()
                    for condition, n in (("vLLM quiet", 0), ("vLLM loaded", args.load)):
                        with Load(url, name, n) as traffic:
                            run_deployment(condition, arms, apps, args.seconds, runs)
                        if n:
                            print(f"  background: {traffic.done} requests completed, {traffic.failed} failed", flush=True)
                if "tasks" in sections:
                    items = [i for i in tasks.items() if i["id"] in TASK_IDS][: args.limit or None]
                    task_found = task_outcomes(arms, items)
    report["runs"] = {name: {"left_out": run["left_out"], "seconds": run["seconds"],
                             "outcomes": {arm: {i: asdict(o) for i, o in cells.items()} for arm, cells in run["outcomes"].items()}}
                      for name, run in runs.items()}
    if runs:
        report["figures"] = apps_report.show(apps, runs, default_bound=getattr(accord.Budget(), "max_seconds", None))
    if task_found is not None:
        report["tasks"] = {"items": list(TASK_IDS), "outcomes": task_found, "figures": apps_report.show_tasks(task_found)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, default=str, ensure_ascii=False))
    print(f"\nfigures and outcomes: {args.json}\ntotal {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM leaves the with block: the server stops too
    sys.exit(main())
