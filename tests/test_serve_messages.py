"""``POST /v1/messages`` (Anthropic's Messages API) through the official Python ``anthropic``
client (``messages.create``, ``.parse``, ``.stream``) and raw httpx, against the real
``accord serve`` in front of the fake upstream (tests/fake_upstream.py), which answers noisy,
messy outputs.

The session's fake speaks chat completions only: a decided request is voted through chat
completions, and one passed through is translated to chat completions and back. A fake of this
module's own also serves ``/v1/messages`` (as vLLM does), behind a proxy that routes two models to
it: ``claude``, configured to speak Messages (``wire = "messages"``: the ballots go through
``accord.models.anthropic``), and ``chatty``, a chat completions upstream that has ``/messages``
too (a request passed through goes there unchanged). Every answer is checked against the SDK's
own types (``Message.model_validate``, the stream events' union), strictly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import serving
from serving import CLIENT_KEY, NOISY, RIGHT, UPSTREAM_KEY, Review, fresh

anthropic = pytest.importorskip("anthropic")
pytest.importorskip("starlette")

from anthropic.types import Message, RawMessageStreamEvent  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

FORMAT = {"format": {"type": "json_schema", "schema": Review.model_json_schema()}}
TOOL = {"name": "Review", "description": "Record the review's rating.", "input_schema": Review.model_json_schema()}
FORCED = {"type": "tool", "name": "Review"}
EVENTS = TypeAdapter(RawMessageStreamEvent)
AUTH = {"x-api-key": CLIENT_KEY, "anthropic-version": "2023-06-01"}
CLAUDE_KEY = "sk-ant-upstream-9e1d-not-for-clients"  # the messages upstream's key (ANTHROPIC_API_KEY of its proxy)


def user(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}]


@pytest.fixture
def client(serve_proxy: Any) -> Any:
    return anthropic.Anthropic(base_url=serve_proxy.root, api_key=CLIENT_KEY, max_retries=0)


def strict(data: dict[str, Any]) -> Message:
    """The message, validated by the SDK's own type (not the lenient construct the client uses)."""
    return Message.model_validate({k: v for k, v in data.items() if k != "accord"})


def sse(root: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of a streamed Messages request, each checked by the SDK's event union."""
    with httpx.stream("POST", f"{root}/v1/messages", json=body, headers=AUTH, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines if line.startswith("data: ")]
    assert names == [e["type"] for e in events]
    for event in events:
        EVENTS.validate_python(event)
    return events


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error of an answer, which must have Anthropic's shape."""
    body = response.json()
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"} and body["request_id"], body
    assert response.headers["request-id"] == body["request_id"]
    return body["error"]  # type: ignore[no-any-return]


# -- decided: create, parse, stream -------------------------------------------------------------------


def test_output_config_gets_the_voted_value_not_the_first_ballot(client: Any, fake_upstream: Any) -> None:
    client.messages.create(model="fake-model", max_tokens=64, messages=user(fresh(say=[json.dumps(RIGHT)])), output_config=FORMAT,
                           extra_body={"accord": {"k": 1}})  # the probe is behind us  # fmt: skip
    prompt = fresh(say=NOISY)
    raw = client.messages.with_raw_response.create(model="fake-model", max_tokens=64, messages=user(prompt), output_config=FORMAT,
                                                   extra_body={"accord": {"k": 5}})  # fmt: skip
    assert raw.headers["x-accord-calls"] == "4" and raw.headers["x-accord-stable"] == "true" and raw.headers["request-id"]
    made = raw.parse()
    [block] = made.content
    assert block.type == "text" and json.loads(block.text) == RIGHT
    assert made.id.startswith("msg_") and made.type == "message" and made.role == "assistant" and made.model == "fake-model"
    assert made.stop_reason == "end_turn" and made.stop_sequence is None
    summary = made.model_extra["accord"]
    assert summary["calls"] == 4 and summary["stable"] is True and summary["agreement"] == 0.75 and summary["coercions"]
    billed = fake_upstream.stats()["billed_by_prompt"][prompt]
    assert (made.usage.input_tokens, made.usage.output_tokens) == (billed["prompt_tokens"], billed["completion_tokens"])
    assert made.usage.cache_read_input_tokens is None and made.usage.cache_creation_input_tokens is None  # the upstream does not say
    strict(json.loads(raw.http_response.text))
    sent = fake_upstream.stats()["bodies"][prompt]
    assert sent["max_tokens"] == 64 and sent["messages"][-1]["content"].startswith(prompt)


def test_parse_and_the_settings_that_go_upstream(client: Any, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    made = client.messages.parse(model="fake-model", max_tokens=64, system=[{"type": "text", "text": "You rate reviews."}],
                                 messages=user(prompt), output_format=Review, metadata={"user_id": "u-1"},
                                 extra_body={"temperature": 0.5, "top_k": 5, "accord": {"k": 5}})  # fmt: skip
    assert made.parsed_output == Review(**RIGHT)
    sent = fake_upstream.stats()["bodies"][prompt]
    assert sent["messages"][0] == {"role": "system", "content": "You rate reviews."} and sent["temperature"] == 0.5
    assert sent["top_k"] == 5 and "metadata" not in sent, "top_k forwarded, metadata taken"


def test_forced_tool_use_votes_on_the_input(client: Any, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    made = client.messages.create(model="fake-model", max_tokens=64, messages=user(prompt), tools=[TOOL], tool_choice=FORCED,
                                  extra_body={"accord": {"k": 5}})  # fmt: skip
    [block] = made.content
    assert block.type == "tool_use" and block.name == "Review" and block.id.startswith("toolu_") and block.input == RIGHT
    assert made.stop_reason == "tool_use" and made.model_extra["accord"]["calls"] == 4
    body = fake_upstream.stats()["bodies"][prompt]
    assert "tools" not in body and "tool_choice" not in body  # the ballots were asked for the input, not for a call


def test_the_stream_helper_gets_the_decided_value(client: Any) -> None:
    with client.messages.stream(model="fake-model", max_tokens=64, messages=user(fresh(say=NOISY)), output_format=Review,
                                extra_body={"accord": {"k": 5}}) as stream:  # fmt: skip
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert final.parsed_output == Review(**RIGHT) and final.model_extra["accord"]["calls"] == 4
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"] and "content_block_stop" in kinds
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0 and final.stop_reason == "end_turn"


def test_a_raw_stream_of_a_forced_tool_is_the_documented_sequence(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "max_tokens": 64, "messages": user(fresh(say=NOISY)), "tools": [TOOL], "tool_choice": FORCED,
            "stream": True, "accord": {"k": 5}}  # fmt: skip
    events = sse(serve_proxy.root, body)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[1]["content_block"]["type"] == "tool_use" and events[1]["content_block"]["input"] == {}
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")
    assert json.loads(partial) == RIGHT and all(e["delta"]["type"] == "input_json_delta" for e in events if e["type"] == "content_block_delta")
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["accord"]["stable"] is True
    assert events[0]["message"]["accord"]["calls"] == 4 and events[-2]["usage"]["output_tokens"] > 0


def test_free_text_with_accord_votes_on_the_normalized_text(client: Any, fake_upstream: Any) -> None:
    prompt = fresh("Capital of France?", say=["The answer is  PARIS.", "the answer is\nParis.", "The answer is Paris. "])
    made = client.messages.create(model="fake-model", max_tokens=32, messages=user(prompt), extra_body={"accord": {"k": 3, "normalize": ["casefold"]}})
    assert made.content[0].text == "the answer is paris." and made.model_extra["accord"]["agreement"] == 1.0
    assert "response_format" not in fake_upstream.stats()["bodies"][prompt]


def test_content_blocks_are_translated_faithfully(client: Any, fake_upstream: Any) -> None:
    prompt = fresh(say=NOISY)
    weather = {"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "Is it sunny in Oslo?"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "Let me look."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                                     {"type": "text", "text": prompt, "cache_control": {"type": "ephemeral"}}]},
    ]  # fmt: skip
    made = client.messages.create(model="fake-model", max_tokens=64, system="Rate reviews.", messages=turns, tools=[TOOL, weather],
                                  tool_choice=FORCED, extra_body={"accord": {"k": 5}})  # fmt: skip
    assert made.content[0].input == RIGHT
    sent = fake_upstream.stats()["bodies"][prompt]["messages"]
    call = {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
    assert sent[:4] == [
        {"role": "system", "content": "Rate reviews."},
        {"role": "user", "content": [{"type": "text", "text": "Is it sunny in Oslo?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},  # the thinking block left out
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},  # the tool result first, then the turn's text
    ]  # fmt: skip
    assert sent[4]["role"] == "user" and sent[4]["content"].startswith(prompt) and len(sent) == 5


# -- refused, with a 400 in Anthropic's shape that names the field; failed votes are 422s -------------


@pytest.mark.parametrize(("change", "named"), [
    ({"max_tokens": None}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"messages": []}, "messages"),
    ({"output_config": {"format": {"type": "json_schema"}}}, "output_config.format.schema"),
    ({"output_config": {"format": {"type": "text"}}}, "output_config.format"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}], "output_config": None, "tool_choice": {"type": "auto"},
      "accord": {"k": 1}}, "tools[0]"),
    ({"tools": [TOOL], "tool_choice": {"type": "tool", "name": "Nope"}, "output_config": None}, "tool_choice"),
    ({"tools": [TOOL], "tool_choice": FORCED}, "tool_choice"),  # a format and a named tool: two answer shapes
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"accord": {"k": 50}}, "accord.k"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}, "messages[0].content[0]"),
    ({"stream": "yes"}, "stream"),
])  # fmt: skip
def test_what_cannot_be_honoured_is_a_400_that_names_the_field(serve_proxy: Any, fake_upstream: Any, change: dict[str, Any],
                                                               named: str) -> None:  # fmt: skip
    prompt = fresh(say=[json.dumps(RIGHT)])
    body = {"model": "fake-model", "max_tokens": 64, "messages": user(prompt), "output_config": FORMAT, **change}
    response = httpx.post(f"{serve_proxy.root}/v1/messages", json={k: v for k, v in body.items() if v is not None}, headers=AUTH)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and error["message"].startswith(named), error
    assert prompt not in fake_upstream.stats()["calls"], "nothing was forwarded"


def test_the_sdk_raises_its_own_errors(serve_proxy: Any) -> None:
    stranger = anthropic.Anthropic(base_url=serve_proxy.root, api_key="not-a-client-key", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        stranger.messages.create(model="fake-model", max_tokens=8, messages=user("hi"))
    assert caught.value.body["error"]["type"] == "authentication_error"
    raw = httpx.post(f"{serve_proxy.root}/v1/messages", json={"model": "fake-model", "max_tokens": 8, "messages": user("hi")},
                     headers={"anthropic-version": "2023-06-01"})  # fmt: skip
    assert raw.status_code == 401 and error_of(raw)["type"] == "authentication_error"
    ours = anthropic.Anthropic(base_url=serve_proxy.root, api_key=CLIENT_KEY, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as missing:  # a route the proxy does not have, in Anthropic's shape
        ours.messages.count_tokens(model="fake-model", messages=user("hi"))
    assert missing.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        anthropic.Anthropic(base_url=serve_proxy.root, api_key=CLIENT_KEY, max_retries=0).messages.create(
            model="fake-model", max_tokens=64, messages=user("hi"), output_config=FORMAT, thinking={"type": "enabled", "budget_tokens": 32})  # type: ignore[arg-type]  # fmt: skip


def test_no_valid_output_is_a_422_the_client_does_not_retry(serve_proxy: Any, fake_upstream: Any) -> None:
    prompt = fresh(say=["I cannot rate this.", "No idea, sorry!"])
    retrying = anthropic.Anthropic(base_url=serve_proxy.root, api_key=CLIENT_KEY)  # the SDK's own retries on: it must not use them
    with pytest.raises(anthropic.UnprocessableEntityError) as caught:
        retrying.messages.create(model="fake-model", max_tokens=64, messages=user(prompt), output_config=FORMAT,
                                 extra_body={"accord": {"k": 1, "retry": 2}})  # fmt: skip
    assert caught.value.response.headers["x-should-retry"] == "false"
    body = caught.value.response.json()
    assert body["error"]["type"] == "accord_invalid_output" and body["accord"]["calls"] == 2
    assert fake_upstream.stats()["calls"][prompt] == 2, "one run, not re-run by the client's retries"


def test_no_consensus_is_a_422_streamed_or_not(serve_proxy: Any) -> None:
    say = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 5, "sentiment": "positive"}', '{"stars": 3, "sentiment": "neutral"}']
    for stream in (False, True):
        body = {"model": "fake-model", "max_tokens": 64, "messages": user(fresh(say=say)), "output_config": FORMAT, "stream": stream,
                "accord": {"k": 3, "quorum": 2}}  # fmt: skip
        response = httpx.post(f"{serve_proxy.root}/v1/messages", json=body, headers=AUTH, timeout=30)
        assert response.status_code == 422 and response.headers["x-should-retry"] == "false"
        assert error_of(response)["type"] == "accord_no_consensus" and len(response.json()["accord"]["votes"]) == 3


# -- passed through: translated to chat completions where the upstream has no /messages ---------------


def test_text_is_translated_to_chat_and_back(client: Any, fake_upstream: Any) -> None:
    prompt = fresh("Say hello.", say=["  Hello,   world!  "])
    raw = client.messages.with_raw_response.create(model="fake-model", max_tokens=20, system="Be brief.", messages=user(prompt),
                                                   stop_sequences=["END"], extra_body={"top_p": 0.9})  # fmt: skip
    made = raw.parse()
    assert made.content[0].text == "  Hello,   world!  " and made.stop_reason == "end_turn" and "accord" not in (made.model_extra or {})
    billed = fake_upstream.stats()["billed_by_prompt"][prompt]
    assert (made.usage.input_tokens, made.usage.output_tokens) == (billed["prompt_tokens"], billed["completion_tokens"])
    assert fake_upstream.stats()["bodies"][prompt] == {"model": "fake-model", "max_tokens": 20, "top_p": 0.9, "stop": ["END"],
                                                       "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": prompt}]}  # fmt: skip
    strict(json.loads(raw.http_response.text))
    with client.messages.stream(model="fake-model", max_tokens=20, messages=user(fresh("Hi.", say=["Hi there, as it comes."]))) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(pieces) == "Hi there, as it comes." and len(pieces) > 1, "streamed as the upstream streams"
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0 and final.stop_reason == "end_turn"


def test_a_passed_through_tool_call_comes_back_as_a_tool_use_block(client: Any, serve_proxy: Any) -> None:
    weather = {"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    asked = fresh("Weather?", tool_call={"name": "weather", "arguments": '{"city": "Oslo"}'})
    made = client.messages.create(model="fake-model", max_tokens=32, messages=user(asked), tools=[weather])
    [call] = made.content
    assert call.type == "tool_use" and call.name == "weather" and call.input == {"city": "Oslo"} and made.stop_reason == "tool_use"
    events = sse(serve_proxy.root, {"model": "fake-model", "max_tokens": 32, "messages": user(fresh("Weather?", tool_call={"name": "weather",
                 "arguments": '{"city": "Bergen"}'})), "tools": [weather], "stream": True})  # fmt: skip
    assert [e["content_block"]["name"] for e in events if e["type"] == "content_block_start"] == ["weather"]
    assert json.loads("".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta")) == {"city": "Bergen"}
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_an_upstream_error_passed_through_keeps_its_status_in_anthropics_shape(serve_proxy: Any) -> None:
    body = {"model": "fake-model", "max_tokens": 8, "messages": user(fresh(status=429, retry_after=7))}
    response = httpx.post(f"{serve_proxy.root}/v1/messages", json=body, headers=AUTH)
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert error_of(response)["type"] == "rate_limit_error"


def test_metrics_and_the_log_count_messages_requests(client: Any, serve_proxy: Any, fake_upstream: Any) -> None:
    from test_serve import _sample

    client.messages.create(model="fake-model", max_tokens=64, messages=user(fresh(say=NOISY)), output_config=FORMAT, extra_body={"accord": {"k": 5}})
    text = httpx.get(f"{serve_proxy.root}/metrics", headers={"authorization": f"Bearer {CLIENT_KEY}"}).text
    assert _sample(text, "accord_serve_requests_total", mode="schema", status="200") >= 1
    assert _sample(text, "accord_serve_calls_per_answer_sum") >= 4
    log = serve_proxy.log_text()
    assert "POST /v1/messages 200" in log and "mode=schema" in log
    assert UPSTREAM_KEY not in log and CLIENT_KEY not in log
    auth = fake_upstream.stats()["auth"]  # (in-process apps of other tests may have called it with their own keys)
    assert f"Bearer {UPSTREAM_KEY}" in auth and not any(CLIENT_KEY in a for a in auth), "the upstream gets the proxy's key, never the client's"


# -- an upstream that speaks Messages --------------------------------------------------------------------


@pytest.fixture(scope="module")
def messages_upstream() -> Iterator[tuple[Any, Any]]:
    with serving.fake_upstream(messages=True) as fake:
        routes = [f"claude={fake.url};wire=messages;model=fake-model;cache_min_tokens=1", f"chatty={fake.url};model=fake-model"]
        flags = [a for route in routes for a in ("--model", route)]
        with serving.accord_serve([], *flags, "--api-key", CLIENT_KEY, env={"ANTHROPIC_API_KEY": CLAUDE_KEY}) as proxy:
            yield fake, proxy


def test_an_upstream_that_speaks_messages_decides_through_the_anthropic_backend(messages_upstream: tuple[Any, Any]) -> None:
    fake, proxy = messages_upstream
    client = anthropic.Anthropic(base_url=proxy.root, api_key=CLIENT_KEY, max_retries=0, timeout=60)
    prompt = fresh(say=[json.dumps(RIGHT)])
    made = client.messages.create(model="claude", max_tokens=64, messages=user(prompt), output_config=FORMAT, extra_body={"accord": {"k": 3}})
    assert json.loads(made.content[0].text) == RIGHT and made.model_extra["accord"]["calls"] == 2
    sent = fake.stats()["bodies"][prompt]
    assert sent["output_config"]["format"]["type"] == "json_schema" and sent["model"] == "fake-model", "the Messages wire, not chat"
    assert [b for b in sent["messages"][-1]["content"] if b.get("cache_control")], "the prefix the ballots share is marked cacheable"
    assert made.usage.cache_creation_input_tokens and made.usage.cache_read_input_tokens, "one ballot wrote the cache, the other read it"
    assert made.model_extra["accord"]["upstream_calls"] >= 2, "the anthropic SDK's calls go through the proxy's bounded transport"
    noisy = client.messages.create(model="claude", max_tokens=64, messages=user(fresh(say=NOISY)), output_config=FORMAT,
                                   extra_body={"accord": {"k": 5}})  # fmt: skip
    assert json.loads(noisy.content[0].text) == RIGHT and noisy.model_extra["accord"]["calls"] == 4
    tool = client.messages.create(model="claude", max_tokens=64, messages=user(fresh(say=[json.dumps(RIGHT)])), tools=[TOOL],
                                  tool_choice=FORCED, extra_body={"accord": {"k": 3}})  # fmt: skip
    assert tool.content[0].type == "tool_use" and tool.content[0].input == RIGHT
    chat = httpx.post(f"{proxy.url}/chat/completions", headers={"authorization": f"Bearer {CLIENT_KEY}"}, timeout=60, json={
        "model": "claude", "messages": user(fresh(say=NOISY)), "accord": {"k": 5},
        "response_format": {"type": "json_schema", "json_schema": {"name": "Review", "schema": Review.model_json_schema()}}})  # fmt: skip
    assert chat.status_code == 200 and json.loads(chat.json()["choices"][0]["message"]["content"]) == RIGHT
    assert f"authorization: Bearer {CLAUDE_KEY}" in fake.stats()["auth"] and CLAUDE_KEY not in proxy.log_text()


def test_passed_through_unchanged_to_an_upstream_with_messages(messages_upstream: tuple[Any, Any]) -> None:
    fake, proxy = messages_upstream
    client = anthropic.Anthropic(base_url=proxy.root, api_key=CLIENT_KEY, max_retries=0)
    for model in ("claude", "chatty"):  # configured to speak Messages; a chat upstream found to have /messages
        prompt = fresh("Say hi.", say=["Hi from /messages."])
        sent = {"max_tokens": 20, "system": "Be kind.", "messages": user(prompt), "thinking": {"type": "enabled", "budget_tokens": 16}}
        made = client.messages.create(model=model, **sent)
        assert made.id == "msg_fake" and made.content[0].text == "Hi from /messages."
        assert fake.stats()["bodies"][prompt] == {**sent, "model": "fake-model"}, "unchanged but for the upstream's model name"
        streamed = [e.type for e in client.messages.create(model=model, max_tokens=20, messages=user(fresh("Hi.")), stream=True)]
        assert streamed[0] == "message_start" and streamed[-1] == "message_stop"
    auth = fake.stats()["auth"]
    assert f"x-api-key: {CLAUDE_KEY}" in auth and f"authorization: Bearer {UPSTREAM_KEY}" in auth
    assert not any(CLIENT_KEY in a for a in auth), "the client's key never goes upstream"


# -- a chat stream translated as it comes (no I/O: the chunks built by hand) ----------------------------


def test_a_chat_stream_is_translated_as_it_comes_whatever_its_chunking() -> None:
    import asyncio

    from accord.serve._messages_events import FromChat

    def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]
        return "data: " + json.dumps({"model": "up-model", "choices": choices, **({"usage": extra.pop("usage")} if "usage" in extra else {})}) + "\n\n"

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": '}}
    stream = "".join([chunk({"role": "assistant", "content": ""}), chunk({"content": "Let me "}), chunk({"content": "look."}),
                      chunk({"tool_calls": [call]}), chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
                      chunk({}, "tool_calls"), "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
                      "\n\ndata: [DONE]\n\n"]).encode()  # fmt: skip

    async def translated(raw: bytes, size: int) -> list[dict[str, Any]]:
        async def pieces() -> Any:
            for i in range(0, len(raw), size):
                yield raw[i : i + size]

        out = b"".join([event async for event in FromChat("rid", "asked-model", ["END"]).translate(pieces())])
        return [json.loads(line[6:]) for line in out.decode().splitlines() if line.startswith("data: ")]

    for size in (1, 7, len(stream)):  # split anywhere, even inside a line
        events = asyncio.run(translated(stream, size))
        for event in events:
            EVENTS.validate_python(event)
        assert [e["type"] for e in events] == ["message_start", "content_block_start", "content_block_delta", "content_block_delta",
                                               "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
                                               "content_block_stop", "message_delta", "message_stop"]  # fmt: skip
        assert events[0]["message"]["model"] == "up-model" and events[0]["message"]["id"] == "msg_rid"
        assert events[5]["content_block"] == {"type": "tool_use", "id": "call_1", "name": "weather", "input": {}} and events[5]["index"] == 1
        assert json.loads(events[6]["delta"]["partial_json"] + events[7]["delta"]["partial_json"]) == {"city": "Oslo"}
        assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"]["input_tokens"] == 9
    vllm_stop = chunk({"content": "ok"}) + chunk({}, "stop", stop_reason="END") + "data: [DONE]\n\n"
    events = asyncio.run(translated(vllm_stop.encode(), 5))
    assert events[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    failed = asyncio.run(translated((chunk({"content": "o"}) + 'data: {"error": {"message": "engine died"}}\n\n').encode(), 64))
    assert failed[-1]["type"] == "error" and "engine died" in failed[-1]["error"]["message"]
