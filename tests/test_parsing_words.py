"""Never a value the model did not mean (issue 29): negations, hedges, number forms, null-likes.

A word or a number that says one value is read, and what reading it took is recorded; one that
negates, hedges, contradicts itself or has two readings is a misreading whose feedback says why.
The same text reads the same as the whole answer, a field, a list item or a value under Optional,
in strict mode too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import accord
import corpus
from accord.read._numbers import number
from accord.read._read import STRICT, Misreading, Reading, read
from accord.read._words import Refusal, boolean, choice

ROOT = Path(__file__).resolve().parents[1]
REASONS = {"negated", "hedged", "several", "contradiction", "number_form", "range", "estimate"}
Sentiment = Literal["positive", "negative", "neutral"]
MEMBERS = ["positive", "negative", "neutral"]


class Verdict(BaseModel):
    sentiment: Sentiment
    ok: bool


class Price(BaseModel):
    unit_price: float
    quantity: int
    discount: Optional[float]  # noqa: UP045


class Labels(BaseModel):
    labels: list[Sentiment]


def _corpus() -> list[dict[str, Any]]:
    parsing = corpus.parsing()
    return [c | {"schema_obj": parsing.schema_of(c["schema"]), "key": parsing.key_of}
            for c in parsing.load() if c["id"].startswith("hand-") and int(c["id"][5:]) >= 206]


CASES = _corpus()


@pytest.mark.parametrize("policy", [None, STRICT], ids=["lenient", "strict"])
def test_the_new_corpus_classes_are_read_with_their_coercion_or_refused_with_why(policy):
    wrong, unrecorded, unexplained = [], [], []
    for case in CASES:
        schema = case["schema_obj"]
        reading = read(case["text"], schema) if policy is None else read(case["text"], schema, policy=policy)
        if isinstance(reading, Reading):
            if case["label"] is None or reading.key != case["key"](schema, case["label"]):
                wrong.append((case["id"], case["text"], reading.data))
            elif not reading.coercions:
                unrecorded.append((case["id"], case["text"]))
        elif case["label"] is not None:
            unexplained.append((case["id"], case["text"], reading.message))  # a value said, and refused
        elif not {e.get("type") for e in reading.errors} & REASONS:
            unexplained.append((case["id"], case["text"], reading.message))
    assert len(CASES) >= 140
    assert wrong == []
    assert unrecorded == []
    assert unexplained == []


@pytest.mark.parametrize(("text", "integer", "value"), [
    ("12", True, 12), ("-3.5", False, -3.5), ("1e6", False, 1e6), ("1,234,567", False, 1234567), ("1,234.5", False, 1234.5),
    ("1,234", True, 1234), ("$1.50", False, 1.5), ("12 EUR", True, 12), ("-$5", True, -5), ("45%", False, 45),
    ("1/2", False, 0.5), ("3/4", False, 0.75), ("2^10", True, 1024), ("10**6", True, 10**6), ("3x10^8", False, 3e8),
    ("The answer is 42.", True, 42), ("2 + 3 = 5", True, 5), ("**24**", True, 24), ("Sure! 3x10^8 Done.", False, 3e8),
    ("5km", True, 5), ("(45%)", True, 45),
])
def test_a_number_form_with_one_meaning_is_read_and_recorded(text, integer, value):
    read_ = number(text, integer)
    assert isinstance(read_, tuple) and read_[0] == value and type(read_[0]) is type(value)
    assert (read_[1] is None) == (text in ("12", "-3.5", "1e6"))


@pytest.mark.parametrize(("text", "integer", "kind"), [
    ("0,5", False, "number_form"), ("3,14", False, "number_form"), ("1,234", False, "number_form"),
    ("1.234,5", False, "number_form"), ("3/4", True, "number_form"), ("1/0", False, "number_form"),
    ("10^400", True, "number_form"), ("40-45", True, "range"), ("40 to 45", True, "range"), ("about 40", True, "estimate"),
    ("about 40-45", True, "range"), ("~40", True, "estimate"), ("40+", True, "estimate"), ("at least 3", True, "estimate"),
    ("not 40", True, "negated"), ("40?", True, "hedged"), ("3 apples and 4 pears", True, "several"),
])
def test_a_number_form_that_is_not_one_number_is_refused_with_why(text, integer, kind):
    refused = number(text, integer)
    assert isinstance(refused, Refusal) and refused.kind == kind and refused.msg


@pytest.mark.parametrize("text", ["0x1F", '3x10^"8', "$}1.50", "1[/2", "no digits here"])
def test_no_number_is_picked_out_of_a_word_or_a_broken_form(text):
    assert number(text, False) is None


def test_a_number_past_a_floats_range_is_refused_as_not_finite():
    refused = number("1e400", False)
    assert isinstance(refused, Refusal) and refused.kind == "finite_number"  # never 1, never inf


@pytest.mark.parametrize("text", ["not positive", "Not negative.", "definitely not neutral", "isn't positive",
                                  "positive or negative", "neither", "maybe positive", "positive?", "I would not call it positive"])
def test_a_negated_hedged_or_undecided_choice_is_refused(text):
    assert isinstance(choice(text, MEMBERS), Refusal)


@pytest.mark.parametrize("text", ["not true", "yes and no", "maybe yes", "Not false", "Yes, it isn't.", "yes?"])
def test_a_negated_or_contradicting_yes_no_is_refused(text):
    assert isinstance(boolean(text), Refusal)


def test_the_issue_cases_are_misreadings_with_feedback_in_both_modes():
    cases = [(Sentiment, "not positive"), (Sentiment, "Not negative."), (Sentiment, "definitely not neutral"),
             (bool, "not true"), (bool, "yes and no"), (float, "0,5"), (float, "3,14"), (int, "2^10 or so"),
             (int, "about 40-45")]
    for source, text in cases:
        for policy in (accord.Extract(), STRICT):
            reading = read(text, accord.Schema(source), policy=policy)
            assert isinstance(reading, Misreading), (text, reading)
            assert {e["type"] for e in reading.errors} & REASONS, reading.errors
    assert read("1/2", accord.Schema(float)).value == 0.5  # one meaning: read, and recorded
    assert read("2^10", accord.Schema(int)).coercions == ({"path": "", "fix": "'2^10' as 1024: a power"},)


def test_the_feedback_of_a_retry_says_why():
    model = accord.models.scripted(["not positive", "negative"])
    result = accord.Stabilizer(model, schema=Sentiment, vote=accord.Vote(k=1), retry=accord.Retry(attempts=2)).run("Tone?")
    assert result.value == "negative"
    assert "negates its answer" in result.ballots[0].error["message"]
    second = model.requests[1].input
    assert "'not positive' negates its answer: say the one value meant" in second  # the retry's feedback says why


TEXTS = ["Positive.", "**negative**", "not positive", "positive or negative", "Yes.", "yes and no", "not true",
         "$1.50", "1/2", "0,5", "2^10", "40-45", "about 40", "45%", "1,234", "N/A", "", "null", "12"]


@pytest.mark.parametrize("text", TEXTS)
def test_one_text_one_reading_at_every_depth(text):
    """The same text: the whole answer, a field, a list item, a value under Optional; lenient and strict."""
    for source in (Sentiment, bool, float, int):
        whole = read(text, accord.Schema(source))
        field_schema = {"type": "object", "properties": {"x": accord.Schema(source).json_schema}, "required": ["x"]}
        item_schema = {"type": "object", "properties": {"x": {"type": "array", "items": accord.Schema(source).json_schema}}}
        optional = {"type": "object", "properties": {"x": {"anyOf": [accord.Schema(source).json_schema, {"type": "null"}]}}}
        got = []
        for schema, data in ((field_schema, {"x": text}), (item_schema, {"x": [text]}), (optional, {"x": text})):
            for policy in (accord.Extract(), STRICT):
                r = read(json.dumps(data), accord.Schema(schema), policy=policy)
                value = None if isinstance(r, Misreading) else r.data["x"]
                got.append(value[0] if isinstance(value, list) else value)
        expected = None if isinstance(whole, Misreading) else whole.data
        if text in ("N/A", "", "null") and expected is None:
            assert got[4:] == [None, None]  # null under Optional: a value, null
            got = got[:4]
        assert all(g == expected and isinstance(g, bool) == isinstance(expected, bool) for g in got), (source, text, expected, got)


# -- for any value and any faithful rendering of it, the reading is that value or a misreading ---

_floats = st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e12, max_value=1e12)


def _renderings(price: Price, verdict: Verdict) -> list[tuple[type[BaseModel], str]]:
    p, v = price.model_dump(), verdict.model_dump()
    out: list[tuple[type[BaseModel], str]] = [(Price, json.dumps(p)), (Verdict, json.dumps(v))]
    for form in (str, lambda x: f"{x:,}", lambda x: f"${x}", lambda x: f"The price is {x}."):
        out.append((Price, json.dumps(p | {"unit_price": form(p["unit_price"]), "quantity": form(p["quantity"])})))
    for null in ("N/A", "null", "", "None"):
        if p["discount"] is None:
            out.append((Price, json.dumps(p | {"discount": null})))
    for member in (v["sentiment"].upper() + ".", f"**{v['sentiment']}**", f"'{v['sentiment']}'", f"Sentiment: {v['sentiment']}"):
        for ok in (("Yes." if v["ok"] else "No."), ("true" if v["ok"] else "false"), ("YES" if v["ok"] else "no!")):
            out.append((Verdict, json.dumps({"sentiment": member, "ok": ok})))
    out.append((Verdict, repr(v)))
    return out


@settings(max_examples=120, deadline=None)
@given(st.builds(Price, unit_price=_floats, quantity=st.integers(-10**9, 10**9), discount=st.none() | _floats),
       st.builds(Verdict, sentiment=st.sampled_from(MEMBERS), ok=st.booleans()))
def test_a_rendering_of_a_value_reads_as_that_value_or_is_refused(price, verdict):
    for model, text in _renderings(price, verdict):
        schema = accord.Schema(model)
        for policy in (accord.Extract(), STRICT):
            reading = read(text, schema, policy=policy)
            if isinstance(reading, Reading):
                value = reading.value
                expected = price if model is Price else verdict
                for name, meant in expected.model_dump().items():
                    got = getattr(value, name)
                    same = got == meant or (isinstance(meant, float) and isinstance(got, float) and math.isclose(got, meant))
                    assert same, (text, name, got, meant)


@pytest.mark.parametrize("policy", [accord.Extract(), STRICT], ids=["lenient", "strict"])
def test_a_union_of_scalars_reads_a_bare_text_as_a_field_would(policy):
    def one(source, text):
        return read(text, accord.Schema(source), policy=policy)

    assert one(int | None, "N/A").value is None and one(int | None, "N/A").coercions == ({"path": "", "fix": "'N/A' as null"},)
    assert one(float | None, "$1.50").value == 1.5
    assert one(Sentiment | None, "Positive.").value == "positive"
    assert {e["type"] for e in one(int | None, "about 4").errors} == {"estimate"}
    assert {e["type"] for e in one(Sentiment | None, "not positive").errors} == {"negated"}
    assert one(str | None, "null").value is None  # JSON's null
    assert read(json.dumps({"x": "null"}), accord.Schema(OptionalText), policy=policy).value.x == "null"  # a text the schema takes


class OptionalText(BaseModel):
    x: Optional[str]  # noqa: UP045
