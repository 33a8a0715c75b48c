"""Routing by model: one ``accord serve`` in front of two upstreams (two fake upstream processes),
each model with its own upstream, key variable, default policy and caps, configured by a file and
by ``--model`` flags. Chat completions and the Responses API route alike; an unknown model is a
404 in OpenAI's shape, and ``GET /v1/models`` lists the configured names.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

import accord
import serving
from accord.serve import build
from serving import CLIENT_KEY, UPSTREAM_KEY

pytest.importorskip("starlette")

SMALL_KEY = "sk-small-upstream-0b5e-not-for-clients"
SCHEMA = {"type": "object", "properties": {"stars": {"type": "integer"}, "sentiment": {"type": "string"}}, "required": ["stars", "sentiment"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "Review", "schema": SCHEMA}}
RIGHT = {"stars": 4, "sentiment": "positive"}
WRONG = {"stars": 2, "sentiment": "negative"}
NOISY = [json.dumps(WRONG), "{stars: 4, sentiment: 'positive'}", '```json\n{"stars": "4", "sentiment": "positive"}\n```', json.dumps(RIGHT)]


def fresh(**directive: Any) -> str:
    return f"Review: 'Fine pen.' [{uuid.uuid4().hex[:10]}] FAKE:{json.dumps(directive)}"


@pytest.fixture(scope="module")
def routed(tmp_path_factory: Any) -> Iterator[tuple[Any, Any, Any]]:
    """Two fakes; "strict" (the first: k=5, no gate, the proxy's OPENAI_API_KEY) and "small" (the
    second, whose upstream calls it "fake-model": k=1, at most k=3, its own SMALL_KEY)."""
    config = Path(tmp_path_factory.mktemp("routing")) / "serve.toml"
    with serving.fake_upstream() as strict, serving.fake_upstream() as small:
        config.write_text(f"""
[policy]
retry = 2

[models.strict]
upstream = ["{strict.url}"]
[models.strict.policy]
k = 5
gate = false

[models.small]
upstream = "{small.url}"
model = "fake-model"
key_env = "SMALL_KEY"
max_k = 3
[models.small.policy]
k = 1
""")
        with serving.accord_serve([], "--api-key", CLIENT_KEY, "--config", str(config), env={"SMALL_KEY": SMALL_KEY}) as proxy:
            yield strict, small, proxy


def test_each_model_gets_its_own_upstream_and_policy(routed: tuple[Any, Any, Any]) -> None:
    strict, small, proxy = routed
    client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY)
    one, two = fresh(say=NOISY), fresh(say=NOISY)
    voted = client.chat.completions.create(model="strict", messages=[{"role": "user", "content": one}], response_format=FORMAT)  # type: ignore[arg-type]
    alone = client.chat.completions.create(model="small", messages=[{"role": "user", "content": two}], response_format=FORMAT)  # type: ignore[arg-type]
    assert json.loads(voted.choices[0].message.content or "") == RIGHT and voted.model_extra["accord"]["calls"] == 4  # k=5: the vote
    assert json.loads(alone.choices[0].message.content or "") == WRONG and alone.model_extra["accord"]["calls"] == 1  # k=1: one call
    assert one in strict.stats()["calls"] and one not in small.stats()["calls"]
    assert two in small.stats()["calls"] and two not in strict.stats()["calls"]
    assert small.stats()["bodies"][two]["model"] == "fake-model" and strict.stats()["bodies"][one]["model"] == "strict"  # the upstream's name
    assert strict.stats()["auth"] == [f"Bearer {UPSTREAM_KEY}"] and small.stats()["auth"] == [f"Bearer {SMALL_KEY}"]  # each its own key

    three, four = fresh(say=NOISY), fresh(say=NOISY)
    voted_r = client.responses.create(model="strict", input=three, text={"format": {"type": "json_schema", "name": "R", "schema": SCHEMA}})  # type: ignore[typeddict-item]
    alone_r = client.responses.create(model="small", input=four, text={"format": {"type": "json_schema", "name": "R", "schema": SCHEMA}})  # type: ignore[typeddict-item]
    assert json.loads(voted_r.output_text) == RIGHT and voted_r.model_extra["accord"]["calls"] == 4
    assert json.loads(alone_r.output_text) == WRONG and alone_r.model_extra["accord"]["calls"] == 1
    assert three in strict.stats()["calls"] and four in small.stats()["calls"]


def test_a_models_caps_and_an_unknown_model(routed: tuple[Any, Any, Any]) -> None:
    _, small, proxy = routed
    client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY)
    prompt = fresh(say=[json.dumps(RIGHT)])
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="small", messages=[{"role": "user", "content": prompt}], response_format=FORMAT,  # type: ignore[arg-type]
                                       extra_body={"accord": {"k": 5}})  # fmt: skip
    assert caught.value.body["param"] == "accord.k" and "from 1 to 3" in caught.value.body["message"]
    assert client.chat.completions.create(model="strict", messages=[{"role": "user", "content": prompt}], response_format=FORMAT,  # type: ignore[arg-type]
                                          extra_body={"accord": {"k": 5}}).model_extra["accord"]["calls"] >= 1  # the other's cap is 9  # fmt: skip
    for call in (lambda: client.chat.completions.create(model="gpt-nope", messages=[{"role": "user", "content": prompt}]),
                 lambda: client.responses.create(model="gpt-nope", input=prompt)):  # fmt: skip
        with pytest.raises(openai.NotFoundError) as missing:
            call()
        assert missing.value.body["code"] == "model_not_found" and missing.value.body["param"] == "model"
        assert "strict" in missing.value.body["message"] and "small" in missing.value.body["message"]
    assert prompt not in small.stats()["calls"]
    assert [m.id for m in client.models.list()] == ["strict", "small"]
    ready = httpx.get(f"{proxy.root}/ready").json()
    assert ready["status"] == "ready" and [u["model"] for u in ready["upstreams"]] == ["strict", "small"]


def test_a_passed_through_request_goes_to_its_models_upstream_renamed(routed: tuple[Any, Any, Any]) -> None:
    _, small, proxy = routed
    client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY)
    prompt = fresh(say=["Hello."])
    assert client.chat.completions.create(model="small", messages=[{"role": "user", "content": prompt}]).choices[0].message.content == "Hello."
    assert small.stats()["bodies"][prompt] == {"model": "fake-model", "messages": [{"role": "user", "content": prompt}]}
    again = fresh(say=["Hi."])
    assert client.responses.create(model="small", input=again).output_text == "Hi."  # translated: the fake has no /responses
    assert small.stats()["bodies"][again]["model"] == "fake-model"


def test_model_flags_route_as_the_file_does() -> None:
    with serving.fake_upstream() as a, serving.fake_upstream() as b, serving.accord_serve(
        [], "--api-key", CLIENT_KEY, "--model", f"alpha={a.url};k=3;gate=false", "--model", f"beta={b.url};model=fake-model;k=1;max_k=2",
    ) as proxy:  # fmt: skip
        client = openai.OpenAI(base_url=proxy.url, api_key=CLIENT_KEY)
        one, two = fresh(say=NOISY), fresh(say=NOISY)
        voted = client.chat.completions.create(model="alpha", messages=[{"role": "user", "content": one}], response_format=FORMAT)  # type: ignore[arg-type]
        alone = client.responses.create(model="beta", input=two, text={"format": {"type": "json_schema", "name": "R", "schema": SCHEMA}})  # type: ignore[typeddict-item]
        assert voted.model_extra["accord"]["calls"] == 3 and json.loads(voted.choices[0].message.content or "") == RIGHT
        assert alone.model_extra["accord"]["calls"] == 1 and one in a.stats()["calls"] and two in b.stats()["calls"]
        assert [m.id for m in client.models.list()] == ["alpha", "beta"]


@pytest.mark.parametrize(("given", "file", "message"), [
    ({"models": ("small",)}, None, "--model takes NAME=URL"),
    ({"models": ("small=ftp://x",)}, None, "an upstream must be an http:// or https:// base URL"),
    ({"models": ("small=http://u/v1;bogus=1",)}, None, "unknown setting 'bogus'"),
    ({"models": ("small=http://u/v1;key_env=sk-abc 123",)}, None, "key_env must name an environment variable"),
    ({"models": ("a=http://u/v1", "a=http://w/v1")}, None, "configured twice"),
    ({"models": ("a=http://u/v1;max_k=0",)}, None, "max_k must be an int from 1 to 1000"),
    ({}, '[models.a]\nupstream = "http://u/v1"\ncolour = "red"\n', "unknown names ['colour']"),
    ({}, 'upstream = "http://u/v1"\n[models.a]\nupstream = "http://w/v1"\n', "not both"),
    ({}, '[models.a]\nupstream = "http://u/v1"\n[models.a.policy]\nk = "five"\n', None),
    ({"models": ("a=http://u/v1;wire=grpc",)}, None, "models.a.wire must be chat"),
    ({"models": ("a=http://u/v1;wire=messages;noise_floor=0.5",)}, None, "[backend] has unknown names ['noise_floor']"),
    ({"models": ("a=http://u/v1;cache_min_tokens=1",)}, None, "[backend] has unknown names ['cache_min_tokens']"),
    ({"models": ("a=http://u/v1;wire=messages;structured=true",)}, None, "structured must be one of auto, output_config, tool, off"),
    ({"models": ("a=http://u/v1",), "wire": "messages"}, None, "give each model its own wire"),
    ({"upstreams": ("http://u/v1",), "wire": "anthropic"}, None, "wire must be chat"),
])  # fmt: skip
def test_a_routing_configuration_that_cannot_work_is_refused(tmp_path: Path, given: dict[str, Any], file: str | None, message: str | None) -> None:
    path = None
    if file is not None:
        path = tmp_path / "serve.toml"
        path.write_text(file)
    with pytest.raises(accord.ConfigError, match=None if message is None else message.replace("[", r"\[").replace("]", r"\]")) as caught:
        config = build(given, path, environ={})
        from accord.serve import create_app

        create_app(config)  # a policy value is checked as the server builds it
    if message is None:
        assert "models.a" in str(caught.value) and "accord.k" in str(caught.value)


def test_the_flags_replace_the_files_routing(tmp_path: Path) -> None:
    path = tmp_path / "serve.toml"
    path.write_text('[models.a]\nupstream = "http://u/v1"\n')
    assert [m.name for m in build({}, path, environ={}).models] == ["a"]
    assert [m.name for m in build({"models": ("b=http://w/v1",)}, path, environ={}).models] == ["b"]
    plain = build({"upstreams": ("http://w/v1",)}, path, environ={})
    assert plain.models == () and plain.upstreams == ("http://w/v1",)  # --upstream: the single-upstream proxy, as before


def test_an_upstream_that_speaks_messages_reads_its_own_key_and_takes_the_backend_names_it_can() -> None:
    from accord.serve._router import Router

    both = build({"models": ("claude=http://u/v1;wire=messages;cache_min_tokens=10", "local=http://w/v1")}, environ={})
    assert [(m.wire, m.key_env) for m in both.models] == [("messages", "ANTHROPIC_API_KEY"), ("chat", "OPENAI_API_KEY")]
    config = accord.serve.Config(models=both.models, backend={"noise_floor": 0.5, "timeout": 30})  # the server's names, for every model
    plain = build({"upstreams": ("http://u/v1",), "wire": "messages"}, environ={})

    async def built() -> None:
        router, alone = Router(config, lambda status, seconds: None), Router(plain, lambda status, seconds: None)
        claude, local = router.routes["claude"].upstreams, router.routes["local"].upstreams
        assert (claude.speaks, claude.options, claude.timeout) == ("messages", {"cache_min_tokens": 10}, 30.0)  # noise_floor left out
        assert (local.speaks, local.options) == ("chat", {"noise_floor": 0.5})
        assert plain.wire == "messages" and [d.upstreams.speaks for d in alone.deployments] == ["messages"]
        await router.aclose()
        await alone.aclose()

    asyncio.run(built())


def test_the_backend_table_turns_learning_off() -> None:
    from accord.serve._router import Router

    config = build({"models": ("local=http://127.0.0.1:9/v1;learn=false",)}, environ={})
    kept = build({"models": ("local=http://127.0.0.1:9/v1",)}, environ={})

    async def built() -> None:
        off, on = Router(config, lambda status, seconds: None), Router(kept, lambda status, seconds: None)
        (quiet,) = off.routes["local"].upstreams.backend("m", "schema").backends
        (learning,) = on.routes["local"].upstreams.backend("m", "schema").backends
        assert (quiet.margins.learn, learning.margins.learn) == (False, True)
        assert quiet.describe()["gate"].startswith("stood aside") and learning.describe()["gate"].startswith("on, learning")
        await off.aclose()
        await on.aclose()

    asyncio.run(built())


@pytest.mark.parametrize("setting, named", [("learn=maybe", "learn"), ("noise_floor=-1", "noise_floor"),
                                            ("top_logprobs=99", "top_logprobs"), ("logprobs=sometimes", "logprobs")])
def test_a_bad_margin_value_is_refused_when_the_server_starts_not_at_the_first_request(setting: str, named: str) -> None:
    with pytest.raises(accord.ConfigError, match=named) as refused:
        build({"models": (f"local=http://127.0.0.1:9/v1;{setting}",)}, environ={})
    assert "models.local[backend]" in str(refused.value)
