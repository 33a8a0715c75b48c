"""Async fan-out over HTTP: many prompts x k ballots against a real ``transformers serve``.

    python benchmarks/http_fanout.py [--quick] [--prompts 40] [--k 5] [--concurrency 8]
                                     [--continuous-batching | --no-continuous-batching]

Starts ``transformers serve`` on loopback with the embedded SmolLM2-135M-Instruct, then decides
the same prompts twice with ``Vote(k, early_stop=False, gate=None)`` (every ballot runs):

- sequential: ``Stabilizer.map(prompts, concurrency=1)``, one model call in flight at a time;
- fan-out: ``Stabilizer.amap(prompts, concurrency=N)``, N calls in flight across all prompts.

Prints both wall times, calls per second, the ratio, whether the server really ran continuous
batching (its log says ``CB: True`` per request), and how often greedy answers moved: prompts
whose decided answer differs between the two runs, and distinct ballot texts per prompt (with
batching, the same greedy request can decode differently next to different neighbours).

The full run tries continuous batching first and falls back to sequential generation if the
server cannot start with it. ``--quick`` (4 prompts x k=3, no continuous batching: its first
request alone takes ~20 s on CPU) runs in about 30 s, server start included; inside the test
suite it measures the session's server (``$ACCORD_TEST_SERVER_URL``) instead of starting one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Literal

import accord
from accord import Stabilizer, Vote, models

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # servers.py: the test servers

REUSE = "ACCORD_TEST_SERVER_URL"  # set by tests/conftest.py while its server runs
Sentiment = Literal["positive", "negative"]
PRODUCTS = ["blender", "laptop", "jacket", "kettle", "phone", "backpack", "lamp", "headphones", "chair", "camera"]
VERDICTS = [
    "I loved it, great {}.",
    "Terrible {}: it broke on day one.",
    "This {} is wonderful, I would buy it again.",
    "Worst {} I ever owned, a waste of money.",
]


def prompts(n: int) -> list[str]:
    texts = [verdict.format(product) for product in PRODUCTS for verdict in VERDICTS]
    return [f"Is this review positive or negative? '{text}'" for text in texts[:n]]


def decide(url: str, items: list[str], k: int, concurrency: int, max_tokens: int) -> tuple[float, list[Any]]:
    backend = models.openai(base_url=url, max_tokens=max_tokens, timeout=600.0)
    stab = Stabilizer(backend, schema=Sentiment, vote=Vote(k=k, early_stop=False, gate=None), on_no_consensus="plurality")
    start = time.perf_counter()
    if concurrency == 1:
        results = stab.map(items, concurrency=1, progress=False)
    else:
        results = asyncio.run(stab.amap(items, concurrency=concurrency, progress=False))
    return time.perf_counter() - start, results


def spread(results: list[Any]) -> float:
    """Mean number of distinct first-attempt texts per prompt (1.0: every ballot decoded the same)."""
    counts = [len({b.text for b in r.ballots if b.text is not None and b.attempt == 1}) or 1 for r in results]
    return sum(counts) / len(counts)


def invalid(results: list[Any]) -> int:
    return sum(b.status == "invalid" for r in results for b in r.ballots)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4 prompts x k=3, about 30 s")
    parser.add_argument("--prompts", type=int, default=None)
    parser.add_argument("--k", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--server-threads", type=int, default=1, help="the server's torch threads (default 1: "
                        "on a small shared CPU, more threads contend and every call slows down)")
    parser.add_argument("--continuous-batching", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--base-url", default=None, help="measure a running server instead of starting one")
    args = parser.parse_args()
    n = args.prompts or (4 if args.quick else 40)
    k = args.k or (3 if args.quick else 5)
    want_cb = args.continuous_batching if args.continuous_batching is not None else not args.quick
    if args.base_url is None and args.quick and not want_cb:
        args.base_url = os.environ.get(REUSE)  # the test session's server, so the suite runs one at a time
    items = prompts(n)
    if args.base_url:
        seq_seconds, seq, fan_seconds, fan = measure(args.base_url, items, k, args)
        cb_line, start_line = "continuous batching: not checked (a running server)", f"server: {args.base_url}"
    else:
        from servers import model_folder

        try:
            folder = model_folder()
        except accord.ModelNotInstalled as exc:
            print(f"http_fanout: skipped, {exc}")
            return 0
        (seq_seconds, seq, fan_seconds, fan), cb_line, startup = with_server(folder, items, k, args, want_cb)
        start_line = f"server start + warm-up: {startup:.1f} s; server torch threads: {args.server_threads}"
    calls_seq = sum(r.calls for r in seq)
    calls_fan = sum(r.calls for r in fan)
    failed = sum(r.error is not None and not r.votes for r in seq + fan)
    moved = sum(a.value != b.value for a, b in zip(seq, fan, strict=True))
    print(f"http_fanout: transformers serve, SmolLM2-135M-Instruct on {platform.machine()} CPU x{os.cpu_count()}, "
          f"{n} prompts x k={k} ({calls_seq} + {calls_fan} calls), max_tokens={args.max_tokens}")
    print(cb_line)
    print(start_line)
    print(f"sequential  map(concurrency=1):  {seq_seconds:8.2f} s  {calls_seq / seq_seconds:6.2f} calls/s")
    print(f"fan-out     amap(concurrency={args.concurrency}): {fan_seconds:8.2f} s  {calls_fan / fan_seconds:6.2f} calls/s")
    print(f"ratio sequential/fan-out: {seq_seconds / fan_seconds:.2f}x")
    print(f"answers that moved between the runs: {moved}/{n}; distinct first-attempt texts per prompt: "
          f"sequential {spread(seq):.2f}, fan-out {spread(fan):.2f}")
    print(f"invalid ballots (retried with feedback): sequential {invalid(seq)}, fan-out {invalid(fan)}; "
          f"prompts with no valid ballot: {failed}")
    return 0


def measure(url: str, items: list[str], k: int, args: argparse.Namespace) -> tuple[float, list[Any], float, list[Any]]:
    seq_seconds, seq = decide(url, items, k, 1, args.max_tokens)
    fan_seconds, fan = decide(url, items, k, args.concurrency, args.max_tokens)
    return seq_seconds, seq, fan_seconds, fan


def with_server(folder: str, items: list[str], k: int, args: argparse.Namespace, want_cb: bool) -> tuple[Any, str, float]:
    """Measure on a fresh server: with continuous batching first when asked, else without."""
    from servers import serve

    note = ""
    for cb in ([True, False] if want_cb else [False]):
        started = time.perf_counter()
        try:
            with serve(folder, continuous_batching=cb, threads=args.server_threads) as server:
                startup = time.perf_counter() - started
                figures = measure(server.url, items, k, args)
                used = "CB: True" in server.log_tail(10**7)
        except RuntimeError as exc:  # the server would not start in this mode
            if not cb:
                raise
            note = f"continuous batching: the server did not start with it ({str(exc)[:200]}); "
            continue
        if cb:
            line = "worked on CPU (the server log shows CB: True)" if used else "NOT used (no CB: True in the server log)"
            return figures, f"continuous batching: asked; {line}", startup
        return figures, note + "continuous batching: off (the server generates one request at a time)", startup
    raise AssertionError("unreachable")


if __name__ == "__main__":
    sys.exit(main())
