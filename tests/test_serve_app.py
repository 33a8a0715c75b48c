"""``accord serve`` in-process: its configuration checks, the server span around each request,
and an upstream that is down. The app is the real one (``accord.serve.create_app``), driven
through httpx's ASGI transport; the upstream is the real fake upstream process, or a port where
nothing listens.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

import accord
from accord.serve import build, create_app
from serving import CLIENT_KEY, ROOT

pytest.importorskip("starlette")

REVIEW = {"type": "object", "properties": {"stars": {"type": "integer"}}, "required": ["stars"]}
BODY = {"model": "fake-model", "messages": [{"role": "user", "content": 'Rate it. FAKE:{"say": ["{\\"stars\\": 4}"]}'}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "Stars", "schema": REVIEW}}, "accord": {"k": 1}}  # fmt: skip


def dead_url() -> str:
    from servers import free_port

    return f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there


async def post(app: Any, body: dict[str, Any], headers: dict[str, str] | None = None, path: str = "/v1/chat/completions") -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        return await client.post(path, json=body, headers=headers or {})


# -- configuration -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "message"), [
    ({}, "needs an upstream"),
    ({"upstreams": ("ftp://x",)}, "http:// or https://"),
    ({"upstreams": ("http://u/v1",), "host": "0.0.0.0"}, "refusing to bind 0.0.0.0 without client keys"),
    ({"upstreams": ("http://u/v1",), "api_keys": ("short",)}, "at least 8 characters"),
    ({"upstreams": ("http://u/v1",), "policy": {"k": 3, "bogus": 1}}, "unknown names ['bogus']"),
    ({"upstreams": ("http://u/v1",), "backend": {"api_key": "x"}}, "unknown names ['api_key']"),
    ({"upstreams": ("http://u/v1",), "concurrency": 0}, "concurrency must be an int >= 1"),
    ({"upstreams": ("http://u/v1",), "max_seconds": -1.0}, "max_seconds must be a positive number"),
])  # fmt: skip
def test_a_configuration_that_cannot_work_is_refused(given: dict[str, Any], message: str) -> None:
    with pytest.raises(accord.ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build(given, environ={})


def test_another_address_needs_keys_or_insecure() -> None:
    assert build({"upstreams": ("http://u/v1",), "host": "0.0.0.0", "insecure": True}, environ={}).insecure
    keyed = build({"upstreams": ("http://u/v1",), "host": "0.0.0.0"}, environ={"ACCORD_API_KEYS": f"{CLIENT_KEY}, other-key-456"})
    assert keyed.api_keys == (CLIENT_KEY, "other-key-456")
    assert CLIENT_KEY not in repr(keyed) and CLIENT_KEY not in json.dumps(keyed.shown())


def test_a_config_file_with_policy_and_backend(tmp_path: Any) -> None:
    file = tmp_path / "serve.toml"
    file.write_text('upstream = ["http://u/v1"]\nmax_k = 7\n[policy]\nk = 3\nretry = 2\n[backend]\nnoise_floor = 0.5\ndtype = "bfloat16"\n')
    config = build({"max_k": 5}, file, environ={})  # a flag beats the file
    assert config.upstreams == ("http://u/v1",) and config.max_k == 5 and config.policy == {"k": 3, "retry": 2}
    (tmp_path / "bad.toml").write_text('upstream = ["http://u/v1"]\n[policy]\nk = 8\n')
    with pytest.raises(accord.ConfigError, match=r"accord\.k must be an integer from 1 to 5"):
        create_app(build({"max_k": 5}, tmp_path / "bad.toml", environ={}))


def test_the_command_refuses_a_bad_configuration_with_a_message() -> None:
    from typer.testing import CliRunner

    from accord.cli import app

    done = CliRunner().invoke(app, ["serve", "--upstream", "http://u/v1", "--host", "0.0.0.0"])
    assert done.exit_code == 2 and "refusing to bind 0.0.0.0" in done.output


def test_accord_help_does_not_import_the_server() -> None:
    code = "import sys, accord.cli; assert not {'starlette', 'uvicorn', 'prometheus_client'} & set(sys.modules), sorted(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


# -- an upstream that is down ------------------------------------------------------------------------


def test_an_unreachable_upstream_is_a_502_and_not_ready() -> None:
    asyncio.run(_unreachable())


async def _unreachable() -> None:
    app = create_app(build({"upstreams": (dead_url(),), "transport_attempts": 1}, environ={}))
    decided = await post(app, BODY)
    assert decided.status_code == 502
    error = decided.json()["error"]
    assert error["type"] == "upstream_error" and error["code"] == "upstream_unreachable"
    assert decided.json()["accord"]["calls"] == 1
    passed = await post(app, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert passed.status_code == 502 and passed.json()["error"]["code"] == "upstream_unreachable"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
        ready = await client.get("/ready")
        models = await client.get("/v1/models")
    assert ready.status_code == 503 and ready.json() == {"status": "not ready", "upstreams": [{"index": 0, "ok": False}]}
    assert models.status_code == 502


def test_a_prompt_that_asks_nothing_is_a_400_before_any_upstream_call() -> None:
    asyncio.run(_asks_nothing())


async def _asks_nothing() -> None:
    app = create_app(build({"upstreams": (dead_url(),), "transport_attempts": 1}, environ={}))  # a call would be a 502
    for content in ("", " \n\t", [{"type": "text", "text": "\u200b"}]):
        for schema in (True, False):  # a schema, or a vote on the text
            body = {k: v for k, v in BODY.items() if schema or k != "response_format"}
            decided = await post(app, {**body, "messages": [{"role": "user", "content": content}]})
            assert decided.status_code == 400, decided.text
            error = decided.json()["error"]
            assert error["code"] == "invalid_messages" and "empty or blank" in error["message"], error


# -- tracing -----------------------------------------------------------------------------------------


def test_each_request_is_a_server_span_with_the_run_inside(fake_upstream: Any) -> None:
    asyncio.run(_spans(fake_upstream))


async def _spans(fake_upstream: Any) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(build({"upstreams": (fake_upstream.url,)}, environ={}), tracer_provider=provider)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    response = await post(app, BODY, {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"})
    assert response.status_code == 200
    spans = {span.name: span for span in exporter.get_finished_spans()}
    server = spans["POST /v1/chat/completions"]
    assert server.kind == SpanKind.SERVER and format(server.context.trace_id, "032x") == trace_id  # joined the caller's trace
    assert server.attributes["http.response.status_code"] == 200 and server.attributes["accord.mode"] == "schema"
    run = spans["accord.run"]
    assert run.parent is not None and run.parent.span_id == server.context.span_id
    calls = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert calls and all(s.parent is not None and s.parent.span_id == run.context.span_id for s in calls)
    assert "Rate it" not in json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()]), "no content by default"


# -- several upstreams -------------------------------------------------------------------------------


def test_several_upstreams_take_the_ballots_in_turn(fake_upstream: Any) -> None:
    asyncio.run(_several(fake_upstream))


async def _several(fake_upstream: Any) -> None:
    port = fake_upstream.url.split(":")[2].split("/")[0]
    urls = (f"http://127.0.0.1:{port}/v1", f"http://localhost:{port}/v1")  # two names of one fake
    app = create_app(build({"upstreams": urls}, environ={}))
    fake_upstream.reset()
    body = {**BODY, "messages": [{"role": "user", "content": 'Rate it twice. FAKE:{"say": ["{\\"stars\\": 4}"]}'}], "accord": {"k": 3}}
    response = await post(app, body)
    assert response.status_code == 200 and json.loads(response.json()["choices"][0]["message"]["content"]) == {"stars": 4}
    assert response.json()["accord"]["calls"] == 2
    assert set(fake_upstream.stats()["hosts"]) == {f"127.0.0.1:{port}", f"localhost:{port}"}  # one ballot each
    upstream = app.state.proxy.router.pick("fake-model").upstreams.backend("fake-model", "schema")
    assert upstream.fingerprint == f"openai:fake-model@{urls[0]}|{urls[1]}" == accord.models.openai(base_url=list(urls), model="fake-model").fingerprint


# -- a calibrated floor -------------------------------------------------------------------------------


def test_a_floor_measured_by_accord_calibrate_lets_the_gate_settle_in_one_call(fake_upstream: Any, tmp_path: Any, monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    from accord.cli import app as cli

    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    url = fake_upstream.url.replace("127.0.0.1", "localhost")  # a name no other test's backend has learned about
    done = CliRunner().invoke(cli, ["calibrate", "--model", f"openai:{url}", "--model-name", "fake-model", "--load", "2"])
    assert done.exit_code == 0, done.output
    proxy = create_app(build({"upstreams": (url,)}, environ={}))
    body = {**BODY, "accord": {"k": 5}}  # the default policy: k=5, and the margin gate
    answer = asyncio.run(post(proxy, body)).json()
    assert answer["accord"]["calls"] == 1 and answer["accord"]["stopped_because"] == "gate", answer["accord"]
