"""The whole pipeline through HTTP against a real ``transformers serve`` (the embedded model).

Outputs are kept short: the server runs a 135M model on a shared CPU.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel

from accord import Prompting, Request, Schema, Settings, Stabilizer, Vote, models
from accord.backends.openai._caps import Capabilities

pytestmark = pytest.mark.server

Sentiment = Literal["positive", "negative"]
REVIEW = "Is this review positive or negative? 'I loved it, great product.'"
EXTRACT = 'Extract name and age as JSON {{"name": ..., "age": ...}}: {} is {} years old.'
PEOPLE = [("Bob", 41), ("Carol", 25), ("Alice", 30)]


class Person(BaseModel):
    name: str
    age: int


def backend(url: str, **options: object) -> object:
    return models.openai(base_url=url, capabilities=Capabilities(), **{"max_tokens": 16, **options})


def test_a_choice_is_decided_through_http(openai_server):
    model = backend(openai_server)
    result = Stabilizer(model, schema=Sentiment, vote=Vote(k=3, gate=None), settings=Settings(seed=1)).run(REVIEW)
    assert result.value == "positive" and result.stable
    meta = result.ballots[0].meta
    assert meta["server"] == openai_server and meta["engine"] == "openai-compatible"
    assert meta["seed"] == 1 and "system_fingerprint" in meta  # transformers serve sends none: recorded as None
    assert meta["model"] == model.describe()["servers"][0]["model"]  # asked the server for its one model
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


def test_an_object_is_read_from_json_followed_by_prose_and_the_ignored_format_is_detected(openai_server):
    model = backend(openai_server, max_tokens=24)
    stab = Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None), prompting=Prompting(schema_in_prompt=False))
    result = asyncio.run(stab.arun(EXTRACT.format("Alice", 30)))
    assert result.value == Person(name="Alice", age=30)
    ballot = result.ballots[-1]
    assert ballot.meta["probe"] == "ignored"  # transformers serve accepts response_format and ignores it
    assert model.constrains is False
    assert model.describe()["servers"][0]["capabilities"]["response_format"] == "ignored"


def test_map_decides_many_prompts_in_input_order(openai_server):
    model = backend(openai_server, max_tokens=24)
    stab = Stabilizer(model, schema=Person, vote=Vote(k=1, gate=None), prompting=Prompting(schema_in_prompt=False))
    results = stab.map([EXTRACT.format(name, age) for name, age in PEOPLE], concurrency=3)
    assert [(r.value.name, r.value.age) for r in results] == PEOPLE
    assert all(r.error is None for r in results)


def test_the_server_refuses_top_k_and_it_is_dropped(openai_server):
    model = backend(openai_server, structured=False)
    request = Request("Say hi.", "Say hi.", Schema.of(str), Settings(max_tokens=4, top_k=5))
    completion = model.generate(request)
    assert completion.text and completion.meta["dropped"] == ["top_k"]
    assert model.describe()["servers"][0]["capabilities"]["rejected"] == ["top_k"]


def test_logprobs_the_server_ignores_leave_no_margins(openai_server):
    model = backend(openai_server, structured=False, margins=models.Margins(noise_floor=0.1))
    request = Request("Say hi.", "Say hi.", Schema.of(str), Settings(max_tokens=4))
    assert model.gives_margins
    completion = model.generate(request)
    assert completion.margins is None and completion.score is None
    assert model.gives_margins is False  # remembered: the margin gate will not wait for margins
