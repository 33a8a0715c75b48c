"""Fuzzing the reading of one output: extract -> normalize -> validate -> canonicalize (``_read.read``).

Random bytes (decoded as a model's text may arrive: UTF-8 with replacement or surrogateescape,
Latin-1) and random JSON-ish text (JSON values dumped, then cut, spliced and sprinkled with the
characters that break parsers) are read under random schemas (pydantic types, JSON Schemas built
at random, regexes, a grammar). Whatever comes in, ``read`` returns a Reading or a Misreading: it
never raises, never hangs past its time limit, and a Reading always holds a value that validates
and a vote key UTF-8 can encode.

A fixed number of examples runs in the suite (60 per target, a few seconds); set
``ACCORD_FUZZ_EXAMPLES`` for more:

    ACCORD_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest -q tests/test_fuzz.py
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from accord import Extract, Grammar, Regex, Schema
from accord.read._read import Misreading, Reading, read

EXAMPLES = int(os.environ.get("ACCORD_FUZZ_EXAMPLES", "60"))
LIMIT = 1.0  # seconds one reading may take (Extract(max_seconds=...))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=150)
    tags: list[str] = []


class Order(BaseModel):
    id: int
    items: list[Person]
    status: Literal["open", "closed"]
    note: str | None = None


FIXED_SCHEMAS: list[Any] = [
    int, float, bool, str, list[int], dict[str, float], Literal["positive", "negative", "neutral"], Person, Order,
    Regex(r"[A-Z]{3}-\d{4}"), Regex(r"(a|b)*c"), Grammar('start: "(" start* ")" | WORD\n%import common.WORD'),
]

# -- random JSON Schemas -------------------------------------------------------------------------------

SCALAR_SCHEMAS = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": "integer"}),
    st.just({"type": "number"}),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.builds(lambda lo, hi: {"type": "integer", "minimum": min(lo, hi), "maximum": max(lo, hi)}, st.integers(-100, 100), st.integers(-100, 100)),
    st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(0, 20)),
    st.sampled_from([{"type": "string", "pattern": p} for p in (r"^\d+$", r"^[a-z]+@[a-z]+\.com$", r"^(ab)+$")]),
    st.sampled_from([{"type": "string", "format": f} for f in ("date", "date-time", "email", "uri")]),
    st.lists(st.one_of(st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none()), min_size=1, max_size=4, unique=True).map(lambda m: {"enum": m}),
    st.one_of(st.text(max_size=8), st.integers(), st.booleans()).map(lambda c: {"const": c}),
)


def _objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    props = st.dictionaries(st.text(st.characters(codec="utf-8"), min_size=1, max_size=8), children, max_size=4)
    return st.one_of(
        st.builds(lambda p, r: {"type": "object", "properties": p, "required": [k for k in p if r]}, props, st.booleans()),
        children.map(lambda c: {"type": "array", "items": c}),
        children.map(lambda c: {"type": "array", "items": c, "uniqueItems": True}),
        st.lists(children, min_size=2, max_size=3).map(lambda bs: {"anyOf": bs}),
        children.map(lambda c: {"type": "object", "additionalProperties": c}),
        children.map(lambda c: {"allOf": [c]}),
    )


JSON_SCHEMAS = st.recursive(SCALAR_SCHEMAS, _objects, max_leaves=8)
SCHEMAS = st.one_of(st.sampled_from(FIXED_SCHEMAS), JSON_SCHEMAS)

# -- random texts ------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=5)),
    max_leaves=20,
)
BREAKERS = st.sampled_from([*'{}[]":,\'\\', "NaN", "Infinity", "-1e999", "\ud800", "\x00", "```", "```json\n", "//", "/*",
                                                    "True", "None", "undefined", "9" * 5000, "[" * 300, "\u2028", "\ufeff"])


@st.composite
def jsonish(draw: st.DrawFn) -> str:
    """A JSON value dumped (or Python-repr'd), then cut, spliced and broken in a few places, in prose or a fence."""
    value = draw(JSON_VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans())) if draw(st.booleans()) else repr(value)
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(BREAKERS) + text[at:]
        else:
            text = text[:at] + text[at + draw(st.integers(0, 5)):]
    if draw(st.booleans()):
        text = draw(st.text(max_size=30)) + text + draw(st.text(max_size=30))
    if draw(st.booleans()):
        text = f"```json\n{text}\n```"
    return text


@st.composite
def raw_bytes(draw: st.DrawFn) -> str:
    """Random bytes, decoded the ways a backend might decode them."""
    data = draw(st.binary(max_size=300))
    how = draw(st.sampled_from(["replace", "surrogateescape", "latin-1"]))
    return data.decode("latin-1") if how == "latin-1" else data.decode("utf-8", how)


def check(text: str, source: Any) -> None:
    try:
        schema: Schema[Any] = Schema(source)
    except Exception:
        return
    start = time.monotonic()
    reading = read(text, schema, policy=Extract(max_seconds=LIMIT))
    seconds = time.monotonic() - start
    assert seconds <= LIMIT + 1.0, f"{seconds:.2f} s reading {text[:80]!r}"
    assert isinstance(reading, (Reading, Misreading)), reading
    if isinstance(reading, Reading):
        reading.key.encode("utf-8")  # every vote key can be stored and hashed
        schema.validate(reading.data)  # the data of a Reading is valid as it stands
    else:
        assert reading.errors and all("msg" in e for e in reading.errors)


@FUZZ
@given(jsonish(), SCHEMAS)
def test_jsonish_text_under_random_schemas(text: str, source: Any) -> None:
    check(text, source)


@FUZZ
@given(raw_bytes(), SCHEMAS)
def test_random_bytes_under_random_schemas(text: str, source: Any) -> None:
    check(text, source)


@FUZZ
@given(st.text(max_size=200), st.sampled_from(FIXED_SCHEMAS))
def test_random_text_under_the_fixed_schemas(text: str, source: Any) -> None:
    check(text, source)
