"""The OpenAI-compatible backend against mock transports and loopback servers (no model needed):
what it sends, what it learns about a server, how it reads answers, and that keys never leak."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, ClassVar, Literal

import httpx
import openai
import pytest
from pydantic import BaseModel

import accord
from accord import Request, Schema, Settings, Stabilizer, Vote, models
from accord.backends.openai import _wire as wire
from accord.backends.openai._caps import Capabilities
from accord.backends.openai._errors import redact_url, scrub

GOOD = '{"name": "Alice", "age": 30}'
KEY = "sk-live-SECRET0123456789"


class Person(BaseModel):
    name: str
    age: int


class Note(BaseModel):
    text: str
    tags: list[str] = []


def chat(content: str = GOOD, *, logprobs: Any = None, **extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
    if logprobs is not None:
        choice["logprobs"] = logprobs
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}  # fmt: skip
    return {**body, **extra}


class Server:
    """A mock transport handler: ``answer(body) -> dict | httpx.Response``; records request bodies."""

    def __init__(self, answer: Callable[[dict[str, Any]], Any] = lambda body: chat()) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.threads: set[int] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.threads.add(threading.get_ident())
        self.paths.append(request.url.path)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [{"id": "only-model", "object": "model", "created": 0, "owned_by": "x"}]})
        body = json.loads(request.content)
        self.bodies.append(body)
        out = self.answer(body)
        return out if isinstance(out, httpx.Response) else httpx.Response(200, json=out)

    @property
    def chats(self) -> list[dict[str, Any]]:
        """Request bodies other than the structured-output probe."""
        return [b for b in self.bodies if not is_probe(b)]


def is_probe(body: dict[str, Any]) -> bool:
    return body.get("response_format", {}).get("json_schema", {}).get("name") == "accord_probe"


def sync_backend(server: Server, **options: Any) -> Any:
    client = openai.OpenAI(api_key=KEY, base_url="http://mock.test/v1", http_client=httpx.Client(transport=httpx.MockTransport(server)))
    return models.openai(client, **{"model": "m", "capabilities": Capabilities(), **options})


def run(model: Any, schema: Any = Person, prompt: Any = "Alice is 30.", **options: Any) -> accord.Result[Any]:
    return Stabilizer(model, schema=schema, **{"vote": Vote(k=1, gate=None), **options}).run(prompt)


def request(schema: Any = Person, **settings: Any) -> Request:
    return Request("Alice is 30.", "Alice is 30.", Schema.of(schema), Settings(**settings))


# -- what is sent --------------------------------------------------------------------------------


def test_greedy_means_temperature_zero_and_no_sampling_filters():
    server = Server()
    run(sync_backend(server, structured=False))
    body = server.bodies[0]
    assert body["temperature"] == 0 and body["max_tokens"] == 512 and body["model"] == "m"
    assert not {"top_p", "top_k", "seed", "response_format"} & set(body)
    assert body["logprobs"] is True and body["top_logprobs"] == 2  # asked by default: margins, when the server gives them


def test_seed_is_sent_and_the_system_fingerprint_recorded():
    server = Server(lambda body: chat(system_fingerprint="fp_abc"))
    result = run(sync_backend(server, structured=False), settings=Settings(seed=7))
    assert server.bodies[0]["seed"] == 7
    meta = result.ballots[0].meta
    assert meta["system_fingerprint"] == "fp_abc" and meta["seed"] == 7 and meta["server"] == "http://mock.test/v1/"


def test_sampling_filters_are_sent_only_when_asked():
    server = Server()
    sync_backend(server, structured=False).generate(request(top_p=0.9, top_k=5))
    assert server.bodies[0]["top_p"] == 0.9 and server.bodies[0]["top_k"] == 5


def test_a_server_without_model_name_is_asked_for_its_model():
    server = Server()
    backend = sync_backend(server, model=None, structured=False)
    before = backend.fingerprint
    run(backend)
    run(backend)
    assert server.paths.count("/v1/models") == 1 and server.bodies[0]["model"] == "only-model"
    assert backend.describe()["servers"][0]["model"] == "only-model"
    assert backend.fingerprint == before == "openai:server-default@http://mock.test/v1/"  # a stable ledger key


# -- parameters a server refuses -----------------------------------------------------------------


def test_a_refused_temperature_is_dropped_and_remembered():
    def answer(body):
        if "temperature" in body:
            return httpx.Response(400, json={"error": {"message": "Unsupported parameter: 'temperature' is not supported with this model.",
                                                       "param": "temperature", "code": "unsupported_parameter"}})
        return chat()

    server = Server(answer)
    backend = sync_backend(server, structured=False)
    first = run(backend)
    assert first.value.age == 30 and first.ballots[0].meta["dropped"] == ["temperature"]
    run(backend)
    assert ["temperature" in b for b in server.bodies] == [True, False, False]  # refused once, then never sent


def test_a_422_unexpected_field_is_dropped():  # what transformers serve answers for top_k
    def answer(body):
        if "top_k" in body:
            return httpx.Response(422, json={"detail": "Unexpected fields in the request: {'top_k'}"})
        return chat()

    server = Server(answer)
    completion = sync_backend(server, structured=False).generate(request(top_k=3))
    assert completion.text == GOOD and completion.meta["dropped"] == ["top_k"]


def test_a_400_that_refuses_nothing_we_can_drop_is_a_typed_error():
    server = Server(lambda body: httpx.Response(400, json={"error": {"message": "max_tokens is too large: 99999"}}))
    with pytest.raises(accord.BackendError) as caught:
        sync_backend(server, structured=False).generate(request())
    assert caught.value.status == 400 and not caught.value.retryable and len(server.bodies) == 1


def test_refused_max_tokens_is_renamed():
    def answer(body):
        if "max_tokens" in body:
            return httpx.Response(400, json={"error": {"message": "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'.",
                                                       "param": "max_tokens", "code": "unsupported_parameter"}})
        return chat()

    server = Server(answer)
    sync_backend(server, structured=False).generate(request(max_tokens=40))
    assert server.bodies[-1]["max_completion_tokens"] == 40 and "max_tokens" not in server.bodies[-1]


# -- structured output ---------------------------------------------------------------------------


def test_a_server_that_honours_response_format_is_probed_once_then_trusted():
    def answer(body):
        return chat('{"probe": 1}') if is_probe(body) else chat()

    server = Server(answer)
    backend = sync_backend(server)
    assert backend.constrains is False  # unknown server: the schema goes in the prompt
    run(backend)
    assert len([b for b in server.bodies if is_probe(b)]) == 1
    assert backend.constrains is True
    run(backend)
    first, second = server.chats
    # The first run started before the probe, the second after it: both show the schema in the
    # prompt beside response_format, so the server read the same prompt.
    shown = 'Alice is 30.\n\nAnswer in JSON using this schema:\n{\n  "name": string,\n  "age": int,\n}'
    assert first["messages"] == second["messages"] == [{"role": "user", "content": shown}]
    assert first["response_format"] == second["response_format"]
    fmt = second["response_format"]["json_schema"]
    assert fmt["strict"] is True and fmt["schema"]["additionalProperties"] is False
    assert len([b for b in server.bodies if is_probe(b)]) == 1


def test_a_probe_that_fails_fails_the_call_and_is_tried_again_later():
    answers = iter([httpx.Response(503, text="warming up")])

    def answer(body):
        return next(answers, None) or (chat('{"probe": 1}') if is_probe(body) else chat())

    server = Server(answer)
    backend = sync_backend(server)
    with pytest.raises(accord.BackendError) as caught:
        backend.generate(request())
    assert caught.value.retryable and caught.value.status == 503 and len(server.bodies) == 1  # no second call
    backend.generate(request())
    assert [is_probe(b) for b in server.bodies] == [True, True, False] and backend.constrains


def test_a_server_that_ignores_response_format_gets_the_schema_in_the_prompt():
    server = Server(lambda body: chat("Hello there!" if is_probe(body) else GOOD + "\nThat is the person."))
    backend = sync_backend(server)
    result = run(backend)
    assert result.value.name == "Alice"  # extraction reads the JSON before the prose
    assert backend.constrains is False and backend.describe()["servers"][0]["capabilities"]["response_format"] == "ignored"
    run(backend)
    assert "response_format" not in server.chats[-1] and "using this schema" in server.chats[-1]["messages"][0]["content"]


def test_a_server_that_rejects_response_format_falls_back_to_the_prompt():
    def answer(body):
        if "response_format" in body:
            return httpx.Response(400, json={"error": {"message": "response_format is not supported by this server"}})
        return chat()

    server = Server(answer)
    backend = sync_backend(server)
    result = run(backend)
    assert result.value.age == 30 and result.ballots[0].meta["structured"] == "prompt"
    assert backend.constrains is False
    assert backend.describe()["servers"][0]["capabilities"]["response_format"] == "rejected"
    # A choice is not listed where the format carries it (prompt._prompt.shows_schema); here it is refused, so listed.
    with pytest.raises(accord.InvalidOutput):  # this server answers every request with Alice
        run(backend, schema=Literal["positive", "negative"], prompt="Great product!", retry=accord.Retry(attempts=1))
    assert server.bodies[-1]["messages"][0]["content"] == "Great product!\n\nAnswer with exactly one of: positive, negative."


def test_a_bare_schema_goes_wrapped_in_an_object_and_comes_back_unwrapped():
    server = Server(lambda body: chat('{"answer": "positive"}'))
    backend = sync_backend(server, structured=True)
    result = run(backend, schema=Literal["positive", "negative"], prompt="Great product!")
    assert result.value == "positive" and result.ballots[0].text == "positive"
    assert result.ballots[0].meta["wrapped"] == "answer" and result.ballots[0].meta["structured"] == "response_format"
    fmt = server.bodies[0]["response_format"]["json_schema"]
    assert fmt["strict"] is True and fmt["schema"] == {
        "type": "object", "properties": {"answer": {"enum": ["positive", "negative"], "type": "string"}},
        "required": ["answer"], "additionalProperties": False}
    # A choice the server takes wrapped is not listed in the prompt too (prompt._prompt.shows_schema)
    assert server.bodies[0]["messages"][0]["content"] == "Great product!"
    assert backend.constrains_for(Schema.of(int)) and backend.constrains_for(Schema.of(list[int]))


def test_wrapping_keeps_references_resolvable_and_unwrap_reads_only_the_wrapper():
    class Tag(BaseModel):
        name: str

    fmt, wrapped = wire.format_for(Schema.of(list[Tag]))
    root = fmt["json_schema"]["schema"]
    assert wrapped and root["properties"]["answer"]["items"] == {"$ref": "#/$defs/Tag"} and "Tag" in root["$defs"]
    assert wire.format_for(Schema.of(Person))[1] is False  # an object root goes as it is
    assert wire.format_for(Schema.of(accord.Grammar('start: "a"'))) == (None, False)
    assert wire.unwrap('{"answer": [1, 2]}') == "[1, 2]" and wire.unwrap('{"answer": "ok"}') == "ok"
    assert wire.unwrap('{"answer": 1, "x": 2}') is None and wire.unwrap('{"answer": "cut') is None


def test_a_schema_response_format_cannot_carry_gets_the_hint_from_the_backend():
    server = Server(lambda body: chat("ab"))
    backend = sync_backend(server, structured=True)  # the core leaves the hint out for it
    result = run(backend, schema=accord.Regex("a+b"), prompt="Say ab.")
    assert result.value == "ab"
    assert "response_format" in server.bodies[0]  # a pattern goes wrapped too
    grammar = accord.Grammar('start: "yes" | "no"')
    result = run(sync_backend(server := Server(lambda body: chat("yes")), structured=True), schema=grammar, prompt="Yes?")
    body = server.bodies[0]
    assert result.value == "yes"
    assert "response_format" not in body and "Answer in this grammar" in body["messages"][0]["content"]


def test_response_format_is_strict_only_when_the_schema_allows():
    assert wire.response_format(Schema.of(Person))["json_schema"]["strict"] is True
    optional = wire.response_format(Schema.of(Note))["json_schema"]
    assert optional["strict"] is False and optional["schema"]["additionalProperties"] is False
    tricky = {"type": "object", "properties": {"properties": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
              "required": ["properties"]}
    closed = wire.response_format(Schema.of(tricky))["json_schema"]
    assert closed["strict"] is True
    assert closed["schema"]["properties"] == {"properties": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                             "required": ["x"], "additionalProperties": False}}
    assert tricky["properties"]["properties"].get("additionalProperties") is None  # the user's schema is untouched
    assert wire.response_format(Schema.of(int)) is None and wire.response_format(Schema.of(list[int])) is None


# -- logprobs ------------------------------------------------------------------------------------


def token(text: str, *tops: float) -> dict[str, Any]:
    return {"token": text, "logprob": tops[0], "bytes": None,
            "top_logprobs": [{"token": f"t{i}", "logprob": lp, "bytes": None} for i, lp in enumerate(tops)]}


def test_logprobs_become_per_token_margins_and_a_score():
    logprobs = {"content": [token("{", -0.01, -5.01), token("x", -0.2, -1.7), token("}", 0.0, -9999.0)]}
    server = Server(lambda body: chat(logprobs=logprobs))
    completion = sync_backend(server, structured=False, margins=models.Margins(top_logprobs=3)).generate(request())
    assert server.bodies[0]["logprobs"] is True and server.bodies[0]["top_logprobs"] == 3
    assert completion.margins == pytest.approx((5.0, 1.5, 9999.0))
    assert completion.score == pytest.approx(-0.07)


def test_margins_of_edge_cases():
    def item(*tops: float) -> SimpleNamespace:
        return SimpleNamespace(logprob=tops[0], top_logprobs=[SimpleNamespace(logprob=t) for t in tops])

    assert wire.margins_of(SimpleNamespace(content=[item(0.0, float("-inf"))])) == ((wire.MAX_GAP,), 0.0)
    assert wire.margins_of(SimpleNamespace(content=[item(-0.1, -2.0), item(-0.3)]))[0] is None  # one alternative only
    assert wire.margins_of(None) == (None, None) and wire.margins_of(SimpleNamespace(content=[])) == (None, None)


def test_logprob_margins_reach_the_ballot_and_the_gate():
    logprobs = {"content": [token("a", -0.01, -4.0), token("b", -0.05, -3.0)]}
    server = Server(lambda body: chat(logprobs=logprobs))
    backend = sync_backend(server, structured=False, margins=models.Margins(noise_floor=0.5))
    assert backend.gives_margins
    result = Stabilizer(backend, schema=Person, vote=Vote(k=5, gate=accord.MarginGate())).run("Alice is 30.")
    assert result.stopped_because == "gate" and result.calls == 1
    assert result.min_margin == pytest.approx(2.95) and result.fragile_steps == 0


def test_a_server_that_drops_logprobs_is_remembered():
    server = Server()
    backend = sync_backend(server, structured=False, margins=models.Margins(noise_floor=0.5))
    completion = backend.generate(request())
    assert completion.margins is None and not backend.gives_margins
    backend.generate(request())
    assert "logprobs" in server.bodies[0] and "logprobs" not in server.bodies[1]


# -- clients -------------------------------------------------------------------------------------


def test_agenerate_is_natively_async_on_the_async_client():
    server = Server()

    async def handler(request: httpx.Request) -> httpx.Response:
        return server(request)

    client = openai.AsyncOpenAI(api_key=KEY, base_url="http://mock.test/v1", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    backend = models.openai(client, model="m", structured=False, capabilities=Capabilities())

    async def main():
        return await Stabilizer(backend, schema=Person, vote=Vote(k=3, gate=None)).arun("Alice is 30."), threading.get_ident()

    result, loop_thread = asyncio.run(main())
    assert result.value.age == 30 and len(server.bodies) == 2
    assert server.threads == {loop_thread}  # served on the event loop's thread, not a worker thread


def test_the_twin_client_is_derived_from_the_given_one():
    given = openai.OpenAI(api_key=KEY, base_url="http://h.test:9/v1", organization="org-1", default_headers={"X-Team": "a"}, max_retries=5)
    backend = models.openai(given, model="m")
    server = backend.servers[0]
    assert server.sync_client().max_retries == 0 and given.max_retries == 5

    async def twin():
        return server.async_client()

    derived = asyncio.run(twin())
    assert isinstance(derived, openai.AsyncOpenAI) and derived.max_retries == 0
    assert str(derived.base_url) == "http://h.test:9/v1/" and derived.api_key == KEY
    assert derived.organization == "org-1" and derived.default_headers["X-Team"] == "a"
    sync_twin = models.openai(openai.AsyncOpenAI(api_key=KEY, base_url="http://h.test:9/v1"), model="m").servers[0].sync_client()
    assert isinstance(sync_twin, openai.OpenAI) and sync_twin.max_retries == 0 and sync_twin.api_key == KEY


def test_each_event_loop_gets_its_own_async_client():
    with JsonServer() as url:
        backend = models.openai(base_url=url, model="m", structured=False)
        stab = Stabilizer(backend, schema=Person, vote=Vote(k=1, gate=None))
        first = asyncio.run(stab.arun("a"))
        second = asyncio.run(stab.arun("b"))  # a pooled connection of the closed loop would fail here
        assert first.value == second.value == Person(name="Alice", age=30)
        results = stab.map(["c", "d"], concurrency=2)  # map runs its own loop
        assert [r.value.age for r in results] == [30, 30]


def test_base_url_list_is_round_robin():
    with JsonServer() as one, JsonServer() as two:
        backend = models.openai(base_url=[one, two], model="m", structured=False)
        for _ in range(4):
            backend.generate(request())
        assert JsonServer.hits[one] == JsonServer.hits[two] == 2
        assert [s["url"] for s in backend.describe()["servers"]] == [one, two]


def test_bad_configuration_is_a_config_error():
    with pytest.raises(accord.ConfigError):
        models.openai(base_url="localhost:8000")
    with pytest.raises(accord.ConfigError):
        models.openai(openai.OpenAI(api_key="x"), base_url="http://a/v1")
    with pytest.raises(accord.ConfigError):
        models.openai(base_url="http://a/v1", margins=models.Margins(top_logprobs=1))
    with pytest.raises(accord.ConfigError):
        models.openai(base_url=[])
    with pytest.raises(accord.ConfigError):
        models.openai(object())


def test_a_server_with_several_models_needs_model_name():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "x"} for n in "ab"]})

    client = openai.OpenAI(api_key=KEY, base_url="http://mock.test/v1", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    with pytest.raises(accord.BackendError) as caught:
        run(models.openai(client, capabilities=Capabilities()))
    assert "serves 2 models (a, b); pass model=" in str(caught.value)


# -- credentials ---------------------------------------------------------------------------------


def test_no_credential_appears_in_results_logs_or_errors(caplog, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    with JsonServer(status=401, body={"error": {"message": f"Incorrect API key provided: {KEY}"}}) as url:
        secret_url = url.replace("http://", "http://admin:hunter2pass@") + "?token=tok-SECRET-42"
        backend = models.openai(base_url=secret_url, model="m", structured=False)
        with pytest.raises(accord.BackendError) as caught:
            run(backend)
    texts = [caplog.text, caught.value.result.to_json(), str(caught.value), json.dumps(backend.describe()), backend.fingerprint]
    texts += [b.error["message"] for b in caught.value.result.ballots]
    for secret in (KEY, "hunter2pass", "tok-SECRET-42"):
        assert not any(secret in text for text in texts), secret
    assert "HTTP 401" in str(caught.value.result.ballots[0].error["message"])
    assert caught.value.__cause__ is None  # the raw exception, with its request headers, is not chained


def test_redaction_helpers():
    assert redact_url("https://u:p@host.test:8443/v1?api-key=abc&x=1") == "https://***@host.test:8443/v1?api-key=***&x=***"
    assert scrub(f"key {KEY} and Bearer abc.def", [KEY]) == "key *** and ***"
    assert scrub("token sk-proj-abcdefgh1234 leaked") == "token *** leaked"


# -- a tiny loopback server ----------------------------------------------------------------------


class JsonServer:
    """A loopback HTTP server answering every POST with one JSON body; counts hits per URL."""

    hits: ClassVar[dict[str, int]] = {}

    def __init__(self, status: int = 200, body: dict[str, Any] | None = None) -> None:
        payload = json.dumps(body if body is not None else chat()).encode()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                JsonServer.hits[owner.url] = JsonServer.hits.get(owner.url, 0) + 1
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
