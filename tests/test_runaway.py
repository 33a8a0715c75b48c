"""A list that runs away (items that keep coming, each new, so no loop is seen) ends the ballot as
a typed, recorded loop, and is asked again with feedback under a bound on that list, never with
more tokens (``accord.read._runaway``, ``run/_absorb.cut``, ``schema/_bounds``); the local backend
stops such a list while it is written (``backends/local/_loops.LoopStop``)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import accord
from accord import Completion, Stabilizer, Usage, Vote, models
from accord.read._loops import LOOP
from accord.read._runaway import CUT, EARLY, find_runaway


class LineItem(BaseModel):
    description: str
    quantity: int
    unit_price: Decimal


class Invoice(BaseModel):
    vendor: str
    line_items: list[LineItem]
    total: Decimal


HEAD = '{"vendor": "Brightline", "line_items": ['
GOOD = HEAD + '{"description": "Desk chair", "quantity": 2, "unit_price": "249.00"}], "total": "498.00"}'
ONE = Vote(k=1, gate=None)


def numbered(n: int, first: int = 1) -> str:
    """Line items the embedded model invents: a counter, then words it copied from anywhere."""
    words = ["Bill to ACME Corp.", "Invoice no.", "Gadget at", "Payment due", "Total", "Chair", "Desk", "Lamp", "Pen", "Box"]
    return ", ".join(f'{{"description": "{first + i}. {words[i % len(words)]}", "quantity": 1, "unit_price": "0"}}' for i in range(n))


def alike(n: int) -> str:
    return ", ".join(f'{{"description": "Item {i}", "quantity": {i}, "unit_price": "{i}.00"}}' for i in range(1, n + 1))


# -- the detector ---------------------------------------------------------------------------------

def test_items_with_a_growing_counter_run_away_from_the_sixth_while_written_and_the_fourth_once_cut() -> None:
    assert find_runaway(HEAD + numbered(EARLY - 1) + ", {", early=True) is None
    found = find_runaway(HEAD + numbered(EARLY) + ", {", early=True)
    assert found is not None and found.runaway == "counter" and found.path == "line_items[]" and found.repeats == EARLY
    assert found.message() == ("the list `line_items` ran away: 6 items, each numbered one more than the last; "
                               "list only the items the input has")
    cut = find_runaway(HEAD + numbered(CUT) + ', {"descr')
    assert cut is not None and cut.runaway == "counter"


def test_items_alike_but_for_a_number_run_away_and_the_bound_keeps_the_items_before_them() -> None:
    text = HEAD + '{"description": "Desk chair", "quantity": 2, "unit_price": "249.00"}, ' + alike(EARLY) + ', {"de'
    found = find_runaway(text, early=True)
    assert found is not None and found.runaway == "alike"
    bounded = accord.schema._bounds.bounded(accord.Schema.of(Invoice), text, found)
    assert bounded is not None and bounded.json_schema["properties"]["line_items"]["maxItems"] == 1


@pytest.mark.parametrize("text", [
    '{"rooms": ["Room 101", "Room 102", "Room 103", "Room 104", "Ro',  # data, and too few to say while written
    '{"readings": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11',  # numbers: data
    '{"days": ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-06", "2024-01-07", "',
    HEAD + '{"description": "1. Chair", "quantity": 1, "unit_price": "1"}, {"description": "3. Desk", "quantity": 1, "unit_price": "1"}',
])
def test_lists_that_are_data_are_not_stopped_while_written(text: str) -> None:
    assert find_runaway(text, early=True) is None


@given(st.lists(st.text(alphabet="abcdefghij kl", min_size=1, max_size=12), min_size=1, max_size=30, unique=True))
def test_a_list_of_distinct_words_is_never_stopped_while_written(words: list[str]) -> None:
    text = '{"tags": [' + ", ".join(json.dumps(w) for w in words) + ', "'
    assert find_runaway(text, early=True) is None


def test_a_cut_inside_a_list_is_a_runaway_bounded_to_one_fewer_than_its_whole_items() -> None:
    text = HEAD + '{"description": "Chair", "quantity": 2, "unit_price": "1"}, {"description": "Desk", "quantity": 1, "unit_price": "1"}, {"descr'
    found = find_runaway(text)
    assert found is not None and found.runaway == "cut" and found.repeats == 2
    assert find_runaway('{"vendor": "Brightline", "total": "4') is None  # no list open: an honest cut
    assert find_runaway(HEAD + '{"descr') is None  # not one whole item: nothing says the list ran on


# -- the run: asked again under a bound, never with more tokens ------------------------------------

def test_a_runaway_list_is_recorded_and_asked_again_bounded_with_feedback_never_more_tokens() -> None:
    runaway = Completion(HEAD + numbered(9), "length", usage=Usage(prompt_tokens=80, completion_tokens=256))
    model = models.scripted([runaway, GOOD])
    result = Stabilizer(model, Invoice, vote=ONE, settings=accord.Settings(max_tokens=256)).run("Extract the invoice.")
    assert result.value is not None and result.value.line_items[0].description == "Desk chair"
    first = result.ballots[0]
    assert first.status == "invalid" and first.error is not None and first.error["type"] == LOOP
    assert first.error["loop"]["runaway"] == "counter" and first.error["loop"]["path"] == "line_items[]"
    again = model.requests[1]
    assert again.settings.max_tokens == 256  # never grown
    assert again.schema.json_schema["properties"]["line_items"]["maxItems"] == 1  # the run began at the first item
    assert again.feedback is not None and again.feedback.kind == "loop"
    assert isinstance(again.input, str) and "the list `line_items` ran away" in again.input


def test_a_cut_inside_a_list_is_asked_again_under_a_bound_not_grown() -> None:
    items = ", ".join(f'{{"description": "{w}", "quantity": 1, "unit_price": "1"}}' for w in ("Chair", "Desk", "Lamp", "Pen"))
    model = models.scripted([Completion(HEAD + items + ', {"descr', "length"), GOOD])
    result = Stabilizer(model, Invoice, vote=ONE, settings=accord.Settings(max_tokens=128)).run("Extract the invoice.")
    assert result.value is not None
    again = model.requests[1]
    assert again.settings.max_tokens == 128 and again.schema.json_schema["properties"]["line_items"]["maxItems"] == 3


def test_a_cut_outside_any_list_is_still_grown() -> None:
    model = models.scripted([Completion('{"vendor": "Brightline and Sons of the North', "length"), GOOD])
    Stabilizer(model, Invoice, vote=ONE, settings=accord.Settings(max_tokens=64)).run("Extract the invoice.")
    assert [r.settings.max_tokens for r in model.requests] == [64, 128]


def test_describe_warns_about_a_list_of_objects_with_no_bound() -> None:
    warned = Stabilizer(models.scripted([]), Invoice).describe()["warnings"]
    assert len(warned) == 1 and warned[0].startswith("line_items: a list of objects with no bound")

    class Bounded(BaseModel):
        line_items: list[LineItem] = Field(max_length=10)
        tags: list[str]  # labels: a loop among them is closed, and they are not objects

    assert "warnings" not in Stabilizer(models.scripted([]), Bounded).describe()


@pytest.mark.model
def test_the_embedded_model_writes_a_bounded_invoice_longer_than_its_default_in_one_uncut_call(local_model) -> None:
    """The invoice with up to five line items is about 260 tokens in the embedded model's indented
    layout; the local default is 256. The first call is sized to the schema (``schema._size``),
    so the answer is not cut and asked again from its first token."""
    import sys
    from pathlib import Path

    from accord.schema._size import answer_tokens

    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        from apps_data.invoices import INSTRUCTION, ITEMS
        from runaway import BoundedInvoice
    finally:
        sys.path[:] = [p for p in sys.path if p != folder]  # the benchmarks folder holds a vllm.py: off the path again
    assert local_model.sizes_max_tokens and local_model.default_max_tokens == 256
    result = Stabilizer(local_model, BoundedInvoice).run(INSTRUCTION + ITEMS[0]["text"])
    first = result.ballots[0]
    assert 256 < first.usage.completion_tokens < answer_tokens(accord.Schema.of(BoundedInvoice).json_schema), first.text
    assert not any((b.error or {}).get("stage") == "truncated" for b in result.ballots) and result.value is not None
