"""How a server writes strict JSON, read from its answers; a reference decodes in the same layout.

The detection (``backends/openai/_probe.free_whitespace``, remembered in ``_caps``) over a mock
transport; the layouts themselves on the embedded model (``whitespace=`` of the local backend).
The real vLLM, started with and without compact JSON: tests/test_vllm.py.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from accord import Completion, Request, Schema, Settings, Stabilizer, Vote, models
from accord.backends._base import Backend
from accord.backends.openai._caps import Capabilities
from accord.backends.openai._probe import free_whitespace
from accord.backends.openai._referee import Referee, _sent
from test_openai_backend import Server, chat, is_probe, sync_backend


class Person(BaseModel):
    name: str
    age: int


def steps(*pairs: tuple[str, dict[str, float]]) -> list[tuple[str, dict[str, float]]]:
    return list(pairs)


def test_whitespace_between_json_tokens_is_free_and_inside_strings_is_not():
    assert not free_whitespace('{"answer":true}') and not free_whitespace('{"name":"Maria Lopez","age":34}')
    assert free_whitespace('{"answer": true}') and free_whitespace('{\n  "answer":true}') and free_whitespace('{"a":1 }')
    assert free_whitespace('{"a":1,\n"b":2}') and free_whitespace('{"a":[1,  2]}')
    assert not free_whitespace('{"a":"q\\" x"}')  # an escaped quote does not end the string
    assert not free_whitespace('{"a":[1, 2]}')  # xgrammar 0.2.8 writes ", " in untyped arrays even when compact
    assert not free_whitespace('{"a":1} ') and not free_whitespace("Hello there, friend.")  # outside the root value


def test_a_compact_answer_shows_a_free_grammar_by_an_allowed_whitespace_alternative():
    text = '{"a":1}'
    assert free_whitespace(text, steps(("{", {}), ('"a', {"\n": -2.0}), ('":', {}), ("1", {}), ("}", {})))
    assert free_whitespace(text, steps(("{", {}), ('"a', {}), ('":', {}), ("1", {" ": -3.0}), ("}", {})))  # before "}"
    assert not free_whitespace(text, steps(("{", {"\n": -1.0}), ('"a', {}), ('":', {}), ("1", {}), ("}", {})))  # before the root
    assert not free_whitespace('{"a":"x"}', steps(('{"a":"', {}), ("x", {" ": -1.0}), ('"}', {})))  # inside a string
    assert not free_whitespace('{"a":[1,2]}', steps(('{"a":[1,', {}), ("2", {" ": -1.0}), ("]}", {})))  # ", " again
    assert free_whitespace('{"a":[1,2]}', steps(('{"a":[1,', {}), ("2", {"\n": -1.0}), ("]}", {})))


def test_the_servers_whitespace_is_learned_from_its_answers_and_free_is_final():
    caps, key = Capabilities(), ("s", "m")
    assert caps.get(key).whitespace is None
    caps.saw_json(key, False)
    assert caps.get(key).whitespace == "compact"
    caps.saw_json(key, True)
    caps.saw_json(key, False)
    assert caps.get(key).whitespace == "free" and caps.get(key).to_dict()["whitespace"] == "free"


def probe_and(answer: str) -> Server:
    return Server(lambda body: chat('{"probe":1}') if is_probe(body) else chat(answer))


def test_the_probe_asks_for_alternatives_and_a_compact_server_stays_compact_until_an_answer_says_otherwise():
    server = probe_and('{"name":"Alice","age":30}')
    backend = sync_backend(server)
    Stabilizer(backend, schema=Person, vote=Vote(k=1, gate=None)).run("Alice is 30.")
    (probe,) = [b for b in server.bodies if is_probe(b)]
    assert probe["logprobs"] is True and probe["top_logprobs"] == 5
    key = (backend.servers[0].shown, "m")
    assert backend.capabilities.get(key).whitespace == "compact"
    server.answer = lambda body: chat('{"name": "Alice", "age": 30}')
    Stabilizer(backend, schema=Person, vote=Vote(k=1, gate=None)).run("Alice is 31.")
    assert backend.capabilities.get(key).whitespace == "free"


def test_a_free_probe_answer_is_enough():
    server = Server(lambda body: chat('{\n    "probe": 1\n}') if is_probe(body) else chat('{"name":"Alice","age":30}'))
    backend = sync_backend(server)
    Stabilizer(backend, schema=Person, vote=Vote(k=1, gate=None)).run("Alice is 30.")
    assert backend.describe()["servers"][0]["capabilities"]["whitespace"] == "free"


class Recorder(Backend):
    """A stand-in reference: records what it is handed; ``prompt_tokens`` and ``forced`` as a local
    model has them (the Learner's teacher forcing), its logits the server's own."""

    fingerprint = "recorder"

    def __init__(self, text: str = '{"answer":"a"}', count: int = 5) -> None:
        self.text, self.count = text, count
        self.asked: list[Request] = []
        self.forced_with: list[Any] = []

    def generate(self, request: Request) -> Completion:
        self.asked.append(request)
        return Completion(text=self.text, finish_reason="stop")

    def prompt_tokens(self, prompt: Any) -> int:
        return self.count

    def forced(self, prompt: Any, steps: Any) -> list[tuple[str, dict[str, float]]]:
        self.forced_with.append(prompt)
        return [(token, dict(alternatives)) for token, alternatives in steps]


def test_the_referee_asks_the_reference_the_servers_prompt_and_the_json_schema_the_server_was_sent():
    server = probe_and('{"answer":"a"}')
    backend = sync_backend(server)
    schema = Schema.of(Literal["a", "b"])
    Stabilizer(backend, schema=schema, vote=Vote(k=1, gate=None)).run("Pick.")  # probed: response_format honoured
    recorder = Recorder()
    referee = Referee(recorder, backend)
    completion = referee.generate(Request("Pick.", "Pick.", schema, Settings()))
    sent = json.loads(json.dumps(server.chats[-1]["response_format"]["json_schema"]["schema"]))
    assert recorder.asked[0].schema.json_schema == sent == _sent(schema).json_schema  # the wrapped, closed schema
    assert completion.text == "a" and completion.meta["wrapped"] == "answer"
    assert referee.whitespace() == "compact"


def logprobs(*tokens: str) -> dict[str, Any]:
    return {"content": [{"token": t, "logprob": -0.1, "bytes": None, "top_logprobs": [{"token": t, "logprob": -0.1, "bytes": None},
                                                                                    {"token": "x", "logprob": -3.0, "bytes": None}]}
                        for t in tokens]}


SHOWN = 'Alice is 30.\n\nAnswer in JSON using this schema:\n{\n  "name": string,\n  "age": int,\n}'


def test_the_floor_is_learned_on_the_prompt_the_server_read_and_not_on_another_prompt():
    answer = '{"name":"Alice","age":30}'
    server = Server(lambda body: chat('{"probe":1}') if is_probe(body) else chat(answer, logprobs=logprobs('{"name":"', "Alice", '","age":30}')))
    reference = Recorder(answer, count=5)  # the mock server counts 5 prompt tokens
    backend = sync_backend(server, reference=reference, margins=models.Margins(dtype_label="bfloat16"))
    result = Stabilizer(backend, schema=Person).run("Alice is 30.")  # the schema shown beside response_format
    assert result.stopped_because == "reference" and server.chats[0]["messages"] == [{"role": "user", "content": SHOWN}]
    assert reference.forced_with == [server.chats[0]["messages"]]  # fed the prompt the server read
    assert backend._learner is not None and backend._learner.samples == 1 and backend._learner.other_prompt is None

    other = Recorder(answer, count=9)  # a reference whose chat template makes another prompt
    backend = sync_backend(server, reference=other, margins=models.Margins(dtype_label="bfloat16"))
    Stabilizer(backend, schema=Person).run("Alice is 30.")
    assert other.forced_with == [] and backend._learner is not None and backend._learner.other_prompt == (5, 9)
    assert "the reference reads another prompt than the server (5 prompt tokens there, 9 here)" in backend.describe()["gate"]


@pytest.mark.model
@pytest.mark.parametrize("layout", ["compact", "free"])
def test_the_local_backend_decodes_a_servers_json_layout(local_model, layout):
    request = Request("Extract the person: Maria Lopez is 34 years old.", "Extract the person: Maria Lopez is 34 years old.",
                      _sent(Schema.of(Person)), Settings(max_tokens=40))
    completion = local_model.generate(request, whitespace=layout, engine="xgrammar")
    assert completion.meta["engine"] == "xgrammar"
    assert free_whitespace(completion.text) == (layout == "free"), completion.text  # this model writes whitespace where it may


def test_the_exchange_hands_the_backend_its_token_steps_as_a_typed_field_that_never_leaves_the_backend():
    from accord._types import TokenSteps
    from accord.backends.openai import _drivers as drivers

    answer = '{"name":"Alice","age":30}'
    server = Server(lambda body: chat('{"probe":1}') if is_probe(body) else chat(answer, logprobs=logprobs('{"name":"', "Alice", '","age":30}')))
    reference = Recorder(answer)
    backend = sync_backend(server, reference=reference, structured=False)
    ask = Request("Alice is 30.", "Alice is 30.", Schema.of(Person), Settings())
    raw = drivers.drive(backend._exchange(ask, backend.servers[0]))  # the exchange alone: what it hands the backend
    assert isinstance(raw.steps, TokenSteps) and raw.steps.messages == [{"role": "user", "content": "Alice is 30."}]
    assert [token for token, _ in raw.steps.steps] == ['{"name":"', "Alice", '","age":30}'] and raw.steps.prompt_tokens == 5
    assert "token_steps" not in raw.meta and "steps" not in repr(raw)  # never in meta, never shown
    completion = backend.generate(ask)  # through the backend: compared with the reference, then taken off
    assert completion.steps is None and "token_steps" not in completion.meta and reference.forced_with
