"""``Prompting(system=..., examples=...)``: outputs validated when the Stabilizer is made, rendered once,
sent as chat messages before the prompt on every backend, and part of the ledger key."""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any, Literal

import pytest

import accord
from accord import ConfigError, Ledger, Prompting, Stabilizer, Vote, models
from reviews import GOOD, Review

SYSTEM = "You read product reviews and answer in JSON."
EXAMPLES = [
    ("Review: 'Broke after a day.'", Review(stars=1, sentiment="negative")),
    ("Review: 'Does the job.'", {"stars": 3, "sentiment": "neutral"}),
]


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


def test_system_and_examples_come_before_the_prompt_as_messages() -> None:
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1, gate=None),
               prompting=Prompting(system=SYSTEM, examples=EXAMPLES, schema_in_prompt=False)).run("Review: 'Great pen.'")
    [request] = model.requests
    assert request.input == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Review: 'Broke after a day.'"},
        {"role": "assistant", "content": '{"stars": 1, "sentiment": "negative"}'},
        {"role": "user", "content": "Review: 'Does the job.'"},
        {"role": "assistant", "content": '{"stars": 3, "sentiment": "neutral"}'},
        {"role": "user", "content": "Review: 'Great pen.'"},
    ]
    assert request.messages == request.input


def test_the_schema_hint_and_feedback_go_with_the_question_not_the_examples() -> None:
    model = models.scripted(['{"stars": 9, "sentiment": "positive"}', GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1, gate=None), prompting=Prompting(examples=EXAMPLES[:1])).run("Review: 'Great pen.'")
    first, retry = (r.input for r in model.requests)
    assert isinstance(first, list) and isinstance(retry, list)
    assert first[1]["content"] == '{"stars": 1, "sentiment": "negative"}'  # the example is as rendered, untouched
    assert first[-1]["content"] == f"Review: 'Great pen.'\n\n{accord.Schema.of(Review).render()}"
    assert retry[:-1] == first and retry[-1]["role"] == "user" and "previous answer" in retry[-1]["content"]


def test_a_message_prompt_keeps_its_messages_after_the_preamble() -> None:
    model = models.scripted(["positive"])
    prompt = [{"role": "user", "content": "Earlier turn"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "Great!"}]
    Stabilizer(model, schema=Literal["positive", "negative"], vote=Vote(k=1, gate=None),
               prompting=Prompting(system="Be brief.", schema_in_prompt=False)).run(prompt)
    [request] = model.requests
    assert request.input == [{"role": "system", "content": "Be brief."}, *prompt]


def test_outputs_render_as_the_model_should_write_them() -> None:
    model = models.scripted(["blue"])
    stab = Stabilizer(model, schema=Colour, vote=Vote(k=1, gate=None), prompting=Prompting(examples=[("sky?", Colour.BLUE), ("blood?", "red")]))
    assert stab.policy.examples == (("sky?", "blue"), ("blood?", "red"))
    assert Stabilizer(models.scripted(["1"]), schema=int, prompting=Prompting(examples=[("one?", "1")])).policy.examples == (("one?", "1"),)
    assert Stabilizer(models.scripted(["1"]), schema=list[int], prompting=Prompting(examples=[("odd?", [1, 3])])).policy.examples == (("odd?", "[1, 3]"),)


@pytest.mark.parametrize(
    "examples, message",
    [
        ([("Review: 'meh'", {"stars": 9, "sentiment": "neutral"})], "examples[0]: the output does not match the schema Review"),
        ([("q", Review(stars=2, sentiment="negative")), ("", GOOD)], "examples[1]: the input must be a non-empty string"),
        ([("q",)], "examples[0] must be an (input, output) pair"),
        ("not a list", "examples= takes a list"),
    ],
)
def test_a_bad_example_is_a_config_error_when_the_stabilizer_is_made(examples: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Stabilizer(models.scripted([GOOD]), schema=Review, prompting=Prompting(examples=examples))


def test_a_bad_system_prompt_is_a_config_error() -> None:
    for system in ("", "  ", 3):
        with pytest.raises(ConfigError):
            Stabilizer(models.scripted([GOOD]), schema=Review, prompting=Prompting(system=system))  # type: ignore[arg-type]


def test_a_function_model_receives_the_messages() -> None:
    seen: list[Any] = []

    def fn(prompt: Any) -> str:
        seen.append(prompt)
        return GOOD

    Stabilizer(models.function(fn), schema=Review, vote=Vote(k=1, gate=None),
               prompting=Prompting(system=SYSTEM, schema_in_prompt=False)).run("q")
    assert seen == [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "q"}]]


def test_system_and_examples_join_the_ledger_key_and_leave_older_keys_alone(tmp_path: Any) -> None:
    def stab(ledger: Ledger | None = None, **options: Any) -> Stabilizer[Any]:
        return Stabilizer(models.scripted([GOOD] * 9, name="m"), schema=Review, prompting=Prompting(**options), ledger=ledger)

    with Ledger(tmp_path / "l.sqlite3") as ledger:
        plain = ledger.key(stab(), "q")
        assert ledger.key(stab(system=None, examples=[]), "q") == plain  # unset: the key as before they existed
        keys = {plain, ledger.key(stab(system=SYSTEM), "q"), ledger.key(stab(examples=EXAMPLES), "q"),
                ledger.key(stab(examples=EXAMPLES[:1]), "q"), ledger.key(stab(system=SYSTEM, examples=EXAMPLES), "q")}
        assert len(keys) == 5
        with_examples = stab(examples=EXAMPLES, ledger=ledger)
        with_examples.run("q")
        assert with_examples.run("q").replayed and not stab(ledger=ledger).run("q").replayed


def test_the_decorator_takes_them_too() -> None:
    seen: list[Any] = []

    @accord.stabilize(schema=Review, vote=Vote(k=1, gate=None), prompting=Prompting(system=SYSTEM, schema_in_prompt=False))
    def ask(prompt: Any) -> str:
        seen.append(prompt)
        return GOOD

    assert ask("q") == Review(stars=4, sentiment="positive")
    assert seen[0][0] == {"role": "system", "content": SYSTEM}
    *_, decided = ask.stream("q")
    assert isinstance(decided, accord.Decided) and decided.value == Review(stars=4, sentiment="positive")


@pytest.mark.model
def test_the_local_model_reads_the_system_prompt_and_examples_through_its_chat_template(local_model: Any) -> None:
    from accord.backends._base import Backend

    class Recording(Backend):
        constrains = True
        gives_margins = True

        def __init__(self, inner: Any) -> None:
            self.inner, self.fingerprint = inner, inner.fingerprint
            self.requests: list[accord.Request] = []

        def generate(self, request: accord.Request) -> accord.Completion:
            self.requests.append(request)
            return self.inner.generate(request)  # type: ignore[no-any-return]

    recording = Recording(local_model)
    stab = Stabilizer(recording, schema=Review, vote=Vote(k=1, gate=None), prompting=Prompting(system=SYSTEM, examples=EXAMPLES))
    result = stab.run("Review: 'Great pen, writes smoothly, five stars.'")
    assert result.value is not None
    text = local_model.tokenizer.decode(local_model.encode(recording.requests[0].input)["input_ids"][0])
    assert f"<|im_start|>system\n{SYSTEM}<|im_end|>" in text  # the model's own default system prompt is replaced
    assert '<|im_start|>assistant\n{"stars": 1, "sentiment": "negative"}<|im_end|>' in text
    assert text.rstrip().endswith("<|im_start|>assistant")


@pytest.mark.server
def test_the_server_gets_the_system_prompt_and_examples_as_chat_messages(openai_server: str) -> None:
    import httpx2  # the HTTP client openai is built on
    import openai

    from accord.backends.openai._caps import Capabilities

    sent: list[Any] = []
    client = httpx2.Client(event_hooks={"request": [lambda r: sent.append(r.content)]})

    model = models.openai(openai.OpenAI(base_url=openai_server, api_key="unused", http_client=client), capabilities=Capabilities(),
                          max_tokens=8, structured=False)
    examples = [("What is 1 + 1?", 2), ("What is 2 + 3?", 5)]
    result = Stabilizer(model, schema=int, vote=Vote(k=1, gate=None),
                        prompting=Prompting(system="Answer with the number only.", examples=examples)).run("What is 2 + 2?")
    assert result.value is not None
    import json

    body = json.loads(sent[-1])
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == "2" and body["messages"][-1]["content"].startswith("What is 2 + 2?")


def test_a_choice_the_server_takes_wrapped_is_not_listed_in_the_prompt(fake_upstream: Any) -> None:
    """Over the OpenAI wire a choice goes as ``{"answer": ...}``; listed in the prompt too, the choices
    pulled small models' answers toward the first one (benchmarks/told.py --tasks choices): not listed.
    A bare integer is still told, and a backend that sends no format still lists the choices."""
    from accord.backends.openai._caps import Capabilities
    from accord.ledger._keys import Keys
    from serving import UPSTREAM_KEY

    def model(structured: bool) -> Any:
        return models.openai(base_url=fake_upstream.url, api_key=UPSTREAM_KEY, model="fake-model", structured=structured,
                             margins=models.Margins(logprobs=False), capabilities=Capabilities())

    one = {"vote": Vote(k=1, gate=None), "retry": accord.Retry(attempts=1)}
    colour, count = Literal["red", "green"], int
    wrapped, told, free = (Stabilizer(model(True), colour, **one), Stabilizer(model(True), count, **one),
                           Stabilizer(model(False), colour, **one))
    asked = {"wrapped": "Which colour is grass? (choice, wrapped)", "told": "How many legs has a cat? (int, wrapped)",
             "free": "Which colour is grass? (choice, no format)"}
    assert wrapped.run(asked["wrapped"]).value == "red"  # the fake's smallest instance of the format
    told.run(asked["told"])
    with pytest.raises(accord.AccordError):
        free.run(asked["free"])  # the fake greets a request without a format: nothing to read
    bodies = fake_upstream.stats()["bodies"]
    sent = {name: next(b for t, b in bodies.items() if t.startswith(prompt)) for name, prompt in asked.items()}
    last = {name: body["messages"][-1]["content"] for name, body in sent.items()}
    assert last["wrapped"] == asked["wrapped"], last["wrapped"]
    assert sent["wrapped"]["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["red", "green"]
    assert last["told"] == f"{asked['told']}\n\nAnswer with an integer only.", last["told"]
    assert last["free"] == f"{asked['free']}\n\nAnswer with exactly one of: red, green.", last["free"]
    # The ledger keys a wrapped choice as the computation it is again: version 1's (the prompt alone).
    versions = {name: json.loads(Keys().context(stab).material)["ledger"] for name, stab in
                (("wrapped", wrapped), ("told", told), ("free", free))}
    assert versions == {"wrapped": 1, "told": 2, "free": 1}, versions
