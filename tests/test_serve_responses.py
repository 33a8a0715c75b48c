"""``POST /v1/responses`` through the official Python ``openai`` client (``responses.create``,
``.parse``, ``.stream``) and raw httpx, against the real ``accord serve`` in front of the fake
upstream (tests/fake_upstream.py), which answers noisy, messy outputs.

The session's fake has no ``/v1/responses`` (as llama.cpp or an older vLLM): a request passed
through is translated to chat completions and back. A fake of this module's own serves
``/v1/responses``, and a request passed through goes there unchanged. Every answer is checked
against the SDK's own types (``Response.model_validate``, the stream events' union), strictly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

import serving
from serving import CLIENT_KEY, NOISY, RIGHT, UPSTREAM_KEY, Review, fresh

pytest.importorskip("starlette")

FORMAT = {"format": {"type": "json_schema", "name": "Review", "schema": Review.model_json_schema(), "strict": True}}
TOOL = {"type": "function", "name": "Review", "description": "Record the review's rating.", "parameters": Review.model_json_schema(),
        "strict": True}  # fmt: skip
EVENTS = TypeAdapter(ResponseStreamEvent)
AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}


@pytest.fixture
def client(serve_proxy: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=serve_proxy.url, api_key=CLIENT_KEY)


def strict(data: dict[str, Any]) -> Response:
    """The response object, validated by the SDK's own type (not the lenient construct the client uses)."""
    return Response.model_validate({k: v for k, v in data.items() if k != "accord"})


def sse(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a streamed Responses request, each checked by the SDK's event union."""
    with httpx.stream("POST", f"{url}/responses", json=body, headers=AUTH, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [e["type"] for e in events]
    for event in events:
        EVENTS.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


# -- decided: create, parse, stream -------------------------------------------------------------------


def test_parse_gets_the_voted_value_not_the_first_ballot(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    raw = client.responses.with_raw_response.parse(model="fake-model", input=prompt, text_format=Review, extra_body={"accord": {"k": 5}})
    assert raw.headers["x-accord-calls"] == "4" and raw.headers["x-accord-stable"] == "true" and raw.headers["x-request-id"]
    parsed = raw.parse()
    assert parsed.output_parsed == Review(**RIGHT)
    assert parsed.object == "response" and parsed.status == "completed" and parsed.id.startswith("resp_") and parsed.created_at > 0
    [item] = parsed.output
    assert item.type == "message" and item.role == "assistant" and item.content[0].type == "output_text"
    summary = parsed.model_extra["accord"]
    assert summary["calls"] == 4 and summary["stable"] is True and summary["agreement"] == 0.75 and summary["coercions"]
    assert fake_upstream.stats()["answered"][prompt] == 4
    strict(json.loads(raw.text))


def test_create_with_instructions_metadata_and_usage_billed(client: openai.OpenAI, fake_upstream: Any) -> None:
    client.responses.create(model="fake-model", input=fresh(say=[json.dumps(RIGHT)]), text=FORMAT, extra_body={"accord": {"k": 1}})  # type: ignore[arg-type]  # the probe is behind us
    prompt = fresh(say=NOISY)
    made = client.responses.create(model="fake-model", input=prompt, instructions="You rate reviews.", text=FORMAT,  # type: ignore[arg-type]
                                   metadata={"ticket": "T-1"}, temperature=0.5, max_output_tokens=64, extra_body={"accord": {"k": 5}})  # fmt: skip
    assert json.loads(made.output_text) == RIGHT
    assert made.instructions == "You rate reviews." and made.metadata == {"ticket": "T-1"} and made.max_output_tokens == 64
    billed = fake_upstream.stats()["billed_by_prompt"][prompt]
    assert made.usage is not None
    assert made.usage.input_tokens == billed["prompt_tokens"] > 0 and made.usage.output_tokens == billed["completion_tokens"] > 0
    assert made.usage.total_tokens == made.usage.input_tokens + made.usage.output_tokens
    sent = fake_upstream.stats()["bodies"][prompt]
    assert sent["messages"][0] == {"role": "system", "content": "You rate reviews."} and sent["messages"][1]["content"].startswith(prompt)
    assert sent["temperature"] == 0.5 and sent["max_tokens"] == 64 and "metadata" not in sent


def test_the_stream_helper_parses_the_decided_value(client: openai.OpenAI) -> None:
    with client.responses.stream(model="fake-model", input=fresh(say=NOISY), text_format=Review, extra_body={"accord": {"k": 5}}) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_parsed == Review(**RIGHT)
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]
    assert final.model_extra["accord"]["calls"] == 4


def test_a_raw_stream_is_the_documented_sequence(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "input": fresh(say=NOISY[1:]), "text": FORMAT, "stream": True, "accord": {"k": 3}}
    events = sse(serve_proxy.url, body)
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert json.loads(text) == RIGHT
    done = events[-1]["response"]
    assert events[-1]["type"] == "response.completed" and done["status"] == "completed" and done["usage"]["total_tokens"] > 0
    assert done["accord"]["stable"] is True and events[0]["response"]["status"] == "in_progress"
    strict(done)


def test_free_text_with_accord_votes_on_the_normalized_text(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh("Capital of France?", say=["The answer is  PARIS.", "the answer is\nParis.", "The answer is Paris. "])
    made = client.responses.create(model="fake-model", input=prompt, extra_body={"accord": {"k": 3, "normalize": ["casefold"]}})
    assert made.output_text == "the answer is paris." and made.model_extra["accord"]["agreement"] == 1.0
    assert "response_format" not in fake_upstream.stats()["bodies"][prompt]


def test_logprobs_are_the_winning_ballots(client: openai.OpenAI) -> None:
    made = client.responses.create(model="fake-model", input=fresh(say=NOISY), text=FORMAT, include=["message.output_text.logprobs"],  # type: ignore[arg-type]
                                   top_logprobs=3, extra_body={"accord": {"k": 5}})  # fmt: skip
    logprobs = made.output[0].content[0].logprobs  # type: ignore[union-attr]
    assert logprobs is not None and "".join(t.token for t in logprobs) == NOISY[1]  # the first valid ballot of the winning value
    assert len(logprobs[0].top_logprobs) == 3


# -- a named function: the vote is on its arguments ---------------------------------------------------


def test_a_named_function_votes_on_its_arguments(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    made = client.responses.parse(model="fake-model", input=prompt, tools=[TOOL], tool_choice={"type": "function", "name": "Review"},  # type: ignore[list-item]
                                  extra_body={"accord": {"k": 5}})  # fmt: skip
    [call] = made.output
    assert call.type == "function_call" and call.name == "Review" and call.call_id.startswith("call_")
    assert json.loads(call.arguments) == RIGHT and call.parsed_arguments == RIGHT  # strict: the SDK parsed them
    body = fake_upstream.stats()["bodies"][prompt]
    assert "tools" not in body and "tool_choice" not in body  # the ballots were asked for the arguments, not for a call


def test_a_streamed_function_call(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "input": fresh(say=NOISY), "tools": [TOOL], "tool_choice": "required", "stream": True, "accord": {"k": 5}}
    events = sse(serve_proxy.url, body)
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.done" in kinds and "response.output_text.delta" not in kinds
    arguments = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    assert json.loads(arguments) == RIGHT
    assert events[-1]["response"]["output"][0]["arguments"] == arguments


# -- input items become the chat messages they are ---------------------------------------------------


def test_input_items_are_translated_faithfully(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    weather = {"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    items = [
        {"role": "developer", "content": "Rate reviews."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Is it sunny"}, {"type": "input_text", "text": " in Oslo?"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": '{"city": "Bergen"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "rain"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": [{"type": "input_text", "text": prompt}]},
    ]
    made = client.responses.create(model="fake-model", input=items, tools=[TOOL, weather], tool_choice={"type": "function", "name": "Review"},  # type: ignore[arg-type,list-item]
                                   extra_body={"accord": {"k": 5}})  # fmt: skip
    assert json.loads(made.output[0].arguments) == RIGHT  # type: ignore[union-attr]
    sent = fake_upstream.stats()["bodies"][prompt]["messages"]
    calls = [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}},
             {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Bergen"}'}}]  # fmt: skip
    assert sent[:5] == [
        {"role": "system", "content": "Rate reviews."},
        {"role": "user", "content": [{"type": "text", "text": "Is it sunny"}, {"type": "text", "text": " in Oslo?"}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": calls},  # the calls of one turn: one assistant message
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "rain"},
    ]
    assert sent[5]["role"] == "user" and sent[5]["content"].startswith(prompt) and len(sent) == 6  # the reasoning item left out


# -- refused, with a 400 that says why; failed votes are 422s ---------------------------------------------


@pytest.mark.parametrize(("extra", "param", "code"), [
    ({"previous_response_id": "resp_123"}, "previous_response_id", "stateful_not_supported"),
    ({"store": True}, "store", "stateful_not_supported"),
    ({"conversation": "conv_1"}, "conversation", "stateful_not_supported"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]", "stateful_not_supported"),
    ({"tools": [{"type": "web_search"}], "accord": {"k": 1}}, "tools[0]", "unsupported_tool"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f_1"}]}]}, "input[0].content[0]", "unsupported_input"),
    ({"accord": {"k": 50}}, "accord.k", "invalid_accord_field"),
    ({"text": {"format": {"type": "json_schema", "name": "X"}}}, "text.format.schema", "invalid_request"),
    ({"tools": [TOOL], "accord": {"k": 3}, "text": None}, "tools", "invalid_request"),  # free text with tools cannot be voted on
    ({"input": 7}, "input", "invalid_input"),
])  # fmt: skip
def test_what_cannot_be_honoured_is_a_400_that_says_why(serve_proxy: Any, fake_upstream: Any, extra: dict[str, Any], param: str, code: str) -> None:
    prompt = fresh(say=[json.dumps(RIGHT)])
    body = {"model": "fake-model", "input": prompt, "text": FORMAT, **extra}
    response = httpx.post(f"{serve_proxy.url}/responses", json={k: v for k, v in body.items() if v is not None}, headers=AUTH)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code), error
    assert prompt not in fake_upstream.stats()["calls"], "nothing was forwarded"


def test_no_valid_output_is_a_422_the_client_does_not_retry(client: openai.OpenAI, fake_upstream: Any) -> None:
    prompt = fresh(say=["I cannot rate this.", "No idea, sorry!"])
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.responses.create(model="fake-model", input=prompt, text=FORMAT, extra_body={"accord": {"k": 1, "retry": 2}})  # type: ignore[arg-type]
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["type"] == "accord_invalid_output" and caught.value.response.json()["accord"]["calls"] == 2
    assert fake_upstream.stats()["calls"][prompt] == 2, "one run, not re-run by the client's retries"


def test_no_consensus_is_a_422_streamed_or_not(serve_proxy: Any) -> None:
    say = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 5, "sentiment": "positive"}', '{"stars": 3, "sentiment": "neutral"}']
    for stream in (False, True):
        body = {"model": "fake-model", "input": fresh(say=say), "text": FORMAT, "stream": stream, "accord": {"k": 3, "quorum": 2}}
        response = httpx.post(f"{serve_proxy.url}/responses", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 422 and response.headers["x-should-retry"] == "false"
        assert response.json()["error"]["type"] == "accord_no_consensus" and len(response.json()["accord"]["votes"]) == 3


# -- passed through: translated to chat completions where the upstream has no /responses ---------------


def test_free_text_is_translated_to_chat_and_back(client: openai.OpenAI, fake_upstream: Any) -> None:
    before = fake_upstream.stats()["no_responses"]
    prompt = fresh("Say hello.", say=["  Hello,   world!  "])
    made = client.responses.create(model="fake-model", input=prompt, instructions="Be brief.", max_output_tokens=20, top_p=0.9)
    assert made.output_text == "  Hello,   world!  " and made.status == "completed" and "accord" not in (made.model_extra or {})
    billed = fake_upstream.stats()["billed_by_prompt"][prompt]
    assert made.usage is not None and (made.usage.input_tokens, made.usage.output_tokens) == (billed["prompt_tokens"], billed["completion_tokens"])
    assert fake_upstream.stats()["bodies"][prompt] == {"model": "fake-model", "max_tokens": 20, "top_p": 0.9,
                                                       "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]}  # fmt: skip
    streamed = "".join(e.delta for e in client.responses.create(model="fake-model", input=fresh("Hi.", say=["Hi there."]), stream=True)
                       if e.type == "response.output_text.delta")  # fmt: skip
    assert streamed == "Hi there."
    assert fake_upstream.stats()["no_responses"] - before <= 1, "the upstream's missing /responses was learned once"


def test_a_passed_through_tool_call_comes_back_as_a_function_call_item(client: openai.OpenAI) -> None:
    weather = {"type": "function", "name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    made = client.responses.create(model="fake-model", input=fresh("Weather?", tool_call={"name": "weather", "arguments": '{"city": "Oslo"}'}),
                                   tools=[weather])  # type: ignore[list-item]  # fmt: skip
    [call] = made.output
    assert call.type == "function_call" and call.name == "weather" and call.arguments == '{"city": "Oslo"}' and call.call_id == "call_fake"


# -- passed through unchanged to an upstream's own /responses --------------------------------------------


@pytest.fixture(scope="module")
def responses_upstream() -> Iterator[tuple[Any, Any]]:
    with serving.fake_upstream(responses=True) as fake, serving.accord_serve([fake.url], "--api-key", CLIENT_KEY) as proxy:
        yield fake, proxy


def test_an_upstream_with_responses_gets_the_request_unchanged(responses_upstream: tuple[Any, Any]) -> None:
    fake, proxy = responses_upstream
    client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY)
    prompt = fresh("Say hi.", say=["Hi from /responses."])
    sent = {"model": "fake-model", "input": prompt, "instructions": "Be kind.", "reasoning": {"effort": "low"}, "include": ["x"]}
    made = client.responses.create(**sent)  # type: ignore[arg-type]
    assert made.id == "resp_fake" and made.output_text == "Hi from /responses."
    assert fake.stats()["bodies"][prompt] == sent and fake.stats()["auth"] == [f"Bearer {UPSTREAM_KEY}"]
    streamed = [e.type for e in client.responses.create(model="fake-model", input=fresh("Hi.", say=["Streamed."]), stream=True)]
    assert streamed[0] == "response.created" and streamed[-1] == "response.completed"
    decided = client.responses.parse(model="fake-model", input=fresh(say=NOISY), text_format=Review, extra_body={"accord": {"k": 5}})
    assert decided.output_parsed == Review(**RIGHT) and decided.model_extra["accord"]["calls"] == 4  # a vote still goes through chat
