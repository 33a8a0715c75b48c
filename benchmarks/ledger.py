"""The decision ledger's own cost: hit latency and write throughput, on a temporary SQLite file.

    python benchmarks/ledger.py [--quick] [--check]

Decides one real Result (a 10-field pydantic schema, 5 ballots on a scripted backend), then:
- writes: ``ledger.remember`` of that Result for N distinct prompts, one transaction each
  (sequential, then 4 threads each with its own Ledger connection);
- hits: ``ledger.recall`` (key hash, 2 indexed reads, JSON decode, values validated again through
  the schema, ballots rebuilt) and ``Stabilizer.run`` on a decided prompt.
Prints p50 / p95 / p99 per call, writes per second, and the CPU time per call (process time: on
a shared machine steadier than wall time, for comparing two versions). Target: hit p50 <= 1 ms. ``--check``
exits 1 when the target is missed (``--quick`` alone always exits 0 once it has printed).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import accord

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import ANSWER, Order  # the same nested 10-field schema and answer

K = 5


def stabilizer(ledger: accord.Ledger | None) -> accord.Stabilizer[Order]:
    model = accord.models.scripted([json.dumps(ANSWER)] * K, fingerprint="bench-model")
    return accord.Stabilizer(model, Order, vote=accord.Vote(k=K, early_stop=False), ledger=ledger)


CPU: dict[str, float] = {}  # name -> CPU seconds per call of the last timed() under that name


def timed(calls: int, fn: Callable[[int], Any], name: str) -> list[float]:
    out = []
    cpu = time.process_time()
    for i in range(calls):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    CPU[name] = (time.process_time() - cpu) / calls
    return out


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"{name:<34} {statistics.median(ms):>8.3f} {pct(ms, 0.95):>8.3f} {pct(ms, 0.99):>8.3f}  ms  (n={len(ms)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few seconds: fewer writes and hits")
    parser.add_argument("--check", action="store_true", help="exit 1 when hit p50 misses 1 ms")
    args = parser.parse_args()
    writes, hits = (300, 1000) if args.quick else (5000, 20000)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.sqlite3"
        result = stabilizer(None).run("Extract the order.")
        assert result.stable and result.calls == K
        ledger = accord.Ledger(path)
        stab = stabilizer(ledger)

        # writes: one transaction per remembered run
        start = time.perf_counter()
        write_times = timed(writes, lambda i: ledger.remember(stab, f"order {i}", result), "remember")
        sequential = writes / (time.perf_counter() - start)

        per_thread = writes // 4

        def writer(t: int) -> None:
            with accord.Ledger(path) as own:
                for i in range(per_thread):
                    own.remember(stab, f"thread {t} order {i}", result)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        threaded = 4 * per_thread / (time.perf_counter() - start)

        # hits: a random decided prompt each time
        rng = random.Random(0)
        prompts = [f"order {rng.randrange(writes)}" for _ in range(hits)]
        for p in prompts[:50]:  # warm the page cache and the per-stabilizer key cache
            ledger.recall(stab, p)
        recall_times = timed(hits, lambda i: ledger.recall(stab, prompts[i]), "recall")
        run_times = timed(hits, lambda i: stab.run(prompts[i]), "run")
        replayed = stab.run(prompts[0])
        assert replayed.replayed and replayed.value == result.value and len(replayed.ballots) == K

        runs_stored = len(ledger.runs(limit=None))
        ledger.close()  # the last connection checkpoints and removes the WAL
        size = path.stat().st_size

    p50 = statistics.median(recall_times) * 1000
    print(f"accord ledger benchmark ({'quick' if args.quick else 'full'}): python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}, {platform.machine()}, {K} ballots per run, 10-field schema")
    print(f"{'':<34} {'p50':>8} {'p95':>8} {'p99':>8}")
    print(row("hit: Ledger.recall", recall_times))
    print(row("hit: Stabilizer.run (replayed)", run_times))
    print(row("write: Ledger.remember", write_times))
    print(f"write throughput, 1 writer:         {sequential:>8.0f} runs/s ({sequential * K:.0f} ballots/s)")
    print(f"write throughput, 4 writer threads: {threaded:>8.0f} runs/s (each its own connection)")
    print(f"CPU per call (process time):        recall {CPU['recall'] * 1000:.3f} ms, replayed run {CPU['run'] * 1000:.3f} ms, "
          f"remember {CPU['remember'] * 1000:.3f} ms")
    print(f"stored: {runs_stored} runs, {size / 1e6:.1f} MB ({size / runs_stored / 1e3:.1f} kB per run of {K} ballots)")
    met = p50 <= 1.0
    print(f"target hit p50 <= 1 ms: {'met' if met else 'MISSED'} ({p50:.3f} ms)")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
