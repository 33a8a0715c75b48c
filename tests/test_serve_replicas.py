"""Two ``accord serve`` replicas on one PostgreSQL ledger (real processes, a real PostgreSQL): one
is SIGKILLed mid-batch; the client's retries are answered by the other, and no request is
decided twice, which the fake upstream's books show (each prompt's answered calls).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import openai
import pytest

from serving import CLIENT_KEY, start_serve

pytest.importorskip("starlette")

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city", "n"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "Place", "schema": SCHEMA}}
PROMPTS = 24
HEDGED = range(0, PROMPTS, 3)  # these are also sent to B while A still decides them: a client's retry on a timeout


def test_replicas_on_one_ledger_decide_each_request_once(postgres_server: Any, fake_upstream: Any) -> None:
    dsn = postgres_server.create_database()
    args = ("--api-key", CLIENT_KEY, "--ledger", dsn)
    a = start_serve([fake_upstream.url], *args)
    b = start_serve([fake_upstream.url], *args)
    try:
        fake_upstream.reset()
        prompts = [f"Where is item {i}? [{uuid.uuid4().hex[:8]}] FAKE:" + json.dumps({"say": [json.dumps({"city": f"C{i}", "n": i})], "delay": 0.3})
                   for i in range(PROMPTS)]  # fmt: skip
        answers, lost = asyncio.run(_batch(a, b, prompts))
        assert lost, "A was killed while it had requests in flight"
        for i, got in enumerate(answers):
            for answer in got:
                assert json.loads(answer.choices[0].message.content) == {"city": f"C{i}", "n": i}
        # decided once: one accepted run per request in the ledger, whichever replica decided it ...
        database = dsn.rsplit("/", 1)[1]
        runs = postgres_server.execute("SELECT key, count(*) FROM accord.runs WHERE outcome = 'accepted' GROUP BY key", database)
        assert len(runs) == PROMPTS and all(count == 1 for _, count in runs)
        # ... and one upstream answer per request, the hedged ones too (a request A was deciding when it died may
        # have had its answer cut off on the way back: B then asked again)
        stats = fake_upstream.stats()
        assert all(stats["answered"].get(p) == 1 for i, p in enumerate(prompts) if i not in lost), stats["answered"]
        assert all(stats["answered"].get(p) in (1, 2) for i, p in enumerate(prompts) if i in lost)

        # the same requests again, to the survivor: every one replayed from the ledger, A's decisions too
        again = asyncio.run(_all(b, prompts))
        for i, answer in enumerate(again):
            assert answer.choices[0].message.content == answers[i][0].choices[0].message.content
            summary = answer.model_extra["accord"]
            assert summary["replayed"] is True and summary["upstream_calls"] == 0 and summary["key"]
        assert fake_upstream.stats()["answered"] == stats["answered"]
        password = postgres_server.password
        assert password not in a.log_text() and password not in b.log_text()
    finally:
        a.kill()
        b.stop()
        a.log.unlink(missing_ok=True)
        b.log.unlink(missing_ok=True)


def _client(proc: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proc.url, api_key=CLIENT_KEY, max_retries=0, timeout=60)


async def _ask(client: openai.AsyncOpenAI, prompt: str) -> Any:
    return await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": prompt}],
                                                response_format=FORMAT, extra_body={"accord": {"k": 1}})  # type: ignore[arg-type]  # fmt: skip


async def _batch(a: Any, b: Any, prompts: list[str]) -> tuple[list[list[Any]], set[int]]:
    """Every prompt to A (the hedged ones to B as well, at once), 6 at a time; A is killed once 8
    are answered; a request A drops goes to B. The answers, and the prompts A dropped."""
    to_a, to_b = _client(a), _client(b)
    gate = asyncio.Semaphore(6)
    done = 0
    lost: set[int] = set()
    killed = asyncio.Event()

    async def one(i: int) -> list[Any]:
        nonlocal done
        async with gate:
            first = asyncio.ensure_future(_ask(to_a, prompts[i]))
            hedge = asyncio.ensure_future(_ask(to_b, prompts[i])) if i in HEDGED else None
            try:
                got = [await first]
            except (openai.APIConnectionError, openai.InternalServerError):
                lost.add(i)
                got = [await _ask(to_b, prompts[i])]  # the client's retry, on the other replica
            if hedge is not None:
                got.append(await hedge)
            done += 1
            if done == 8 and not killed.is_set():
                killed.set()
                await asyncio.to_thread(a.kill)  # SIGKILL, mid-batch
            return got

    try:
        answers = list(await asyncio.gather(*(one(i) for i in range(len(prompts)))))
    finally:
        await to_a.close()
        await to_b.close()
    return answers, lost


async def _all(proc: Any, prompts: list[str]) -> list[Any]:
    client = _client(proc)
    try:
        return list(await asyncio.gather(*(_ask(client, p) for p in prompts)))
    finally:
        await client.close()
