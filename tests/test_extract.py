import time
from enum import Enum
from typing import Literal

import pytest
from pydantic import BaseModel

from accord import Schema
from accord.read._extract import MAX_CHARS, ExtractionFailure, extract


class Point(BaseModel):
    x: int
    y: int


POINT = Schema(Point)


@pytest.mark.parametrize(
    "text",
    [
        '{"x": 1, "y": 2}',
        '```json\n{"x": 1, "y": 2}\n```',
        'Sure! Here it is:\n{"x": 1, "y": 2}\nHope that helps {not json}',
        '```\n{"x": 1, "y": 2}\n```',
        'The point {"x": 1, "y": 2} is valid. Another: {"x": 3, "y": 4}',
    ],
)
def test_json_found_in_fences_and_prose(text):
    assert extract(text, POINT) == {"x": 1, "y": 2}


def test_first_complete_value_skips_broken_braces():
    assert extract('oops {x: 1} then {"x": 5, "y": 6}', POINT) == {"x": 5, "y": 6}


def test_no_json_is_an_extraction_failure():
    with pytest.raises(ExtractionFailure, match="no JSON"):
        extract("I cannot answer that.", POINT)


def test_huge_input_fails_fast():
    text = "{" * 10_000_000
    start = time.perf_counter()
    with pytest.raises(ExtractionFailure, match="too long"):
        extract(text, POINT)
    assert time.perf_counter() - start < 1.0


def test_deep_nesting_fails_without_recursion_error():
    text = "[" * 100_000 + "]" * 100_000
    assert len(text) <= MAX_CHARS
    with pytest.raises(ExtractionFailure, match="nested"):
        extract(text, POINT)


class Color(Enum):
    RED = "red"
    GREEN = "green"


@pytest.mark.parametrize(
    "text,expected",
    [("positive", "positive"), ("Positive.", "positive"), ('"negative"', "negative"),
     ("The sentiment is **negative** overall.", "negative"), ('{"label": "positive"}', "positive")],
)
def test_choice_word(text, expected):
    assert extract(text, Schema(Literal["positive", "negative"])) == expected


def test_choice_in_prose_with_two_members_is_refused_with_why():
    with pytest.raises(ExtractionFailure, match="more than one choice"):
        extract("positive or negative, hard to say", Schema(Literal["positive", "negative"]))


def test_enum_choice():
    assert extract("GREEN", Schema(Color)) == "green"


@pytest.mark.parametrize("text,expected", [("42", 42), ("The answer is 42.", 42), ("-3.5", -3.5), ("1,234 items", 1234)])
def test_number(text, expected):
    assert extract(text, Schema(int if isinstance(expected, int) else float)) == expected


@pytest.mark.parametrize("text,expected", [("Yes.", True), ("no", False), ("TRUE", True), ("false, because", False)])
def test_bool(text, expected):
    assert extract(text, Schema(bool)) is expected


def test_bool_missing():
    with pytest.raises(ExtractionFailure):
        extract("maybe", Schema(bool))


def test_plain_string_unquotes_json_string():
    assert extract('"hello"', Schema(str)) == "hello"
    assert extract("hello there", Schema(str)) == "hello there"
