"""``accord.models.anthropic``: the official ``anthropic`` SDK against a real server that speaks the
Messages API, the session's vLLM (``POST /v1/messages``, the embedded model), with no mocks. Faults
(a 400, a 429 with retry-after, a 529, a 401) are injected by a small fault proxy in front of it
(tests/fault_proxy.py), which also records what the SDK sent: the cache marks are asserted on
the requests themselves. The usage mapping of Claude's cache fields, which vLLM does not report
here, is checked on a real SDK ``Message`` built from Claude's JSON. Outputs are short: a 135M
model on a shared CPU.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any, Literal

import anthropic
import pytest
import tenacity
from pydantic import BaseModel

import accord
from accord import Budget, Prompting, Request, Retry, Schema, Settings, Stabilizer, Vote, models
from accord._types import Feedback
from accord.backends.anthropic import _wire as wire
from accord.backends.anthropic._cache import minimum_for
from accord.backends.anthropic._caps import Capabilities, Known
from accord.backends.anthropic._errors import to_backend_error
from accord.backends.openai._errors import redact_url
from accord.prompt._prompt import build_input, render_feedback
from fault_proxy import FaultProxy, fault_proxy
from servers import free_port

KEY = "sk-ant-api03-test-key-0123456789abcdef"
FAST = Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=3)
Sentiment = Literal["positive", "negative", "neutral"]
HAPPY = "Classify the sentiment of this review as positive, negative or neutral.\nReview: I loved this movie, it was wonderful."
PERSON = "Extract the person: Maria Lopez is 34 years old."
LONG_FACT = "The museum opened its new wing in the spring, and visitors came from every part of the region to see it. "


class Person(BaseModel):
    name: str
    age: int


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- the real server, through the fault proxy --------------------------------------------------------


@pytest.fixture(scope="module")
def proxy(vllm_server: Any) -> Iterator[FaultProxy]:
    with fault_proxy(vllm_server.url.removesuffix("/v1")) as found:
        yield found


@pytest.fixture
def fresh(proxy: FaultProxy) -> FaultProxy:
    proxy.clear()
    return proxy


def claude(server: Any, proxy: FaultProxy | None = None, **options: Any) -> Any:
    """``models.anthropic`` on the session's vLLM (through the proxy when given), with its own memory."""
    url = proxy.url if proxy is not None else server.url  # vLLM's URL ends in /v1: the backend drops it
    options = {"model": server.model, "api_key": KEY, "max_tokens": 48, "capabilities": Capabilities(), **options}
    return models.anthropic(base_url=url, **options)


def decide(model: Any, schema: Any, prompt: Any, k: int = 2, **options: Any) -> accord.Result[Any]:
    options = {"vote": Vote(k=k, gate=None), "retry": FAST, "budget": Budget(max_seconds=120), **options}
    return Stabilizer(model, schema=schema, **options).run(prompt)


@pytest.mark.vllm
def test_output_config_gives_voted_values(vllm_server: Any, fresh: FaultProxy) -> None:
    model = claude(vllm_server, fresh)
    mood = decide(model, Sentiment, HAPPY, k=3)
    assert mood.value == "positive" and mood.stable
    first = mood.ballots[0].meta
    assert first["probe"] == "honoured" and first["structured"] == "output_config" and first["wrapped"] == "answer"
    person = decide(model, Person, PERSON)
    assert isinstance(person.value, Person) and "Maria" in person.value.name  # the shape; the 135M model's age may be off
    assert model.constrains and model.constrains_for(Schema.of(Person)) and model.enforces(Schema.of(Person))
    assert model.describe()["server"]["capabilities"] == {"structured": "output_config", "rejected": []}
    sent = fresh.bodies()
    probe, ballots = sent[0], sent[1:]
    assert probe["output_config"]["format"]["schema"]["properties"] == {"probe": {"type": "integer"}}
    assert len(ballots) == len(mood.ballots) + len(person.ballots)
    assert all("output_config" in body and "tools" not in body for body in ballots)
    assert ballots[0]["output_config"]["format"]["schema"]["properties"]["answer"]["enum"] == ["positive", "negative", "neutral"]
    assert all(body["temperature"] == 0.0 for body in ballots)  # the run's temperature, sent in extra_body
    assert mood.usage.calls == len(mood.ballots) and mood.usage.prompt_tokens > mood.ballots[1].usage.prompt_tokens * len(mood.ballots)
    # ^ the probe's tokens count in the ballot that made it, its call does not


@pytest.mark.vllm
def test_a_forced_tool_call_gives_voted_values(vllm_server: Any, fresh: FaultProxy) -> None:
    model = claude(vllm_server, fresh, structured="tool")
    mood = decide(model, Sentiment, HAPPY)
    person = decide(model, Person, PERSON)
    assert mood.value == "positive" and isinstance(person.value, Person) and "Maria" in person.value.name
    assert [b.meta["structured"] for b in mood.ballots + person.ballots] == ["tool"] * 4
    assert mood.ballots[0].meta["stop_reason"] == "tool_use" and mood.ballots[0].meta["wrapped"] == "answer"
    for body in fresh.bodies():
        assert "output_config" not in body and body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
    assert fresh.bodies()[-1]["tools"][0]["input_schema"]["required"] == ["name", "age"]
    assert not model.constrains and model.enforces(Schema.of(Person))  # nothing enforces a tool's input on Claude


@pytest.mark.vllm
def test_a_server_that_refuses_output_config_gets_a_tool_call(vllm_server: Any, fresh: FaultProxy) -> None:
    fresh.fail(400, error_body("invalid_request_error", "output_config: Extra inputs are not permitted"))
    capabilities = Capabilities()
    model = claude(vllm_server, fresh, capabilities=capabilities)
    result = decide(model, Person, PERSON, k=1)
    assert isinstance(result.value, Person)
    assert result.ballots[0].meta["probe"] == "rejected" and result.ballots[0].meta["structured"] == "tool"
    assert [("output_config" in b, "tools" in b) for b in fresh.bodies()] == [(True, False), (False, True)]
    again = claude(vllm_server, fresh, capabilities=capabilities)  # the refusal is remembered: no second probe
    assert decide(again, Person, PERSON, k=1).ballots[0].meta.get("probe") is None
    assert capabilities.get((redact_url(fresh.url), vllm_server.model)) == Known("tool", frozenset({"output_config"}), True)


@pytest.mark.vllm
def test_the_model_is_asked_of_the_server_and_the_async_path_works(vllm_server: Any) -> None:
    model = claude(vllm_server, model=None)
    assert model.fingerprint == f"anthropic:server-default@{vllm_server.url.removesuffix('/v1')}"
    result = asyncio.run(Stabilizer(model, schema=Person, vote=Vote(k=2, gate=None)).arun(PERSON))
    assert isinstance(result.value, Person) and model.describe()["server"]["model"] == vllm_server.model
    assert model.fingerprint.endswith("server-default@" + vllm_server.url.removesuffix("/v1"))  # the same once asked


@pytest.mark.vllm
def test_the_system_prompt_and_examples_go_as_messages_content(vllm_server: Any, fresh: FaultProxy) -> None:
    prompting = Prompting(system="You classify reviews.", examples=[("Review: Awful, it broke.", "negative")])
    result = decide(claude(vllm_server, fresh), Sentiment, HAPPY, k=1, prompting=prompting)
    assert result.value in ("positive", "negative", "neutral")
    body = fresh.bodies()[-1]
    assert body["system"] == [{"type": "text", "text": "You classify reviews."}]
    assert [turn["role"] for turn in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [{"type": "text", "text": "negative"}]


# -- prompt caching ---------------------------------------------------------------------------------


def marks(body: dict[str, Any]) -> list[str]:
    """Where a request carries cache_control: "system[i]" or "messages[i][j]"."""
    found = [f"system[{i}]" for i, block in enumerate(body.get("system") or []) if "cache_control" in block]
    for i, turn in enumerate(body["messages"]):
        found += [f"messages[{i}][{j}]" for j, block in enumerate(turn["content"]) if "cache_control" in block]
    return found


@pytest.mark.vllm
def test_a_long_prompt_is_marked_cacheable_and_a_short_one_is_not(vllm_server: Any, fresh: FaultProxy) -> None:
    model = claude(vllm_server, fresh, structured="output_config")
    document = LONG_FACT * 45  # about 4,900 characters: about 1,200 tokens by the estimate, over the 1,024 minimum
    long = decide(model, Sentiment, f"{document}\n\n{HAPPY}")
    short = decide(model, Sentiment, HAPPY)
    bodies = fresh.bodies()
    assert [marks(body) for body in bodies] == [["messages[0][0]"]] * 2 + [[]] * 2  # each ballot of the long prompt, none of the short
    assert bodies[0]["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert long.ballots[0].meta["cache"] == {"marked": True, "estimated_tokens": long.ballots[0].meta["cache"]["estimated_tokens"],
                                             "minimum": 1024}
    assert long.ballots[0].meta["cache"]["estimated_tokens"] >= 1024 and short.ballots[0].meta["cache"]["marked"] is False
    # What vLLM reports (no prompt token details here): every input token, no cache fields.
    usage = long.ballots[0].usage
    assert usage.prompt_tokens is not None and usage.prompt_tokens > 1000 and usage.cached_tokens is None and usage.cache_write_tokens is None


@pytest.mark.vllm
def test_the_minimum_is_an_option(vllm_server: Any, fresh: FaultProxy) -> None:
    decide(claude(vllm_server, fresh, structured="output_config", cache_min_tokens=10), Sentiment, HAPPY, k=1)
    assert marks(fresh.bodies()[-1]) == ["messages[0][0]"]
    fresh.clear()
    prompting = Prompting(system="You classify reviews. " + LONG_FACT * 45)
    decide(claude(vllm_server, fresh, structured="output_config"), Sentiment, HAPPY, k=1, prompting=prompting)
    assert marks(fresh.bodies()[-1]) == ["messages[0][0]"]  # the prefix ends with the prompt: its last block is marked


def a_request(prompt: Any, schema: Any = Sentiment, **changes: Any) -> Request:
    return Request(prompt, prompt, Schema.of(schema), **changes)


def test_a_retry_keeps_reading_the_cached_prefix() -> None:
    """The feedback block goes after the mark, so a retry's prefix is the first attempt's."""
    schema = Schema.of(Sentiment)
    feedback = Feedback("validate", ({"loc": (), "msg": "not one of the choices", "input": "great"},))
    prompt = LONG_FACT * 45 + HAPPY
    options = wire.Options("claude-sonnet-4-5", 64, 1024)
    first = wire.message_params(a_request(prompt), options, Known(), how="output_config")
    retried_input = build_input(prompt, schema, hint=False, feedback=feedback)
    retry = wire.message_params(Request(prompt, retried_input, schema, feedback=feedback), options, Known(), how="output_config")
    [only] = first.kwargs["messages"][0]["content"]
    head, tail = retry.kwargs["messages"][0]["content"]
    assert head == only and head["cache_control"] == {"type": "ephemeral"} and "cache_control" not in tail
    assert head["text"] + tail["text"] == retried_input and tail["text"] == "\n\n" + render_feedback(feedback, schema)
    assert retry.cache.tokens == first.cache.tokens  # the same estimate: every attempt decides alike


def test_the_minimum_follows_the_model() -> None:
    assert minimum_for("claude-sonnet-4-5") == 1024 and minimum_for("claude-3-5-haiku-latest") == 2048
    assert minimum_for("claude-haiku-4-5") == 4096 and minimum_for("claude-opus-4-5") == 4096 and minimum_for("my-local-model") == 1024
    below = wire.message_params(a_request("x" * 4000), wire.Options("claude-3-haiku-20240307", 64, 2048), Known(), how="off")
    assert not below.cache.marked and all("cache_control" not in b for t in below.kwargs["messages"] for b in t["content"])


CLAUDE_MESSAGE = {  # a Messages API response as Claude sends it, cache fields and all
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": '{"answer": "positive"}'}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1488, "output_tokens": 9,
              "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}, "service_tier": "standard"},
}  # fmt: skip


def test_the_cache_fields_of_a_real_sdk_message_map_to_usage() -> None:
    read = anthropic.types.Message.model_validate(CLAUDE_MESSAGE)
    wrote = anthropic.types.Message.model_validate(
        {**CLAUDE_MESSAGE, "usage": {**CLAUDE_MESSAGE["usage"], "cache_creation_input_tokens": 1488, "cache_read_input_tokens": 0}})
    first, second = wire.parse(wrote).completion, wire.parse(read).completion
    assert (first.usage.prompt_tokens, first.usage.cached_tokens, first.usage.cache_write_tokens) == (1500, 0, 1488)
    assert (second.usage.prompt_tokens, second.usage.cached_tokens, second.usage.cache_write_tokens) == (1500, 1488, 0)
    assert first.model == "claude-sonnet-4-5-20250929" and first.finish_reason == "stop" and first.engine == "anthropic"
    prices = accord.Prices({"claude-sonnet-4-5-20250929": (3.0, 15.0, 0.30, 3.75)})
    both = first.usage + second.usage
    billed = prices.cost(both.prompt_tokens, 0, first.model, cached=both.cached_tokens, written=both.cache_write_tokens)
    uncached = prices.cost(both.prompt_tokens, 0, first.model)
    assert billed is not None and uncached is not None and billed / uncached < 0.7
    vllm_like = anthropic.types.Message.model_validate({**CLAUDE_MESSAGE, "usage": {"input_tokens": 40, "output_tokens": 3}})
    assert wire.parse(vllm_like).completion.usage.cached_tokens is None  # not said: unknown, not zero


# -- errors -----------------------------------------------------------------------------------------


def ask(model: Any, prompt: str = PERSON) -> Any:
    return model.generate(a_request(prompt, Person, settings=Settings(max_tokens=16)))


@pytest.mark.vllm
def test_a_429_is_retryable_with_the_servers_retry_after(vllm_server: Any, fresh: FaultProxy) -> None:
    model = claude(vllm_server, fresh, structured="output_config")
    fresh.fail(429, error_body("rate_limit_error", "Number of request tokens has exceeded your rate limit"), headers={"retry-after": "0.5"})
    with pytest.raises(accord.BackendError) as caught:
        ask(model)
    assert caught.value.retryable and caught.value.status == 429 and caught.value.retry_after == 0.5
    assert "HTTP 429 RateLimitError" in str(caught.value) and "rate limit" in str(caught.value)
    fresh.fail(429, error_body("rate_limit_error", "slow down"), headers={"retry-after": "0.5"})
    started = time.monotonic()
    result = decide(model, Person, PERSON, k=1)
    assert isinstance(result.value, Person) and [b.status for b in result.ballots] == ["error", "valid"]
    assert result.ballots[0].error["retryable"] and time.monotonic() - started >= 0.45  # the server's hint, not the 0.01 s wait


@pytest.mark.vllm
def test_an_overloaded_api_is_retryable(vllm_server: Any, fresh: FaultProxy) -> None:
    fresh.fail(529, error_body("overloaded_error", "Overloaded"))
    result = decide(claude(vllm_server, fresh, structured="output_config"), Person, PERSON, k=1)
    assert isinstance(result.value, Person) and [b.status for b in result.ballots] == ["error", "valid"]
    assert "HTTP 529" in result.ballots[0].error["message"] and "overloaded" in result.ballots[0].error["message"]


@pytest.mark.vllm
def test_a_400_is_not_retried(vllm_server: Any, fresh: FaultProxy) -> None:
    fresh.fail(400, error_body("invalid_request_error", "messages: roles must alternate"), times=5)
    with pytest.raises(accord.BackendError) as caught:
        decide(claude(vllm_server, fresh, structured="output_config"), Person, PERSON, k=1)
    assert caught.value.status == 400 and not caught.value.retryable and len(fresh.bodies()) == 1  # asked once, not again
    assert "roles must alternate" in str(caught.value)
    too_long = a_request(PERSON, Person, settings=Settings(max_tokens=1_000_000))  # a real 400 from vLLM: over the context
    with pytest.raises(accord.BackendError) as real:
        claude(vllm_server, structured="output_config").generate(too_long)
    assert real.value.status == 400 and not real.value.retryable


@pytest.mark.vllm
def test_a_401_names_the_fix_and_never_the_key(vllm_server: Any, fresh: FaultProxy, caplog: pytest.LogCaptureFixture) -> None:
    fresh.fail(401, error_body("authentication_error", f"invalid x-api-key {KEY}"))
    with caplog.at_level(logging.DEBUG), pytest.raises(accord.BackendError) as caught:
        ask(claude(vllm_server, fresh, structured="output_config"))
    assert caught.value.status == 401 and not caught.value.retryable and "ANTHROPIC_API_KEY" in str(caught.value)
    assert KEY not in str(caught.value) and all(KEY not in record.getMessage() for record in caplog.records)
    sent = fresh.seen[-1].headers  # sent where it belongs (this SDK sends it as a bearer token), and only there
    assert KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))


def test_a_server_that_is_down_is_a_retryable_connection_error() -> None:
    model = models.anthropic(base_url=f"http://127.0.0.1:{free_port()}", model="claude-sonnet-4-5", api_key=KEY,
                             structured="output_config", capabilities=Capabilities())
    with pytest.raises(accord.BackendError) as caught:
        ask(model)
    assert caught.value.retryable and "connection failed" in str(caught.value) and KEY not in str(caught.value)
    with pytest.raises(accord.BackendError) as run:
        decide(model, Person, PERSON, k=1, retry=Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=2))
    assert [b.status for b in run.value.result.ballots] == ["error", "error"]


def test_the_error_mapping_covers_the_sdk_errors() -> None:
    def status(code: int, headers: dict[str, str] | None = None) -> BaseException:
        import httpx2

        response = httpx2.Response(code, headers=headers, request=httpx2.Request("POST", "https://api.anthropic.com/v1/messages"))
        return anthropic.APIStatusError("boom", response=response, body=error_body("api_error", "boom"))

    assert [to_backend_error(status(code), server="s").retryable for code in (400, 401, 403, 404, 408, 409, 429, 500, 503, 529)] == [
        False, False, False, False, True, True, True, True, True, True]
    assert to_backend_error(status(429, {"retry-after-ms": "250"}), server="s").retry_after == 0.25
    timeout = anthropic.APITimeoutError(request=status(400).request)
    assert to_backend_error(timeout, server="s").retryable


# -- options, identity, what it says -----------------------------------------------------------------


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(accord.ConfigError, match="unknown options \\['organization'\\]"):
        models.anthropic(model="m", organization="o")
    with pytest.raises(accord.ConfigError, match="structured must be one of"):
        models.anthropic(model="m", structured="json")
    with pytest.raises(accord.ConfigError, match="starting with http"):
        models.anthropic(model="m", base_url="localhost:8000")
    with pytest.raises(accord.ConfigError, match=r"anthropic\.Anthropic"):
        models.anthropic(object(), model="m")
    with pytest.raises(accord.ConfigError, match="cache_min_tokens"):
        models.anthropic(model="m", cache_min_tokens=0)


def test_the_identity_names_the_model_and_the_base_url() -> None:
    one = models.anthropic(model="claude-sonnet-4-5", api_key=KEY)
    assert one.identity() == one.fingerprint == "anthropic:claude-sonnet-4-5@https://api.anthropic.com"
    local = models.anthropic(base_url="http://user:pw-secret@127.0.0.1:8000/v1/", model="m", api_key=KEY)
    assert local.identity() == "anthropic:m@http://***@127.0.0.1:8000"  # /v1 dropped, the credentials never shown
    client = anthropic.Anthropic(api_key=KEY, base_url="http://127.0.0.1:8000")
    assert models.anthropic(client, model="m").identity() == "anthropic:m@http://127.0.0.1:8000"
    assert models.anthropic(model="claude-haiku-4-5", api_key=KEY).identity() != one.identity()


@pytest.mark.vllm
def test_it_says_it_has_no_margins() -> None:
    model = models.anthropic(model="claude-sonnet-4-5", api_key=KEY)
    said = model.describe()
    assert not model.gives_margins and model.noise() is None and said["logprobs"] is False
    assert "no logprobs" in str(said["gate"]) and "the vote decides" in str(said["gate"])
    assert said["cache"] == {"min_tokens": 1024, "estimate": "characters / 4 of the prefix the ballots share"}
    assert model.telemetry() == {"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-sonnet-4-5",
                                 "server.address": "api.anthropic.com"}
    assert KEY not in json.dumps(said)
