"""``accord audit``: how much a model's answers fluctuate, raw and through the Stabilizer. No printing.

    conditions = local_conditions(lambda dtype, **kw: models.local(dtype=dtype, **kw), quick=True)
    raw = raw_phase(items, conditions, settings)                 # {condition: [Run per item]}
    stable = stabilized_phase(items, conditions, max_tokens)    # {condition: [Final per item]}
    audit = summarize(items, raw, stable, floors)               # JSON-ready dict

A *condition* is one backend as deployed (float32 weights, bfloat16 weights, a busy server with
a batch neighbour, one thread, ...), or over HTTP one of N concurrent requests. Any backend
works: one with ``unconstrained()`` (a local model) is asked for its raw greedy text; any other
is asked through ``generate``; scripted backends make the phases testable.
"""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import AccordError, OutputError
from .._result import Result
from .._stabilizer import Stabilizer
from .._types import Completion, Request, Settings
from ..models import Backend
from ..prompt._prompt import build_input, shows_schema
from ..read._read import Reading, read
from ..vote._perturb import Perturbation
from ._audit_input import Item
from ._metrics import MISSING, Spread, accuracy_by_condition, distinct, first_divergence, majority_share, total_agreement

Tick = Callable[[], None]


@dataclass(frozen=True)
class Condition:
    name: str
    backend: Any  # a Backend: the audit reads its declared surface (``dtype``, ``tokenizer``)


@dataclass(frozen=True)
class Run:
    """One raw call: the text, its extracted and normalized answer key, its tokens, its margin."""

    text: str
    answer: str
    tokens: tuple[Any, ...]
    min_margin: float | None


@dataclass(frozen=True)
class Final:
    """One Stabilizer run: its final answer key (MISSING on failure), calls, why it stopped, and
    its ballots (slot, attempt, status, text, answer key) as the report shows them."""

    answer: str
    calls: int
    stopped_because: str
    stable: bool
    ballots: tuple[dict[str, Any], ...] = ()


# -- conditions ------------------------------------------------------------------------------------


def local_conditions(load: Callable[..., Any], *, quick: bool = False) -> list[Condition]:
    """The local deployment conditions; ``load(dtype)`` is called once per dtype.

    float32, bfloat16, float32 with one batch neighbour, float32 on one thread (not with quick).
    The float32 variants share the loaded weights (a shallow copy with another condition).
    """
    fp32 = load("float32")
    bf16 = load("bfloat16")
    fp32.constrainer  # noqa: B018 - built once, shared by the copies below
    conditions = [Condition("float32", fp32), Condition("bfloat16", bf16), Condition("float32+batch", _variant(fp32, condition=Perturbation("batch", reference=None)))]
    if not quick:
        conditions.append(Condition("float32+threads=1", _variant(fp32, threads=1)))
    return conditions


def _variant(backend: Any, **changes: Any) -> Any:
    twin = copy.copy(backend)
    for name, value in changes.items():
        setattr(twin, name, value)
    return twin


# -- the raw phase ---------------------------------------------------------------------------------


def raw_call(backend: Backend, item: Item, settings: Settings) -> Completion:
    """The raw text for one item: unconstrained greedy when the backend can, else ``generate``."""
    sent = build_input(item.prompt, item.schema, hint=True, feedback=None)
    raw = backend.unconstrained(sent, settings)
    if raw is not None:
        return raw
    sent = build_input(item.prompt, item.schema, hint=shows_schema(True, item.schema, backend), feedback=None)  # as a run sends it
    return backend.generate(Request(item.prompt, sent, item.schema, settings))


def to_run(completion: Completion, item: Item, tokenize: Callable[[str], Sequence[Any]] | None) -> Run:
    reading = read(completion.text, item.schema)
    answer = reading.key if isinstance(reading, Reading) else MISSING
    tokens = tuple(tokenize(completion.text)) if tokenize else tuple(completion.text)
    return Run(completion.text, answer, tokens, smallest_margin(completion.margins))


def smallest_margin(margins: Sequence[float] | None) -> float | None:
    finite = [m for m in margins or () if math.isfinite(m)]
    return min(finite) if finite else None


def tokenizer_of(conditions: Sequence[Condition]) -> Callable[[str], Sequence[Any]] | None:
    """Token ids by the first condition's tokenizer (local); None means characters (HTTP)."""
    tokenizer = conditions[0].backend.tokenizer if conditions else None
    if tokenizer is None:
        return None
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def raw_phase(items: Sequence[Item], conditions: Sequence[Condition], settings: Settings, tick: Tick | None = None) -> dict[str, list[Run]]:
    """Every item under every condition, one call each: ``{condition: [Run per item]}``."""
    tokenize = tokenizer_of(conditions)
    runs: dict[str, list[Run]] = {c.name: [] for c in conditions}
    for condition in conditions:
        for item in items:
            runs[condition.name].append(to_run(raw_call(condition.backend, item, settings), item, tokenize))
            if tick:
                tick()
    return runs


def http_raw_phase(items: Sequence[Item], backend: Any, n: int, settings: Settings, tick: Tick | None = None, *, concurrency: int = 0) -> dict[str, list[Run]]:
    """Over HTTP: each item sent ``n`` times at once (the server batches them with each other);
    with ``concurrency``, one at a time: alone, then each among ``concurrency`` requests of other lengths."""

    async def one(item: Item) -> list[Completion]:
        sent = build_input(item.prompt, item.schema, hint=shows_schema(True, item.schema, backend), feedback=None)  # as a run sends it
        request = Request(item.prompt, sent, item.schema, settings)
        if concurrency:
            return [await backend.agenerate_beside(request, concurrency if i else 0) for i in range(n)]
        return list(await asyncio.gather(*(backend.agenerate(request) for _ in range(n))))

    completions = _one_item_at_a_time(items, one, tick)
    return {_http_name(i, concurrency): [to_run(c[i], item, None) for c, item in zip(completions, items, strict=True)] for i in range(n)}


def _http_name(i: int, concurrency: int) -> str:
    return f"request {i + 1}" if not concurrency else "alone" if i == 0 else f"among {concurrency} ({i})"


def _one_item_at_a_time(items: Sequence[Item], one: Callable[[Item], Any], tick: Tick | None) -> list[Any]:
    """``await one(item)`` for each item in turn (each may fan out), ticking after each."""

    async def every() -> list[Any]:
        done = []
        for item in items:
            done.append(await one(item))
            if tick:
                tick()
        return done

    return asyncio.run(every())


# -- the stabilized phase --------------------------------------------------------------------------


def to_final(outcome: Any) -> Final:
    """A Result, or the OutputError a run ended with (its ``.result`` holds the ballots)."""
    if isinstance(outcome, OutputError):
        result: Result[Any] | None = outcome.result  # None only for an error raised by hand
        if result is None:
            return Final(MISSING, 0, "error", False)
        return Final(MISSING, result.calls, result.stopped_because, False, _ballots(result))
    return Final(outcome.key if outcome.key is not None else MISSING, outcome.calls, outcome.stopped_because, outcome.stable, _ballots(outcome))


def _ballots(result: Result[Any]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"slot": b.slot, "attempt": b.attempt, "status": b.status, "text": b.text, "answer": b.key if b.key is not None else MISSING}
        for b in result.ballots
    )


def stabilized_phase(
    items: Sequence[Item], conditions: Sequence[Condition], max_tokens: int | None, tick: Tick | None = None
) -> dict[str, list[Final]]:
    """The Stabilizer (default policy) once per condition per item."""
    finals: dict[str, list[Final]] = {c.name: [] for c in conditions}
    for condition in conditions:
        for item in items:
            stab = Stabilizer(condition.backend, item.schema, settings=Settings(max_tokens=max_tokens))
            try:
                outcome: Any = stab.run(item.prompt)
            except OutputError as exc:
                outcome = exc
            finals[condition.name].append(to_final(outcome))
            if tick:
                tick()
    return finals


def http_stabilized_phase(items: Sequence[Item], backend: Any, n: int, max_tokens: int | None, tick: Tick | None = None, *, concurrency: int = 0) -> dict[str, list[Final]]:
    """Over HTTP: ``n`` concurrent Stabilizer runs per item, as the raw requests were (with
    ``concurrency``: one at a time, alone and then among that much background traffic)."""

    async def busy(i: int, stab: Stabilizer[Any], item: Item) -> Any:
        async with backend.traffic(concurrency if i else 0, max_tokens or 64):
            return (await asyncio.gather(stab.arun(item.prompt), return_exceptions=True))[0]

    async def one(item: Item) -> list[Final]:
        stab = Stabilizer(backend, item.schema, settings=Settings(max_tokens=max_tokens))
        if concurrency:
            outcomes = [await busy(i, stab, item) for i in range(n)]
        else:
            outcomes = await asyncio.gather(*(stab.arun(item.prompt) for _ in range(n)), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, OutputError):
                raise outcome
        return [to_final(outcome) for outcome in outcomes]

    per_item = _one_item_at_a_time(items, one, tick)
    return {_http_name(i, concurrency): [f[i] for f in per_item] for i in range(n)}


# -- the summary -----------------------------------------------------------------------------------


def summarize(
    items: Sequence[Item],
    raw: dict[str, list[Run]],
    stable: dict[str, list[Final]] | None = None,
    floors: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """The audit as JSON data: headline metrics per phase, and one row per prompt."""
    names = list(raw)
    gold = [item.gold_key for item in items]
    texts = [[raw[c][i].text for c in names] for i in range(len(items))]
    answers = [[raw[c][i].answer for c in names] for i in range(len(items))]
    prompts = [_row(item, {c: raw[c][i] for c in names}, {c: stable[c][i] for c in stable} if stable is not None else None)
               for i, item in enumerate(items)]  # fmt: skip
    audit: dict[str, Any] = {
        "prompts_audited": len(items),
        "conditions": names,
        "n": len(names),
        "raw": _phase_metrics(answers, gold, names, texts=texts, rows=prompts),
        "prompts": prompts,
    }
    if stable is not None:
        audit["stabilized"] = _stabilized_metrics(stable, gold, len(items))
    if floors is not None:
        audit["noise_floors"] = floors
    return audit


def _row(item: Item, raw: dict[str, Run], stable: dict[str, Final] | None) -> dict[str, Any]:
    """One prompt's row: its raw run under each condition, and its stabilized run under each, if any."""
    runs = list(raw.values())
    texts = [r.text for r in runs]
    answers = [r.answer for r in runs]
    margins = [r.min_margin for r in runs if r.min_margin is not None]
    row: dict[str, Any] = {
        "id": item.id,
        "prompt": item.text,
        "schema": item.schema_name,
        "gold": item.gold,
        "raw": {c: {"text": r.text, "answer": r.answer, "min_margin": r.min_margin} for c, r in raw.items()},
        "text_agrees": distinct(texts) == 1,
        "answer_agrees": distinct(answers) == 1,
        "distinct_texts": distinct(texts),
        "distinct_answers": distinct(answers),
        "first_divergence": first_divergence([r.tokens for r in runs]),
        "min_margin": min(margins) if margins else None,
        "agreement_before": majority_share(answers),
    }
    if stable is not None:
        row["stabilized"] = {
            c: {"answer": f.answer, "calls": f.calls, "stopped_because": f.stopped_because, "ballots": list(f.ballots)}
            for c, f in stable.items()
        }
        finals = list(stable.values())
        row["agreement_after"] = majority_share([f.answer for f in finals])
        row["calls_per_answer"] = sum(f.calls for f in finals) / len(finals)
    return row


def _stabilized_metrics(stable: dict[str, list[Final]], gold: list[str | None], n: int) -> dict[str, Any]:
    """The stabilized phase's headline metrics."""
    finals_by_item = [[stable[c][i].answer for c in stable] for i in range(n)]
    metrics = _phase_metrics(finals_by_item, gold, list(stable))
    calls = [f.calls for c in stable for f in stable[c]]
    metrics["calls_per_answer"] = sum(calls) / len(calls) if calls else 0.0
    metrics["stable_share"] = sum(f.stable for c in stable for f in stable[c]) / max(len(calls), 1)
    return metrics


def _phase_metrics(
    answers: list[list[str]], gold: list[str | None], names: list[str], texts: list[list[str]] | None = None, rows: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    by_condition = {c: [answers[i][j] for i in range(len(answers))] for j, c in enumerate(names)}
    accuracy = accuracy_by_condition(by_condition, gold)
    metrics: dict[str, Any] = {
        "TARa": total_agreement(answers),
        "distinct_answers_mean": sum(distinct(a) for a in answers) / len(answers) if answers else 0.0,
        "missing_answers": sum(a.count(MISSING) for a in answers),
        "accuracy_by_condition": accuracy,
        "accuracy": Spread.of(list(accuracy.values())).to_dict() if accuracy else None,
    }
    if texts is not None:
        metrics["TARr"] = total_agreement(texts)
        metrics["distinct_texts_mean"] = sum(distinct(t) for t in texts) / len(texts) if texts else 0.0
    if rows is not None:
        splits = sorted(r["first_divergence"] for r in rows if r["first_divergence"] is not None)
        margins = [r["min_margin"] for r in rows if r["min_margin"] is not None]
        metrics["diverged_prompts"] = len(splits)
        metrics["first_divergence_median"] = splits[len(splits) // 2] if splits else None
        metrics["first_divergence_min"] = splits[0] if splits else None
        metrics["min_margin"] = min(margins) if margins else None
    return metrics


def measured_floors(conditions: Sequence[Condition]) -> dict[str, dict[str, float]]:
    """The noise floor per perturbation kind, per dtype (what the margin gate compares with)."""
    from ..backends.local._calibrate import noise_floors

    floors: dict[str, dict[str, float]] = {}
    for condition in conditions:
        dtype = condition.backend.dtype
        if dtype is None or dtype in floors or not condition.backend.perturbable:
            continue
        try:
            floors[dtype] = noise_floors(condition.backend)
        except AccordError:
            raise
        except Exception as exc:  # measuring runs the model: map its failure at this boundary
            raise AccordError(f"cannot measure the noise floors for {dtype}: {type(exc).__name__}: {exc}") from exc
    return floors


# -- the target ------------------------------------------------------------------------------------

QUICK_TOKENS = 32
FULL_TOKENS = 128


@dataclass(frozen=True)
class Target:
    """What ``--model`` named: local conditions, or one HTTP backend sent N concurrent requests."""

    label: str
    conditions: tuple[Condition, ...] = ()
    http: Any = None


def open_target(model: str, model_name: str | None = None, *, quick: bool = False) -> Target:
    """``local`` | ``transformers:PATH`` | ``openai:BASE_URL`` (with ``model_name``)."""
    from .._errors import ConfigError

    kind, _, where = model.partition(":")
    if kind == "local" and not where:
        from .. import models

        return Target("local (embedded SmolLM2-135M-Instruct)", tuple(local_conditions(lambda d, **kw: models.local(dtype=d, **kw), quick=quick)))
    if kind == "transformers" and where:
        from .. import models

        return Target(f"transformers:{where}", tuple(local_conditions(lambda d, **kw: models.transformers(where, dtype=d, **kw), quick=quick)))
    if kind == "openai" and where:
        from .. import models

        return Target(f"openai:{where} ({model_name or 'server default'})", http=models.openai(base_url=where, model=model_name or None))
    raise ConfigError(f"--model {model!r}: expected local, transformers:PATH or openai:BASE_URL")
