"""accord on Ray Data: rows per second with 1 and 2 actors, the cost against one process, and a kill.

    python benchmarks/ray.py [--quick] [--check] [--rows N] [--address GCS] [--dsn DSN]

The backend takes 50 ms a call (``time.sleep``: a remote server's latency) and logs each call
(when, which row) to a file, so calls are counted where they are made. ``Vote(k=3)``: 2 calls a
row, one after the other. Every arm decides the same rows with 8 calls in flight per worker:

- ``map``: ``Stabilizer.map(rows, concurrency=8)`` in this process, no Ray;
- ``ray 1 actor`` / ``ray 2 actors``: ``stabilize_dataset(ds, recipe, actors=n, concurrency=8,
  batch_size=32, num_cpus=0.5)``, collected with ``take_all``.

For each: rows per second end to end (the whole call: for Ray, the actors' start too, which a
large batch pays once) and in steady state (rows over the span from the first model call to the
last). The targets are read on steady state: 2 actors >= 1.8x one actor; one actor's overhead
against ``map`` <= 10%. Then the kill: 2 actors with the ledger on PostgreSQL (a throwaway
server from tests/servers.py, fsync off, or ``--dsn``, a new database there), one actor killed
(``ray.kill``, Ray restarts it) once 40% of the calls were made: rows present, prompts decided
twice (accepted runs per key in the ledger), model calls per row against 2.0 without a kill.

The cluster: ``--address``, else the test session's (``$ACCORD_TEST_RAY_ADDRESS``), else a new
local one (``ray.init(num_cpus=2)``). ``--check`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # this file is ray.py: `import ray` must find Ray
sys.path.insert(0, str(HERE.parent / "tests"))  # servers.py: the throwaway PostgreSQL

import accord  # noqa: E402
from accord.integrations.ray import Recipe, stabilize_dataset  # noqa: E402

CALL_SECONDS = 0.05
CONCURRENCY = 8
BATCH = 32
VOTE = accord.Vote(k=3)
CALLS_PER_ROW = 2  # Vote(k=3) against a backend that always agrees: unanimous after 2
TARGET_SCALING, TARGET_OVERHEAD = 1.8, 0.10
REUSE = "ACCORD_TEST_RAY_ADDRESS"


def answer(prompt: str, *, log: str) -> str:
    n = prompt.split("row ", 1)[1].split(".", 1)[0]
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{time.time():.6f} {n}\n".encode())
    finally:
        os.close(fd)
    time.sleep(CALL_SECONDS)
    return f"label-{int(n) % 5}"


def make_model(log: str, register: str | None = None) -> Any:
    if register is not None:  # the kill: this actor hands its handle to the registry first
        import ray

        ray.get(ray.get_actor(register).add.remote(ray.get_runtime_context().current_actor))
    return accord.models.function(functools.partial(answer, log=log), name="bench-50ms")


class Registry:
    def __init__(self) -> None:
        self.handles: list[Any] = []

    def add(self, handle: Any) -> None:
        self.handles.append(handle)

    def all(self) -> list[Any]:
        return list(self.handles)


def logged(log: Path) -> list[tuple[float, int]]:
    if not log.exists():
        return []
    return [(float(when), int(n)) for when, n in (line.split() for line in log.read_text().splitlines())]


def arm(name: str, rows: int, wall: float, log: Path) -> dict[str, Any]:
    calls = logged(log)
    span = max(w for w, _ in calls) + CALL_SECONDS - min(w for w, _ in calls)
    out = {"name": name, "rows": rows, "wall": wall, "span": span, "calls": len(calls), "e2e": rows / wall, "steady": rows / span}
    print(f"  {name:<14} {out['e2e']:>8.1f} rows/s end to end ({wall:.2f} s)  {out['steady']:>8.1f} rows/s steady ({span:.2f} s)"
          f"  {len(calls) / rows:.2f} calls/row", flush=True)
    return out


def in_process(prompts: list[str], folder: Path) -> dict[str, Any]:
    log = folder / "map.log"
    stab = accord.Stabilizer(make_model(str(log)), str, vote=VOTE)
    start = time.perf_counter()
    results = stab.map(prompts, concurrency=CONCURRENCY, progress=False)
    wall = time.perf_counter() - start
    assert all(r.ok for r in results)
    return arm("map", len(prompts), wall, log)


def on_ray(prompts: list[str], actors: int, folder: Path) -> dict[str, Any]:
    import ray.data

    log = folder / f"ray{actors}.log"
    ds = ray.data.from_items([{"prompt": p} for p in prompts])
    start = time.perf_counter()
    out = stabilize_dataset(ds, Recipe(functools.partial(make_model, str(log)), str, vote=VOTE), actors=actors,
                    concurrency=CONCURRENCY, batch_size=BATCH, num_cpus=0.5).take_all()
    wall = time.perf_counter() - start
    assert len(out) == len(prompts) and all(r["error_type"] is None for r in out)
    return arm(f"ray {actors} actor{'s' if actors > 1 else ''}", len(prompts), wall, log)


def kill(prompts: list[str], folder: Path, dsn: str) -> dict[str, Any]:
    import ray
    import ray.data

    log, name = folder / "kill.log", f"bench-registry-{os.getpid()}"
    registry = ray.remote(Registry).options(name=name, num_cpus=0).remote()
    recipe = Recipe(functools.partial(make_model, str(log), name), str, vote=VOTE, ledger=dsn)
    killed: list[bool] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while len(logged(log)) < 0.4 * CALLS_PER_ROW * len(prompts) and time.monotonic() < deadline:
            time.sleep(0.01)
        ray.kill(ray.get(registry.all.remote())[0], no_restart=False)
        killed.append(True)

    thread = threading.Thread(target=killer)
    thread.start()
    ds = ray.data.from_items([{"prompt": p} for p in prompts])
    start = time.perf_counter()
    out = stabilize_dataset(ds, recipe, actors=2, concurrency=CONCURRENCY, batch_size=BATCH, num_cpus=0.5).take_all()
    wall = time.perf_counter() - start
    thread.join()
    with accord.Ledger(dsn) as ledger:
        runs = ledger.runs(limit=None)
    accepted = Counter(r["key"] for r in runs if r["outcome"] == "accepted")
    per_row = Counter(n for _, n in logged(log))
    got = Counter(r["prompt"] for r in out)
    result = {
        "killed": bool(killed), "restarts": len(ray.get(registry.all.remote())) - 2, "rows_in": len(prompts),
        "rows_out": len(out), "missing": len(set(prompts) - set(got)), "duplicated": sum(1 for c in got.values() if c > 1),
        "errors": sum(1 for r in out if r["error_type"] is not None), "decided_twice": sum(1 for c in accepted.values() if c > 1),
        "decided": len(accepted), "calls": sum(per_row.values()), "calls_per_row": sum(per_row.values()) / len(prompts),
        "most_calls": max(per_row.values()), "interrupted": sum(1 for r in runs if r["outcome"] != "accepted"), "wall": wall,
    }
    print(f"  kill: {'one actor killed' if killed else 'NO KILL'} (restarts seen: {result['restarts']}), {result['rows_out']} of "
          f"{len(prompts)} rows out, {result['missing']} missing, {result['duplicated']} duplicated, {result['errors']} errors;"
          f" prompts decided twice: {result['decided_twice']} (of {result['decided']} decided); {result['calls_per_row']:.3f} calls/row"
          f" (2.000 without a kill; most for one prompt: {result['most_calls']}, the policy's most {VOTE.k * accord.Retry().attempts});"
          f" runs cut short by the kill: {result['interrupted']}; {wall:.2f} s", flush=True)
    return result


@contextlib.contextmanager
def cluster(address: str | None) -> Iterator[str]:
    import ray
    import ray.data

    if address:
        ray.init(address=address, log_to_driver=False)
        where = f"joined {address}"
    else:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
        where = "a new local cluster (num_cpus=2)"
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield where
    finally:
        ray.shutdown()


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn  # its schema accord must be empty: a new database
        return
    from servers import postgres

    with postgres() as server:
        yield server.create_database()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows (the suite's mode)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--rows", type=int, help="rows per arm (default 1600; --quick 128)")
    parser.add_argument("--address", help="a Ray cluster's GCS address to join")
    parser.add_argument("--dsn", help="a PostgreSQL server's DSN for the kill (a new database there)")
    args = parser.parse_args()
    rows = args.rows or (128 if args.quick else 1600)
    prompts = [f"Label row {n}." for n in range(rows)]
    print(f"accord on Ray Data ({'quick' if args.quick else 'full'}): python {platform.python_version()}, {os.cpu_count()} cores, "
          f"{rows} rows an arm, {CALL_SECONDS * 1000:.0f} ms a call, {CALLS_PER_ROW} calls a row, {CONCURRENCY} in flight per worker", flush=True)
    address = args.address or os.environ.get(REUSE)
    with tempfile.TemporaryDirectory() as tmp, cluster(address) as where:
        folder = Path(tmp)
        print(f"cluster: {where}", flush=True)
        one_process = in_process(prompts, folder)
        one = on_ray(prompts, 1, folder)
        two = on_ray(prompts, 2, folder)
        with database(args.dsn) as dsn:
            killed = kill(prompts, folder, dsn)
    scaling, scaling_e2e = two["steady"] / one["steady"], two["e2e"] / one["e2e"]
    overhead, overhead_e2e = one["span"] / one_process["span"] - 1, one["wall"] / one_process["wall"] - 1
    met = {
        "2 actors >= 1.8x one (steady)": scaling >= TARGET_SCALING,
        "overhead vs map <= 10% (steady)": overhead <= TARGET_OVERHEAD,
        "after a kill: every row, 0 decided twice": killed["killed"] and not killed["missing"] and not killed["duplicated"]
        and not killed["decided_twice"] and not killed["errors"],
    }
    print(f"2 actors / 1 actor: {scaling:.2f}x steady, {scaling_e2e:.2f}x end to end (target >= {TARGET_SCALING}x)")
    print(f"1 actor against map in one process: {overhead * 100:+.1f}% steady, {overhead_e2e * 100:+.1f}% end to end (target <= +10%)")
    for name, ok in met.items():
        print(f"  {'met    ' if ok else 'NOT MET'}  {name}")
    print(json.dumps({"map": one_process, "ray1": one, "ray2": two, "kill": killed}))
    return 1 if args.check and not all(met.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
