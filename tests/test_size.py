"""A run's first call is sized to its schema where the backend's default is too small
(``schema/_size``, ``run/_loop``): a whole answer is never cut at a default it could not fit, and
a backend or run given a number keeps to it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord import Settings, Stabilizer, Vote
from accord.backends._scripted import ScriptedBackend
from accord.schema._size import answer_tokens, first_call_tokens

FOLDER = str(Path(__file__).resolve().parents[1] / "benchmarks")
sys.path.insert(0, FOLDER)
try:
    from apps_data.invoices import Invoice, LineItem  # the shipped invoice: eight fields, line_items unbounded
finally:
    sys.path[:] = [p for p in sys.path if p != FOLDER]  # the benchmarks folder holds a vllm.py: off the path again


class Bounded(Invoice):
    line_items: list[LineItem] = Field(max_length=5)  # type: ignore[assignment]


class Label(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]


class Tree(BaseModel):
    name: str
    children: list[Tree] = Field(default_factory=list)


INVOICE = json.dumps(
    {"vendor": "Brightline Office Supply Co.", "invoice_number": "INV-2024-0387", "issue_date": "2024-03-04", "due_date": "2024-04-03",
     "currency": "USD", "line_items": [{"description": "Ergonomic desk chair", "quantity": 2, "unit_price": 249.0}] * 5,
     "total": 750.5, "notes": None}, indent=2)


SIZE = 384  # the invoice's stand-in: 5 line items (docs/retry.md)


def test_an_invoice_of_five_items_is_sized_over_what_the_model_writes_and_a_label_stays_at_the_default() -> None:
    invoice = answer_tokens(accord.Schema.of(Invoice).json_schema)
    assert invoice == answer_tokens(accord.Schema.of(Bounded).json_schema) == SIZE  # an unbounded list counts 5 items
    assert invoice % 64 == 0 and len(INVOICE) / 2.8 < invoice < 2 * len(INVOICE) / 2.8  # over the written answer, not far over
    assert first_call_tokens(accord.Schema.of(Invoice).json_schema, 256) == invoice
    assert first_call_tokens(accord.Schema.of(Invoice).json_schema, 1024) is None  # the default fits
    assert first_call_tokens(accord.Schema.of(Invoice).json_schema, 256, sizes=False) is None  # a number was given
    assert first_call_tokens(accord.Schema.of(Label).json_schema, 256) is None
    assert first_call_tokens(True, 256) is None  # not an object schema


def test_bounds_count_and_recursion_ends() -> None:
    class Many(BaseModel):
        items: list[LineItem] = Field(max_length=1000)

    class Two(BaseModel):
        items: list[LineItem] = Field(max_length=2)

    many, two = (answer_tokens(accord.Schema.of(m).json_schema) for m in (Many, Two))
    assert two < SIZE < many < 10 * SIZE  # at most 32 items are counted
    assert 0 < answer_tokens(accord.Schema.of(Tree).json_schema) < 100_000  # a recursive $ref stops


def sized_backend(texts: list[str], sizes: bool = True) -> ScriptedBackend:
    backend = ScriptedBackend(texts)
    backend.default_max_tokens, backend.sizes_max_tokens = 256, sizes  # as models.local() with max_tokens unset
    return backend


@pytest.mark.parametrize(("sizes", "settings", "asked"), [(True, Settings(), SIZE), (False, Settings(), None),
                                                          (True, Settings(max_tokens=64), 64)])
def test_the_first_call_asks_for_the_schema_s_size_unless_a_number_was_set(sizes: bool, settings: Settings, asked: int | None) -> None:
    backend = sized_backend([INVOICE], sizes)
    result = Stabilizer(backend, Invoice, vote=Vote(k=1, gate=None), settings=settings).run("Extract the invoice.")
    assert result.value is not None and [r.settings.max_tokens for r in backend.requests] == [asked]


def test_a_cut_at_the_sized_budget_grows_from_it_and_a_label_is_not_sized() -> None:
    backend = sized_backend([accord.Completion(INVOICE[:200], finish_reason="length"), INVOICE])
    Stabilizer(backend, Invoice, vote=Vote(k=1, gate=None)).run("Extract the invoice.")
    assert [r.settings.max_tokens for r in backend.requests] == [SIZE, 2 * SIZE]
    labels = sized_backend(['{"sentiment": "positive"}'])
    Stabilizer(labels, Label, vote=Vote(k=1, gate=None)).run("Great pen.")
    assert [r.settings.max_tokens for r in labels.requests] == [None]  # the backend's default


def test_the_backends_size_only_when_no_max_tokens_was_given() -> None:
    assert accord.models.openai(base_url="http://127.0.0.1:9/v1", model="m").sizes_max_tokens  # type: ignore[attr-defined]
    given = accord.models.openai(base_url="http://127.0.0.1:9/v1", model="m", max_tokens=512)
    assert not given.sizes_max_tokens and given.default_max_tokens == 512  # type: ignore[attr-defined]
    assert accord.models.openai(base_url="http://127.0.0.1:9/v1", model="m").default_max_tokens == 512
    with pytest.raises(accord.ConfigError):
        accord.models.openai(base_url="http://127.0.0.1:9/v1", model="m", max_tokens="many")  # type: ignore[arg-type]
