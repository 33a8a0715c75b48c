"""``accord serve`` under load, and its bounds: 200 chat requests and 100 Responses requests, 50 at
once (all answered, memory bounded), ``--concurrency`` (upstream calls in flight), ``--queue`` (a 429 past it), and SIGTERM
(in-flight requests finish, new ones get a 503). Real processes, loopback only, bounded.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import openai
import pytest

import serving
from serving import CLIENT_KEY, accord_serve

pytest.importorskip("starlette")

SCHEMA = {"type": "object", "properties": {"stars": {"type": "integer"}, "sentiment": {"type": "string"}}, "required": ["stars", "sentiment"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "Review", "schema": SCHEMA}}
RIGHT = {"stars": 4, "sentiment": "positive"}
MESSY = ["{stars: 4, sentiment: 'positive'}", '```json\n{"sentiment": "positive", "stars": "4"}\n```', '{"stars": 4, "sentiment": "positive"}']


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def prompt(directive: dict[str, Any], text: str = "Review: 'Fine pen.'") -> str:
    return f"{text} [{uuid.uuid4().hex[:10]}] FAKE:{json.dumps(directive)}"


async def gathered(url: str, n: int, at_once: int, ask: Callable[[openai.AsyncOpenAI], Awaitable[Any]]) -> list[Any]:
    """``n`` requests made by ``ask``, at most ``at_once`` in flight; an error status is returned, not raised."""
    client = openai.AsyncOpenAI(base_url=url, api_key=CLIENT_KEY, max_retries=0, timeout=60)
    gate = asyncio.Semaphore(at_once)

    async def one() -> Any:
        async with gate:
            try:
                return await ask(client)
            except openai.APIStatusError as exc:
                return exc

    try:
        return list(await asyncio.gather(*(one() for _ in range(n))))
    finally:
        await client.close()


async def batch(url: str, n: int, at_once: int, directive: dict[str, Any], accord: dict[str, Any]) -> list[Any]:
    return await gathered(url, n, at_once, lambda client: client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": prompt(directive)}], response_format=FORMAT,  # type: ignore[arg-type]
        extra_body={"accord": accord}))


def test_200_requests_50_at_once_are_all_answered_with_memory_bounded(serve_proxy: Any, fake_upstream: Any) -> None:
    pid = serve_proxy.process.pid
    asyncio.run(batch(serve_proxy.url, 30, 30, {"say": MESSY}, {"k": 3}))  # warm: every path taken once
    before = rss_mib(pid)
    fake_upstream.reset()
    answers = asyncio.run(batch(serve_proxy.url, 200, 50, {"say": MESSY}, {"k": 3}))
    grown = rss_mib(pid) - before
    failed = [a for a in answers if isinstance(a, Exception)]
    assert not failed, failed[:3]
    assert all(json.loads(a.choices[0].message.content) == RIGHT for a in answers)
    assert all(a.model_extra["accord"]["calls"] == 2 and a.model_extra["accord"]["stable"] for a in answers)
    stats = fake_upstream.stats()
    assert sum(stats["answered"].values()) == 400  # two ballots each, no more
    assert stats["max_in_flight"] <= 16, "--concurrency 16 bounds the upstream calls of all requests together"
    assert grown < 50, f"RSS grew {grown:.1f} MiB over 200 requests"


async def responses_batch(url: str, n: int, at_once: int) -> list[Any]:
    text = {"format": {"type": "json_schema", "name": "Review", "schema": SCHEMA}}
    return await gathered(url, n, at_once, lambda client: client.responses.create(
        model="fake-model", input=prompt({"say": MESSY}), text=text, extra_body={"accord": {"k": 3}}))  # type: ignore[arg-type]


def test_100_responses_requests_50_at_once_are_all_answered_with_memory_bounded(serve_proxy: Any, fake_upstream: Any) -> None:
    pid = serve_proxy.process.pid
    asyncio.run(responses_batch(serve_proxy.url, 50, 50))  # warm: every path taken once
    before = rss_mib(pid)
    fake_upstream.reset()
    answers = asyncio.run(responses_batch(serve_proxy.url, 100, 50))
    grown = rss_mib(pid) - before
    failed = [a for a in answers if isinstance(a, Exception)]
    assert not failed, failed[:3]
    assert all(json.loads(a.output_text) == RIGHT and a.model_extra["accord"]["calls"] == 2 for a in answers)
    assert sum(fake_upstream.stats()["answered"].values()) == 200  # two ballots each, no more
    assert fake_upstream.stats()["max_in_flight"] <= 16, "--concurrency 16 bounds the upstream calls"
    assert grown < 50, f"RSS grew {grown:.1f} MiB over 100 Responses requests"


def test_the_bounds_an_upstream_down_and_sigterm() -> None:
    """--concurrency bounds the upstream calls and --queue the requests (a 429 past it); with its
    upstream down the proxy answers 502 and is not ready, and back once it is up; on SIGTERM the
    request in flight finishes, a new one gets a 503, and the process exits 0."""
    with serving.fake_upstream() as own, accord_serve([own.url], "--api-key", CLIENT_KEY, "--concurrency", "2", "--queue", "3", "--grace", "10") as proxy:
        auth = {"authorization": f"Bearer {CLIENT_KEY}"}
        answers = asyncio.run(batch(proxy.url, 12, 12, {"say": ['{"stars": 4, "sentiment": "positive"}'], "delay": 0.8}, {"k": 1}))
        refused = [a for a in answers if isinstance(a, openai.RateLimitError)]
        answered = [a for a in answers if not isinstance(a, Exception)]
        assert len(answered) == 5 and len(refused) == 7  # 2 calls in flight + 3 queued; the rest refused at once
        assert all(r.response.headers["retry-after"] == "1" and r.body["code"] == "queue_full" for r in refused)
        assert own.stats()["max_in_flight"] == 2

        one = {"model": "fake-model", "messages": [{"role": "user", "content": prompt({"say": [json.dumps(RIGHT)]})}], "response_format": FORMAT,
               "accord": {"k": 1}}  # fmt: skip
        port = int(own.url.rsplit(":", 1)[1].split("/")[0])
        own.proc.stop()  # the upstream goes down
        down = httpx.post(f"{proxy.url}/chat/completions", json=one, headers=auth, timeout=30)
        assert down.status_code == 502 and down.json()["error"]["code"] == "upstream_unreachable"
        assert httpx.get(f"{proxy.root}/ready").status_code == 503
        with serving.fake_upstream(port) as again:  # and comes back on its address
            assert httpx.get(f"{proxy.root}/ready").status_code == 200
            assert httpx.post(f"{proxy.url}/chat/completions", json=one, headers=auth, timeout=30).status_code == 200

            slow = {**one, "messages": [{"role": "user", "content": prompt({"say": [json.dumps(RIGHT)], "delay": 1.5})}]}
            outcome: dict[str, Any] = {}
            thread = threading.Thread(target=lambda: outcome.update(slow=httpx.post(f"{proxy.url}/chat/completions", json=slow, headers=auth, timeout=30)))
            thread.start()
            deadline = time.monotonic() + 10
            while not again.stats()["in_flight"] and time.monotonic() < deadline:
                time.sleep(0.02)
            proxy.process.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            late = httpx.post(f"{proxy.url}/chat/completions", json=one, headers=auth, timeout=10)
            assert late.status_code == 503 and late.json()["error"]["code"] == "shutting_down"
            assert httpx.get(f"{proxy.root}/ready").status_code == 503
            thread.join(timeout=20)
            assert outcome["slow"].status_code == 200 and json.loads(outcome["slow"].json()["choices"][0]["message"]["content"]) == RIGHT
            assert proxy.process.wait(timeout=10) == 0
        assert "draining" in proxy.log_text()
