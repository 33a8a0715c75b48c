"""Load that forks answers, and a reference deployment that removes the forks (benchmarks/vllm.py).

    python benchmarks/vllm.py --only reference,drift [--quick]

Near-tied tasks (:data:`ITEMS`: mixed reviews, borderline yes/no questions, a complaint with a
free-text field), written for this benchmark and frozen before it was run, are decided under a
sweep of conditions on one vLLM server: quiet (nothing else in flight), then ``load`` other
requests of other lengths always in flight (``benchmarks/vllm.py``'s ``Load``), for each load of the sweep
(4, 16, 48; ``--quick``: 4). Each condition has a time bound; an item not reached in it is left out
of every figure (and counted). Two arms, every call greedy:

  raw       one call with the schema as a strict ``response_format`` (constrained greedy)
  accord    ``Stabilizer(models.openai(url, reference=models.local(dtype="float32")), schema)``,
            the default policy; its floor learned online against the reference over
            :data:`WARM` first requests before the sweep (what a new user's first requests do)

Per arm and load: the items whose answer differs from the quiet one (forks, with the load where
they appear) and TARa (the share of items with one answer across quiet and that load, and across
every condition). For accord: serving calls and reference calls per answer, and the share of
answers the reference decided.

``cost``: the reference's share and calls on the 62 shipped tasks (ordinary prompts), quiet.

``accuracy``: right on gold of one plain strict ``response_format`` call, accord without a
reference and accord with the float32 reference, on 20 shipped tasks, quiet; the reference's
share, and where its answer is not the plain call's, both texts (``--whitespace free``: a vLLM
started as a user starts it).

``drift``: the same items, quiet, on a second vLLM deployment of the model in float32 (its floor
learned against the same reference): raw and accord agreement between the bfloat16 and the
float32 deployment.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

import accord
from accord.backends.openai import _wire as wire
from accord.backends.openai._caps import Capabilities
from accord.prompt._prompt import build_input
from accord.read._canonical import canonical_form, canonical_key

Sentiment = Literal["positive", "negative", "neutral"]
Verdict = Literal["yes", "no"]


class Complaint(BaseModel):
    topic: str
    severity: Literal["low", "medium", "high"]


REVIEW = "Classify the sentiment of this review as positive, negative or neutral.\nReview: "
QUESTION = "Answer yes or no.\nQuestion: "
COMPLAINT = "Extract the complaint's topic (a few words) and its severity (low, medium or high).\nComplaint: "
ITEMS: list[dict[str, Any]] = [
    *({"id": f"review-{n}", "prompt": REVIEW + text, "schema": Sentiment} for n, text in enumerate([
        "The pasta was cold and the waiter ignored us for twenty minutes.",
        "Great view, but the room smelled of smoke.",
        "It was fine, I guess, nothing special.",
        "Loved the staff; hated the price.",
        "The battery lasts two days, though the screen scratches easily.",
        "Not the worst film I have seen this year.",
        "Delivery was late again, but the courier apologised and the box was intact.",
        "The hotel was clean. The breakfast was cold. The location was perfect.",
        "I expected more from a restaurant with this reputation.",
        "Cheap, loud, and exactly what we needed after a long day.",
    ])),
    *({"id": f"question-{n}", "prompt": QUESTION + text, "schema": Verdict} for n, text in enumerate([
        "Is a tomato a vegetable?",
        "Is Pluto a planet?",
        "Is a hot dog a sandwich?",
        "Is zero an even number?",
        "Is it safe to swim right after eating?",
        "Can a penguin be called a seabird?",
    ])),
    *({"id": f"complaint-{n}", "prompt": COMPLAINT + text, "schema": Complaint} for n, text in enumerate([
        "My parcel arrived a day late and the corner of the box was slightly bent.",
        "The app logs me out every few hours, which is annoying but I can live with it.",
        "The heating has been broken for a week and it is freezing in the flat.",
        "The invoice lists a fee I never agreed to.",
    ])),
]
WARM = [  # the first requests a deployment sees: its floor is learned on them (not part of the figures)
    {"prompt": REVIEW + "The soup was good.", "schema": Sentiment},
    {"prompt": REVIEW + "Terrible service, never again.", "schema": Sentiment},
    {"prompt": QUESTION + "Is Paris the capital of France?", "schema": Verdict},
    {"prompt": QUESTION + "Is the sun cold?", "schema": Verdict},
    {"prompt": COMPLAINT + "The lift has been out of order for a month.", "schema": Complaint},
    {"prompt": REVIEW + "An average hotel at an average price.", "schema": Sentiment},
    {"prompt": QUESTION + "Is water wet?", "schema": Verdict},
    {"prompt": COMPLAINT + "The train was ten minutes late.", "schema": Complaint},
]
ITEMS = [item for pair in zip(ITEMS[:10], ITEMS[10:], strict=True) for item in pair]  # the kinds interleaved: a bounded condition covers each
LOADS = (4, 16, 48)
QUICK_LOADS = (4,)
QUICK_ITEMS = 2
SECONDS = 45.0  # the time bound of one condition (both arms); --quick: 30 s
MAX_TOKENS = 40


@dataclass
class Answer:
    key: str | None  # the canonical key of the valid answer (None: none)
    serving: int = 1  # calls to the serving deployment
    reference: int = 0  # calls to the reference
    stopped: str | None = None
    texts: tuple[str, ...] = ()  # what each call wrote (serving first, then the reference)


@dataclass
class Deployment:
    """One vLLM deployment, and accord over it with the in-process float32 reference."""

    url: str
    model: str
    dtype: str
    reference: Any
    max_tokens: int = MAX_TOKENS
    client: Any = None
    backend: Any = None
    stabilizers: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import openai

        self.client = openai.OpenAI(base_url=self.url, api_key="none", max_retries=0, timeout=600)
        self.backend = accord.models.openai(base_url=self.url, model=self.model, reference=self.reference, margins=accord.models.Margins(dtype_label=self.dtype),
                                            max_tokens=self.max_tokens, capabilities=Capabilities(), timeout=600.0)

    def raw(self, item: dict[str, Any]) -> Answer:
        schema = accord.Schema.of(item["schema"])
        fmt, wrapped = wire.format_for(schema)
        response = self.client.chat.completions.create(
            model=self.model, temperature=0, max_tokens=self.max_tokens, response_format=fmt,
            messages=[{"role": "user", "content": build_input(item["prompt"], schema, hint=False, feedback=None)}])
        text = response.choices[0].message.content or ""
        try:
            data = json.loads(text)
            if wrapped:
                data = data[wire.WRAPPER] if isinstance(data, dict) and set(data) == {wire.WRAPPER} else data
            value = schema.validate(data)
        except (ValueError, accord.ValidationFailure):
            return Answer(None, texts=(text,))
        return Answer(canonical_key(canonical_form(schema.dump(value), schema.json_schema)), texts=(text,))

    def accord(self, item: dict[str, Any]) -> Answer:
        key = id(item["schema"])
        if key not in self.stabilizers:
            self.stabilizers[key] = accord.Stabilizer(self.backend, schema=item["schema"])
        try:
            result = self.stabilizers[key].run(item["prompt"])
        except accord.OutputError as exc:
            result = exc.result
        serving = sum(1 for b in result.ballots if b.meta.get("deployment") != "reference")
        return Answer(result.key if result.error is None else None, serving, len(result.ballots) - serving, result.stopped_because,
                      tuple(b.text for b in result.ballots))

    def warm(self) -> float:
        """The first requests: the floor is learned against the reference (returns the seconds)."""
        start = time.perf_counter()
        for item in WARM:
            self.accord(item)
        return time.perf_counter() - start


def sweep(deployment: Deployment, items: list[dict[str, Any]], loads: tuple[int, ...], seconds: float, Load: Any) -> dict[str, Any]:
    outcomes: dict[str, dict[str, dict[str, Answer]]] = {"raw": {}, "accord": {}}
    for condition in ("quiet", *(str(n) for n in loads)):
        begin = time.perf_counter()
        with Load(deployment.url, deployment.model, 0 if condition == "quiet" else int(condition)) as traffic:
            for item in items:
                if time.perf_counter() - begin > seconds:
                    break
                outcomes["raw"].setdefault(item["id"], {})[condition] = deployment.raw(item)
                outcomes["accord"].setdefault(item["id"], {})[condition] = deployment.accord(item)
        done = sum(1 for per in outcomes["raw"].values() if condition in per)
        print(f"  {condition if condition == 'quiet' else 'load ' + condition}: {done}/{len(items)} items in "
              f"{time.perf_counter() - begin:.0f} s" + (f" (background: {traffic.done} requests)" if traffic.n else ""), flush=True)
    return outcomes


def figures(outcomes: dict[str, dict[str, Answer]], loads: tuple[int, ...]) -> dict[str, Any]:
    """Forks and TARa per load against quiet, and across every condition, over the items each covers."""
    found: dict[str, Any] = {}
    for load in (str(n) for n in loads):
        both = {i: per for i, per in outcomes.items() if "quiet" in per and load in per}
        forks = sorted(i for i, per in both.items() if per["quiet"].key != per[load].key)
        found[load] = {"items": len(both), "forks": forks, "tara": 1 - len(forks) / len(both) if both else None}
    full = {i: per for i, per in outcomes.items() if all(c in per for c in ("quiet", *(str(n) for n in loads)))}
    agree = [i for i, per in full.items() if len({a.key for a in per.values()}) == 1 and None not in {a.key for a in per.values()}]
    found["all"] = {"items": len(full), "tara": len(agree) / len(full) if full else None}
    answers = [a for per in outcomes.values() for a in per.values()]
    found["serving_calls"] = sum(a.serving for a in answers) / len(answers) if answers else None
    found["reference_calls"] = sum(a.reference for a in answers) / len(answers) if answers else None
    found["referred"] = sum(a.reference > 0 for a in answers) / len(answers) if answers else None
    found["invalid"] = sum(a.key is None for a in answers)
    return found


def report(arm: str, found: dict[str, Any], loads: tuple[int, ...]) -> None:
    cells = []
    for load in (str(n) for n in loads):
        f = found[load]
        tara = "n/a" if f["tara"] is None else f"{f['tara']:.1%}"
        cells.append(f"load {load}: TARa {tara} of {f['items']}" + (f", forks {', '.join(f['forks'])}" if f["forks"] else ""))
    every = found["all"]
    line = f"  {arm:>6}: " + "; ".join(cells) + (f"; all conditions: {every['tara']:.1%} of {every['items']}" if every["tara"] is not None else "")
    if arm == "accord":
        line += (f"; per answer {found['serving_calls']:.2f} serving calls + {found['reference_calls']:.2f} reference calls "
                 f"({found['referred']:.0%} of answers decided by the reference)")
    if found["invalid"]:
        line += f"; {found['invalid']} answers without a valid value"
    print(line, flush=True)


def cost(url: str, model: str, items: list[dict[str, Any]], report_into: dict[str, Any]) -> None:
    """``cost``: what the reference costs on ordinary prompts (the shipped tasks, not near-tied
    ones), quiet, after the :data:`WARM` first requests: the share of answers it decided and the
    calls of each deployment per answer."""
    start = time.perf_counter()
    deployment = Deployment(url, model, "bfloat16", accord.models.local(dtype="float32"))
    deployment.warm()
    print(f"cost: {len(items)} shipped tasks, quiet, after {len(WARM)} first requests: {deployment.backend.describe()['gate']}", flush=True)
    answers = [deployment.accord(item) for item in items]
    n = len(answers)
    found = {"items": n, "referred": sum(a.reference > 0 for a in answers) / n, "serving_calls": sum(a.serving for a in answers) / n,
             "reference_calls": sum(a.reference for a in answers) / n, "invalid": sum(a.key is None for a in answers),
             "floor": deployment.backend.noise().floor}
    report_into["cost"] = found
    print(f"  {found['referred']:.0%} of answers decided by the reference; per answer {found['serving_calls']:.2f} serving calls + "
          f"{found['reference_calls']:.2f} reference calls; {found['invalid']} without a valid value; floor {found['floor']:.3f} "
          f"({time.perf_counter() - start:.0f} s)", flush=True)


def accuracy(url: str, model: str, items: list[dict[str, Any]], report_into: dict[str, Any], *, max_tokens: int) -> dict[str, Any]:
    """``accuracy``: right on gold of one plain strict ``response_format`` call, of accord without
    a reference (the default policy) and of accord with the in-process float32 reference (after
    the :data:`WARM` first requests), quiet, on ``items`` (each with its ``gold`` key); the
    reference's share of answers; where the reference's answer is not the plain call's, both texts."""
    start = time.perf_counter()
    deployment = Deployment(url, model, "bfloat16", accord.models.local(dtype="float32"), max_tokens=max_tokens)
    alone = Deployment(url, model, "bfloat16", None, max_tokens=max_tokens)
    warmed = deployment.warm()
    said = deployment.backend.describe()
    print(f"accuracy: {len(items)} tasks, quiet, max_tokens={max_tokens}; after {len(WARM)} first requests ({warmed:.0f} s): "
          f"{said['gate']}; the server's JSON: {said['servers'][0]['capabilities']}", flush=True)
    rows = []
    for item in items:
        row = {"id": item["id"], "gold": item["gold"], "plain": deployment.raw(item), "alone": alone.accord(item),
               "reference": deployment.accord(item)}
        rows.append(row)
        marks = " ".join(f"{arm}={'right' if row[arm].key == item['gold'] else 'wrong'}" for arm in ("plain", "alone", "reference"))
        line = f"  {item['id']:>13}: {marks} ({row['reference'].stopped})"
        if row["reference"].key != row["plain"].key:
            line += f"; plain wrote {row['plain'].texts[0]!r}, accord's ballots {list(row['reference'].texts)!r}"
        print(line, flush=True)
    n = len(rows)
    found = {arm: sum(r[arm].key == r["gold"] for r in rows) for arm in ("plain", "alone", "reference")}
    answers = [r["reference"] for r in rows]
    found.update(items=n, same_as_plain=sum(r["reference"].key == r["plain"].key for r in rows), floor=deployment.backend.noise().floor,
                 referred=sum(a.reference > 0 for a in answers) / n, serving_calls=sum(a.serving for a in answers) / n,
                 reference_calls=sum(a.reference for a in answers) / n, alone_calls=sum(r["alone"].serving for r in rows) / n,
                 json=said["servers"][0]["capabilities"], seconds=round(time.perf_counter() - start, 1),
                 rows={r["id"]: {arm: vars(r[arm]) for arm in ("plain", "alone", "reference")} for r in rows})
    report_into["accuracy"] = found
    print(f"  right on gold, of {n}: one plain strict response_format call {found['plain']}; accord without a reference "
          f"{found['alone']} ({found['alone_calls']:.2f} calls per answer); accord with the float32 reference {found['reference']} "
          f"({found['referred']:.0%} decided by the reference; {found['serving_calls']:.2f} serving + {found['reference_calls']:.2f} "
          f"reference calls per answer; its answer the plain call's on {found['same_as_plain']}; floor {found['floor']:.3g}) "
          f"({found['seconds']:.0f} s)", flush=True)
    met = found["reference"] >= found["plain"]
    print(f"- accord with the reference right at least as often as the plain call: {found['reference']} vs {found['plain']}: "
          f"{'met' if met else 'NOT met'}", flush=True)
    return found


def run(url: str, model: str, *, quick: bool, drift: bool, reference_section: bool, report_into: dict[str, Any], load: Any,
        seconds: float | None = None) -> None:
    """The reference sweep on the running bfloat16 server and, with ``drift``, a float32 one started here."""
    items = ITEMS[:: len(ITEMS) // QUICK_ITEMS][:QUICK_ITEMS] if quick else ITEMS
    loads = QUICK_LOADS if quick else LOADS
    seconds = seconds or (30.0 if quick else SECONDS)
    start = time.perf_counter()
    reference = accord.models.local(dtype="float32")
    bf16 = Deployment(url, model, "bfloat16", reference)
    warmed = 0.0 if quick else bf16.warm()  # --quick: no warm-up, every first ballot goes to the reference (learning)
    gate = bf16.backend.describe()["gate"]
    print(f"reference: {reference.fingerprint}, float32, in process; after {0 if quick else len(WARM)} first requests "
          f"({warmed:.0f} s): {gate}", flush=True)
    quiet: dict[str, Answer] = {}
    if reference_section:
        print(f"sweep: {len(items)} near-tied items; quiet, then loads {', '.join(map(str, loads))} in flight; "
              f"at most {seconds:.0f} s a condition", flush=True)
        outcomes = sweep(bf16, items, loads, seconds, load)
        quiet = {i: per["quiet"] for i, per in outcomes["accord"].items()} | {f"raw {i}": per["quiet"] for i, per in outcomes["raw"].items()}
        found = {arm: figures(outcomes[arm], loads) for arm in outcomes}
        for arm in ("raw", "accord"):
            report(arm, found[arm], loads)
        report_into["reference"] = {"floor": bf16.backend.noise().floor, "figures": found,
                                    "outcomes": {arm: {i: {c: vars(a) for c, a in per.items()} for i, per in o.items()} for arm, o in outcomes.items()}}
        a = found["accord"]
        taras = [found["accord"][str(n)]["tara"] for n in loads]
        print("targets:")
        print(f"- accord TARa 100% between quiet and every load: {', '.join('n/a' if t is None else f'{t:.1%}' for t in taras)}: "
              f"{'met' if all(t == 1 for t in taras) else 'NOT met'}")
        print(f"- at most 1.3 serving calls per answer: {a['serving_calls']:.2f} (reference calls beside: {a['reference_calls']:.2f}): "
              f"{'met' if a['serving_calls'] <= 1.3 else 'NOT met'}")
        raw_forks = {n: found["raw"][str(n)]["forks"] for n in loads}
        print(f"- the raw arm's forks, by load: {raw_forks}: {'shown' if any(raw_forks.values()) else 'none appeared'}")
    if drift:
        from servers import model_folder, serve_vllm

        with serve_vllm(model_folder(), dtype="float32") as server:
            f32 = Deployment(server.url, server.model, "float32", reference)
            f32.warm()
            print(f"drift: a float32 vLLM (started in {server.started_in:.0f} s); {f32.backend.describe()['gate']}", flush=True)
            agree = {"raw": 0, "accord": 0}
            for item in items:  # the bfloat16 answers: quiet, from the sweep when it ran
                agree["raw"] += (quiet.get(f"raw {item['id']}") or bf16.raw(item)).key == f32.raw(item).key
                agree["accord"] += (quiet.get(item["id"]) or bf16.accord(item)).key == f32.accord(item).key
        shares = {arm: n / len(items) for arm, n in agree.items()}
        report_into["drift"] = shares
        print(f"  bfloat16 vs float32 deployment, quiet, {len(items)} items: raw agreement {shares['raw']:.1%}, "
              f"accord {shares['accord']:.1%} (target 100%: {'met' if shares['accord'] == 1 else 'NOT met'})", flush=True)
    print(f"reference sections: {time.perf_counter() - start:.0f} s", flush=True)
