"""Schema-aligned reading (issue 14): what a model meant, never a value it did not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

import pytest
from pydantic import BaseModel

import accord
import corpus
from accord.read._read import Misreading, Reading, read

ROOT = Path(__file__).resolve().parents[1]


class P(BaseModel):
    name: str
    age: int
    tags: list[str]


ANN = {"name": "Ann", "age": 31, "tags": ["a", "b"]}


def run(text: str, schema=P, **options):
    stab = accord.Stabilizer(accord.models.scripted([text]), schema=schema, vote=accord.Vote(k=1),
                             retry=accord.Retry(attempts=1), **options)
    return stab.run("Who?")


@pytest.mark.parametrize(
    "text,fix",
    [
        ("{name: 'Ann', age: 31, tags: ['a', 'b']}", "unquoted key"),
        ("{'name': 'Ann', 'age': 31, 'tags': ['a', 'b']}", "single quotes"),
        ('{"name": "Ann", "age": 31, "tags": ["a", "b",],}', "trailing comma"),
        ('{"name": "Ann", // her name\n "age": 31, "tags": ["a", "b"]}', "comment removed"),
        ('{"name": "Ann", /* x */ "age": 31, # y\n "tags": ["a", "b"]}', "comment removed"),
        ("{'name': 'Ann', 'age': 31, 'tags': ('a', 'b'), 'ok': True, 'note': None}", "tuple as list"),
        ('{"name": "Ann", "age": 31, "tags": ["a", "b"]', "closed a cut-off object"),
        ("name: Ann\nage: 31\ntags:\n  - a\n  - b", "key-value lines as an object"),
        ('{"NAME": "Ann", "Age": 31, "Tags": ["a", "b"]}', "key 'NAME' as 'name'"),
        ("{name: Ann, age: '31', tags: [a, b]}", "unquoted string"),
        ('```json\n{name: "Ann", age: 31, tags: ["a", "b"]}\n```', "unquoted key"),
    ],
)
def test_the_malformations_of_the_issue_read_as_the_value_meant(text, fix):
    result = run(text)
    assert result.data == ANN
    assert fix in {c["fix"] for c in result.coercions}
    assert result.ballots[0].coercions == result.coercions
    assert result.to_dict()["ballots"][0]["coercions"] == [dict(c) for c in result.coercions]


def test_a_scalar_where_the_schema_wants_a_list_becomes_a_one_element_list():
    result = run('{"name": "Ann", "age": 31, "tags": "a"}')
    assert result.data == {**ANN, "tags": ["a"]}
    assert {"path": "tags", "fix": "one value as a list"} in result.coercions


def test_a_raw_newline_inside_a_string_is_kept():
    result = run('{"name": "Ann\nLee", "age": 31, "tags": []}')
    assert result.data["name"] == "Ann\nLee"
    assert result.coercions == ({"path": "name", "fix": "raw control character in a string"},)


def test_the_object_that_fits_wins_over_a_wrong_object_quoted_first():
    text = 'Not {"name": "Bob", "age": "old"}, that one is wrong. The answer: {"name": "Ann", "age": 31, "tags": ["a", "b"]}'
    assert run(text).data == ANN


def test_a_value_valid_as_read_is_not_coerced():
    # "start " is an extra key, allowed: a valid value is never renamed toward the schema
    schema = {"type": "object", "properties": {"start": {"type": "boolean"}}}
    assert run('{"start ": true}', schema=schema).data == {"start ": True}
    assert run("{'start ': True}", schema=schema).data == {"start ": True}


def test_a_free_form_object_may_hold_a_schema():
    schema = {"type": "object", "properties": {"schema": {"type": "object"}}, "required": ["schema"]}
    text = json.dumps({"schema": {"type": "object", "properties": {"a": {"type": "string"}}}})
    assert run(text, schema=schema).data == json.loads(text)


def test_clean_json_takes_no_coercion():
    result = run(json.dumps(ANN))
    assert result.coercions == () and result.to_dict()["coercions"] == []


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ann", "age": 31, "tags": ["a", "b"], "name2": "Ann Le',  # fine: name2 is not a field
    ],
)
def test_a_cut_off_member_that_is_not_a_field_does_not_matter(text):
    assert run(text).data == ANN


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Ann", "age": 31, "tags": ["a", "b"',  # a list cut off: its length is unknown
        '{"tags": ["a"], "name": "Ann", "age": 3',  # a number cut off: 3 may be 31
        '{"tags": ["a"], "age": 31, "name": "An',  # a string cut off
        '{"tags": ["a"], "age": 31, "name": tr',  # a literal cut off
        '{"tags": ["a"], "age": 31, "na',  # a key cut off: name missing
    ],
)
def test_a_value_cut_mid_way_is_never_accepted(text):
    with pytest.raises(accord.InvalidOutput):
        run(text)


def test_key_value_lines_cut_at_max_tokens_are_not_a_value():
    # "age: 3" may be "age: 31" cut off: with finish_reason "length" the run loop grows max_tokens
    model = accord.models.function(lambda prompt: "name: Ann\ntags: [a]\nage: 3")
    stab = accord.Stabilizer(model, schema=P, vote=accord.Vote(k=1), retry=accord.Retry(attempts=1))
    assert stab.run("Who?").data == {"name": "Ann", "age": 3, "tags": ["a"]}  # not cut: a value
    cut = accord.Completion("name: Ann\ntags: [a]\nage: 3", finish_reason="length")
    scripted = accord.models.scripted([cut])
    with pytest.raises(accord.InvalidOutput) as caught:
        accord.Stabilizer(scripted, schema=P, vote=accord.Vote(k=1), retry=accord.Retry(attempts=1)).run("Who?")
    assert caught.value.result.ballots[0].error["stage"] == "truncated"
    assert isinstance(read('name: Ann\nage: 31\ntags: ["a", "b",', accord.Schema(P)), Misreading)  # a list cut off


class Contact(BaseModel):
    first_name: str
    email: Optional[str]  # noqa: UP045 - written as users write it
    kind: Literal["person", "company"]


def test_keys_enum_case_and_a_missing_nullable_field():
    result = run('{"firstName": "Ann", "Kind": "PERSON"}', schema=Contact)
    assert result.data == {"first_name": "Ann", "email": None, "kind": "person"}
    fixes = {c["fix"] for c in result.coercions}
    assert {"key 'firstName' as 'first_name'", "missing nullable field as null", "'PERSON' as the member 'person'"} <= fixes


def test_a_nullable_field_is_not_filled_in_an_object_cut_off():
    with pytest.raises(accord.InvalidOutput):
        run('{"first_name": "Ann", "kind": "person", ', schema=Contact)


class Shape(BaseModel):
    size: int | list[int]


def test_a_union_takes_the_member_with_the_fewest_coercions():
    assert run('{"size": "3"}', schema=Shape).data == {"size": 3}
    assert run('{"size": [1, 2]}', schema=Shape).data == {"size": [1, 2]}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(accord.Schema(P).json_schema),
        '{"properties": {"name": {"type": "string"}}, "required": ["name"], "type": "object"}',
        '{"name": string, "age": int, "tags": string[]}',
        '{"name": "string", "age": 0, "tags": []}',
    ],
)
def test_an_echoed_schema_is_never_a_value(text):
    with pytest.raises(accord.InvalidOutput) as caught:
        run(text)
    assert caught.value.result.ballots[0].error["errors"][0]["type"] == "schema_echo"


class Loose(BaseModel):
    title: str = ""
    note: str = ""


def test_an_echoed_schema_is_recognised_even_when_it_would_validate():
    with pytest.raises(accord.InvalidOutput):
        run(json.dumps(accord.Schema(Loose).json_schema), schema=Loose)


def test_after_an_echo_the_retry_shows_the_shape_to_fill_in():
    model = accord.models.scripted([json.dumps(accord.Schema(P).json_schema), json.dumps(ANN)])
    result = accord.Stabilizer(model, schema=P, vote=accord.Vote(k=1), retry=accord.Retry(attempts=2)).run("Who is Ann?")
    assert result.data == ANN
    first, second = (r.input for r in model.requests)
    assert "Answer in JSON using this schema" in first and '"properties"' not in first
    assert "repeated the schema" in second and '{"name": ..., "age": ..., "tags": [..., ...]}' in second


def test_strict_extraction_turns_every_repair_off():
    with pytest.raises(accord.InvalidOutput):
        run("{name: 'Ann', age: 31, tags: ['a', 'b']}", extract=accord.Extract(strict=True))
    with pytest.raises(accord.InvalidOutput):
        run('{"name": "Ann", "age": 31, "tags": "a"}', extract=accord.Extract(strict=True))
    assert run(f"Here: {json.dumps(ANN)}", extract=accord.Extract(strict=True)).data == ANN  # JSON as written


def test_extract_must_be_an_extract_policy():
    with pytest.raises(accord.ConfigError):
        accord.Stabilizer(accord.models.scripted(["{}"]), schema=P, extract={"strict": True})


@pytest.mark.parametrize("text", ['{"x": NaN}', '{"x": Infinity}', "{'x': float('nan')}"])
def test_non_finite_numbers_are_never_values(text):
    class F(BaseModel):
        x: float

    assert isinstance(read(text, accord.Schema(F)), Misreading)


@pytest.mark.parametrize("text,expected", [("Yes.", True), ("No, it is not.", False)])
def test_a_bare_answer_fills_a_one_field_object(text, expected):
    class YesNo(BaseModel):
        answer: bool

    result = run(text, schema=YesNo)
    assert result.data == {"answer": expected}
    assert result.coercions == ({"path": "answer", "fix": "the bare answer as the only field"},)


def test_prose_is_not_a_bare_answer():
    class Number(BaseModel):
        answer: int

    for text in ("What is 2 + 3?", "It might be 4 or 5."):
        assert isinstance(read(text, accord.Schema(Number)), Misreading)


def test_a_ledger_replay_keeps_the_coercions(tmp_path):
    with accord.Ledger(tmp_path / "ledger.sqlite3") as ledger:
        stab = accord.Stabilizer(accord.models.scripted(["{name: 'Ann', age: 31, tags: 'a'}"]), schema=P,
                                 vote=accord.Vote(k=1), ledger=ledger)
        first = stab.run("Who?")
        replayed = stab.run("Who?")
    assert replayed.replayed
    assert [dict(c) for c in replayed.coercions] == [dict(c) for c in first.coercions] != []


def test_adversarial_input_is_read_in_bounded_work():
    import time

    schema = accord.Schema(P)
    texts = ["{" * 50_000, "[" * 200 + "]" * 200, '{"a": "' + "x" * 90_000, "{a: " * 20_000, "'" * 80_000,
             '{"name": "a", ' * 5_000, "/*" * 30_000, "name: x\n" * 10_000, "{" + ", " * 40_000 + "}"]
    for text in texts:
        start = time.perf_counter()
        assert isinstance(read(text, schema), (Reading, Misreading))
        assert time.perf_counter() - start < 5.0, text[:20]


def test_the_corpus_is_read_right_and_never_wrong():
    """tests/data/malformed: accord recovers >= 95% of the recoverable cases and no wrong value."""
    parsing = corpus.parsing()
    cases = parsing.load()
    assert len(cases) >= 300
    rows = parsing.run_local("accord", parsing.LOCAL_TOOLS["accord"], cases, 1)
    figures = parsing.score(cases, rows)
    assert figures["wrong"] == 0, figures["wrong_ids"]
    assert figures["recovered"] >= 0.95 * figures["recoverable"], figures["missed"]


class Rating(BaseModel):
    stars: int
    summary: str = ""


@pytest.mark.parametrize(
    "text,says",
    [
        ('{"stars": 4 or 5}', "stars: '4 or 5' is a range, not one number: write one number"),
        ('{"stars": 4 or 5, "summary": "good"}', "stars: '4 or 5' is a range, not one number: write one number"),
        ('{"stars": 4-5}', "stars: '4-5' is a range, not one number: write one number"),
        ('{"stars": 4 to 5}', "stars: '4 to 5' is a range, not one number: write one number"),
        ('{"stars": 40+}', "stars: '40+' is an estimate or a bound, not one number: write the number"),
        ('{"stars": 3/4}', "stars: '3/4' is a fraction, not an integer: write the integer"),
    ],
)
def test_a_hedge_written_inside_a_json_value_is_named_not_no_json(text: str, says: str) -> None:
    """Issue #45: the model's hedge, unquoted in its JSON, read as the text it is, so the reading's
    error (the retry's feedback) names it, rather than "no JSON value found"."""
    reading = read(text, accord.Schema(Rating))
    assert isinstance(reading, Misreading) and reading.message == says
    model = accord.models.scripted([text, '{"stars": 4, "summary": "good"}'])
    result = accord.Stabilizer(model, Rating, vote=accord.Vote(k=1), prompting=accord.Prompting(schema_in_prompt=False)).run("Rate.")
    assert result.value.stars == 4 and says in model.requests[1].input


@pytest.mark.parametrize(
    "text,value",
    [
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),  # a missing comma, as before
        ("[1 -2]", [1, -2]),  # a space before the sign and none after: two numbers
        ('{"a": 3 // three\n}', {"a": 3}),  # a comment
        ('{"a": 3 /* three */}', {"a": 3}),
        ("[4-5]", ["4-5"]),  # one answer written as a range: text, for the schema to read or refuse
        ('{"a": true or false}', {"a": "true or false"}),
        ("{a: 5 to: 3}", {"a": 5, "to": 3}),  # the next key, its comma missing
    ],
)
def test_what_follows_a_number_on_its_line_is_more_of_it_only_when_it_hedges(text: str, value: object) -> None:
    from accord.read._jsonish import parse

    assert parse(text).value == value
