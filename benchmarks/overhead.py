"""The middleware's own cost per ballot, on a scripted backend, for a nested 10-field schema.

    python benchmarks/overhead.py [--quick] [--cpu] [--processor batch|simple] [--against REF] [--instructions]

Prints p50 / p90 microseconds per ballot (target: p50 <= 200 us) for three arms, measured in
interleaved rounds so that the machine's load falls on all of them alike:

    off     the default Stabilizer: OpenTelemetry installed, no tracer provider configured, no hooks
    otel    spans on: an SDK tracer provider whose exporter does nothing, behind the processor a
            service uses (``BatchSpanProcessor``, the documented production choice; ``--processor
            simple`` for ``SimpleSpanProcessor``) (target: <= +50 us a ballot)
    spans   spans on, through a tracer whose spans say they record and do nothing: accord's own
            part of the otel arm (every attribute built, every span started, made current, ended);
            the rest is the SDK's work on each span
    hooks   all five hooks set, each a function that does nothing

Then the SDK's floor on the same pipeline: a bare span, and the very spans a ballot makes (its
call span and its share of the run span, with the same attributes, made current the same way)
made directly on the SDK in a loop with no accord around them: the part of the otel arm accord
cannot remove (a lower bound: inside a run, between accord's own work, the same code runs colder).

The scripted backend returns at once, so the time measured is accord's: building the request,
extracting, normalizing, validating, canonicalizing, voting and assembling the Result (and, in
the other arms, the spans and hook calls). ``--cpu`` measures the process's CPU time instead of
wall-clock time: steadier on a shared machine, where other processes preempt this one.
``--against REF`` also measures the off arm of the git revision REF (``main``: today's accord)
and of this tree, each in fresh processes taking turns (target: off no slower than REF), and
counts the Python function calls a ballot makes in each (cProfile), and in each one's otel arm
the calls, and those into ``opentelemetry``: a count, not a time, it does not move with the
machine's load. ``--instructions`` counts, for each arm and for the SDK's floor,
the machine instructions a ballot takes (valgrind's callgrind, the same process run twice, with
and without the measured runs, the difference divided by their ballots), and the SDK's price of
each thing a span may be asked for (an attribute at the start, a batch of them after it, a list,
being made current, an event): slow (minutes), and the same on an idle machine and a loaded one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

import accord

ROOT = Path(__file__).resolve().parents[1]


class Address(BaseModel):
    street: str
    city: str
    zip: str


class Order(BaseModel):
    id: int
    customer: str
    email: str
    total: float
    currency: Literal["EUR", "USD", "GBP"]
    paid: bool
    items: list[str]
    address: Address
    note: str | None = None
    priority: int


ANSWER = {
    "id": 1042, "customer": "Ada Lovelace", "email": "ada@example.com", "total": 99.5, "currency": "EUR",
    "paid": True, "items": ["book", "pen"], "address": {"street": "1 Main St", "city": "London", "zip": "N1"},
    "note": None, "priority": 2,
}
TEXT = "Here is the order:\n```json\n" + json.dumps(ANSWER) + "\n```"
ARMS = {
    "off": "OTel off (no provider)",
    "otel": "OTel on, no-op exporter",
    "spans": "spans that do nothing",
    "hooks": "hooks set (5 no-op hooks)",
}
PROCESSORS = {"batch": "BatchSpanProcessor", "simple": "SimpleSpanProcessor"}
FLOORS = {"floor": "the SDK alone, the same spans", "bare": "the SDK alone, spans bare"}
PRICES = {  # what --instructions prices on the SDK: each a child span started and ended, with...
    "span": "a span (started, ended; a child)",
    "int8": "8 int attributes at its start",
    "str8": "8 string attributes at its start",
    "list1": "1 list attribute (of 1 string) at its start",
    "batch1": "set_attributes() of 1 int, after its start",
    "batch8": "set_attributes() of 8 ints, after its start",
    "set1": "set_attribute() of 1 int, after its start",
    "current": "made current (set_span_in_context, attach, detach)",
    "event": "an event with 4 attributes",
}


def _nothing(_: Any) -> None:
    return None


def _noop_provider(processor: str = "batch") -> Any:
    """An SDK tracer provider whose exporter drops every span, behind ``processor`` (what is left
    is the spans' cost). Shut it down when done: a batch processor keeps a worker thread."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()) if processor == "batch" else SimpleSpanProcessor(Dropped()))
    return provider


class _Idle:
    """A tracer provider whose spans say they record and do nothing: accord takes its whole traced
    path (attributes built, spans started, made current, ended), and that is all that is left."""

    def __init__(self) -> None:
        from opentelemetry import trace

        class Span(trace.NonRecordingSpan):
            def is_recording(self) -> bool:
                return True

        self.span = Span(trace.INVALID_SPAN_CONTEXT)

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.span


def options(arm: str, processor: str = "batch") -> dict[str, Any]:
    """The Stabilizer options of an arm (``off`` uses none: it runs on any accord, today's too)."""
    if arm == "otel":
        return {"telemetry": accord.Telemetry(tracer_provider=_noop_provider(processor))}
    if arm == "spans":
        return {"telemetry": accord.Telemetry(tracer_provider=_Idle())}
    if arm == "hooks":
        return {"hooks": accord.Hooks(before_request=_nothing, after_ballot=_nothing, on_retry=_nothing, on_result=_nothing, on_error=_nothing)}
    return {}


def measure(runs: int, k: int, clock: Callable[[], float] = time.perf_counter, arm: str = "off", processor: str = "batch") -> list[float]:
    per_ballot = []
    model = accord.models.scripted([TEXT] * k * runs)
    chosen = options(arm, processor)
    stab = accord.Stabilizer(model, schema=Order, vote=accord.Vote(k=k, early_stop=False, gate=None), **chosen)
    for _ in range(runs):
        start = clock()
        result = stab.run("Extract the order.")
        per_ballot.append((clock() - start) / result.calls)
    if "telemetry" in chosen:
        getattr(chosen["telemetry"].tracer_provider, "shutdown", lambda: None)()  # its worker thread, after the timing
    return per_ballot


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e6, ordered[int(len(ordered) * 0.9)] * 1e6


def interleaved(arms: list[str], runs: int, rounds: int, clock: Callable[[], float], processor: str = "batch") -> dict[str, list[list[float]]]:
    """Per-ballot samples of each arm, ``runs`` runs each, taken in ``rounds`` turns (order
    rotating): one list of samples per round."""
    samples: dict[str, list[list[float]]] = {arm: [] for arm in arms}
    for round_ in range(rounds):
        for arm in arms[round_ % len(arms) :] + arms[: round_ % len(arms)]:
            samples[arm].append(measure(max(1, runs // rounds), 5, clock, arm, processor))
    return samples


def paired(rounds: list[list[float]], base: list[list[float]]) -> float:
    """The median over rounds of (this arm's p50 - the base arm's p50) in the same round, in us:
    the load a round ran under falls on both, so it cancels out."""
    return statistics.median(statistics.median(a) - statistics.median(b) for a, b in zip(rounds, base, strict=True)) * 1e6


def span_floor(clock: Callable[[], float], processor: str = "batch", count: int = 5000) -> float:
    """What the SDK itself takes to start and end one bare span (no attributes) on the no-op
    pipeline, in us (a ballot has 1 + 1/k spans)."""
    from opentelemetry import trace

    provider = _noop_provider(processor)
    tracer = provider.get_tracer("floor")
    parent = trace.set_span_in_context(tracer.start_span("parent"))
    for _ in range(200):
        tracer.start_span("x", context=parent).end()
    spent = 0.0
    for _ in range(count // 500):  # a batch processor's queue (2048) emptied between the chunks, untimed
        provider.force_flush()
        start = clock()
        for _ in range(500):
            tracer.start_span("x", context=parent).end()
        spent += clock() - start
    provider.shutdown()
    return spent / (count // 500 * 500) * 1e6


def ballot_floor(clock: Callable[[], float], processor: str = "batch", runs: int = 400, k: int = 5, bare: bool = False) -> float:
    """The spans a run of this benchmark makes, with the same names, kinds and attributes (read
    back from the SDK's in-memory exporter), made directly on the no-op pipeline: the run span,
    then each call span started as a child of it, made current and left, ended; per ballot, in us
    (the median over runs). This is what the SDK takes for what accord records, each attribute
    given once, at the start: the part of the otel arm no code around the SDK can remove. With
    ``bare``: the same spans with no attribute, not made current (what the attributes and the
    current span add is the difference)."""
    from opentelemetry import context, trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    kept = InMemorySpanExporter()
    recorder = TracerProvider()
    recorder.add_span_processor(SimpleSpanProcessor(kept))
    model = accord.models.scripted([TEXT] * k)
    accord.Stabilizer(model, schema=Order, vote=accord.Vote(k=k, early_stop=False, gate=None), telemetry=accord.Telemetry(tracer_provider=recorder)).run("Extract the order.")
    spans = kept.get_finished_spans()
    [run] = [s for s in spans if s.name == "accord.run"]
    calls = [(s.name, s.kind, None if bare else dict(s.attributes or {})) for s in spans if s is not run]
    run_attrs = None if bare else dict(run.attributes or {})
    provider = _noop_provider(processor)
    tracer = provider.get_tracer("floor")

    def one() -> None:
        span = tracer.start_span("accord.run", attributes=run_attrs)
        parent = trace.set_span_in_context(span)
        for name, kind, attrs in calls:
            call = tracer.start_span(name, context=parent, kind=kind, attributes=attrs)
            if not bare:
                context.detach(context.attach(trace.set_span_in_context(call)))
            call.end()
        span.end()

    for _ in range(50):
        one()
    samples = []
    for n in range(runs):
        if n % 50 == 0:
            provider.force_flush()  # a batch processor's queue emptied now and then, untimed
        start = clock()
        one()
        samples.append((clock() - start) / len(calls))
    provider.shutdown()
    return statistics.median(samples) * 1e6


def sdk_price(what: str, count: int, processor: str = "batch") -> None:
    """``count`` times one entry of :data:`PRICES` on the no-op pipeline (after a warm-up), for
    --instructions to count: what the SDK takes for each thing accord may ask of it."""
    from opentelemetry import context, trace

    provider = _noop_provider(processor)
    tracer = provider.get_tracer("price")
    parent = trace.set_span_in_context(tracer.start_span("parent"))
    ints = {f"accord.n{i}": i for i in range(8)}
    strs = {f"accord.s{i}": "chat" for i in range(8)}
    at_start = {"int8": ints, "str8": strs, "list1": {"gen_ai.response.finish_reasons": ["stop"]}}.get(what)
    after = {"batch1": {"accord.n": 1}, "batch8": ints}.get(what)

    def one() -> None:
        span = tracer.start_span("chat", context=parent, attributes=at_start)
        if after is not None:
            span.set_attributes(after)
        elif what == "set1":
            span.set_attribute("accord.n", 1)
        elif what == "current":
            context.detach(context.attach(trace.set_span_in_context(span, parent)))
        elif what == "event":
            span.add_event("accord.retry", {"accord.slot": 0, "accord.attempt": 2, "accord.reason": "invalid", "accord.wait": 0.5})
        span.end()

    for n in range(50 + count):
        one()
        if n % 400 == 399:
            provider.force_flush()  # a batch processor's queue emptied now and then (no span dropped)
    provider.shutdown()


def instructions(whats: list[tuple[str, Path]], processor: str, runs: int = 100, per: int = 5) -> dict[tuple[str, Path], float]:
    """Machine instructions a ballot of each ``(what, src)`` (an arm, or ``floor``; accord imported
    from ``src``) takes, counted by valgrind: a fresh process with ``runs`` measured runs after the
    warm-up, less one with none; two processes at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def count(job: tuple[str, Path, int]) -> int:
        what, src, n = job
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(src)}
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--ir", what, str(n), "--processor", processor]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=3600)
        return int(next(line for line in done.stderr.splitlines() if "Collected" in line).split()[-1])

    jobs = [(what, src, n) for what, src in whats for n in (runs, 0)]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(count, jobs), strict=True))
    return {(what, src): (counts[(what, src, runs)] - counts[(what, src, 0)]) / (runs * per) for what, src in whats}


def _ir_child(what: str, runs: int, processor: str) -> None:
    """What ``instructions`` counts: the warm-up, then ``runs`` runs of ``what``."""
    if what in PRICES:
        sdk_price(what, runs, processor)
    elif what in FLOORS:
        ballot_floor(time.process_time, processor, runs=runs + 1, bare=what == "bare")  # one more: the same work outside the runs
    else:
        measure(20, 5, arm=what, processor=processor)
        if runs:
            measure(runs, 5, arm=what, processor=processor)


def export_src(ref: str, into: Path) -> Path:
    """The ``src`` folder of git revision ``ref``, unpacked under ``into``."""
    archive = into / "src.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), ref, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def calls_per_ballot(runs: int = 100, arm: str = "off") -> tuple[float, float]:
    """Python function calls per ballot of ``arm`` (cProfile's count), and how many of them are
    calls of functions of ``opentelemetry`` (the API's and the SDK's): unlike a time, the same on
    an idle machine and a loaded one."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    measure(runs, 5, arm=arm)
    profile.disable()
    stats: Any = pstats.Stats(profile)
    otel = sum(called for (file, _, _), (_, called, *_) in stats.stats.items() if f"{os.sep}opentelemetry{os.sep}" in file)
    return float(stats.total_calls) / (runs * 5), otel / (runs * 5)


def _child(src: Path, runs: int, cpu: bool, calls: bool = False, arm: str = "off") -> list[float]:
    """The off arm measured in a fresh process that imports accord from ``src`` (with ``calls``:
    the function calls per ballot of ``arm`` instead, all and into OpenTelemetry)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--child", str(runs), *(["--cpu"] if cpu else []), *(["--calls", "--arm", arm] if calls else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=900)
    return [float(x) for x in json.loads(done.stdout)]


def counted(arms: list[str], processor: str, ref: str | None) -> None:
    """``--instructions``: the instructions a ballot takes in each arm and the SDK's floor (and in
    ``ref``'s off and otel arms), printed against the off arm."""
    import shutil

    if shutil.which("valgrind") is None:
        print("  instructions: skipped (valgrind is not installed)")
        return
    with tempfile.TemporaryDirectory(prefix="accord-overhead-") as tmp:
        here = ROOT / "src"
        whats = [(arm, here) for arm in arms] + ([(floor, here) for floor in FLOORS] if "otel" in arms else [])
        theirs = export_src(ref, Path(tmp)) if ref else None
        if theirs is not None:
            whats += [(arm, theirs) for arm in ("off", "otel") if arm in arms]
        found = instructions(whats, processor)
    print("instructions a ballot (valgrind callgrind, 100 runs of k=5; the same on an idle or a loaded machine):")
    for label, src in (("this tree", here), (ref, theirs)):
        if src is None:
            continue
        off = found[("off", src)]
        for what, at in whats:
            if at != src:
                continue
            count = found[(what, src)]
            against_off = "" if what == "off" or what in FLOORS else f" ({count - off:+,.0f})"
            print(f"  {label:<12} {ARMS.get(what) or FLOORS[what]:<34} {count:>9,.0f}{against_off}")
    if "otel" in arms:
        prices = instructions([(what, here) for what in PRICES], processor, runs=1000, per=1)
        span = prices[("span", here)]
        print(f"the SDK's prices on that pipeline (instructions; each on a child span, 1000 times, less the span): {PRICES['span']} {span:,.0f}")
        for what, text in PRICES.items():
            if what != "span":
                print(f"  {text:<54} {prices[(what, here)] - span:+9,.0f}")


def against(ref: str, runs: int, rounds: int, cpu: bool) -> tuple[list[float], list[float], tuple[float, float]]:
    """Off-arm samples of ``ref`` and of this tree, from fresh processes taking turns, and the
    function calls per ballot of each."""
    theirs: list[float] = []
    ours: list[float] = []
    with tempfile.TemporaryDirectory(prefix="accord-overhead-") as tmp:
        src = export_src(ref, Path(tmp))
        for round_ in range(rounds):
            order = [(src, theirs), (ROOT / "src", ours)]
            for where, samples in order if round_ % 2 == 0 else order[::-1]:
                samples.extend(_child(where, max(1, runs // rounds), cpu))
        calls = (_child(src, 100, cpu, calls=True)[0], _child(ROOT / "src", 100, cpu, calls=True)[0])
    return theirs, ours, calls


def otel_calls(ref: str) -> tuple[list[float], list[float]]:
    """The otel arm's function calls per ballot, all and into OpenTelemetry, at ``ref`` and in this
    tree (fresh processes)."""
    with tempfile.TemporaryDirectory(prefix="accord-overhead-") as tmp:
        src = export_src(ref, Path(tmp))
        return _child(src, 100, False, calls=True, arm="otel"), _child(ROOT / "src", 100, False, calls=True, arm="otel")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (for the test suite)")
    parser.add_argument("--cpu", action="store_true", help="CPU time of this process instead of wall-clock time")
    parser.add_argument("--rounds", type=int, default=40, help="turns the arms take (default 40)")
    parser.add_argument("--processor", choices=list(PROCESSORS), default="batch", help="the otel arm's span processor (default batch)")
    parser.add_argument("--against", metavar="REF", help="also compare the off arm with git revision REF (e.g. main)")
    parser.add_argument("--child", type=int, metavar="RUNS", help=argparse.SUPPRESS)  # one off-arm measurement, as JSON
    parser.add_argument("--calls", action="store_true", help=argparse.SUPPRESS)  # with --child: its function calls per ballot
    parser.add_argument("--arm", choices=list(ARMS), default="off", help=argparse.SUPPRESS)  # with --calls: of which arm
    parser.add_argument("--instructions", action="store_true", help="also count the instructions a ballot takes in each arm (valgrind; minutes)")
    parser.add_argument("--ir", nargs=2, metavar=("WHAT", "RUNS"), help=argparse.SUPPRESS)  # what --instructions runs under valgrind
    args = parser.parse_args(argv)
    clock = time.process_time if args.cpu else time.perf_counter
    if args.ir:
        _ir_child(args.ir[0], int(args.ir[1]), args.processor)
        return 0
    if args.child:
        measure(20, 5)  # warm-up: imports, pydantic schema caches
        if args.calls:
            measure(20, 5, arm=args.arm)
        print(json.dumps(calls_per_ballot(args.child, args.arm) if args.calls else measure(args.child, 5, clock)))
        return 0
    runs = 200 if args.quick else 2000
    rounds = 4 if args.quick else args.rounds
    arms = list(ARMS)
    if importlib.util.find_spec("opentelemetry") is None:
        arms = [arm for arm in arms if arm not in ("otel", "spans")]
        print("OTel arms: skipped (opentelemetry is not installed: pip install 'accord[otel]' opentelemetry-sdk)")
    elif importlib.util.find_spec("opentelemetry.sdk") is None:
        arms.remove("otel")
        print("OTel on: skipped (opentelemetry-sdk is not installed: pip install opentelemetry-sdk)")
    for arm in arms:
        measure(20, 5, arm=arm, processor=args.processor)  # warm-up: imports, pydantic schema caches
    samples = interleaved(arms, runs, rounds, clock, args.processor)
    kind = "CPU time" if args.cpu else "wall-clock"
    print(f"overhead per ballot ({kind}), nested 10-field schema, k=5, {runs} runs per arm in {rounds} interleaved rounds:")
    for arm in arms:
        p50, p90 = percentiles([x for round_ in samples[arm] for x in round_])
        if arm == "off":
            note = f"target p50 <= 200 us: {'met' if p50 <= 200 else 'NOT met'}"
        else:
            delta = paired(samples[arm], samples["off"])
            note = f"{delta:+.0f} us a ballot, paired by round"
            if arm == "otel":
                note += f"; target <= +50 us: {'met' if delta <= 50 else 'NOT met'}"
        print(f"  {ARMS[arm]:<28} p50 {p50:4.0f} us, p90 {p90:4.0f} us ({note})")
    if "otel" in arms:
        processor = PROCESSORS[args.processor]
        print(f"  the otel arm's pipeline: an SDK TracerProvider, {processor}, an exporter that drops every span")
        print(f"  the SDK's own bare span there: {span_floor(clock, args.processor):.0f} us (a ballot has 1 + 1/k of them: its call, its share of the run)")
        print(
            f"  the SDK's own cost of a ballot's spans (the same spans and attributes, made in a loop with no accord around them):"
            f" {ballot_floor(clock, args.processor):.0f} us a ballot"
        )
    if args.against:
        theirs, ours, (t_calls, o_calls) = against(args.against, runs, rounds, args.cpu)
        (t50, t90), (o50, o90) = percentiles(theirs), percentiles(ours)
        print(f"  off at {args.against:<21} p50 {t50:4.0f} us, p90 {t90:4.0f} us, {t_calls:.1f} function calls a ballot (fresh processes, taking turns)")
        print(
            f"  off in this tree             p50 {o50:4.0f} us, p90 {o90:4.0f} us, {o_calls:.1f} function calls a ballot"
            f" ({o50 - t50:+.0f} us, {100 * (o50 - t50) / t50:+.1f}%; calls {100 * (o_calls - t_calls) / t_calls:+.1f}%)"
        )
        if "otel" in arms:
            (t_all, t_otel), (o_all, o_otel) = otel_calls(args.against)
            print(f"  otel at {args.against:<20} {t_all:.1f} function calls a ballot, {t_otel:.1f} of them into opentelemetry")
            print(f"  otel in this tree            {o_all:.1f} function calls a ballot, {o_otel:.1f} of them into opentelemetry ({o_otel - t_otel:+.1f})")
    if args.instructions:
        counted(arms, args.processor, args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
