"""OpenTelemetry spans of a run, recorded by the SDK's in-memory exporter: sync, async, ``map``
under concurrency (every span parented where it belongs), failures on the span, content only on
opt-in, no span (and no cost) without a configured provider; the real model and server too."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind, StatusCode

import accord
from accord import BackendError, Completion, Retry, Stabilizer, Telemetry, Usage, Vote, models
from reviews import GOOD, OTHER, Review


class Traced:
    """A tracer provider with an in-memory exporter, and the spans it finished."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    def telemetry(self, content: bool = False) -> Telemetry:
        return Telemetry(tracer_provider=self.provider, content=content)

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def runs(self) -> list[ReadableSpan]:
        return self.named("accord.run")

    def calls(self) -> list[ReadableSpan]:
        return [s for s in self.spans if s.attributes and s.attributes.get("gen_ai.operation.name") == "chat"]


@pytest.fixture
def traced() -> Iterator[Traced]:
    found = Traced()
    yield found
    found.provider.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def test_a_run_is_a_span_with_one_child_per_model_call(traced: Traced) -> None:
    stab = Stabilizer(models.scripted([GOOD, OTHER, GOOD]), schema=Review, vote=Vote(k=3, gate=None), telemetry=traced.telemetry())
    result = stab.run("review this")
    [run] = traced.runs()
    calls = traced.calls()
    assert len(calls) == result.calls == 3
    assert all(parent_of(c) == span_id(run) for c in calls) and all(c.kind == SpanKind.CLIENT for c in calls)
    assert all(c.context is not None and run.context is not None and c.context.trace_id == run.context.trace_id for c in calls)
    a = attrs(run)
    assert a["accord.schema"] == "Review" and a["accord.policy"] == "k=3 quorum=2 early_stop retry=3"
    assert a["accord.outcome"] == "stable" and a["accord.stopped_because"] == result.stopped_because
    assert a["accord.calls"] == 3 and a["accord.agreement"] == pytest.approx(2 / 3) and a["accord.ledger.hit"] is False
    assert "accord.model" not in a and "accord.usage.seconds" not in a  # on the call spans, and the span's duration
    assert run.status.status_code == StatusCode.UNSET
    first = attrs(sorted(calls, key=lambda s: s.start_time or 0)[0])
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "accord"
    assert first["gen_ai.request.model"] == "scripted" and first["gen_ai.output.type"] == "json"
    assert first["gen_ai.request.temperature"] == 0.0 and first["gen_ai.request.max_tokens"] == 512
    assert first["accord.ballot.slot"] == 0 and "accord.ballot.attempt" not in first  # a first call: no attempt
    assert first["accord.ballot.status"] == "valid" and first["gen_ai.response.finish_reasons"] == ("stop",)
    assert calls[0].name == "chat scripted"


def test_the_run_span_says_its_policy_in_one_attribute_and_its_usage(traced: Traced) -> None:
    model = models.scripted([Completion(GOOD, "stop", Usage(12, 5))] * 4)
    stab = Stabilizer(model, schema=Review, vote=Vote(k=4, early_stop=False, fieldwise=True, gate=None), retry=Retry(attempts=2), telemetry=traced.telemetry())
    result = stab.run("q")
    [run] = traced.runs()
    a = attrs(run)
    assert a["accord.policy"] == "k=4 quorum=3 fieldwise retry=2"
    assert a["accord.usage.input_tokens"] == result.usage.prompt_tokens == 48 and a["accord.usage.output_tokens"] == 20
    assert "accord.usage.cost" not in a  # no prices given: no cost


def test_prompts_and_outputs_are_recorded_only_on_opt_in(traced: Traced) -> None:
    secret = "review of patient 4711"
    Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), telemetry=traced.telemetry()).run(secret)
    dumped = json.dumps([attrs(s) for s in traced.spans], default=str)
    assert secret not in dumped and "positive" not in dumped  # neither the prompt nor the output nor the value
    traced.exporter.clear()
    Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), telemetry=traced.telemetry(content=True)).run(secret)
    [run] = traced.runs()
    assert json.loads(attrs(run)["accord.value"]) == {"stars": 4, "sentiment": "positive"}
    call = attrs(traced.calls()[0])
    [message] = json.loads(call["gen_ai.input.messages"])
    assert message["role"] == "user" and message["parts"][0]["content"].startswith(secret)
    [output] = json.loads(call["gen_ai.output.messages"])
    assert output == {"role": "assistant", "parts": [{"type": "text", "content": GOOD}], "finish_reason": "stop"}


def test_every_gen_ai_attribute_is_a_published_name(traced: Traced) -> None:
    model = models.scripted([Completion(GOOD, "stop", Usage(12, 5), meta={"model": "m-2024"}), "nope", GOOD])
    stab = Stabilizer(model, schema=Review, vote=Vote(k=2, quorum=1, early_stop=False, gate=None),
                      settings=accord.Settings(seed=3, stop=["\n\n"], max_tokens=64), telemetry=traced.telemetry(content=True))
    stab.run("q")
    published = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    used = {name for span in traced.spans for name in attrs(span) if name.startswith("gen_ai.")}
    assert used - published == set()
    first = attrs(traced.calls()[0])
    assert first["gen_ai.usage.input_tokens"] == 12 and first["gen_ai.usage.output_tokens"] == 5
    assert first["gen_ai.response.model"] == "m-2024" and first["gen_ai.request.seed"] == 3
    assert first["gen_ai.request.stop_sequences"] == ("\n\n",) and first["gen_ai.request.max_tokens"] == 64


def test_retries_are_events_on_the_run_span_and_invalid_ballots_say_why(traced: Traced) -> None:
    fault = BackendError("overloaded", retryable=True, status=503)
    model = models.scripted(['{"stars": 9, "sentiment": "positive"}', fault, GOOD])
    retry = Retry(wait=lambda state: 0.0)  # no real backoff in a test
    Stabilizer(model, schema=Review, vote=Vote(k=1, gate=None), retry=retry, telemetry=traced.telemetry()).run("q")
    [run] = traced.runs()
    events = [(e.name, dict(e.attributes or {})) for e in run.events]
    assert events == [
        ("accord.retry", {"accord.slot": 0, "accord.attempt": 2, "accord.reason": "invalid", "accord.wait": 0.0}),
        ("accord.retry", {"accord.slot": 0, "accord.attempt": 3, "accord.reason": "fault", "accord.wait": 0.0}),
    ]
    invalid, failed, valid = sorted(traced.calls(), key=lambda s: attrs(s).get("accord.ballot.attempt", 1))
    assert "accord.ballot.attempt" not in attrs(invalid) and attrs(failed)["accord.ballot.attempt"] == 2 and attrs(valid)["accord.ballot.attempt"] == 3
    assert attrs(invalid)["accord.ballot.status"] == "invalid" and attrs(invalid)["accord.ballot.invalid"] == "validate"
    assert attrs(invalid)["accord.ballot.error_types"] == "less_than_equal"
    assert "accord.ballot.feedback" not in attrs(invalid)
    assert attrs(valid)["accord.ballot.feedback"] == "validate"  # the call after a failed one carried feedback
    assert failed.status.status_code == StatusCode.ERROR and "overloaded" in (failed.status.description or "")
    assert attrs(failed)["error.type"] == "BackendError"
    assert [e.name for e in failed.events] == ["exception"]
    assert valid.status.status_code == StatusCode.UNSET


def test_a_failed_run_records_its_error_on_the_run_span(traced: Traced) -> None:
    stab = Stabilizer(models.scripted(["no"] * 4), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=2), telemetry=traced.telemetry())
    with pytest.raises(accord.InvalidOutput):
        stab.run("q")
    [run] = traced.runs()
    assert run.status.status_code == StatusCode.ERROR and "InvalidOutput" in (run.status.description or "")
    assert attrs(run)["accord.outcome"] == "failed" and attrs(run)["error.type"] == "InvalidOutput"
    assert [e.name for e in run.events][-1] == "exception"
    assert len(traced.calls()) == 2


def test_a_crash_below_the_run_ends_its_span_with_the_error(traced: Traced) -> None:
    class Broken(accord.models.Backend):
        blocking = False

        def generate(self, request: accord.Request) -> Completion:
            return Completion(GOOD)

        def map_error(self, exc: BaseException) -> accord.AccordError:
            raise RuntimeError("a bug in map_error")

    class Failing(Broken):
        def generate(self, request: accord.Request) -> Completion:
            raise ValueError("boom")

    with pytest.raises(RuntimeError):
        Stabilizer(Failing(), schema=Review, vote=Vote(k=1, gate=None), telemetry=traced.telemetry()).run("q")
    [run] = traced.runs()
    assert run.status.status_code == StatusCode.ERROR and attrs(run)["error.type"] == "RuntimeError"
    assert run.end_time is not None


def test_async_runs_are_traced_the_same(traced: Traced) -> None:
    async def answer(prompt: str) -> str:
        await asyncio.sleep(0.01)
        return GOOD

    stab = Stabilizer(models.function(answer), schema=Review, vote=Vote(k=3, early_stop=False, gate=None), telemetry=traced.telemetry())
    asyncio.run(stab.arun("q"))
    [run] = traced.runs()
    assert len(traced.calls()) == 3 and all(parent_of(c) == span_id(run) for c in traced.calls())


def test_spans_made_inside_the_model_call_nest_under_its_span_sync_and_async(traced: Traced) -> None:
    def sync_model(prompt: str) -> str:
        with traced.tracer.start_as_current_span("http POST"):
            time.sleep(0.01)  # a blocking backend: the call runs in a worker thread
        return GOOD

    async def async_model(prompt: str) -> str:
        with traced.tracer.start_as_current_span("http POST"):
            await asyncio.sleep(0.01)
        return GOOD

    for model in (sync_model, async_model):
        traced.exporter.clear()
        stab = Stabilizer(models.function(model), schema=Review, vote=Vote(k=2, early_stop=False, gate=None), telemetry=traced.telemetry())
        if model is sync_model:
            stab.run("q")
        else:
            asyncio.run(stab.arun("q"))
        calls = {span_id(c) for c in traced.calls()}
        inner = traced.named("http POST")
        assert len(inner) == 2 and {parent_of(s) for s in inner} == calls


def test_the_model_call_sees_the_callers_context_with_its_span_current_in_a_worker_thread_too(traced: Traced) -> None:
    from opentelemetry import baggage, context, trace

    seen: list[tuple[object, int]] = []

    def sync_model(prompt: str) -> str:  # a blocking backend: the call runs in a worker thread
        seen.append((baggage.get_baggage("tenant"), trace.get_current_span().get_span_context().span_id))
        time.sleep(0.01)
        return GOOD

    stab = Stabilizer(models.function(sync_model), schema=Review, vote=Vote(k=2, early_stop=False, gate=None), telemetry=traced.telemetry())
    token = context.attach(baggage.set_baggage("tenant", "t-42"))
    try:
        stab.run("q")
    finally:
        context.detach(token)
    assert sorted(seen) == sorted(("t-42", span_id(c)) for c in traced.calls())


class _DropsRuns(Sampler):
    """Samples like the SDK's default (parent-based, always on) but drops every ``accord.run``;
    keeps the name of every span it was asked about (every span started)."""

    def __init__(self) -> None:
        self.inner = ParentBased(ALWAYS_ON)
        self.asked: list[str] = []

    def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any) -> SamplingResult:
        self.asked.append(name)
        if name == "accord.run":
            return SamplingResult(Decision.DROP)
        return self.inner.should_sample(parent_context, trace_id, name, *args, **kwargs)

    def get_description(self) -> str:
        return "drops accord.run"


def test_a_run_the_sampler_drops_makes_no_call_span_and_drops_what_the_backend_makes() -> None:
    exporter = InMemorySpanExporter()
    sampler = _DropsRuns()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    def sync_model(prompt: str) -> str:
        with tracer.start_as_current_span("http POST"):  # the run's (dropped) context is current here
            time.sleep(0.01)
        return GOOD

    async def async_model(prompt: str) -> str:
        with tracer.start_as_current_span("http POST"):
            await asyncio.sleep(0.01)
        return GOOD

    for model in (sync_model, async_model):
        exporter.clear()
        sampler.asked.clear()
        stab = Stabilizer(models.function(model), schema=Review, vote=Vote(k=2, early_stop=False, gate=None), telemetry=Telemetry(tracer_provider=provider))
        with tracer.start_as_current_span("POST /reviews"):
            result = stab.run("q") if model is sync_model else asyncio.run(stab.arun("q"))
        assert result.value is not None and result.calls == 2
        assert sorted(sampler.asked) == ["POST /reviews", "accord.run", "http POST", "http POST"]  # no call span was started
        # and the backend's spans went with the dropped run, not orphaned under the request's span
        assert [s.name for s in exporter.get_finished_spans()] == ["POST /reviews"]
    provider.shutdown()


def test_map_under_concurrency_parents_every_span_in_its_own_run(traced: Traced) -> None:
    async def answer(prompt: Any) -> str:
        await asyncio.sleep(0.02)  # the prompts' calls interleave
        return GOOD if "even" in str(prompt) else OTHER

    stab = Stabilizer(models.function(answer), schema=Review, vote=Vote(k=3, early_stop=False, gate=None), telemetry=traced.telemetry(content=True))
    prompts = [f"prompt {i} {'even' if i % 2 == 0 else 'odd'}" for i in range(6)]
    with traced.tracer.start_as_current_span("POST /reviews") as outer:
        results = stab.map(prompts, concurrency=3)
    assert [r.value.stars if r.value else None for r in results] == [4, 2, 4, 2, 4, 2]
    runs = traced.runs()
    assert len(runs) == 6 and {parent_of(r) for r in runs} == {outer.get_span_context().span_id}
    by_run = {span_id(r): json.loads(attrs(r)["accord.prompt"]) for r in runs}
    calls = traced.calls()
    assert len(calls) == 18
    for call in calls:
        prompt = by_run[parent_of(call) or 0]
        [message] = json.loads(attrs(call)["gen_ai.input.messages"])
        assert message["parts"][0]["content"].startswith(prompt), "a call span sits under the run of its own prompt"
    starts = sorted((c.start_time or 0, parent_of(c)) for c in calls)
    assert len({p for _, p in starts[:6]}) > 1, "the runs really did overlap"


def test_a_ledger_replay_is_a_run_span_with_no_call(traced: Traced, tmp_path: Any) -> None:
    with accord.Ledger(tmp_path / "l.sqlite3") as ledger:
        stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), ledger=ledger, telemetry=traced.telemetry())
        stab.run("q")
        traced.exporter.clear()
        assert stab.run("q").replayed
    [run] = traced.runs()
    assert attrs(run)["accord.ledger.hit"] is True and traced.calls() == []


def test_telemetry_false_records_nothing(traced: Traced) -> None:
    Stabilizer(models.scripted([GOOD] * 3), schema=Review, telemetry=False).run("q")
    assert traced.spans == []
    with pytest.raises(accord.ConfigError):
        Stabilizer(models.scripted([GOOD]), schema=Review, telemetry="yes")  # type: ignore[call-overload]


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


SCRIPT = """
import accord, sys
from accord.observe import _telemetry
stab = accord.Stabilizer(accord.models.scripted(['4'] * 6), schema=int, vote=accord.Vote(k=3, gate=None))
print(stab.run('q').value, _telemetry.tracer(stab.telemetry) is not None, sys.modules.get('opentelemetry') is not None, stab._decider().watch('q') is None)
"""


def test_no_provider_configured_no_span_and_no_watch() -> None:
    assert _python(SCRIPT) == "4 False True True"  # the API is there (the dev extra) but nobody configured a provider


def test_without_opentelemetry_installed_accord_runs_the_same() -> None:
    blocked = "import sys; sys.modules['opentelemetry'] = None\n" + SCRIPT
    assert _python(blocked) == "4 False False True"
    assert _python("import sys, accord; print('opentelemetry' in sys.modules)") == "False"  # importing accord imports no OTel


def test_the_global_provider_the_application_configured_is_used() -> None:
    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
import accord
accord.Stabilizer(accord.models.scripted(['4'] * 6), schema=int, vote=accord.Vote(k=3, gate=None)).run('q')
print(sorted(s.name for s in exporter.get_finished_spans()))
"""
    assert _python(code) == "['accord.run', 'chat scripted', 'chat scripted']"


@pytest.mark.model
def test_the_local_model_traces_its_ballots(local_model: Any, traced: Traced) -> None:
    stab = Stabilizer(local_model, schema=Review, vote=Vote(k=3, gate=None), telemetry=traced.telemetry())
    result = stab.run("Review: 'Great pen, writes smoothly, five stars.' Give stars and sentiment.")
    [run] = traced.runs()
    calls = traced.calls()
    assert len(calls) == result.calls and all(parent_of(c) == span_id(run) for c in calls)
    first = attrs(sorted(calls, key=lambda s: attrs(s)["accord.ballot.slot"])[0])
    assert first["gen_ai.provider.name"] == "transformers" and first["gen_ai.request.model"] == local_model.model_id
    assert first["gen_ai.usage.input_tokens"] > 0 and first["gen_ai.usage.output_tokens"] > 0
    assert "accord.ballot.min_margin" in first or result.ballots[0].min_margin in (None, float("inf"))
    if len(calls) > 1:  # ballots after the first run under a perturbation
        assert any("accord.ballot.perturbation" in attrs(c) for c in calls)


@pytest.mark.server
def test_the_server_traces_its_ballots(openai_server: str, traced: Traced) -> None:
    from accord.backends.openai._caps import Capabilities

    model = models.openai(base_url=openai_server, capabilities=Capabilities(), max_tokens=8)
    stab = Stabilizer(model, schema=int, vote=Vote(k=2, quorum=1, early_stop=False, gate=None), telemetry=traced.telemetry())
    [result] = stab.map(["What is 2 + 2? Answer with the number only."])  # map: a failed run is a Result too
    calls = traced.calls()
    assert len(calls) == result.calls >= 2  # retries of an invalid answer included
    a = attrs(calls[0])
    assert a["gen_ai.provider.name"] == "openai" and a["server.address"] == "127.0.0.1" and isinstance(a["server.port"], int)
    servers: Any = model.describe()["servers"]
    assert a["gen_ai.response.model"] == servers[0]["model"]
    assert a["gen_ai.usage.input_tokens"] > 0


def test_the_repairs_reading_took_are_on_the_call_span(traced: Traced) -> None:
    repaired = "{stars: 4, sentiment: 'positive',}"  # unquoted keys, single quotes, a trailing comma
    Stabilizer(models.scripted([repaired, GOOD]), schema=Review, vote=Vote(k=2, quorum=1, early_stop=False, gate=None),
               telemetry=traced.telemetry()).run("q")
    by_slot = {attrs(c)["accord.ballot.slot"]: attrs(c) for c in traced.calls()}
    assert by_slot[0]["accord.ballot.coercions"] >= 3
    assert set(by_slot[0]["accord.ballot.coercion_kinds"].split(", ")) >= {"unquoted key", "single quotes", "trailing comma"}
    assert "accord.ballot.coercions" not in by_slot[1]  # valid JSON as written: nothing to say
