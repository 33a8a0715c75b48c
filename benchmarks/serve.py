"""``accord serve``: what the proxy adds, each figure measured directly and through the proxy in one run.

    python benchmarks/serve.py [--quick] [--check] [--only latency,load,core,vllm] [--base-url URL --model NAME]

Real processes on loopback: the fake upstream (tests/fake_upstream.py, an instant scripted
OpenAI-compatible server), ``accord serve`` (uvicorn; tests/serving.py starts both), and for the
throughput a real vLLM (tests/servers.py, or the server of ``--base-url``; inside the test suite
``--quick`` measures the session's, ``$ACCORD_TEST_VLLM_URL``).

- latency: one request at a time, alternating direct (client -> fake), through the proxy's chat
  completions (client -> proxy -> accord.models.openai -> fake), through its Responses API
  (``POST /v1/responses`` with the same schema as ``text.format``: the same upstream call) and
  through its Messages API (``POST /v1/messages``, the schema as ``output_config.format``: the
  same upstream call again), a keep-alive httpx client. The proxy knows the fake's noise floor
  (``[backend] noise_floor``) and the fake's logprob gaps clear it, so accord's default policy
  settles each answer in one call (the margin gate): the added p50 of each API (target <= 2 ms),
  p99 printed.
- one core: the proxy pinned to CPU 0 (``sched_setaffinity``), the fake and the client on the other CPU,
  16 requests in flight for a few seconds: requests per second, and requests per CPU-second of
  the proxy process (its own throughput on one core, whatever the client could send).
- load: 100 Responses requests, 50 at once, each a vote of two messy ballots (``accord: {"k": 3, "gate": false}``),
  after 50 to warm: all answered with the voted value, and the proxy's resident memory sampled
  every 10 ms: its peak growth over the batch (target: bounded, < 50 MiB). Run after the
  latency and one core: its messy ballots teach the proxy that the fake ignores a schema.
- vLLM: the same requests at concurrency 32 (``max_tokens`` 16, a ``json_schema`` response
  format), directly and through the proxy with ``accord: {"k": 1}`` (one upstream call an
  answer: the same work), alternating, twice: requests per second through the proxy against
  direct (target >= 90%). Then accord's default policy through the proxy: calls per answer.
- calls per answer: through the proxy, with accord's default policy (1 directly, by definition).

``--check`` exits 1 when a target is missed. ``--quick`` (the suite's) measures each figure on
less: 100 requests an arm for the latency (the load is the same 100), 1 s on one core, after 2 warm-up requests an arm one
burst of 8 an arm at concurrency 8 (it checks the path runs; the throughput figure is the full run's, 32 in flight), 2 answers
under the default policy. Each section prints its seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # serving.py, servers.py, fake_upstream.py: the test servers

import httpx  # noqa: E402

from serving import CLIENT_KEY, accord_serve, fake_upstream  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from parsing import machine_speed  # noqa: E402 - beside this file: the machine's pace, a fixed Python loop

REUSE_URL, REUSE_MODEL = "ACCORD_TEST_VLLM_URL", "ACCORD_TEST_VLLM_MODEL"  # set by tests/conftest.py
SCHEMA = {"type": "object", "properties": {"sentiment": {"type": "string", "enum": ["positive", "negative", "neutral"]}},
          "required": ["sentiment"], "additionalProperties": False}  # fmt: skip
FORMAT = {"type": "json_schema", "json_schema": {"name": "Sentiment", "schema": SCHEMA, "strict": True}}
TEXTS = ("The pasta was cold and the waiter ignored us.", "Great pen, writes smoothly.", "It arrived on Tuesday.",
         "Best concert of my life!", "The battery died after a week.", "Delivery was on time, packaging fine.")  # fmt: skip
TEXT_FORMAT = {"format": {"type": "json_schema", "name": "Sentiment", "schema": SCHEMA, "strict": True}}
FLOOR_CONFIG = '[backend]\nnoise_floor = 0.5\n'  # the fake's gaps are 8: every step clears it
MESSY = ["{sentiment: 'positive'}", '```json\n{"sentiment": "positive"}\n```', '{"sentiment": "positive"}']  # two ballots agree


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def body(model: str, i: int, accord: dict[str, Any] | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    text = TEXTS[i % len(TEXTS)]
    out: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": f"Classify the sentiment (item {i}): {text}"}],
                           "response_format": FORMAT, "temperature": 0}  # fmt: skip
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    if accord is not None:
        out["accord"] = accord
    return out


def responses_body(model: str, i: int, accord: dict[str, Any] | None = None, text: str | None = None) -> dict[str, Any]:
    """The Responses twin of :func:`body`: the same question, the schema as ``text.format``."""
    out: dict[str, Any] = {"model": model, "input": text or f"Classify the sentiment (item {i}): {TEXTS[i % len(TEXTS)]}",
                           "text": TEXT_FORMAT, "temperature": 0}  # fmt: skip
    if accord is not None:
        out["accord"] = accord
    return out


def messages_body(model: str, i: int) -> dict[str, Any]:
    """The Messages twin of :func:`body`: the same question, the schema as ``output_config.format``."""
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": f"Classify the sentiment (item {i}): {TEXTS[i % len(TEXTS)]}"}],
            "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}, "temperature": 0}  # fmt: skip


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def floor_config() -> Iterator[str]:
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as file:
        file.write(FLOOR_CONFIG)
    try:
        yield file.name
    finally:
        os.unlink(file.name)


# -- added latency -----------------------------------------------------------------------------------


def latency(fake: Any, proxy: Any, n: int) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    anthropic_headers = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}  # what Anthropic's clients send
    direct, through, responses, messages, calls = [], [], [], [], []
    with httpx.Client(timeout=30) as client:
        for i in range(n + 20):
            payload, asked, said = body("fake-model", 0), responses_body("fake-model", 0), messages_body("fake-model", 0)
            t = time.perf_counter()
            client.post(f"{fake.url}/chat/completions", json=payload).raise_for_status()
            d = time.perf_counter() - t
            t = time.perf_counter()
            answer = client.post(f"{proxy.url}/chat/completions", json=payload, headers=headers)
            p = time.perf_counter() - t
            t = time.perf_counter()
            made = client.post(f"{proxy.url}/responses", json=asked, headers=headers)
            r = time.perf_counter() - t
            t = time.perf_counter()
            message = client.post(f"{proxy.url}/messages", json=said, headers=anthropic_headers)
            m = time.perf_counter() - t
            for answered in (answer, made, message):
                answered.raise_for_status()
            if i >= 20:  # the first ones warm every path (the probe, the Stabilizer, the pools)
                direct.append(d)
                through.append(p)
                responses.append(r)
                messages.append(m)
                calls += [answer.json()["accord"]["calls"], made.json()["accord"]["calls"], message.json()["accord"]["calls"]]
    p50 = statistics.median
    return {"direct_p50": p50(direct), "direct_p99": percentile(direct, 99), "proxy_p50": p50(through), "proxy_p99": percentile(through, 99),
            "responses_p50": p50(responses), "responses_p99": percentile(responses, 99), "added_p50": p50(through) - p50(direct),
            "added_p99": percentile(through, 99) - percentile(direct, 99), "responses_added_p50": p50(responses) - p50(direct),
            "responses_added_p99": percentile(responses, 99) - percentile(direct, 99), "messages_p50": p50(messages),
            "messages_p99": percentile(messages, 99), "messages_added_p50": p50(messages) - p50(direct),
            "messages_added_p99": percentile(messages, 99) - percentile(direct, 99), "calls_per_answer": sum(calls) / len(calls), "n": n}  # fmt: skip


# -- 100 Responses requests, 50 at once ------------------------------------------------------------------


def responses_load(proxy: Any, n: int = 100, at_once: int = 50, warm: int = 50) -> dict[str, Any]:
    pid = proxy.process.pid

    async def batch(count: int) -> list[httpx.Response]:
        gate = asyncio.Semaphore(at_once)
        limits = httpx.Limits(max_connections=at_once, max_keepalive_connections=at_once)
        async with httpx.AsyncClient(timeout=60, limits=limits, headers={"authorization": f"Bearer {CLIENT_KEY}"}) as client:

            async def one(i: int) -> httpx.Response:
                text = f"Classify the sentiment (load {i}, {time.monotonic_ns()}): Great pen. FAKE:{json.dumps({'say': MESSY})}"
                async with gate:
                    return await client.post(f"{proxy.url}/responses", json=responses_body("fake-model", i, {"k": 3, "gate": False}, text))

            return list(await asyncio.gather(*(one(i) for i in range(count))))

    asyncio.run(batch(warm))  # every path taken once
    before, peak, done = rss_mib(pid), [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            done.wait(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    answers = asyncio.run(batch(n))
    took = time.perf_counter() - t0
    done.set()
    sampler.join()
    right = [a for a in answers if a.status_code == 200
             and json.loads(a.json()["output"][0]["content"][0]["text"]) == {"sentiment": "positive"}]  # fmt: skip
    return {"n": n, "at_once": at_once, "answered": len(right), "statuses": sorted({a.status_code for a in answers}), "seconds": took,
            "rss_before": before, "peak_growth": max(peak[0], rss_mib(pid)) - before, "rss_after": rss_mib(pid),
            "calls_per_answer": sum(a.json()["accord"]["calls"] for a in answers if a.status_code == 200) / max(1, len(right))}  # fmt: skip


# -- one core ---------------------------------------------------------------------------------------


def one_core(fake: Any, proxy: Any, seconds: float, in_flight: int = 16, warm: float = 1.0) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    payload = body("fake-model", 1)
    done = 0

    async def lane(client: httpx.AsyncClient, end: float) -> None:
        nonlocal done
        while time.monotonic() < end:
            (await client.post(f"{proxy.url}/chat/completions", json=payload, headers=headers)).raise_for_status()
            done += 1

    async def run() -> tuple[float, float]:
        limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            await asyncio.gather(*(lane(client, time.monotonic() + warm) for _ in range(in_flight)))  # warm
            nonlocal done
            done = 0
            start_cpu, start = cpu_seconds(proxy.process.pid), time.monotonic()
            await asyncio.gather(*(lane(client, start + seconds) for _ in range(in_flight)))
            took = time.monotonic() - start
            return took, cpu_seconds(proxy.process.pid) - start_cpu

    took, cpu = asyncio.run(run())
    return {"rps": done / took, "per_cpu_second": done / cpu if cpu else float("nan"), "proxy_cpu_share": cpu / took, "requests": done}


# -- throughput with vLLM --------------------------------------------------------------------------


async def _burst(url: str, bodies: list[dict[str, Any]], concurrency: int, key: str) -> tuple[float, list[dict[str, Any]]]:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=600, limits=limits, headers={"authorization": f"Bearer {key}"}) as client:

        async def one(payload: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                answer = await client.post(f"{url}/chat/completions", json=payload)
                answer.raise_for_status()
                return answer.json()  # type: ignore[no-any-return]

        start = time.perf_counter()
        answers = list(await asyncio.gather(*(one(b) for b in bodies)))
        return time.perf_counter() - start, answers


def throughput(vllm_url: str, model: str, proxy: Any, *, n: int, concurrency: int, rounds: int, n_default: int, warm: int) -> dict[str, Any]:
    direct_rps, proxy_rps, k1_calls = [], [], []
    start = time.monotonic()
    asyncio.run(_burst(vllm_url, [body(model, i, max_tokens=16) for i in range(warm)], concurrency, "none"))  # the schema's grammar compiled
    asyncio.run(_burst(proxy.url, [body(model, i, {"k": 1}, 16) for i in range(warm)], concurrency, CLIENT_KEY))  # the probe, the Stabilizer
    for r in range(rounds):
        offset = 1000 * (r + 1)
        took, _ = asyncio.run(_burst(vllm_url, [body(model, offset + i, max_tokens=16) for i in range(n)], concurrency, "none"))
        direct_rps.append(n / took)
        took, answers = asyncio.run(_burst(proxy.url, [body(model, offset + 500 + i, {"k": 1}, 16) for i in range(n)], concurrency, CLIENT_KEY))
        k1_calls += [a["accord"]["calls"] for a in answers]  # more than 1 when an invalid output was retried
        proxy_rps.append(n / took)
    compared = time.monotonic() - start
    took, answers = asyncio.run(_burst(proxy.url, [body(model, 90_000 + i, None, 16) for i in range(n_default)], concurrency, CLIENT_KEY))
    calls = [a["accord"]["calls"] for a in answers]
    return {"direct_rps": statistics.median(direct_rps), "proxy_rps": statistics.median(proxy_rps), "rounds": rounds, "n": n,
            "ratio": statistics.median(proxy_rps) / statistics.median(direct_rps), "default_calls_per_answer": sum(calls) / len(calls),
            "default_rps": n_default / took, "default_upstream_calls": sum(a["accord"]["upstream_calls"] for a in answers) / n_default,
            "n_default": n_default, "k1_calls_per_answer": sum(k1_calls) / len(k1_calls), "compared_s": compared, "default_s": took,
            "all_direct": direct_rps, "all_proxy": proxy_rps}  # fmt: skip


@contextlib.contextmanager
def vllm_target(url: str | None, model: str | None) -> Iterator[tuple[str, str] | None]:
    if url is not None:
        yield url, model or ""
        return
    if os.environ.get("ACCORD_SKIP_VLLM") == "1":
        yield None
        return
    from servers import model_folder, serve_vllm

    with serve_vllm(model_folder()) as server:
        yield server.url, server.model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer requests, shorter runs, one vLLM round")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--only", default="latency,load,core,vllm", help="sections to run: latency, load, core, vllm")
    parser.add_argument("--base-url", help="a running vLLM (its /v1 URL) instead of starting one")
    parser.add_argument("--model", help="the model name on --base-url")
    parser.add_argument("--requests", type=int, help="latency: requests per arm (default 1000; --quick 100)")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    began = time.monotonic()
    n_latency = args.requests or (100 if args.quick else 1000)
    print(f"accord serve benchmark ({'quick' if args.quick else 'full'}): python {platform.python_version()}, {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, pace {machine_speed():.0f} ms "
          "(benchmarks/parsing.py's fixed loop: 30-110 ms on this project's machines)")  # fmt: skip
    met = []
    if sections & {"latency", "load", "core"}:
        with floor_config() as config, fake_upstream() as fake, accord_serve([fake.url], "--api-key", CLIENT_KEY, "--config", config) as proxy:
            if "latency" in sections:
                t0 = time.monotonic()
                figures = latency(fake, proxy, n_latency)
                ok = figures["added_p50"] <= 0.002
                ok_responses = figures["responses_added_p50"] <= 0.002
                ok_messages = figures["messages_added_p50"] <= 0.002
                met += [ok, ok_responses, ok_messages]
                print(f"latency, one call an answer ({figures['n']} requests each, alternating; calls per answer through the proxy "
                      f"{figures['calls_per_answer']:.2f}):")  # fmt: skip
                print(f"  direct            p50 {figures['direct_p50'] * 1000:.2f} ms  p99 {figures['direct_p99'] * 1000:.2f} ms")
                print(f"  chat completions  p50 {figures['proxy_p50'] * 1000:.2f} ms  p99 {figures['proxy_p99'] * 1000:.2f} ms")
                print(f"  responses         p50 {figures['responses_p50'] * 1000:.2f} ms  p99 {figures['responses_p99'] * 1000:.2f} ms")
                print(f"  messages          p50 {figures['messages_p50'] * 1000:.2f} ms  p99 {figures['messages_p99'] * 1000:.2f} ms")
                print(f"  added, chat completions  p50 {figures['added_p50'] * 1000:.2f} ms (target <= 2 ms: {'met' if ok else 'NOT met'})  "
                      f"p99 {figures['added_p99'] * 1000:.2f} ms")  # fmt: skip
                print(f"  added, responses         p50 {figures['responses_added_p50'] * 1000:.2f} ms "
                      f"(target <= 2 ms: {'met' if ok_responses else 'NOT met'})  p99 {figures['responses_added_p99'] * 1000:.2f} ms")  # fmt: skip
                print(f"  added, messages          p50 {figures['messages_added_p50'] * 1000:.2f} ms "
                      f"(target <= 2 ms: {'met' if ok_messages else 'NOT met'})  p99 {figures['messages_added_p99'] * 1000:.2f} ms  "
                      f"({time.monotonic() - t0:.1f} s)")  # fmt: skip
            if "core" in sections and (os.cpu_count() or 1) >= 2:
                everywhere = set(range(os.cpu_count() or 1))
                os.sched_setaffinity(proxy.process.pid, {0})  # the proxy on CPU 0; the fake and this client on CPU 1
                os.sched_setaffinity(fake.proc.process.pid, {1})
                os.sched_setaffinity(0, {1})
                t0 = time.monotonic()
                try:
                    core = one_core(fake, proxy, 1.0 if args.quick else 8.0, warm=0.5 if args.quick else 1.0)
                finally:
                    for pid in (0, proxy.process.pid, fake.proc.process.pid):
                        os.sched_setaffinity(pid, everywhere)
                print(f"one core: the proxy pinned to CPU 0, 16 requests in flight: {core['rps']:.0f} requests/s "
                      f"({core['requests']} requests; the proxy busy {core['proxy_cpu_share'] * 100:.0f}% of its core), "
                      f"{core['per_cpu_second']:.0f} requests per CPU-second of the proxy  ({time.monotonic() - t0:.1f} s)")  # fmt: skip
            if "load" in sections:  # last: its messy ballots teach the proxy that the fake ignores schemas
                t0 = time.monotonic()
                load = responses_load(proxy)
                ok = load["answered"] == load["n"] and load["peak_growth"] < 50
                met.append(ok)
                print(f"load: {load['n']} Responses requests, {load['at_once']} at once (k=3 without the gate: a vote of messy ballots): {load['answered']} answered "
                      f"with the voted value (statuses {load['statuses']}) in {load['seconds']:.1f} s, {load['calls_per_answer']:.2f} calls "
                      f"per answer; the proxy's RSS {load['rss_before']:.0f} MiB before, peak growth {load['peak_growth']:.1f} MiB, "
                      f"{load['rss_after']:.0f} MiB after (target: all answered, growth < 50 MiB: {'met' if ok else 'NOT met'})  "
                      f"({time.monotonic() - t0:.1f} s)")  # fmt: skip
    if "vllm" in sections:
        url = args.base_url or (os.environ.get(REUSE_URL) if args.quick else None)
        model = args.model or (os.environ.get(REUSE_MODEL) if url and not args.base_url else None)
        with vllm_target(url, model) as target:
            if target is None:
                print("vLLM: skipped (ACCORD_SKIP_VLLM=1)")
            else:
                vllm_url, vllm_model = target
                if not vllm_model:
                    vllm_model = httpx.get(f"{vllm_url}/models").json()["data"][0]["id"]
                with accord_serve([vllm_url], "--api-key", CLIENT_KEY, "--concurrency", "64") as proxy:
                    # --quick: one burst of 8 an arm, 8 in flight (the suite checks it runs; the figures are the full run's)
                    n, concurrency = (8, 8) if args.quick else (64, 32)
                    tp = throughput(vllm_url, vllm_model, proxy, n=n, concurrency=concurrency, rounds=1 if args.quick else 2,
                                    n_default=2 if args.quick else n, warm=2 if args.quick else 32)  # fmt: skip
                ok = tp["ratio"] >= 0.9
                met.append(ok)
                print(f"vLLM, concurrency {concurrency}, {tp['n']} requests an arm, {tp['rounds']} round(s) (max_tokens 16, json_schema):")
                print(f"  direct {tp['direct_rps']:.2f} requests/s, through the proxy (k=1: {tp['k1_calls_per_answer']:.2f} calls per answer) "
                      f"{tp['proxy_rps']:.2f} requests/s: "
                      f"{tp['ratio'] * 100:.0f}% of direct (target >= 90%: {'met' if ok else 'NOT met'}); "
                      f"rounds {[round(x, 2) for x in tp['all_direct']]} / {[round(x, 2) for x in tp['all_proxy']]}  ({tp['compared_s']:.1f} s)")  # fmt: skip
                print(f"  accord's default policy through the proxy ({tp['n_default']} requests): {tp['default_calls_per_answer']:.2f} calls per answer "
                      f"({tp['default_upstream_calls']:.2f} upstream calls with batch neighbours), {tp['default_rps']:.2f} answers/s; "
                      f"directly: 1.00 call per answer  ({tp['default_s']:.1f} s)")  # fmt: skip
    print(f"load average at the end {os.getloadavg()[0]:.1f}; {time.monotonic() - began:.1f} s in all")
    return 1 if args.check and not all(met) else 0


if __name__ == "__main__":
    sys.exit(main())
