"""Property tests for schema-aligned reading: exact JSON is never changed, reading is idempotent,
and no text makes the reader hang or raise anything but a Misreading."""

from __future__ import annotations

import json
import re
from typing import Literal, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import accord
from accord.read._canonical import label
from accord.read._extract import _DECODER
from accord.read._locate import _VALUE_STARTS, may_open
from accord.read._read import Misreading, Reading, read


class Home(BaseModel):
    city: str
    country: str


class Record(BaseModel):
    name: str
    age: int
    score: float
    tags: list[str]
    home: Home
    kind: Literal["person", "company"]
    note: Optional[str] = None  # noqa: UP045
    ok: bool = True


SCHEMA = accord.Schema(Record)
_ = SCHEMA.json_schema

# Strings as normalization leaves them (trimmed, NFC), so "unchanged" means unchanged.
words = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), max_size=12).map(str.strip)


def _labels(items: list[str]) -> list[str]:
    """A list of labels as reading leaves it (items of distinct labels): no item that is no label
    (the one change a reading makes to exact JSON, docs/normalize.md: `tags` is voted as a set
    of labels, and the value holds each label once)."""
    return [text for text in items if label(text)]


records = st.builds(
    Record,
    name=words,
    age=st.integers(-(10**12), 10**12),
    score=st.floats(-1e9, 1e9, allow_nan=False).map(lambda x: float(f"{x:.6g}")),
    tags=st.lists(words, max_size=4, unique_by=label).map(_labels),
    home=st.builds(Home, city=words, country=words),
    kind=st.sampled_from(["person", "company"]),
    note=st.one_of(st.none(), words),
    ok=st.booleans(),
)


def _unicode_nfc(record: Record) -> bool:
    import unicodedata

    text = record.model_dump_json()
    return unicodedata.normalize("NFC", text) == text


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(records.filter(_unicode_nfc), st.sampled_from(["{}", "```json\n{}\n```", "Here it is: {} Thanks.", "{}\n"]),
       st.sampled_from([None, 2]))
def test_valid_json_of_a_valid_value_reads_back_unchanged(record, frame, indent):
    data = record.model_dump(mode="json")
    reading = read(frame.replace("{}", json.dumps(data, indent=indent, ensure_ascii=False)), SCHEMA)
    assert isinstance(reading, Reading)
    assert reading.data == data
    assert reading.coercions == ()


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(records.filter(_unicode_nfc))
def test_a_python_literal_of_a_valid_value_reads_back_as_that_value(record):
    data = record.model_dump(mode="json")
    reading = read(repr(data), SCHEMA)  # single quotes, True/False/None
    assert isinstance(reading, Reading)
    assert reading.data == data


fragments = st.lists(
    st.sampled_from(['{', '}', '[', ']', '(', ')', '"', "'", ':', ',', ' ', '\n', '\t', 'a', 'name', 'age', 'tags', 'home',
                     'city', 'kind', 'person', '1', '-2.5', '1e3', 'true', 'None', 'NaN', 'undefined', '//', '/*', '*/', '#',
                     '```', '```json\n', '- ', '\\', '\\"', '=', 'string', 'int', '"type"', 'properties', '\x00', 'é']),
    max_size=60,
).map("".join)


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(fragments, st.text(max_size=200)))
def test_no_text_raises_anything_but_a_misreading_and_reading_is_idempotent(text):
    reading = read(text, SCHEMA)
    assert isinstance(reading, (Reading, Misreading))
    if isinstance(reading, Reading):
        again = read(json.dumps(reading.data, ensure_ascii=False), SCHEMA)
        assert isinstance(again, Reading)
        assert again.key == reading.key and again.data == reading.data and again.coercions == ()
        assert read(text, SCHEMA) == reading  # the same text, the same reading


@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(fragments)
def test_strict_reading_never_repairs(text):
    strict = read(text, SCHEMA, policy=accord.Extract(strict=True))
    assert isinstance(strict, (Reading, Misreading))
    if isinstance(strict, Reading):
        assert strict.coercions == ()


json_fragments = st.lists(
    st.sampled_from(['{', '[', '}', ']', '"', '"a"', ':', ',', ' ', '\n', '\t', '\r', '\x0b', '\xa0', '1', '-', 'tru', 'true',
                     'null', 'NaN', 'Infinity', 'x', "'"]),
    max_size=12,
).map("".join)


@settings(deadline=None, max_examples=500)
@given(json_fragments)
def test_where_no_json_value_can_start_none_is_decoded(text):
    # The strict and lenient readers skip raw_decode where may_open says no JSON value can start:
    # that must never skip a value json would read.
    for match in re.finditer(r"[\[{]", text):
        if not may_open(text, match.start()):
            with pytest.raises(ValueError):
                _DECODER.raw_decode(text, match.start())
    if text.lstrip(" \t\n\r")[:1] not in _VALUE_STARTS:  # nor json.loads where no value starts
        with pytest.raises(ValueError):
            json.loads(text)
