"""The local backend on the real embedded model (SmolLM2-135M-Instruct), end to end.

Greedy decoding is deterministic on one machine, so these assert what this model really writes
under each grammar; where the model's answer could drift across torch builds, they assert the
shape (a valid value, the grammar's language) rather than one exact answer.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord.backends._base import Backend
from accord.backends.local._backend import TransformersBackend

pytestmark = pytest.mark.model


class Address(BaseModel):
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int
    address: Address


class Item(BaseModel):
    name: str
    price: float


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)


class Tags(BaseModel):
    tags: set[str]  # JSON Schema "uniqueItems": llguidance rejects it


class Recording(Backend):
    """Passes calls to a backend and keeps every Request."""

    constrains = True
    gives_margins = True

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.fingerprint = inner.fingerprint
        self.requests: list[accord.Request] = []

    def generate(self, request: accord.Request) -> accord.Completion:
        self.requests.append(request)
        return self.inner.generate(request)


def ask(model: Backend, prompt: str, schema: Any, **settings: Any) -> accord.Completion:
    return model.generate(accord.Request(prompt, prompt, accord.Schema.of(schema), accord.Settings(**settings)))


def sibling(local_model: Any, **options: Any) -> TransformersBackend:
    """Another backend over the session's loaded model (another engine chain, no reload)."""
    backend = TransformersBackend(local_model.model, local_model.tokenizer, name=local_model.fingerprint, **options)
    backend.model_id = local_model.model_id  # the same label, as models.local sets it
    return backend


def test_extracts_a_validated_nested_model(local_model: Any) -> None:
    result = accord.Stabilizer(local_model, schema=Person, vote=accord.Vote(k=1, gate=None)).run(
        "Extract the person: John Smith is 42 years old and lives in Paris, France."
    )
    assert result.value == Person(name="John Smith", age=42, address=Address(city="Paris", country="France"))
    assert result.engine == "xgrammar"  # the model's own indented layout, which only xgrammar writes exactly
    assert result.ballots[0].text.startswith('{\n  "name": ')
    ballot = result.ballots[0]
    assert ballot.text is not None and json.loads(ballot.text) == result.data  # the grammar's JSON, no prose to strip


def test_literal_choice(local_model: Any) -> None:
    prompt = "What is the sentiment of this review? 'Terrible service, cold food, never again.'"
    completion = ask(local_model, prompt, Literal["positive", "negative", "neutral"])
    assert completion.text in {"positive", "Positive", "negative", "Negative", "neutral", "Neutral"}
    # The prompt alone, as ``ask`` sends it: shown "Answer with exactly one of: positive, negative,
    # neutral.", the 135M model answers "positive" here (docs/prompting.md#figures counts such moves).
    result = accord.Stabilizer(local_model, schema=Literal["positive", "negative", "neutral"], vote=accord.Vote(k=3, gate=None),
                               prompting=accord.Prompting(schema_in_prompt=False)).run(prompt)
    assert result.value == "negative"
    assert result.agreement == 1.0 and result.calls == 2  # greedy ballots agree; the quorum of 2 decides


def test_regex(local_model: Any) -> None:
    pattern = r"[0-9]{3}-[0-9]{4}"
    completion = ask(local_model, "Write a made-up phone number like 555-0123.", accord.Regex(pattern))
    assert re.fullmatch(pattern, completion.text)
    assert completion.finish_reason == "stop"


def test_lark_grammar(local_model: Any) -> None:
    grammar = accord.Grammar('start: NUMBER " + " NUMBER " = " NUMBER\nNUMBER: /[0-9]{1,3}/\n')
    completion = ask(local_model, "Write one addition with its result, like 2 + 3 = 5.", grammar)
    assert re.fullmatch(r"[0-9]{1,3} \+ [0-9]{1,3} = [0-9]{1,3}", completion.text)
    assert completion.meta["engine"] == "llguidance"
    accord.Schema.of(grammar).validate(completion.text)


def test_range_violation_is_retried_with_feedback(local_model: Any) -> None:
    # outlines_core does not enforce minimum/maximum: SmolLM2, not shown the bounds, answers
    # "stars": 34 for a 1..5 field, validation rejects it, and the retry carries the error back.
    model = Recording(sibling(local_model, engine=["outlines_core"]))
    prompt = "The critic gave the film 34 points. How many stars?"
    result = accord.Stabilizer(model, schema=Review, vote=accord.Vote(k=1, gate=None), retry=accord.Retry(attempts=3),
                               prompting=accord.Prompting(schema_in_prompt=False)).run(prompt)
    first = result.ballots[0]
    assert first.status == "invalid" and first.text is not None and json.loads(first.text) == {"stars": 34}
    assert first.error is not None
    assert first.error["errors"][0]["loc"] == ("stars",) and first.error["errors"][0]["type"] == "less_than_equal"
    retry = model.requests[1]
    assert retry.feedback is not None and "stars" in json.dumps(retry.input)
    assert result.value is not None and 1 <= result.value.stars <= 5 and result.calls >= 2


def test_objects_are_strict(local_model: Any) -> None:
    # With an open object, SmolLM2 adds a key the schema does not have; strict objects forbid it.
    prompt = "Extract the product as JSON: The blue wool sweater costs 49.99 euros, category clothing, in stock."
    completion = ask(local_model, prompt, Item)
    assert set(json.loads(completion.text)) == {"name", "price"}
    open_schema = {**Item.model_json_schema(), "additionalProperties": True}  # says extras are fine
    opened = json.loads(ask(local_model, prompt, open_schema).text)
    assert set(opened) > {"name", "price"}


def test_greedy_ignores_model_defaults_and_warns_on_user_filters(local_model: Any, monkeypatch: Any) -> None:
    saved = local_model.model.generation_config
    noisy = saved.__class__.from_dict({**saved.to_dict(), "do_sample": True, "temperature": 0.7, "top_k": 5,
                                       "top_p": 0.5, "repetition_penalty": 1.3, "no_repeat_ngram_size": 2})
    local_model.model.generation_config = noisy
    try:
        model = sibling(local_model)
        assert {"temperature", "top_k", "top_p", "repetition_penalty", "no_repeat_ngram_size"} <= set(model.ignored_defaults)
        built: list[Any] = []
        real = type(model.model)._get_logits_processor

        def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
            built.append(real(self, *args, **kwargs))
            return built[-1]

        monkeypatch.setattr(type(model.model), "_get_logits_processor", spy)
        monkeypatch.setenv("ACCORD_JUMP_FORWARD", "0")  # through model.generate (the jump loop builds no processor of its own)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            completion = ask(model, "Say hello.", str, max_tokens=8, top_p=0.9, top_k=3)
        assert any("greedy" in str(w.message) for w in caught)
        kinds = [type(p).__name__ for p in built[0]]
        assert kinds[-1] == "StepRecorder" and len(kinds) == 2  # the grammar, then the recorder: nothing else
        assert model.model.generation_config is noisy  # swapped for the call only
        config = model.generation_config(accord.Settings(), 8)
        assert config.do_sample is False and config.num_beams == 1
        assert completion.meta["decoding"] == "greedy"
    finally:
        local_model.model.generation_config = saved


def test_engine_fallback_on_a_schema_one_engine_rejects(local_model: Any) -> None:
    model = sibling(local_model, layout="spaced")  # a layout llguidance takes, so the chain starts there
    completion = ask(model, "List the tags of this post: python, testing, python.", Tags, max_tokens=12)
    assert completion.meta["engine"] == "xgrammar"
    assert "uniqueItems" in completion.meta["passed_over"]["llguidance"]
    assert completion.text.startswith('{"tags": [')  # SmolLM2 then repeats tags: validation's job


def test_compile_time_limit_passes_to_the_next_engine(local_model: Any) -> None:
    model = sibling(local_model, engine=["outlines_core", "llguidance"], compile_timeout=0.05, layout="spaced")
    schema = {"type": "object", "properties": {"code": {"type": "string", "minLength": 150, "maxLength": 300}},
              "required": ["code"]}
    completion = ask(model, "Write some code.", schema, max_tokens=4)
    assert completion.meta["engine"] == "llguidance"
    assert "compile-time limit" in completion.meta["passed_over"]["outlines_core"]


def test_an_indented_layout_no_engine_compiles_falls_back_to_spaced(local_model: Any) -> None:
    model = sibling(local_model, engine=["llguidance"], layout="indent-2")  # llguidance writes no exact indents
    completion = ask(model, "Extract the person: Ann is 34.", Item, max_tokens=24)
    assert completion.meta["engine"] == "llguidance" and completion.text.startswith('{"name": ')
    assert "indent-2" in completion.meta["passed_over"]["layout"]


def test_unsupported_everywhere_is_a_clear_error(local_model: Any) -> None:
    model = sibling(local_model, engine=["outlines_core", "xgrammar"])
    with pytest.raises(accord.UnsupportedSchema, match="llguidance"):
        ask(model, "Say something.", accord.Grammar('start: "a" | "b"'))


def test_completion_carries_margins_usage_and_finish_reason(local_model: Any) -> None:
    completion = ask(local_model, "Write a long story about a cat.", str, max_tokens=6)
    assert completion.finish_reason == "length"
    assert completion.usage.completion_tokens == 6
    assert completion.usage.prompt_tokens is not None and completion.usage.prompt_tokens > 10
    assert completion.usage.calls == 1 and completion.usage.seconds > 0
    assert completion.margins is not None and len(completion.margins) == 6
    assert all(m >= 0 for m in completion.margins)
    assert completion.score is not None and completion.score <= 0
    short = ask(local_model, "Is the sky blue?", bool)
    assert short.finish_reason == "stop" and short.text in {"yes", "Yes", "no", "No"}
    assert short.margins is not None and math.isinf(short.margins[-1])  # after "Yes"/"No" the grammar allows only the end


def test_stop_strings_end_the_text(local_model: Any) -> None:
    completion = ask(local_model, "Write a long story about a cat.", str, max_tokens=40, stop=(" cat",))
    assert completion.finish_reason == "stop" and " cat" not in completion.text
    assert completion.usage.completion_tokens is not None and completion.usage.completion_tokens < 40


def test_compiled_grammars_are_cached(local_model: Any) -> None:
    import time

    schema = accord.Schema.of(Person)
    local_model.constrainer.processor(schema)
    start = time.perf_counter()
    served = local_model.constrainer.processor(schema)
    assert served.compile_seconds == 0.0
    assert time.perf_counter() - start < 0.010


def test_unconstrained_text_is_the_plain_greedy_output(local_model: Any) -> None:
    completion = local_model.unconstrained("Say hello.", accord.Settings(max_tokens=8))
    assert completion.meta["engine"] is None and completion.text


def test_folder_is_servable_and_fingerprinted(local_model: Any) -> None:
    folder = Path(local_model.path)
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                 "tokenizer_config.json", "accord-model.json"):
        assert (folder / name).is_file(), name
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert re.fullmatch(r"SmolLM2-135M-Instruct-Q4_1@sha256:[0-9a-f]{16}", local_model.fingerprint)
    assert local_model.describe()["dtype"] == "float32"



class Invoice(BaseModel):
    vendor: str
    invoice_number: str
    quantity: int
    currency: Literal["USD", "EUR", "GBP"]


@pytest.mark.parametrize("layout", ["indent-2", "compact"])  # xgrammar writes the indented layout, llguidance the compact
def test_forced_text_is_fed_in_without_asking_the_model(local_model: Any, monkeypatch: Any, layout: str) -> None:
    """Jump-forward decoding (._jump): the keys and punctuation the grammar forces cost no forward
    pass of their own, the text is the one step-by-step greedy decoding writes, and each forced
    token is recorded as a step with one allowed token."""
    model = sibling(local_model, layout=layout)
    prompt = "Invoice INV-2291 from Harbor Tools Ltd: 3 hammers, paid in euros. Extract it."
    forwards: list[int] = []
    hook = model.model.register_forward_pre_hook(lambda module, args, kwargs: forwards.append(1), with_kwargs=True)
    try:
        jumped = ask(model, prompt, Invoice, max_tokens=120)
        jumped_forwards = len(forwards)
        monkeypatch.setenv("ACCORD_JUMP_FORWARD", "0")
        forwards.clear()
        stepped = ask(model, prompt, Invoice, max_tokens=120)
    finally:
        hook.remove()
    assert jumped.text == stepped.text and Invoice.model_validate_json(jumped.text)
    assert len(forwards) == stepped.usage.completion_tokens  # one pass per token (the prompt's included)
    assert jumped_forwards < len(forwards) * 0.7  # the keys went in with the tokens before them
    assert len(jumped.margins) == jumped.usage.completion_tokens
    forced = sum(math.isinf(m) for m in jumped.margins)
    assert forced >= sum(math.isinf(m) for m in stepped.margins) and forced >= jumped.usage.completion_tokens - jumped_forwards
    assert jumped.finish_reason == stepped.finish_reason == "stop"


def test_sampling_and_perturbed_calls_ask_the_model_for_every_token(local_model: Any) -> None:
    model = sibling(local_model)
    prompt = "Invoice INV-2291 from Harbor Tools Ltd: 3 hammers, paid in euros. Extract it."
    forwards: list[int] = []
    hook = model.model.register_forward_pre_hook(lambda module, args, kwargs: forwards.append(1), with_kwargs=True)
    try:
        sampled = ask(model, prompt, Invoice, max_tokens=120, temperature=0.7, seed=3)
        assert len(forwards) == sampled.usage.completion_tokens
        forwards.clear()
        request = accord.Request(prompt, prompt, accord.Schema.of(Invoice), accord.Settings(max_tokens=120),
                                 perturbation=accord.Perturbation("threads", 1))
        perturbed = model.generate(request)
        assert len(forwards) == perturbed.usage.completion_tokens
    finally:
        hook.remove()
