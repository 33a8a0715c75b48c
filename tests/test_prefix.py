"""The decisive prefix (vote/_prefix): the gate reads the steps up to the end of the last decisive value.

The scanner and the step count alone, then the gate end to end on a backend that reports margins
and the text of each step (a fake one: what matters here is which steps the gate reads; the real
model and the real vLLM are in tests/test_local_backend.py and tests/test_vllm.py).
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import accord
from accord.backends._base import Backend, Noise
from accord.vote._decisive import Decisions
from accord.vote._prefix import counted, decisive_end, prefix, spans


class Ticket(BaseModel):
    category: Literal["billing", "bug"]
    priority: int
    summary: str


class Late(BaseModel):
    summary: str
    category: Literal["billing", "bug"]


class Optional_(BaseModel):
    category: Literal["billing", "bug"]
    summary: str
    priority: int | None = None


def decisions(model: type[BaseModel], prompt: str = "") -> Decisions:
    return Decisions(accord.Schema.of(model).roles(), prompt)


def test_spans_place_every_value_of_the_text() -> None:
    text = '{"a": [1, {"b": "x\\"y"}], "c": true, "d": -1.5e3 }'
    found = spans(text)
    assert found is not None
    assert text[found[("a",)][0]:found[("a",)][1]] == '[1, {"b": "x\\"y"}]'
    assert text[slice(*found[("a", 1, "b")][:2])] == '"x\\"y"'
    assert text[slice(*found[("d",)][:2])] == "-1.5e3"
    assert found[()][2] == "object" and found[("c",)][2] == "scalar"
    assert spans('{"a": 1} trailing') is None and spans('{"a": ') is None and spans("not json") is None


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20),
       st.sampled_from([None, 2]))
def test_every_span_holds_the_json_of_its_value(data: Any, indent: int | None) -> None:
    text = json.dumps(data, indent=indent)
    found = spans(text)
    assert found is not None
    for path, (start, end, _) in found.items():
        value = data
        for key in path:
            value = value[key]
        assert json.loads(text[start:end]) == value


def test_the_prefix_ends_right_after_the_last_decisive_value() -> None:
    text = '{"category": "billing", "priority": 4, "summary": "Charged twice."}'
    d = decisions(Ticket)
    end = decisive_end(text, d, d.prose)
    assert end == text.index(', "summary"')  # the number 4 ends there
    pieces = ('{"', "category", '":', ' "', "billing", '",', ' "', "priority", '":', " ", "4", ",", ' "', "summary", '":',
              ' "', "Char", "ged", " twice", '."', "}", "")
    assert "".join(pieces) == text
    n = counted(text, pieces, len(pieces), end)
    assert "".join(pieces[:n]) == '{"category": "billing", "priority": 4,'  # the step after the 4 says it ends
    form = json.loads(text)
    assert prefix(text, pieces, len(pieces), d, form) == n


def test_prose_before_a_decision_is_read_and_a_missing_optional_decision_reads_everything() -> None:
    text = '{"summary": "Charged twice.", "category": "billing"}'
    d = decisions(Late)
    assert decisive_end(text, d, d.prose) == len(text) - 1  # the summary's steps stand before the decision
    text = '{"category": "billing", "summary": "Charged twice."}'
    d = decisions(Optional_)
    assert decisive_end(text, d, d.prose) is None  # priority might still have come after the summary
    assert decisive_end('{"category": "billing", "summary": "x", "priority": 2}', d, d.prose) is not None


def test_every_step_is_read_where_the_steps_cannot_be_placed() -> None:
    d = decisions(Ticket)
    form = {"category": "billing", "priority": 4, "summary": "x"}
    text = json.dumps(form)
    assert prefix(text, None, 9, d, form) == 9  # no pieces
    assert prefix(text, ("a", "b"), 9, d, form) == 9  # not one piece a step
    assert prefix("Sure! " + text, tuple("Sure! " + text), len("Sure! " + text), d, form) == len("Sure! " + text)  # not one JSON value
    assert prefix("```json\n" + text + "\n```", tuple("```json\n" + text + "\n```"), 99, d, form) == 99
    plain = Decisions(accord.Schema.of(Literal["a", "b"]).roles())
    assert prefix('"a"', ('"', "a", '"'), 3, plain, "a") == 3


class Margins(Backend):
    """A backend that gives each text with margins and pieces, one per character: the gate's view."""

    gives_margins = True
    fingerprint = "margins-test"

    def __init__(self, texts: list[str], low: dict[int, float], floor: float = 0.5) -> None:
        self.texts, self.low, self.floor, self.calls = texts, low, floor, 0

    def generate(self, request: accord.Request) -> accord.Completion:
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        margins = tuple(self.low.get(i, 5.0) for i in range(len(text) + 1))
        return accord.Completion(text, margins=margins, pieces=(*text, ""))

    def noise(self) -> Noise:
        return Noise(self.floor)


def test_the_gate_accepts_a_ballot_whose_prose_alone_is_fragile() -> None:
    text = '{"category": "billing", "priority": 4, "summary": "Charged twice."}'
    in_summary = text.index("twice")
    result = accord.Stabilizer(Margins([text], {in_summary: 0.01}), Ticket).run("Ticket ...")
    assert result.stopped_because == "gate" and result.calls == 1 and result.fragile is False
    assert result.ballots[0].meta["decisive_steps"] == text.index(', "summary"') + 1
    assert result.fragile_steps == 0 and result.carried == {"summary": 1}


def test_the_gate_does_not_accept_a_fragile_decision_or_fragile_prose_before_one() -> None:
    text = '{"category": "billing", "priority": 4, "summary": "Charged twice."}'
    result = accord.Stabilizer(Margins([text], {text.index("billing"): 0.01}), Ticket).run("Ticket ...")
    assert result.stopped_because != "gate" and result.calls > 1
    late = '{"summary": "Charged twice.", "category": "billing"}'
    result = accord.Stabilizer(Margins([late], {late.index("twice"): 0.01}), Late).run("Ticket ...")
    assert result.stopped_because != "gate" and result.calls > 1


def test_a_schema_without_prose_reads_every_step_as_before() -> None:
    class Plain(BaseModel):
        category: Literal["billing", "bug"]
        priority: int

    text = '{"category": "billing", "priority": 4}'
    result = accord.Stabilizer(Margins([text], {len(text): 0.01}), Plain).run("?")  # the end-of-sequence step
    assert result.stopped_because != "gate"
    assert "decisive_steps" not in result.ballots[0].meta
    assert math.isclose(result.ballots[0].min_margin or 0.0, 0.01)
