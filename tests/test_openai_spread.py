"""Ballots spread over HTTP, floors of a server, and the structured-output probe (no model needed).

A loopback server that takes 0.15 s per request shows when requests overlap; a mock transport
answers the rest. The real behaviour against vLLM is in tests/test_vllm.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, ClassVar

import httpx
import openai
import pytest
from pydantic import BaseModel

import accord
from accord import MarginGate, Stabilizer, Vote, models
from accord.backends.openai import _calibrate as calibration
from accord.backends.openai import _spread as spreading
from accord.backends.openai._caps import Capabilities
from accord.backends.openai._probe import probe_verdict


class Person(BaseModel):
    name: str
    age: int


def token(text: str, *tops: float) -> dict[str, Any]:
    return {"token": text, "logprob": tops[0], "bytes": None,
            "top_logprobs": [{"token": f"{text}{i}" if i else text, "logprob": lp, "bytes": None} for i, lp in enumerate(tops)]}


def chat(content: str, gaps: list[float] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
    if gaps is not None:
        choice["logprobs"] = {"content": [token(f"t{i}", -0.01, -0.01 - gap) for i, gap in enumerate(gaps)]}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}


def mock_backend(answer: Any, **options: Any) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer(json.loads(request.content)))

    client = openai.OpenAI(api_key="unused", base_url="http://mock.test/v1", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return models.openai(client, **{"model": "m", "capabilities": Capabilities(), "structured": False, **options})


# -- the structured-output probe -------------------------------------------------------------------


def test_the_probe_counts_a_constrained_answer_cut_off_in_whitespace_as_honoured():
    assert probe_verdict('{"probe": 1}', "stop") == "honoured"
    assert probe_verdict('{\n    "probe"\n\n:\n\n-1\n\n', "length") == "honoured"  # vLLM's answer at 16 tokens
    assert probe_verdict("{\n\n\n", "length") == "honoured" and probe_verdict('{"pro', "length") == "honoured"
    assert probe_verdict("Hello! How can I help you today?", "stop") == "ignored"
    assert probe_verdict("Hello! How can I", "length") == "ignored"
    assert probe_verdict('{"greeting": "hello"}', "stop") == "ignored"
    assert probe_verdict('{"probe": 1} and some prose', "stop") == "ignored"
    assert probe_verdict('{"probe": 1', "stop") == "ignored"  # stopped, not cut off: not the shape


# -- noise floors of a server ----------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_floor_is_stored_per_server_model_and_dtype_and_found_by_the_backend(cache):
    backend = mock_backend(lambda body: chat("x"), margins=models.Margins(dtype_label="bfloat16"))
    learned = backend.noise()  # nobody measured this server: its noise is learned from its own ballots
    assert learned.learned is not None and learned.learned.tail_at(None) is None and backend.gives_margins
    unlearned = mock_backend(lambda body: chat("x"), margins=models.Margins(dtype_label="bfloat16", learn=False))
    assert unlearned.noise() is None and not unlearned.gives_margins  # learn=False: the gate stands aside
    server = backend.servers[0].shown
    calibration.store(server, "m", "bfloat16", {"floor": 0.5})
    calibration.store(server, "m", "float32", {"floor": 0.0})
    calibration.store(server, "other-model", "bfloat16", {"floor": 9.0})
    assert (cache / "http_noise_floors.json").exists()
    assert backend.noise().floor == 0.5 and backend.noise().learned is None and backend.gives_margins  # a calibration comes first
    assert mock_backend(lambda body: chat("x"), margins=models.Margins(dtype_label="float32")).noise().floor == 0.0
    assert mock_backend(lambda body: chat("x")).noise().floor == 0.5  # no dtype: the largest for the server and model
    assert mock_backend(lambda body: chat("x"), margins=models.Margins(dtype_label="float16")).noise().learned is not None  # unmeasured: learned
    assert mock_backend(lambda body: chat("x"), margins=models.Margins(noise_floor=0.25)).noise().floor == 0.25  # a floor given wins
    assert backend.describe()["noise_floor"] == 0.5 and backend.describe()["noise_floor_from"] == "calibrated"


def test_with_a_floor_the_gate_settles_a_clear_answer_in_one_call(cache):
    answer = lambda body: chat('{"name": "Alice", "age": 30}', gaps=[3.0, 1.2, 6.0])  # noqa: E731
    backend = mock_backend(answer, margins=models.Margins(dtype_label="bfloat16"))
    calibration.store(backend.servers[0].shown, "m", "bfloat16", {"floor": 0.5})
    result = Stabilizer(backend, schema=Person).run("Alice is 30.")
    assert result.calls == 1 and result.stopped_because == "gate"
    assert result.min_margin == pytest.approx(1.2) and result.fragile_steps == 0
    fragile = mock_backend(lambda body: chat('{"name": "Alice", "age": 30}', gaps=[3.0, 0.25]), margins=models.Margins(noise_floor=0.5), spread=False)
    result = Stabilizer(fragile, schema=Person).run("Alice is 30.")
    assert result.calls == 3 and result.stopped_because != "gate" and result.ballots[0].fragile_steps == 1


def test_without_logprobs_or_a_floor_no_call_waits_for_the_gate(cache):
    answer = lambda body: chat('{"name": "Alice", "age": 30}', gaps=[3.0])  # noqa: E731
    assert Stabilizer(mock_backend(answer), schema=Person).run("Alice is 30.").calls == 3  # quorum at once
    assert Stabilizer(mock_backend(answer, margins=models.Margins(logprobs=False, noise_floor=0.5)), schema=Person).run("A.").calls == 3


def test_the_gate_change_is_the_largest_move_of_a_gap_up_to_the_fork():
    alone = [("a", {"a": -0.1, "b": -2.1, "c": -5.0}), ("x", {"x": -0.5, "y": -0.9}), ("z", {"z": -0.1, "w": -3.0})]
    loaded = [("a", {"a": -0.1, "b": -2.6, "d": -4.0}), ("y", {"y": -0.6, "x": -0.7}), ("q", {"q": -0.1, "z": -0.2})]
    change, compared = calibration.gap_change(alone, loaded)
    assert compared == 2  # the shared token and the fork; nothing after it
    assert change == pytest.approx(0.5)  # a-b: 2.0 -> 2.5; x-y: 0.4 -> -0.1, also 0.5
    assert calibration.gap_change(alone, alone) == (0.0, 3)


# -- spreading the ballots of one prompt -----------------------------------------------------------


class Slow(BaseHTTPRequestHandler):
    """Answers every chat completion after 0.15 s; records (start, end, is a neighbour, ballot text)."""

    log: ClassVar[list[tuple[float, float, bool]]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        start, log = time.monotonic(), self.log  # this test's log: a neighbour of the last test may still finish
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        neighbour = body["messages"][0]["content"].startswith(spreading.FILLER)
        time.sleep(0.15)
        data = json.dumps(chat('{"name": "Alice", "age": 30}')).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # a cancelled neighbour hung up
            pass
        with self.lock:
            log.append((start, time.monotonic(), neighbour))

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slow_server():
    Slow.log = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", Slow.log
    server.shutdown()


def overlapping(spans: list[tuple[float, float]]) -> bool:
    spans = sorted(spans)
    return any(later[0] < earlier[1] - 0.01 for earlier, later in itertools.pairwise(spans))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ballots_of_one_prompt_go_one_at_a_time_each_with_its_batch_neighbours(slow_server, mode):
    url, log = slow_server
    backend = models.openai(base_url=url, model="m", structured=False, capabilities=Capabilities())
    stab = Stabilizer(backend, schema=Person, vote=Vote(k=3, early_stop=False, gate=None))
    result = stab.run("Alice is 30.") if mode == "sync" else asyncio.run(stab.arun("Alice is 30."))
    assert result.calls == 3 and result.value == Person(name="Alice", age=30)
    ballots = [(s, e) for s, e, neighbour in log if not neighbour]
    assert len(ballots) == 3 and not overlapping(ballots)  # never in one batch
    sent = [b.meta.get("neighbours", 0) for b in result.ballots]
    # the first ballot alone; the later ones, started together (threads in the sync driver), each
    # take the next turn as they get the prompt's turn: which ballot number gets which is a race
    assert sent[0] == 0 and sorted(sent) == [spreading.neighbours(i) for i in range(3)] == [0, 1, 3]
    assert sum(neighbour for _, _, neighbour in log) <= sum(sent)  # cancelled ones may never be logged
    assert sum(neighbour for _, _, neighbour in log) >= 1


def test_ballots_of_different_prompts_still_run_concurrently(slow_server):
    url, log = slow_server
    backend = models.openai(base_url=url, model="m", structured=False, capabilities=Capabilities())
    stab = Stabilizer(backend, schema=Person, vote=Vote(k=1, gate=None))
    start = time.monotonic()
    results = stab.map([f"Alice is {n}." for n in range(6)], concurrency=6)
    assert all(r.error is None for r in results) and time.monotonic() - start < 0.15 * 6 * 0.8
    assert overlapping([(s, e) for s, e, neighbour in log if not neighbour])


def most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e - 0.01, -1) for _, e in spans])
    return max(itertools.accumulate(step for _, step in edges))


def test_a_map_keeps_its_concurrency_in_flight_while_ballots_of_one_prompt_wait_their_turn(slow_server):
    # a ballot waiting for its prompt's turn takes no slot of the concurrency bound: 8 prompts of
    # 3 ballots each at concurrency 4 reach 4 ballots at the server at once (3 at most when the
    # first prompt's waiting ballots held slots); tests/test_map.py counts the slots exactly
    url, log = slow_server
    backend = models.openai(base_url=url, model="m", structured=False, capabilities=Capabilities())
    stab = Stabilizer(backend, schema=Person, vote=Vote(k=3, early_stop=False, gate=None))
    results = stab.map([f"Alice is 30. ({n})" for n in range(8)], concurrency=4)
    assert all(r.error is None and r.calls == 3 for r in results)
    ballots = [(s, e) for s, e, neighbour in log if not neighbour]
    assert len(ballots) == 24 and most_at_once(ballots) == 4


def test_spread_off_sends_the_quorum_at_once_without_neighbours(slow_server):
    url, log = slow_server
    backend = models.openai(base_url=url, model="m", structured=False, capabilities=Capabilities(), spread=False)
    result = Stabilizer(backend, schema=Person, vote=Vote(k=5, gate=None)).run("Alice is 30.")
    assert result.calls == 3 and not any(neighbour for _, _, neighbour in log)
    assert overlapping([(s, e) for s, e, _ in log])


def test_neighbours_differ_in_length_and_a_key_names_the_prompt():
    lengths = {len(spreading.neighbour_messages(turn)[0]["content"]) for turn in range(7)}
    assert len(lengths) >= 5
    request = SimpleNamespace(input="x", schema=accord.Schema.of(Person))
    assert spreading.prompt_key(request) == spreading.prompt_key(SimpleNamespace(input="x", schema=accord.Schema.of(Person)))
    assert spreading.prompt_key(request) != spreading.prompt_key(SimpleNamespace(input="y", schema=accord.Schema.of(Person)))
    assert spreading.neighbours(0) == 0 and all(spreading.neighbours(i) >= 0 for i in range(1, 20))


def test_gate_floor_given_to_the_gate_wins_over_the_server(cache):
    answer = lambda body: chat('{"name": "Alice", "age": 30}', gaps=[0.3])  # noqa: E731
    backend = mock_backend(answer, margins=models.Margins(noise_floor=0.5))
    result = Stabilizer(backend, schema=Person, vote=Vote(k=5, gate=MarginGate(floor=0.1))).run("Alice is 30.")
    assert result.calls == 1 and result.stopped_because == "gate"
