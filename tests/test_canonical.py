"""Canonical forms: typed normalization, opt-in normalizers, floats, sets, dates, fieldwise votes."""

from datetime import date, datetime
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel

import accord
from accord import Schema, Stabilizer, Vote, models
from accord.read._read import Misreading, Reading, read


class Tagged(BaseModel):
    name: Annotated[str, accord.Normalize(str.casefold)]
    tags: set[str]
    steps: accord.Unordered[list[str]]
    order: list[str]


def valid(text: str, schema: Schema[Any], **kwargs: Any) -> Reading:
    reading = read(text, schema, **kwargs)
    assert isinstance(reading, Reading), reading
    return reading


def key(text: str, schema: Schema[Any], **kwargs: Any) -> str:
    return valid(text, schema, **kwargs).key


def test_per_field_normalizer_runs_in_validation() -> None:
    schema = Schema.of(Tagged)
    a = valid('{"name": "ALICE", "tags": [], "steps": [], "order": []}', schema)
    assert a.value.name == "alice"
    assert a.key == key('{"name": "alice", "tags": [], "steps": [], "order": []}', schema)


def test_set_like_lists_compare_order_insensitively_but_lists_do_not() -> None:
    schema = Schema.of(Tagged)
    base = '{"name": "a", "tags": ["x", "y"], "steps": ["s1", "s2"], "order": ["o1", "o2"]}'
    swapped_sets = '{"name": "a", "tags": ["y", "x"], "steps": ["s2", "s1"], "order": ["o1", "o2"]}'
    swapped_list = '{"name": "a", "tags": ["x", "y"], "steps": ["s1", "s2"], "order": ["o2", "o1"]}'
    assert key(base, schema) == key(swapped_sets, schema)
    assert key(base, schema) != key(swapped_list, schema)
    json_schema = Schema(Tagged).json_schema
    assert json_schema is not None and json_schema["properties"]["steps"]["x-accord-unordered"] is True


def test_unique_items_in_a_json_schema_is_set_like() -> None:
    schema = Schema.of({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    assert key("[3, 1, 2]", schema) == key("[1, 2, 3]", schema)


def test_numbers_keep_their_digits_unless_float_digits_is_set() -> None:
    schema = Schema.of(float)
    assert key("0.30000000000000004", schema) != key("0.3", schema)  # two floats: two answers
    assert key("10000000.01", schema) != key("10000000.02", schema) != key("10000000.04", schema)
    assert key("3.0", schema) == key("3", schema) == "3"  # one value
    assert key("1.50", schema) == key("1.5", schema)  # one float
    assert key("0.30000000000000004", schema, float_digits=9) == key("0.3", schema, float_digits=9)  # the opt-in merges
    assert key("1.23456789", schema, float_digits=3) == key("1.234", schema, float_digits=3) == "1.23"
    assert key("1.2", schema) != key("1.3", schema)


def test_float_digits_is_a_vote_setting() -> None:
    texts = ["3.14159", "3.14160", "3.14158"]
    result = Stabilizer(models.scripted(texts), schema=float, vote=Vote(k=3, float_digits=4)).run("pi?")
    assert result.stable and result.value == 3.14159 and list(result.votes) == ["3.142"]
    with pytest.raises(accord.ConfigError):
        Vote(float_digits=0)


def test_per_schema_text_normalizers_touch_free_text_only() -> None:
    class Note(BaseModel):
        title: str
        mood: Literal["Happy", "Sad"]

    schema = Schema.of(Note)
    plain = valid('{"title": "Hello   World", "mood": "happy"}', schema, normalizers=(accord.casefold, accord.collapse_whitespace))
    assert plain.value.title == "hello world" and plain.value.mood == "Happy"


def test_nfkc_is_opt_in() -> None:
    schema = Schema.of(str)
    assert valid("ﬁne", schema).value == "ﬁne"
    assert valid("ﬁne", schema, normalizers=(accord.nfkc,)).value == "fine"


def test_nfc_always() -> None:
    assert valid("Cafe\u0301", Schema.of(str)).value == "Café"


def test_dates_to_iso_8601() -> None:
    class Event(BaseModel):
        day: date
        at: datetime

    schema = Schema.of(Event)
    a = valid('{"day": "March 5, 2024", "at": "2024-03-05T10:00:00.000Z"}', schema)
    b = valid('{"day": "2024-03-05", "at": "2024-03-05T10:00:00+00:00"}', schema)
    assert a.value == b.value and a.key == b.key
    assert a.value.day == date(2024, 3, 5)


def test_dates_in_json_schema_dicts() -> None:
    schema = Schema.of({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}})
    assert valid('{"d": "5 March 2024"}', schema).value == {"d": "2024-03-05"}
    ambiguous = read('{"d": "03/05/2024"}', schema)  # March 5 or May 3: never guessed, so rejected
    assert isinstance(ambiguous, Misreading) and ambiguous.errors[0]["loc"] == ("d",)


@pytest.mark.parametrize(("written", "day"), [("14/12/2023", "2023-12-14"), ("12/14/2023", "2023-12-14"), ("05/05/2024", "2024-05-05"),
                                              ("12.02.2024", "2024-02-12"), ("2024.02.12", "2024-02-12")])
def test_a_date_with_one_reading_is_read_and_two_readings_or_none_are_not(written: str, day: str) -> None:
    schema = Schema.of({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}})
    assert valid(f'{{"d": "{written}"}}', schema).value == {"d": day}  # day first or month first: only one is a date
    for unread in ("03/05/2024", "31/02/2024", "13/13/2024", "1/2/24", "not 14/12/2023", "about 12/14/2023", "12/14/2023 or 12/15/2023",
                   "14/12/2023-15/12/2023", "12.02.2024?", "12.02.24"):  # ambiguous, impossible, negated, hedged, two dates
        assert isinstance(read(f'{{"d": "{unread}"}}', schema), Misreading), unread


def test_fieldwise_vote_keeps_the_fields_ballots_agree_on() -> None:
    class Person(BaseModel):
        name: str
        age: int
        city: str

    texts = ['{"name": "Ann", "age": 30, "city": "Oslo"}', '{"name": "Ann", "age": 31, "city": "Oslo"}',
             '{"name": "Ann", "age": 30, "city": "Bergen"}']
    with pytest.raises(accord.NoConsensus):
        Stabilizer(models.scripted(texts), schema=Person, vote=Vote(k=3)).run("q")
    result = Stabilizer(models.scripted(texts), schema=Person, vote=Vote(k=3, fieldwise=True)).run("q")
    assert result.value == Person(name="Ann", age=30, city="Oslo") and result.stable
    assert result.field_agreement == pytest.approx({"name": 1.0, "age": 2 / 3, "city": 2 / 3})
    assert result.agreement == pytest.approx(2 / 3) and result.meta["fieldwise"] == "assembled"


def test_fieldwise_nested_and_positional_lists() -> None:
    class Line(BaseModel):
        sku: str
        qty: int

    class Order(BaseModel):
        lines: list[Line]
        note: str | None = None

    texts = ['{"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]}',
             '{"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 3}], "note": "x"}',
             '{"lines": [{"sku": "a", "qty": 5}, {"sku": "b", "qty": 2}]}']
    result = Stabilizer(models.scripted(texts), schema=Order, vote=Vote(k=3, fieldwise=True)).run("q")
    assert result.value == Order(lines=[Line(sku="a", qty=1), Line(sku="b", qty=2)])
    assert result.field_agreement is not None and result.field_agreement["lines[1].qty"] == pytest.approx(2 / 3)
