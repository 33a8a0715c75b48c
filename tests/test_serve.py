"""``accord serve`` through the official Python ``openai`` client and raw httpx, against a real
uvicorn process in front of a fake upstream that answers noisy, messy outputs (tests/fake_upstream.py).

The session's proxy (``serve_proxy``) takes the client key ``CLIENT_KEY`` and reaches the fake
with ``UPSTREAM_KEY``. Every prompt here is unique (``fresh``), so the fake's books per prompt
say what this test alone caused.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import openai
import pytest

from serving import CLIENT_KEY, NOISY, RIGHT, UPSTREAM_KEY, Review, fresh

pytest.importorskip("starlette")

REVIEW_FORMAT = {"type": "json_schema", "json_schema": {"name": "Review", "schema": Review.model_json_schema()}}


@pytest.fixture
def client(serve_proxy: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=serve_proxy.url, api_key=CLIENT_KEY)


def ask(client: openai.OpenAI, prompt: str, accord: dict[str, Any] | None = None, **options: Any) -> Any:
    body = {"accord": accord} if accord is not None else {}
    options.setdefault("response_format", REVIEW_FORMAT)
    return client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": prompt}], extra_body=body, **options)


# -- the vote, through create / with_raw_response / parse / stream ------------------------------------


def test_the_vote_decides_the_messy_ballots_not_the_first(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    completion = ask(client, prompt, {"k": 5})
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-") and completion.created > 0
    assert json.loads(completion.choices[0].message.content) == RIGHT
    assert completion.choices[0].finish_reason == "stop"
    assert completion.system_fingerprint == "fp_fake"
    summary = completion.model_extra["accord"]
    assert summary["calls"] == 4 and summary["stable"] is True and summary["agreement"] == 0.75
    assert sorted(summary["votes"].values()) == [1, 3]
    assert summary["coercions"], "the winner was read from messy text: its repairs are said"
    assert fake_upstream.stats()["answered"][prompt] == 4
    # one call alone, as a pass-through would give it, is the wrong answer
    alone = ask(client, fresh(say=NOISY), {"k": 1})
    assert json.loads(alone.choices[0].message.content) == {"stars": 2, "sentiment": "negative"}


def test_with_raw_response_headers_say_the_vote(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=[{"role": "user", "content": fresh(say=NOISY)}], response_format=REVIEW_FORMAT,
        extra_body={"accord": {"k": 5, "quorum": 3}},
    )  # fmt: skip
    assert raw.status_code == 200
    assert raw.headers["x-accord-calls"] == "4"
    assert raw.headers["x-accord-agreement"] == "0.7500"
    assert raw.headers["x-accord-stable"] == "true"
    assert raw.headers["x-request-id"]
    assert json.loads(raw.parse().choices[0].message.content) == RIGHT


def test_parse_with_a_pydantic_model_and_every_turn_kept(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    turns = [{"role": "system", "content": "You rate reviews."}, {"role": "user", "content": "Review: 'Awful.'"},
             {"role": "assistant", "content": '{"stars": 1, "sentiment": "negative"}'}, {"role": "user", "content": prompt}]  # fmt: skip
    completion = client.chat.completions.parse(model="fake-model", messages=turns, response_format=Review, extra_body={"accord": {"k": 5}})  # type: ignore[arg-type]
    assert completion.choices[0].message.parsed == Review(**RIGHT)
    assert completion.model_extra["accord"]["stable"] is True
    sent = fake_upstream.stats()["bodies"][prompt]["messages"]
    assert sent[:3] == turns[:3] and sent[3]["content"].startswith(prompt)  # the schema may follow the question, when not constrained


def test_stream_gives_the_decided_value_then_done(client: openai.OpenAI) -> None:
    chunks = list(ask(client, fresh(say=NOISY), {"k": 5}, stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert json.loads(text) == RIGHT
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    last_choice = next(c for c in reversed(chunks) if c.choices)
    assert last_choice.model_extra["accord"]["calls"] == 4


def test_the_stream_helper_parses_the_decided_value(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model="fake-model", messages=[{"role": "user", "content": fresh(say=NOISY)}], response_format=Review,
        extra_body={"accord": {"k": 5}},
    ) as stream:  # fmt: skip
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Review(**RIGHT)


def test_a_stream_over_raw_sse_ends_in_done(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": fresh(say=NOISY[1:])}], "response_format": REVIEW_FORMAT,
            "stream": True, "accord": {"k": 3}}  # fmt: skip
    with httpx.stream("POST", f"{serve_proxy.url}/chat/completions", json=body, headers=_auth(), timeout=30) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines)


# -- the accord field and the caps --------------------------------------------------------------------


@pytest.mark.parametrize(("accord", "param"), [
    ({"k": 50}, "accord.k"),  # over --max-k (9)
    ({"max_seconds": 1000}, "accord.max_seconds"),  # over --max-seconds (120)
    ({"bogus": 1}, "accord.bogus"),  # an unknown name
    ({"k": "5"}, "accord.k"),
    ({"quorum": 7, "k": 5}, "accord.quorum"),
    ({"fieldwise": "yes"}, "accord.fieldwise"),
])  # fmt: skip
def test_a_bad_accord_field_is_a_400_that_names_it(client: openai.OpenAI, fake_upstream: Any, accord: dict[str, Any], param: str) -> None:
    prompt = fresh()
    with pytest.raises(openai.BadRequestError) as caught:
        ask(client, prompt, accord)
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == param and caught.value.body["type"] == "invalid_request_error"
    assert prompt not in fake_upstream.stats()["calls"], "nothing was forwarded"


def test_n_above_one_with_a_schema_is_a_400_that_says_why(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="vote replaces n"):
        ask(client, fresh(), n=2)


def test_fieldwise_and_less_than_the_caps(client: openai.OpenAI) -> None:
    say = ['{"stars": 4, "sentiment": "neutral"}', '{"stars": 4, "sentiment": "positive"}', '{"stars": 5, "sentiment": "positive"}']
    completion = ask(client, fresh(say=say), {"k": 3, "quorum": 2, "fieldwise": True, "retry": 1, "max_seconds": 20})
    assert json.loads(completion.choices[0].message.content) == RIGHT  # each field by its own majority
    assert completion.model_extra["accord"]["field_agreement"]


# -- tool calls -----------------------------------------------------------------------------------------


def test_a_named_tool_votes_on_its_arguments(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    completion = client.chat.completions.parse(
        model="fake-model", messages=[{"role": "user", "content": prompt}], tools=[openai.pydantic_function_tool(Review)],
        tool_choice={"type": "function", "function": {"name": "Review"}}, extra_body={"accord": {"k": 5}},
    )  # fmt: skip
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "Review" and json.loads(call.function.arguments) == RIGHT
    assert call.function.parsed_arguments == Review(**RIGHT)
    body = fake_upstream.stats()["bodies"][prompt]
    assert "tools" not in body and "tool_choice" not in body  # the ballots were asked for the arguments, not for a call


def test_a_streamed_tool_call(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": fresh(say=NOISY)}], stream=True,
        tools=[openai.pydantic_function_tool(Review)], tool_choice={"type": "function", "function": {"name": "Review"}},
        extra_body={"accord": {"k": 5}},
    ))  # fmt: skip
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or "" for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert json.loads(arguments) == RIGHT
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


# -- free text -----------------------------------------------------------------------------------------


def test_free_text_passes_through_unchanged(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh("Say hello.", say=["  Hello,   world!  "])
    completion = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": prompt}],
                                                extra_body={"presence_penalty": 0.25, "top_p": 0.9})  # fmt: skip
    assert completion.choices[0].message.content == "  Hello,   world!  "
    assert completion.id.startswith("chatcmpl-fake") and "accord" not in (completion.model_extra or {})
    assert fake_upstream.stats()["bodies"][prompt] == {"model": "fake-model", "messages": [{"role": "user", "content": prompt}],
                                                       "presence_penalty": 0.25, "top_p": 0.9}  # fmt: skip


def test_free_text_streams_through(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="fake-model", stream=True,
                                                 messages=[{"role": "user", "content": fresh("Say hi.", say=["Hi there, friend."])}]))  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hi there, friend."
    assert chunks[0].id == "chatcmpl-fakestream"


def test_a_stream_passed_through_and_dropped_gives_its_upstream_slot_back(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": fresh("Talk.", say=["x" * 200], chunk_delay=0.2)}]}

    def in_flight() -> float:
        return _sample(httpx.get(f"{serve_proxy.root}/metrics", headers=_auth()).text, "accord_serve_upstream_calls_in_flight")

    with httpx.stream("POST", f"{serve_proxy.url}/chat/completions", json=body, headers=_auth(), timeout=30) as response:
        lines = response.iter_lines()  # kept: dropping it would close the stream already
        assert next(lines).startswith("data: ")
        assert in_flight() == 1  # the upstream stream is held while the client reads
    deadline = time.monotonic() + 5  # the client left 8 s before the upstream's end
    while in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_flight() == 0, "the dropped stream gave its slot back"


def test_tools_and_tool_messages_pass_through(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh("What is the weather?", tool_call={"name": "weather", "arguments": '{"city": "Oslo"}'})
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    messages = [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": prompt},
    ]
    completion = client.chat.completions.create(model="fake-model", messages=messages, tools=[tool])  # type: ignore[arg-type]
    assert completion.choices[0].message.tool_calls[0].function.arguments == '{"city": "Oslo"}'
    assert fake_upstream.stats()["bodies"][prompt]["messages"] == messages


def test_free_text_with_accord_votes_on_the_normalized_text(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh("Capital of France?", say=["The answer is  PARIS.", "the answer is\nParis.", "The answer is Paris. "])
    completion = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": prompt}],
                                                extra_body={"accord": {"k": 3, "normalize": ["casefold"]}})  # fmt: skip
    assert completion.choices[0].message.content == "the answer is paris."
    assert completion.model_extra["accord"]["calls"] == 2 and completion.model_extra["accord"]["agreement"] == 1.0  # unanimous at the quorum
    assert "response_format" not in fake_upstream.stats()["bodies"][prompt]


def test_json_mode_with_accord_votes_on_a_json_object(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh("Give me an object.", say=['{"a": 1, "b": [2]}', 'Here: {"b": [2], "a": 1}', "{'a': 1, 'b': [2]}"])
    completion = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": prompt}],
                                                response_format={"type": "json_object"}, extra_body={"accord": {"k": 3}})  # fmt: skip
    assert json.loads(completion.choices[0].message.content) == {"a": 1, "b": [2]}
    assert completion.model_extra["accord"]["calls"] == 2 and completion.model_extra["accord"]["stable"]
    assert fake_upstream.stats()["bodies"][prompt]["response_format"] == {"type": "json_object"}  # JSON mode, as asked


# -- what else a completion carries ------------------------------------------------------------------


def test_forwarded_fields_reach_every_ballot(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=['{"stars": 4, "sentiment": "positive"}'])
    ask(client, prompt, {"k": 1}, top_p=0.5, user="u-1", presence_penalty=0.1)
    body = fake_upstream.stats()["bodies"][prompt]
    assert body["top_p"] == 0.5 and body["user"] == "u-1" and body["presence_penalty"] == 0.1


def test_logprobs_are_the_winning_ballots(client: openai.OpenAI) -> None:
    completion = ask(client, fresh(say=NOISY), {"k": 5}, logprobs=True, top_logprobs=3)
    content = completion.choices[0].logprobs.content
    winner_text = NOISY[1]  # the first valid ballot of the winning value
    assert "".join(t.token for t in content) == winner_text
    assert len(content[0].top_logprobs) == 3


def test_usage_is_what_the_upstream_billed(client: openai.OpenAI, fake_upstream: Any, serve_proxy: Any) -> None:
    ask(client, fresh(say=[json.dumps(RIGHT)]), {"k": 1})  # the session's response_format probe, if not made yet, is behind us
    prompt = fresh(say=NOISY)
    completion = ask(client, prompt, {"k": 5})
    billed = fake_upstream.stats()["billed_by_prompt"][prompt]
    assert completion.usage.prompt_tokens == billed["prompt_tokens"] > 0
    assert completion.usage.completion_tokens == billed["completion_tokens"] > 0
    assert completion.usage.total_tokens == billed["prompt_tokens"] + billed["completion_tokens"]
    summary = completion.model_extra["accord"]
    upstream = summary["upstream_usage"]  # the batch neighbours that answered, too
    assert upstream["total_tokens"] >= completion.usage.total_tokens
    # every request sent: the ballots and each neighbour (a loopback upstream: neighbours go), answered or cancelled
    assert summary["upstream_requests"] == summary["calls"] + summary["neighbour_requests"] and summary["neighbour_requests"] >= 1
    metrics = httpx.get(f"{serve_proxy.root}/metrics", headers=_auth()).text
    assert _sample(metrics, "accord_serve_neighbour_requests_total") >= summary["neighbour_requests"]


def test_models_are_forwarded(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model"]


def test_health_and_ready(serve_proxy: Any) -> None:
    assert httpx.get(f"{serve_proxy.root}/health").json() == {"status": "ok"}
    ready = httpx.get(f"{serve_proxy.root}/ready")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


# -- errors --------------------------------------------------------------------------------------------


def _auth(key: str = CLIENT_KEY) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _shape(body: dict[str, Any]) -> dict[str, Any]:
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer wrong-key-123"}, {"authorization": f"Basic {CLIENT_KEY}"}])
def test_a_request_without_the_client_key_is_a_401_and_nothing_is_forwarded(serve_proxy: Any, fake_upstream: Any, headers: dict[str, str]) -> None:
    prompt = fresh()
    body = {"model": "fake-model", "messages": [{"role": "user", "content": prompt}], "response_format": REVIEW_FORMAT}
    response = httpx.post(f"{serve_proxy.url}/chat/completions", json=body, headers=headers)
    assert response.status_code == 401 and _shape(response.json())["code"] == "invalid_api_key"
    assert CLIENT_KEY not in response.text and "wrong-key" not in response.text
    assert prompt not in fake_upstream.stats()["calls"]
    assert httpx.get(f"{serve_proxy.url}/models", headers=headers).status_code == 401
    assert httpx.get(f"{serve_proxy.root}/metrics", headers=headers).status_code == 401


@pytest.mark.parametrize("content", [b'{"model": "fake-model", "messages": [', b"not json", b"\xff\xfe", b"[1, 2]", b""])
def test_malformed_json_is_a_400(serve_proxy: Any, content: bytes) -> None:
    response = httpx.post(f"{serve_proxy.url}/chat/completions", content=content, headers={**_auth(), "content-type": "application/json"})
    assert response.status_code == 400
    assert _shape(response.json())["type"] == "invalid_request_error"


def test_a_body_over_max_body_is_a_413(serve_proxy: Any) -> None:
    big = {"model": "fake-model", "messages": [{"role": "user", "content": "x" * 70_000}]}
    response = httpx.post(f"{serve_proxy.url}/chat/completions", json=big, headers=_auth())
    assert response.status_code == 413 and _shape(response.json())["code"] == "request_too_large"


def test_no_valid_output_is_a_422_that_the_client_does_not_retry(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=["I cannot rate this.", "No idea, sorry!"])
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        ask(client, prompt, {"k": 1, "retry": 2})  # the client's default max_retries=2 is in force
    error = caught.value
    assert error.response.headers["x-should-retry"] == "false"
    assert error.body["type"] == "accord_invalid_output" and error.body["code"] == "invalid_output"
    summary = error.response.json()["accord"]
    assert summary["calls"] == 2 and summary["stable"] is False
    assert fake_upstream.stats()["calls"][prompt] == 2, "one run, not re-run by the client's retries"


def test_no_consensus_is_a_422(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=['{"stars": 1, "sentiment": "negative"}', '{"stars": 5, "sentiment": "positive"}', '{"stars": 3, "sentiment": "neutral"}'])
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        ask(client, prompt, {"k": 3, "quorum": 2})
    assert caught.value.body["type"] == "accord_no_consensus"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(caught.value.response.json()["accord"]["votes"]) == 3
    assert fake_upstream.stats()["calls"][prompt] == 3


def test_plurality_answers_instead_of_a_422(client: openai.OpenAI) -> None:
    say = ['{"stars": 5, "sentiment": "positive"}', '{"stars": 5, "sentiment": "positive"}', '{"stars": 1, "sentiment": "negative"}']
    completion = ask(client, fresh(say=say), {"k": 3, "quorum": 3, "plurality": True})
    assert json.loads(completion.choices[0].message.content) == {"stars": 5, "sentiment": "positive"}
    assert completion.model_extra["accord"]["stable"] is False


def test_a_spent_budget_is_a_typed_error_not_retried(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=['{"stars": 4, "sentiment": "positive"}'], delay=3.0)
    start = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        ask(client, prompt, {"k": 1, "max_seconds": 0.5})
    assert time.monotonic() - start < 2.5, "the budget ended the run, and the client did not retry it"
    assert caught.value.status_code == 504 and caught.value.body["type"] == "accord_budget_exceeded"
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert fake_upstream.stats()["calls"][prompt] == 1


def test_an_upstream_429_is_passed_on_with_its_retry_after(serve_proxy: Any, fake_upstream: Any) -> None:
    prompt = fresh(status=429, retry_after=1)
    client = openai.OpenAI(base_url=serve_proxy.url, api_key=CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client, prompt, {"k": 1})
    assert caught.value.response.headers["retry-after"] == "1"
    assert caught.value.body["type"] == "rate_limit_error"
    assert fake_upstream.stats()["calls"][prompt] == 2  # --transport-attempts 2: one retry after its Retry-After, then passed on


def test_an_upstream_5xx_is_a_502(serve_proxy: Any) -> None:
    client = openai.OpenAI(base_url=serve_proxy.url, api_key=CLIENT_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        ask(client, fresh(status=500), {"k": 1})
    assert caught.value.status_code == 502 and caught.value.body["code"] == "upstream_failed"


def test_unknown_routes_and_methods_answer_in_openais_shape(serve_proxy: Any) -> None:
    missing = httpx.get(f"{serve_proxy.url}/embeddings", headers=_auth())
    assert missing.status_code == 404 and _shape(missing.json())["code"] == "unknown_url"
    wrong = httpx.get(f"{serve_proxy.url}/chat/completions", headers=_auth())
    assert wrong.status_code == 405 and _shape(wrong.json())


# -- load-bearing details: disconnects, metrics, logs, keys ---------------------------------------


def test_a_client_that_leaves_cancels_its_ballots(serve_proxy: Any, fake_upstream: Any) -> None:
    prompt = fresh(say=['{"stars": 4, "sentiment": "positive"}'], delay=3.0)
    body = {"model": "fake-model", "messages": [{"role": "user", "content": prompt}], "response_format": REVIEW_FORMAT, "accord": {"k": 5}}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{serve_proxy.url}/chat/completions", json=body, headers=_auth(), timeout=0.8)
    deadline = time.monotonic() + 5
    while fake_upstream.stats()["abandoned"].get(prompt) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    stats = fake_upstream.stats()
    assert stats["abandoned"].get(prompt) == 1, "the upstream call was cancelled, not left running"
    assert stats["calls"][prompt] == 1 and prompt not in stats["answered"], "no later ballot was started"
    metrics = httpx.get(f"{serve_proxy.root}/metrics", headers=_auth()).text
    assert _sample(metrics, "accord_serve_client_disconnects_total") >= 1


def _sample(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_metrics(client: openai.OpenAI, serve_proxy: Any) -> None:
    ask(client, fresh(say=NOISY), {"k": 5})
    with pytest.raises(openai.UnprocessableEntityError):
        ask(client, fresh(say=["no json"]), {"k": 1, "retry": 1})
    text = httpx.get(f"{serve_proxy.root}/metrics", headers=_auth()).text
    assert _sample(text, "accord_serve_requests_total", mode="schema", status="200") >= 1
    assert _sample(text, "accord_serve_calls_per_answer_count") >= 1 and _sample(text, "accord_serve_calls_per_answer_sum") >= 4
    assert _sample(text, "accord_serve_agreement_count") >= 1
    assert _sample(text, "accord_serve_answers_total", stable="true") >= 1
    assert _sample(text, "accord_serve_errors_total", type="accord_invalid_output") >= 1
    assert _sample(text, "accord_serve_upstream_seconds_count", outcome="ok") >= 5


def test_one_log_line_per_request_without_content_or_keys(client: openai.OpenAI, serve_proxy: Any, fake_upstream: Any) -> None:
    secret_word = f"zebra{uuid.uuid4().hex[:8]}"
    before = serve_proxy.log_text().count("\n")
    ask(client, fresh(f"Review: '{secret_word} pen'", say=NOISY), {"k": 5})
    client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": fresh(f"{secret_word} hello")}])
    with pytest.raises(openai.BadRequestError):
        ask(client, fresh(secret_word), {"k": 99})
    time.sleep(0.2)
    lines = serve_proxy.log_text().splitlines()[before:]
    requests = [line for line in lines if "POST /v1/chat/completions" in line]
    assert len(requests) == 3, lines
    assert "mode=schema" in requests[0] and "calls=4" in requests[0] and "stable=true" in requests[0]
    assert "mode=pass" in requests[1] and " 400 " in requests[2]
    log = serve_proxy.log_text()
    assert secret_word not in log, "no content in the log"
    assert UPSTREAM_KEY not in log and CLIENT_KEY not in log
    assert fake_upstream.stats()["auth"] == [f"Bearer {UPSTREAM_KEY}"], "the upstream gets the proxy's key, never the client's"


def test_the_upstream_key_is_never_returned(serve_proxy: Any) -> None:
    refused = {"model": "m", "messages": [{"role": "user", "content": fresh(status=401)}], "response_format": REVIEW_FORMAT, "accord": {"k": 1}}
    bodies = [
        httpx.post(f"{serve_proxy.url}/chat/completions", json=refused, headers=_auth()),
        httpx.post(f"{serve_proxy.url}/chat/completions", json={"model": "m"}, headers=_auth()),
        httpx.get(f"{serve_proxy.url}/models", headers=_auth()),
        httpx.get(f"{serve_proxy.root}/metrics", headers=_auth()),
    ]
    assert bodies[0].status_code == 502 and "credentials" in bodies[0].json()["error"]["message"]
    for response in bodies:
        assert UPSTREAM_KEY not in response.text and UPSTREAM_KEY not in str(response.headers)


# -- what the upstream's model is shown (issue 42) -------------------------------------------------


def test_the_upstream_reads_the_schema_in_the_prompt_beside_response_format_unless_the_request_opts_out(
    client: openai.OpenAI, fake_upstream: Any
) -> None:
    shown, alone = fresh(say=[json.dumps(RIGHT)]), fresh(say=[json.dumps(RIGHT)])
    ask(client, shown, {"k": 1})
    ask(client, alone, {"k": 1, "schema_in_prompt": False})
    bodies = fake_upstream.stats()["bodies"]
    told = bodies[shown]["messages"][-1]["content"]
    assert told.startswith(shown) and "Answer in JSON using this schema" in told and '"positive" | "negative"' in told
    assert bodies[alone]["messages"][-1]["content"] == alone
    # response_format goes with both or with neither (as the proxy's upstream backend has learned the fake): the
    # prompt is the request's choice alone
    assert bodies[shown].get("response_format") == bodies[alone].get("response_format")
    with pytest.raises(openai.BadRequestError, match="schema_in_prompt"):
        ask(client, fresh(say=[json.dumps(RIGHT)]), {"schema_in_prompt": "no"})
