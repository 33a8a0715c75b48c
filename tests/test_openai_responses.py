"""``models.openai(api="responses")``: OpenAI's Responses API as the upstream.

Against the session's real vLLM (``vllm_server``: ``POST /v1/responses`` with logprobs, the
embedded model in bfloat16): the same answers as chat completions on short tasks of
benchmarks/tasks.py, margins read, the gate settling a clear prompt in one call, cached input
read from the usage, streaming, a reference teaching the floor, the docs page's snippet. Faults
(a 429 with Retry-After, a 400) are injected by a mock transport in front of that server, which
answers everything else. What needs no server (the API checked, the ledger identity, what is
sent) runs without one.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import tenacity
from pydantic import BaseModel

import accord
from accord import Budget, Prices, Request, Retry, Schema, Settings, Stabilizer, Vote, models
from accord.backends.openai import _learning as learning
from accord.backends.openai import _responses as responses
from accord.backends.openai import _wire as wire
from accord.backends.openai._caps import Capabilities, Known

ROOT = Path(__file__).resolve().parents[1]
CLEAR = "Is water wet? Answer yes or no."
FAST = Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=3)


class YesNo(BaseModel):
    answer: bool


def tasks() -> Any:
    """benchmarks/tasks.py, loaded by path (benchmarks/ never goes on sys.path: tests/corpus.py says why)."""
    spec = importlib.util.spec_from_file_location("accord_bench_tasks", ROOT / "benchmarks" / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations (``date``) in it
    spec.loader.exec_module(module)
    return module


def backend(server: Any, **options: Any) -> Any:
    options = {"max_tokens": 48, "capabilities": Capabilities(), "api": "responses", **options}
    return models.openai(base_url=server.url, model=server.model, **options)


# -- without a server ------------------------------------------------------------------------------


def test_the_api_is_checked():
    with pytest.raises(accord.ConfigError, match="api must be one of 'chat', 'responses', got 'completions'"):
        models.openai(base_url="http://127.0.0.1:9/v1", model="m", api="completions")
    assert models.openai(base_url="http://127.0.0.1:9/v1", model="m").describe()["api"] == "chat"  # the default


def test_the_identity_names_the_endpoint_and_the_chat_identity_is_unchanged():
    urls = ["http://a.test/v1", "http://b.test/v1/"]
    chat = models.openai(base_url=urls, model="m")
    answers = models.openai(base_url=urls, model="m", api="responses")
    assert chat.identity() == "openai:m@http://a.test/v1|http://b.test/v1/"  # as before: chat runs' ledger keys replay
    assert answers.identity() == "openai:m@http://a.test/v1/responses|http://b.test/v1/responses"
    assert answers.describe()["api"] == "responses" and answers.telemetry()["gen_ai.provider.name"] == "openai"


def refusal(param: str, message: str = "") -> openai.BadRequestError:
    """The 400 a server answers a parameter it does not take with, as the SDK raises it."""
    body = {"message": message or f"Unsupported parameter: '{param}'.", "type": "invalid_request_error", "param": param,
            "code": "unsupported_parameter"}
    response = httpx.Response(400, json={"error": body}, request=httpx.Request("POST", "http://x.test/v1/responses"))
    return openai.BadRequestError(body["message"], response=response, body=body)


def test_a_request_is_the_chat_request_spelled_for_the_responses_api():
    schema = Schema.of(YesNo)
    request = Request(CLEAR, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": CLEAR}], schema,
                      Settings(max_tokens=20, seed=7, top_k=3, stop=("END",)))
    sent = responses.params(request, wire.Options("m", 512, True, 2), Known(), structured=True)
    assert sent == {
        "model": "m", "input": request.messages, "store": False, "max_output_tokens": 20, "temperature": 0.0,
        "text": {"format": {"type": "json_schema", "name": "YesNo", "schema": wire.format_for(schema)[0]["json_schema"]["schema"],
                            "strict": True}},
        "include": ["message.output_text.logprobs"], "top_logprobs": 2, "extra_body": {"top_k": 3, "seed": 7, "stop": ["END"]},
    }  # fmt: skip
    refused = Known(rejected=frozenset({"seed", "top_k", "temperature"}), logprobs="rejected")
    without = responses.params(request, wire.Options("m", 512, True, 2), refused, structured=False)
    assert set(without) == {"model", "input", "store", "max_output_tokens", "extra_body"} and without["extra_body"] == {"stop": ["END"]}
    assert responses.rejected_params(refusal("stop"), sent) == frozenset()  # the user's stop strings: never dropped
    assert responses.rejected_params(refusal("seed"), sent) == {"seed"}
    assert responses.rejected_params(refusal("text.format.schema"), sent) == {"text"}
    assert responses.rejected_params(refusal("logprobs", "logprobs are not supported with gpt-oss models"), sent) == {"include"}
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "http://x/i.png"}}]}]
    assert responses.input_items(parts) == [{"role": "user", "content": [{"type": "input_text", "text": "hi"},
                                                                         {"type": "input_image", "image_url": "http://x/i.png"}]}]


def test_batch_neighbours_speak_the_backend_s_api():
    model = models.openai(base_url="http://127.0.0.1:9/v1", model="m", api="responses")
    neighbours = model._neighbours(Request("p", "p", Schema.of(str), ballot=3), model.servers[0])
    assert neighbours and all(set(n) == {"model", "input", "max_output_tokens", "temperature", "store"} for n in neighbours)


def response_body(text: str = '{"name": "Alice", "age": 30}', **extra: Any) -> dict[str, Any]:
    """A Responses API body, for the answers a fault test scripts."""
    body = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "m", "status": "completed",
        "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 50, "output_tokens": 9, "total_tokens": 59,
                  "input_tokens_details": {"cached_tokens": 32}, "output_tokens_details": {"reasoning_tokens": 0}},
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip
    return {**body, **extra}


class Person(BaseModel):
    name: str
    age: int


def scripted(*answers: httpx.Response) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """A responses backend whose server answers from a list (the last repeats); what it got, recorded."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, json.loads(request.content or b"{}")))
        return answers[min(len(seen), len(answers)) - 1]

    client = openai.OpenAI(api_key="sk-test-0123456789", base_url="http://mock.test/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    return models.openai(client, model="m", api="responses", structured=False, capabilities=Capabilities()), seen


def decide(model: Any) -> accord.Result[Any]:
    return Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None), retry=FAST, budget=Budget(max_seconds=20)).run("Alice is 30.")


def test_what_comes_back_is_read_refusals_reasoning_and_a_failed_response_included():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    refusal = {"type": "message", "id": "msg_0", "role": "assistant", "status": "completed",
               "content": [{"type": "refusal", "refusal": "I cannot help with that."}]}
    model, seen = scripted(httpx.Response(200, json=response_body(status="failed", error={"code": "server_error", "message": "boom"})),
                           httpx.Response(200, json=response_body(output=[reasoning, refusal])),
                           httpx.Response(200, json=response_body(output=[reasoning, *response_body()["output"]])))
    result = decide(model)
    assert result.value == Person(name="Alice", age=30) and [b.status for b in result.ballots] == ["error", "invalid", "valid"]
    assert result.ballots[0].error["retryable"] and "the response failed: boom" in result.ballots[0].error["message"]
    assert result.ballots[1].meta["refusal"] == "I cannot help with that." and result.ballots[1].text == ""
    assert result.ballots[2].usage.cached_tokens == 32 and result.ballots[2].usage.prompt_tokens == 50
    assert {path for path, _ in seen} == {"/v1/responses"} and all(body["store"] is False for _, body in seen)


# -- the real server -------------------------------------------------------------------------------

SHORT_TASKS = ["sentiment-0", "sentiment-1", "yesno-0", "yesno-1", "integer-0", "integer-5", "date-0", "person-0"]


@pytest.mark.vllm
def test_the_same_answers_as_chat_completions_on_short_tasks(vllm_server):
    module = tasks()
    items = [item for item in module.items() if item["id"] in SHORT_TASKS]
    chat, answers = backend(vllm_server, api="chat"), backend(vllm_server)
    for item in items:
        schema = getattr(module, item["schema"].split(":")[1])
        by_chat, by_responses = (Stabilizer(m, schema=schema, vote=Vote(k=1, gate=None)).run(item["prompt"]) for m in (chat, answers))
        assert by_responses.value == by_chat.value, (item["id"], by_chat.ballots, by_responses.ballots)
        (ballot,) = by_responses.ballots
        assert ballot.text == by_chat.ballots[0].text and ballot.status == "valid", item["id"]
        assert ballot.meta["structured"] == "text.format" and ballot.min_margin is not None, item["id"]  # logprobs read
        assert by_responses.min_margin == by_chat.min_margin, item["id"]  # the same tokens, the same logits
    assert answers.describe()["servers"][0]["capabilities"] == {"rejected": [], "response_format": "honoured", "logprobs": "returned",
                                                                "whitespace": "compact"}
    assert set(answers.capabilities._known) == {(f"{vllm_server.url}/responses", vllm_server.model)}  # apart from chat's


@pytest.mark.vllm
def test_the_gate_settles_a_clear_prompt_in_one_call_and_ballots_spread(vllm_server):
    gated = backend(vllm_server, margins=models.Margins(noise_floor=0.1))
    assert gated.gives_margins and gated.describe()["gate"].startswith("on")
    result = Stabilizer(gated, schema=YesNo).run(CLEAR)
    assert result.value == YesNo(answer=True) and result.stopped_because == "gate" and result.calls == 1, result.ballots
    assert result.fragile_steps == 0 and result.min_margin >= 0.1
    voted = asyncio.run(Stabilizer(backend(vllm_server), schema=YesNo, vote=Vote(k=3, early_stop=False, gate=None)).arun(CLEAR))
    assert voted.value == YesNo(answer=True) and sorted(b.meta.get("neighbours", 0) for b in voted.ballots) == [0, 1, 3]


@pytest.mark.vllm
def test_cached_input_is_read_and_priced(vllm_server):
    text = f"Ticket {uuid.uuid4().hex}. " + "The committee met again on Thursday to review the quarterly figures. " * 25
    prices = Prices({"*": (1.0, 2.0, 0.1)})
    model = backend(vllm_server, structured=True)  # no probe: each run's usage is its one call
    stab = Stabilizer(model, schema=YesNo, vote=Vote(k=1, gate=None), prices=prices)
    first, again = (stab.run(f"{text}\nWas there a meeting? Answer yes or no.") for _ in range(2))
    assert first.usage.prompt_tokens == again.usage.prompt_tokens > 300 and first.calls == again.calls == 1
    assert first.usage.cached_tokens < 64, first.usage  # a new prompt: at most the chat template's head was cached
    assert again.usage.cached_tokens - first.usage.cached_tokens >= 256, again.usage  # the same prompt again: vLLM's prefix cache
    assert again.usage.cost < first.usage.cost


@pytest.mark.vllm
def test_streamed_answers_are_the_same_with_margins(vllm_server):
    whole, streamed = backend(vllm_server), backend(vllm_server, streamed=True)
    request = Request(CLEAR, CLEAR, Schema.of(YesNo), Settings(max_tokens=24))
    a, b = whole.generate(request), streamed.generate(request)
    chat = backend(vllm_server, api="chat", streamed=True).generate(request)
    assert (a.text, a.finish_reason, a.margins, a.pieces) == (chat.text, chat.finish_reason, chat.margins, chat.pieces)
    assert (a.text, a.finish_reason) == (b.text, b.finish_reason) and b.margins and b.pieces
    # vLLM's Responses stream has no delta for the end-of-sequence token (its chat stream has): one step fewer
    assert len(a.margins) - len(b.margins) in (0, 1) and a.margins[: len(b.margins)] == b.margins and a.pieces[: len(b.pieces)] == b.pieces
    parts = list(streamed.stream(request))
    deltas, last = parts[:-1], parts[-1]
    assert isinstance(last, accord.Completion) and "".join(deltas) == last.text == a.text and len(deltas) > 1
    cut = whole.generate(request.with_settings(max_tokens=3))
    assert cut.finish_reason == "length" and cut.usage.completion_tokens == 3


@pytest.mark.vllm
def test_a_reference_teaches_the_floor_from_the_responses_api_s_logprobs(vllm_server, local_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(learning, "LEARN", 2)  # two first ballots learn the floor (8 by default)
    model = backend(vllm_server, reference=local_model, margins=models.Margins(dtype_label="bfloat16"), max_tokens=24)
    first = Stabilizer(model, schema=YesNo).run(CLEAR)  # learning: the reference decides
    assert first.stopped_because == "reference" and first.value == YesNo(answer=True)
    assert [b.meta["deployment"] for b in first.ballots] == ["serving", "reference"]
    Stabilizer(model, schema=YesNo).run("Is the sun cold? Answer yes or no.")
    assert model._learner.samples == 2 and model._learner.other_prompt is None  # vLLM counted the prompt the reference read
    assert model.describe()["noise_floor_from"] == "learned" and model.noise().floor > 0


@pytest.mark.vllm
def test_faults_in_front_of_the_server_a_429_a_refused_seed_and_a_bad_request(vllm_server):
    upstream = httpx.Client(timeout=120)
    origin = vllm_server.url.removesuffix("/v1")
    faults: list[httpx.Response] = []
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:  # a fault if one is queued, else the real server's answer
        paths.append(request.url.path)
        if faults:
            return faults.pop(0)
        answer = upstream.send(httpx.Request(request.method, origin + request.url.raw_path.decode(), content=request.content,
                                             headers={"content-type": "application/json"}))
        return httpx.Response(answer.status_code, content=answer.content, headers={"content-type": answer.headers["content-type"]})

    client = openai.OpenAI(api_key="sk-test-0123456789", base_url="http://faults.test/v1",
                           http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    model = models.openai(client, model=vllm_server.model, api="responses", max_tokens=48, capabilities=Capabilities())
    stab = Stabilizer(model, schema=YesNo, vote=Vote(k=1, gate=None), retry=FAST, settings=Settings(seed=5))

    faults.append(httpx.Response(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "0.3"}))
    result = stab.run(CLEAR)
    assert result.value == YesNo(answer=True) and [b.status for b in result.ballots] == ["error", "valid"]
    assert result.ballots[0].error["retryable"] and "HTTP 429" in result.ballots[0].error["message"]

    refusal = {"error": {"message": "Unsupported parameter: 'seed'.", "type": "invalid_request_error", "param": "seed",
                         "code": "unsupported_parameter"}}
    faults.append(httpx.Response(400, json=refusal))
    again = stab.run("Is the sun cold? Answer yes or no.")
    assert again.error is None and again.ballots[0].meta["dropped"] == ["seed"] and "seed" not in again.ballots[0].meta
    assert model.describe()["servers"][0]["capabilities"]["rejected"] == ["seed"]

    faults.append(httpx.Response(400, json={"error": {"message": "Invalid 'input': empty.", "type": "invalid_request_error"}}))
    with pytest.raises(accord.BackendError) as caught:
        stab.run("Is ice cold? Answer yes or no.")
    assert caught.value.status == 400 and not caught.value.retryable and len(caught.value.result.ballots) == 1
    assert set(paths) == {"/v1/responses"}
    missing = models.openai(base_url=vllm_server.url, model="no-such-model", api="responses", capabilities=Capabilities())
    with pytest.raises(accord.BackendError) as lost:
        Stabilizer(missing, schema=YesNo, vote=Vote(k=1, gate=None), retry=FAST).run(CLEAR)
    assert lost.value.status == 404 and not lost.value.retryable
