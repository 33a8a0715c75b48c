"""The noise a server's own ballots teach (backends/openai/_noise) and the gate that reads it as a
distribution (vote/_risk, vote/_gate), with no model: a mock transport answers with logprobs that
move between calls as a server's batches move them. The real server is in tests/test_vllm.py.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from accord import ConfigError, MarginGate, Stabilizer, models
from accord.backends.openai import _load as load_
from accord.backends.openai import _noise as noise
from accord.backends.openai._caps import Capabilities
from accord.vote._risk import MIN_STEPS, NoiseTail, chi2_quantile, count_bound


class Verdict(BaseModel):
    label: str


# -- the risk a tail of samples bounds --------------------------------------------------------------


def test_the_chi_square_quantiles_and_the_count_bound_are_those_of_the_tables():
    assert chi2_quantile(0.95, 2) == pytest.approx(5.991, abs=1e-3)
    assert chi2_quantile(0.95, 10) == pytest.approx(18.307, rel=0.01)
    assert chi2_quantile(0.05, 20) == pytest.approx(10.851, rel=0.01)
    assert count_bound(0, 1000) == pytest.approx(0.003, rel=0.01)  # none seen in n: about 3 / n
    assert count_bound(10, 1000) > 0.01 and count_bound(10, 10_000) < count_bound(10, 1000)


def test_too_few_samples_say_nothing_and_a_tie_is_never_free():
    assert NoiseTail.of([0.0] * (MIN_STEPS - 1)).risk([5.0]) is None
    quiet = NoiseTail.of([0.0] * 1000)
    assert quiet.risk([0.0]) == pytest.approx(count_bound(0, 1000) / 2)  # an exact tie: bounded by the count alone
    assert quiet.risk([0.01, 3.0]) == 0.0  # no change ever seen: the model sees none past 0


def test_the_bound_falls_with_the_margin_and_tightens_with_more_samples():
    rng = random.Random(7)
    draw = lambda n: [rng.choice((0.0, 0.0, 0.0625, 0.125)) + (0.25 if rng.random() < 0.02 else 0.0) for _ in range(n)]  # noqa: E731
    few, many = NoiseTail.of(draw(300)), NoiseTail.of(draw(30_000))
    for tail in (few, many):
        bounds = [tail.past(m) for m in (0.0, 0.1, 0.2, 0.4, 0.8, 1.6)]
        assert bounds == sorted(bounds, reverse=True) and bounds[-1] < 1e-3
        seen = sum(d > 0.1 for d in tail.deltas) / tail.n
        assert tail.past(0.1) >= seen  # an upper bound on what was seen
    assert many.clears(1e-4) < few.clears(1e-4)  # more samples, a smaller margin clears the same risk
    assert many.quantiles()["max"] >= many.quantiles()["p99"] >= many.quantiles()["p50"]


# -- the gate -----------------------------------------------------------------------------------------


class Learned:
    def __init__(self, tail: NoiseTail | None, check: bool = False) -> None:
        self.tail, self.check, self.heard = tail, check, []

    def tail_at(self, load):
        return self.tail if load is None or load <= 4 else None

    def check_due(self):
        return self.check

    def checked(self, agreed, server):
        self.heard.append(agreed)


class Backend:
    def __init__(self, learned):
        from accord.backends._base import Noise

        self._noise = Noise(math.inf, learned=learned)

    def noise(self):
        return self._noise


def test_the_gate_reads_the_risk_refuses_an_unseen_load_and_checks_when_due():
    tail = NoiseTail.of([0.0] * 900 + [0.0625] * 90 + [0.125] * 10)
    gate = MarginGate()
    clear = gate.check((5.0, 4.0, 6.0), Backend(Learned(tail)), load=2)
    assert clear.certified and clear.risk is not None and clear.risk <= gate.risk
    near = gate.check((5.0, 0.05), Backend(Learned(tail)), load=2)
    assert not near.certified and near.fragile_steps == 1 and near.steps == (1,)
    unseen = gate.check((5.0, 4.0), Backend(Learned(tail)), load=16)
    assert not unseen.certified and unseen.learning  # past the loads learned: learn, do not accept
    checked = gate.check((5.0, 4.0), Backend(Learned(tail, check=True)), load=1)
    assert checked.checked and not checked.certified
    strict = MarginGate(rule="max").check((0.2,), Backend(Learned(tail)), load=1)
    assert strict.certified and strict.floor == 0.125
    given = MarginGate(floor=0.3).check((0.2,), Backend(Learned(tail)), load=1)
    assert not given.certified and not given.learning  # a floor given is the floor
    with pytest.raises(ConfigError, match="risk"):
        MarginGate(risk=0)
    with pytest.raises(ConfigError, match="rule"):
        MarginGate(rule="mean")


# -- the learner, over a mock server --------------------------------------------------------------


def test_hosted_and_self_hosted_servers_are_told_apart():
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:1/v1", "http://10.0.0.7/v1", "http://gpu-box:8000/v1",
                "http://vllm.internal/v1", "http://[::1]:9/v1", "http://192.168.1.4/v1"):
        assert load_.self_hosted(url), url
    for url in ("https://api.openai.com/v1", "https://openrouter.ai/api/v1", "https://8.8.8.8/v1", "http://mock.test/v1"):
        assert not load_.self_hosted(url), url


def test_a_server_s_metrics_give_its_requests_in_flight():
    text = ('# HELP vllm:num_requests_running x\nvllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\nvllm:other 9\n')
    assert load_._running(text) == 5 and load_._running("llamacpp:requests_processing 4\n") == 4
    assert load_._running("nothing here 1\n") is None
    assert load_._metrics_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/metrics"
    assert [noise.bin_of(n) for n in (None, 1, 2, 4, 5, 16, 17, 300)] == [0, 0, 1, 1, 2, 2, 3, 5]


def answer(rng: random.Random, label: str, gaps: list[float], jitter: float) -> dict[str, Any]:
    """A chat completion whose every token lists the same runner-up, the gaps moved by noise."""
    tokens = [{"token": f"t{i}", "logprob": -0.01, "bytes": None,
               "top_logprobs": [{"token": f"t{i}", "logprob": -0.01, "bytes": None},
                                {"token": f"u{i}", "logprob": -0.01 - max(0.0, g + rng.choice((-jitter, 0.0, jitter))), "bytes": None}]}
              for i, g in enumerate(gaps)]
    return {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "system_fingerprint": "fp1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": json.dumps({"label": label})},
                         "logprobs": {"content": tokens}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(gaps), "total_tokens": 5 + len(gaps)}}


def backend_on(handler: Any, **options: Any) -> Any:
    client = openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    # spread: ballots one at a time, later ones with batch neighbours (sent to a closed port: they fail, as a
    # neighbour may, and still count in the load), so two ballots of a prompt never both ran alone
    return models.openai(client, **{"model": "m", "capabilities": Capabilities(), "structured": False, **options})


def test_a_server_learns_its_noise_from_its_own_ballots_then_accepts_one_call_and_checks_some(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_NOISE_FILE", str(tmp_path / "noise.json"))
    rng = random.Random(3)
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metrics"):
            return httpx.Response(404)
        calls["n"] += 1
        return httpx.Response(200, json=answer(rng, "yes", [6.0, 5.0, 7.0, 4.0] * 5, 0.0625))

    backend = backend_on(handler)
    assert backend.describe()["gate"].startswith("on, learning")
    stabilizer = Stabilizer(backend, Verdict)
    learning = stabilizer.run("prompt 0")
    assert learning.gate == "learning" and learning.calls == 3  # voted, and learned from
    stored = json.loads((tmp_path / "noise.json").read_text())["deployments"]
    (key, entry), = stored.items()
    assert key.startswith("m @ http://127.0.0.1:9/v1") and entry["fingerprint"] == "fp1"
    assert sum(b["pairs"] for b in entry["bins"].values()) == 3  # three ballots: three pairs
    results = [stabilizer.run(f"question {i}") for i in range(16)]
    gates = [r.gate for r in results]
    assert gates.count("certified") >= 12 and "checked" in gates  # one call each, and a share checked
    assert all(r.calls == 1 for r in results if r.gate == "certified")
    said = backend.describe()
    (learned,) = said["noise"].values()
    assert said["gate"].startswith("on: accepts one ballot") and learned["checks"] >= 1 and learned["contradicted"] == 0
    assert learned["steps"] >= MIN_STEPS and learned["quantiles"]["max"] <= 0.125
    assert said["neighbours"].startswith("on")  # a loopback server: its own
    assert learning.usage.neighbour_requests == 4 and learning.usage.requests == 7  # ballot 1 with one, ballot 2 with three
    # Another process on the machine reads what this one learned.
    again = Stabilizer(backend_on(handler), Verdict).run("one more")
    assert again.gate in ("certified", "checked")


def test_a_contradicted_check_is_recorded_and_moves_the_tail(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_NOISE_FILE", str(tmp_path / "noise.json"))
    rng = random.Random(5)
    turn = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        turn["n"] += 1
        flip = turn["n"] > 40 and turn["n"] % 2 == 0  # later, every other ballot writes the other label
        return httpx.Response(200, json=answer(rng, "no" if flip else "yes", [6.0, 5.0, 7.0, 4.0] * 5, 0.0625))

    backend = backend_on(handler)
    stabilizer = Stabilizer(backend, Verdict)
    results = [stabilizer.run(f"prompt {i}") for i in range(40)]
    (said,) = backend.describe()["noise"].values()
    assert said["checks"] >= 1
    assert said["contradicted"] == sum(r.gate == "contradicted" for r in results)


def test_neighbours_are_off_on_a_hosted_api_and_counted_where_they_go():
    hosted = models.openai(base_url="https://api.openai.com/v1", model="m", api_key="sk-test")
    assert not hosted.neighbours and hosted.describe()["neighbours"].startswith("off: a hosted API")
    own = models.openai(base_url="http://127.0.0.1:9/v1", model="m")
    assert own.neighbours and "neighbour_requests" in own.describe()["neighbours"]
    assert not models.openai(base_url="http://127.0.0.1:9/v1", model="m", spread=False).neighbours


def test_two_ballots_that_both_ran_alone_teach_nothing(tmp_path):
    learner = noise.NoiseLearner(noise.NoiseStore(tmp_path / "noise.json"))
    steps = [("a", {"a": -0.1, "b": -0.6}), ("b", {"b": -0.2, "c": -0.9})]
    moved = [("a", {"a": -0.1, "b": -0.7}), ("b", {"b": -0.2, "c": -0.9})]
    assert learner.heard("http://127.0.0.1:9/v1", "m", None, "p", steps=steps, load=1) == 0
    assert learner.heard("http://127.0.0.1:9/v1", "m", None, "p", steps=moved, load=1) == 0  # one computation twice
    assert learner.heard("http://127.0.0.1:9/v1", "m", None, "p", steps=moved, load=3) == 4  # against each earlier one
    (entry,) = json.loads((tmp_path / "noise.json").read_text())["deployments"].values()
    assert entry["bins"]["<=4"]["hist"] == {"0.000": 3, "0.100": 1}


def test_a_server_s_count_is_polled_while_a_ballot_runs_longer_than_the_idle_time(monkeypatch):
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"vllm:num_requests_running 7\n"
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(load_, "IDLE", 0.2)
    monkeypatch.setattr(load_, "PERIOD", 0.05)
    monkeypatch.setattr(load_, "FRESH", 0.15)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    loads = load_.ServerLoad()
    loads.watch(url)
    time.sleep(0.6)  # a long ballot: three idle times, still in flight
    assert loads.read(url, own=1) == 7 and loads.others(url) == 6
    loads.done(url)
    time.sleep(0.6)
    assert loads.read(url) is None  # polling stopped once nothing was in flight: the count goes stale
    server.shutdown()
