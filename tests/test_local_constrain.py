"""Constrained decoding without the model: strict objects, specs, the engine chain, the recorder."""

from __future__ import annotations

import enum
import json
import math
import re
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

import accord
from accord.backends.local._constrain import choice_regex, engine_chain, spec_of, strict
from accord.backends.local._engines import apply_bitmask
from accord.backends.local._steps import GrammarDeadEnd, StepRecorder, token_ids, until_end


class Inner(BaseModel):
    x: int


class Outer(BaseModel):
    inner: Inner
    items: list[Inner]
    maybe: Inner | None = None
    counts: dict[str, int]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


def closed_objects(node: object) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("properties"):
            found.append(node)
        for value in node.values():
            found += closed_objects(value)
    elif isinstance(node, list):
        for value in node:
            found += closed_objects(value)
    return found


def test_every_object_with_properties_is_closed() -> None:
    schema = strict(Outer.model_json_schema())
    objects = closed_objects(schema)
    assert len(objects) == 2  # Outer and Inner (in $defs)
    assert all(o["additionalProperties"] is False for o in objects)
    counts = schema["properties"]["counts"]
    assert counts["additionalProperties"] == {"type": "integer"}  # a map stays a map


def test_strict_leaves_open_what_says_it_is_open() -> None:
    assert strict(Open.model_json_schema())["additionalProperties"] is True
    assert "additionalProperties" not in strict({"type": "object"})  # free-form: no properties listed
    both: dict[str, Any] = {"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]}
    assert strict(both) == both  # closing one part of a conjunction would reject the other's keys
    alternatives = strict({"anyOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]})
    assert all(branch["additionalProperties"] is False for branch in alternatives["anyOf"])


def test_strict_leaves_dates_to_the_reader_and_keeps_other_formats() -> None:
    schema = {"type": "object", "properties": {"born": {"type": "string", "format": "date"},
                                               "at": {"type": "string", "format": "date-time"},
                                               "mail": {"type": "string", "format": "email"}}}
    properties = strict(schema)["properties"]
    assert properties["born"] == {"type": "string"} and properties["at"] == {"type": "string"}
    assert properties["mail"]["format"] == "email"  # the reader does not rewrite an address


def test_strict_does_not_touch_the_input() -> None:
    schema = Outer.model_json_schema()
    before = json.dumps(schema, sort_keys=True)
    strict(schema)
    assert json.dumps(schema, sort_keys=True) == before


def test_choices_allow_a_capitalized_first_letter_when_unambiguous() -> None:
    assert choice_regex(["positive", "negative"]) == "(positive|Positive|negative|Negative)"
    assert choice_regex(["yes", "Yes"]) == "(yes|Yes)"  # both are members: no extra forms
    assert choice_regex([1, None, True]) == "(1|null|true)"
    assert choice_regex(["a.b", "(x)"]) == r"(a\.b|A\.b|\(x\))"
    pattern = choice_regex(["a+b", "c|d"])
    assert re.fullmatch(pattern, "a+b") and re.fullmatch(pattern, "c|d") and not re.fullmatch(pattern, "aab")


def test_spec_per_schema_kind() -> None:
    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    assert spec_of(accord.Schema(Literal["a", "b"])).kind == "regex"
    assert spec_of(accord.Schema(Color)).text == "(red|Red|blue|Blue)"
    assert spec_of(accord.Schema(bool)).text == "(yes|Yes|no|No)"
    assert re.fullmatch(spec_of(accord.Schema(int)).text, "-42")
    assert re.fullmatch(spec_of(accord.Schema(float)).text, "3.25e-3")
    assert spec_of(accord.Schema(accord.Regex(r"\d+"))).text == r"\d+"
    assert spec_of(accord.Schema(accord.Grammar('start: "x"'))).kind == "lark"
    json_spec = spec_of(accord.Schema(Inner))
    assert json_spec.kind == "json" and json.loads(json_spec.text)["additionalProperties"] is False
    assert json.loads(spec_of(accord.Schema(list[int])).text) == {"items": {"type": "integer"}, "type": "array"}


def test_engine_chain() -> None:
    assert engine_chain(None) == ("llguidance", "xgrammar", "outlines_core")
    assert engine_chain("outlines_core") == ("outlines_core", "llguidance", "xgrammar")
    assert engine_chain(["xgrammar"]) == ("xgrammar",)
    with pytest.raises(accord.ConfigError):
        engine_chain("guidance")
    with pytest.raises(accord.ConfigError):
        engine_chain([])


def test_apply_bitmask_matches_the_bits() -> None:
    import torch

    logits = torch.zeros(1, 70)
    mask = torch.zeros(1, 3, dtype=torch.int32)
    mask[0, 0] = 0b101  # tokens 0 and 2
    mask[0, 2] = 1 << 5  # token 69
    apply_bitmask(logits, mask)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [0, 2, 69]
    wide = torch.zeros(1, 40)
    apply_bitmask(wide, torch.full((1, 1), -1, dtype=torch.int32))  # 32 bits for a 40-token row
    assert torch.isfinite(wide[0]).sum().item() == 32


def test_step_recorder_margins_and_logprobs() -> None:
    import torch

    recorder = StepRecorder(sampling=False)
    recorder(torch.tensor([[0]]), torch.tensor([[1.0, 3.0, 2.5, -math.inf]]))
    recorder(torch.tensor([[0, 1]]), torch.tensor([[-math.inf, 4.0, -math.inf, -math.inf]]))
    assert recorder.margins == (0.5, math.inf)
    assert recorder.logprobs[1] == 0.0 and -1.0 < recorder.logprobs[0] < 0.0
    with pytest.raises(GrammarDeadEnd):
        recorder(torch.tensor([[0, 1, 1]]), torch.full((1, 4), -math.inf))


def test_step_recorder_reads_sampled_tokens_one_step_late() -> None:
    import torch

    recorder = StepRecorder(sampling=True)
    recorder(torch.tensor([[0]]), torch.tensor([[0.0, 0.0]]))
    recorder(torch.tensor([[0, 1]]), torch.tensor([[0.0, -math.inf]]))
    recorder.finish(0)
    assert recorder.logprobs == pytest.approx([math.log(0.5), 0.0])


def test_step_recorder_keeps_only_our_rows_steps_up_to_its_end() -> None:
    import torch

    recorder = StepRecorder(sampling=False, ends=[2])
    for step, scores in enumerate(([[1.0, 3.0, 2.0]], [[0.0, 1.0, 4.0]], [[5.0, 0.0, 1.0]])):
        recorder(torch.tensor([[0] * (step + 1)]), torch.tensor(scores))  # a batch neighbour runs on
    new = until_end([1, 2, 0], eos=[2])
    recorder.keep(new)
    assert new == [1, 2] and recorder.margins == (1.0, 3.0) and len(recorder.logprobs) == 2
    assert recorder.score == pytest.approx(sum(recorder.logprobs) / 2)
    assert until_end([1, 1], eos=None) == [1, 1] and token_ids(7) == [7] and token_ids((1, 2)) == [1, 2]


def test_a_date_the_reader_could_not_read_is_asked_again_under_an_iso_pattern() -> None:
    import datetime

    from pydantic import BaseModel

    import accord
    from accord import Vote, models
    from accord.backends.local._constrain import spec_of

    class Person(BaseModel):
        name: str
        birth_date: datetime.date
        visits: list[datetime.date]

    model = models.scripted(['{"name": "Maria", "birth_date": "the twelfth", "visits": ["soon"]}',
                             '{"name": "Maria", "birth_date": "1978-01-12", "visits": []}'])
    result = accord.Stabilizer(model, Person, vote=Vote(k=1, gate=None)).run("q")
    assert result.value is not None and result.value.birth_date == datetime.date(1978, 1, 12)
    first, again = model.requests[0].schema.json_schema, model.requests[1].schema.json_schema
    assert "pattern" not in first["properties"]["birth_date"]
    assert again["properties"]["birth_date"]["pattern"] == "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    assert again["properties"]["visits"]["items"]["pattern"] == "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
    grammar = json.loads(spec_of(model.requests[1].schema, "indent-2").text)["properties"]["birth_date"]
    assert grammar == {"title": "Birth Date", "type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}  # the pattern, not the format
