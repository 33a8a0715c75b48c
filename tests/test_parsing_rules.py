"""The reading rules of issue 33, held by every reader: one answer or none, a closed list of
coercions (each recorded), numbers that keep their digits.

Every reading case the issue names refuses or returns the meant value, lenient and strict; the
refusal corpus (tests/data/refusals/) gives 0 wrong values; docs/parsing.md lists the table of
``read/_coercions`` as it is.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import accord
from accord.read._canonical import canonical_form, canonical_key
from accord.read._coercions import ALLOWED, REFUSED
from accord.read._exact import exact_form
from accord.read._read import STRICT, Misreading, Reading, read

ROOT = Path(__file__).resolve().parents[1]
REFUSE = "refuse"
Category = Literal["billing", "bug", "other", "feature"]


class Ticket(BaseModel):
    category: Category
    priority: int
    urgent: bool = False


class Answer(BaseModel):
    answer: int


class Tags(BaseModel):
    tags: list[str]


class Invoice(BaseModel):
    total: Decimal
    currency: Literal["USD", "EUR"] = "USD"


def _ticket(**changed: Any) -> str:
    return json.dumps({"category": "bug", "priority": 2, **changed})


# (schema, text, the meant value as JSON data or REFUSE, a coercion the reading must record)
ISSUE: list[tuple[Any, str, Any, str | None]] = [
    # several answers in one text: the first is never taken
    (Ticket, 'Let me think. A first guess would be {"category": "other", "priority": 1} but on reflection it is '
             'a charge on the card, so my final answer is:\n{"category": "billing", "priority": 4}',
     {"category": "billing", "priority": 4, "urgent": False}, "the answer marked final (1 other value before it)"),
    (Answer, 'Example format: {"answer": 0}. My answer: {"answer": 42}', {"answer": 42}, None),
    (Answer, '{"answer": 7}\n\nCorrection: {"answer": 8}', {"answer": 8}, None),
    (Answer, '{"answer": 7}\n\n{"answer": 8}', REFUSE, None),  # an object answer with two objects, as a scalar with two numbers
    (int, "7, then 8", REFUSE, None),
    # unknowns never become booleans
    *[(bool, said, REFUSE, None) for said in ("no idea", "No clue", "no way to tell", "no information")],
    *[(Ticket, _ticket(urgent=said), REFUSE, None) for said in ("no idea", "No clue", "no way to tell", "no information")],
    # hedges
    *[(Category, said, REFUSE, None) for said in ("Could be billing", "I think billing", "billing, I guess", "seems like billing",
                                                   "billing (not sure)")],
    *[(Ticket, _ticket(category=said), REFUSE, None) for said in ("Could be billing", "I think billing", "billing, I guess",
                                                                   "seems like billing", "billing (not sure)")],
    # counts from words that are not counts
    (Ticket, _ticket(priority="2nd highest"), REFUSE, None),
    (Ticket, _ticket(priority=True), REFUSE, None),
    # a string that holds a list: the list it spells, recorded
    (Tags, json.dumps({"tags": "android, crash, export"}), {"tags": ["android", "crash", "export"]}, "as the list it spells"),
    (Tags, json.dumps({"tags": "['a', 'b']"}), {"tags": ["a", "b"]}, "as the list it spells"),
    # Decimal: every number form float gets
    *[(Invoice, json.dumps({"total": said}), {"total": value, "currency": "USD"}, "currency dropped")
      for said, value in (("$1,234.50", "1234.50"), ("€1234.50", "1234.50"), ("EUR 1234.5", "1234.5"))],
    *[(Decimal, said, value, "currency dropped") for said, value in (("$1,234.50", "1234.50"), ("€1234.50", "1234.50"),
                                                                       ("EUR 1234.5", "1234.5"))],
    # case folds are recorded like any coercion
    (Ticket, _ticket(category="BUG"), {"category": "bug", "priority": 2, "urgent": False}, "'BUG' as the member 'bug'"),
    (Ticket, _ticket(category="Bug"), {"category": "bug", "priority": 2, "urgent": False}, "'Bug' as the member 'bug'"),
    (Invoice, json.dumps({"total": "12.00", "currency": "usd"}), {"total": "12.00", "currency": "USD"}, "'usd' as the member 'USD'"),
]


def _key(schema: accord.Schema[Any], data: Any) -> str:
    value = schema.validate(data)
    return canonical_key(canonical_form(exact_form(schema, value, schema.dump(value)), schema.json_schema))


@pytest.mark.parametrize("policy", [None, STRICT], ids=["lenient", "strict"])
@pytest.mark.parametrize(("source", "text", "meant", "fix"), ISSUE, ids=[f"{n}" for n in range(len(ISSUE))])
def test_every_reading_case_of_the_issue_refuses_or_returns_the_meant_value(source, text, meant, fix, policy):
    schema = accord.Schema(source)
    reading = read(text, schema) if policy is None else read(text, schema, policy=policy)
    if meant == REFUSE:
        assert isinstance(reading, Misreading), (text, reading)
        assert reading.errors[0]["msg"]  # with feedback that says why
        return
    if policy is STRICT and isinstance(reading, Misreading):
        return  # strict reading turns every repair off: refused is never wrong
    assert isinstance(reading, Reading), (text, reading)
    assert reading.key == _key(schema, meant), (text, reading.data, meant)
    if fix is not None and policy is None:
        assert any(fix in c["fix"] for c in reading.coercions), reading.coercions


def test_the_lenient_reading_reads_each_meant_value_of_the_issue():
    """Not refused, where a stated rule reads it: the marked final answer, the list spelled, the Decimal forms."""
    for source, text, meant, _ in ISSUE:
        if meant != REFUSE:
            assert isinstance(read(text, accord.Schema(source)), Reading), text


def test_decimal_votes_by_value_and_numbers_keep_their_digits():
    schema = accord.Schema(Invoice)
    assert read('{"total": "1234.50"}', schema).key == read('{"total": 1234.5}', schema).key  # one amount
    amounts = [read(json.dumps({"total": t}), schema).key for t in ("10000000.01", "10000000.02", "10000000.04")]
    assert len(set(amounts)) == 3
    floats = [read(t, accord.Schema(float)).key for t in ("10000000.01", "10000000.02", "10000000.04")]
    assert len(set(floats)) == 3
    exact = read('{"total": 12345678901234567.89}', schema)  # a JSON number's digits, every one
    assert isinstance(exact, Reading) and exact.value.total == Decimal("12345678901234567.89")
    whole = read("12345678901234567.89", accord.Schema(Decimal))
    assert isinstance(whole, Reading) and whole.value == Decimal("12345678901234567.89")


def test_a_vote_of_amounts_that_differ_in_their_last_digit_is_no_unanimous_answer():
    texts = ['{"total": 10000000.01}', '{"total": 10000000.02}', '{"total": 10000000.04}']

    class Total(BaseModel):
        total: float

    model = accord.models.scripted(texts)
    result = accord.Stabilizer(model, schema=Total, vote=accord.Vote(k=3, early_stop=False, on_no_consensus="plurality")).run("total?")
    assert len(result.votes) == 3 and not result.stable
    merged = accord.Stabilizer(accord.models.scripted(texts), schema=Total,
                               vote=accord.Vote(k=3, early_stop=False, float_digits=9)).run("total?")
    assert len(merged.votes) == 1  # the opt-in merges them, as its documentation says


def test_the_ledger_key_of_a_default_vote_is_the_one_it_was():
    from accord.ledger._keys import describe_policy

    stab = accord.Stabilizer(accord.models.scripted(["1"]), schema=int)
    assert describe_policy(stab.policy)["vote"]["float_digits"] == 9  # keys made when 9 was the default still match
    explicit = accord.Stabilizer(accord.models.scripted(["1"]), schema=int, vote=accord.Vote(float_digits=4))
    assert describe_policy(explicit.policy)["vote"]["float_digits"] == 4


def test_docs_list_the_closed_table_of_coercions_and_refusals():
    text = (ROOT / "docs" / "parsing.md").read_text()
    for name in [*ALLOWED, *REFUSED]:
        assert f"`{name}`" in text, f"docs/parsing.md does not list {name!r}"


# -- the refusal corpus -------------------------------------------------------------------------


def _corpus() -> list[dict[str, Any]]:
    folder = ROOT / "tests" / "data" / "refusals"
    sys.path.insert(0, str(folder))
    try:
        import triage
    finally:
        sys.path.remove(str(folder))
    cases = [json.loads(line) for line in (folder / "cases.jsonl").read_text().splitlines() if line.strip()]
    schemas: dict[str, accord.Schema[Any]] = {}
    for case in cases:
        name = case["schema"].split(":")[1]
        case["schema_obj"] = schemas.setdefault(name, accord.Schema(getattr(triage, name)))
    return cases


@pytest.mark.parametrize("policy", [None, STRICT], ids=["lenient", "strict"])
def test_the_refusal_corpus_gives_no_wrong_value(policy):
    cases = _corpus()
    assert len(cases) >= 300
    wrong, missed = [], []
    for case in cases:
        schema = case["schema_obj"]
        reading = read(case["text"], schema) if policy is None else read(case["text"], schema, policy=policy)
        if case["label"] == REFUSE:
            if isinstance(reading, Reading):
                wrong.append((case["id"], case["text"], reading.data))
        elif isinstance(reading, Reading):
            if reading.key != _key(schema, case["label"]):
                wrong.append((case["id"], case["text"], reading.data))
        elif policy is None:
            missed.append((case["id"], case["text"], reading.message))
    assert wrong == []
    assert missed == []  # where a stated rule reads the meant value, the lenient reading reads it
