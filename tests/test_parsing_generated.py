"""Generated readings (issue 33): every form of a value, wrapped in what makes it no answer, read
by every reader at every depth, is refused or read as the exact value meant, never another.

The strategies render every member, number form, yes/no spelling, list and object, then compose
around them: negations, hedges and unknowns before and after; ordinals and ranks for counts;
bools for numbers and numbers for bools; lists spelled in strings; a second value as a draft, an
example or a correction. Each text is read as the whole answer, a field of an object, a field of
an item of a list and a field of a nested object, leniently and strictly (``Extract(strict=True)``).

A small number of examples runs in the suite (a few seconds); set ``ACCORD_RULES_EXAMPLES`` for more:

    ACCORD_RULES_EXAMPLES=2000 .venv/bin/python -m pytest -q tests/test_parsing_generated.py
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import accord
from accord.read._canonical import canonical_form, canonical_key
from accord.read._exact import exact_form
from accord.read._read import STRICT, Reading, read

EXAMPLES = int(os.environ.get("ACCORD_RULES_EXAMPLES", "20"))
RULES = settings(max_examples=EXAMPLES, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
REFUSE = "refuse"
MEMBERS = ["billing", "bug", "feature", "account", "other"]
Category = Literal["billing", "bug", "feature", "account", "other"]


class Ticket(BaseModel):
    category: Category
    priority: int
    amount: Decimal
    price: float
    urgent: bool
    tags: list[str]


class Queue(BaseModel):
    tickets: list[Ticket]


class Case(BaseModel):
    ticket: Ticket


SCHEMAS = {name: accord.Schema(source) for name, source in
           {"Ticket": Ticket, "Queue": Queue, "Case": Case, "category": Category, "priority": int, "amount": Decimal,
            "price": float, "urgent": bool}.items()}
BASE = {"category": "other", "priority": 3, "amount": "10.00", "price": 2.5, "urgent": False, "tags": ["x"]}

# -- values and the forms that say them -------------------------------------------------------------

words = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=2, max_size=8).filter(lambda w: w not in ("or", "and", "no", "not"))
members = st.sampled_from(MEMBERS)
counts = st.integers(1, 10**7)
cents = st.integers(0, 10**12).map(lambda c: Decimal(c).scaleb(-2))


def member_forms(m: str) -> list[str]:
    return [m, m.upper(), m.title(), f"**{m}**", f"'{m}'", f"{m}.", f"Category: {m}"]


def count_forms(n: int) -> list[str]:
    return [str(n), f"{n:,}", f"The answer is {n}.", f"{n} items", f"${n}"]


def amount_forms(d: Decimal) -> list[str]:
    return [f"{d}", f"{d:,}", f"${d:,}", f"€{d}", f"EUR {d}", f"{d} USD", f"The total is ${d:,}."]


def bool_forms(b: bool) -> list[str]:
    return ["true", "True", "yes", "Yes.", "YES", "y", "**yes**"] if b else ["false", "False", "no", "No.", "NO", "n"]


NEGATIONS = [("not ", ""), ("Not ", "."), ("definitely not ", ""), ("It isn't ", ""), ("", " is not it")]
HEDGES = [("I think ", ""), ("Could be ", ""), ("Probably ", ""), ("seems like ", ""), ("Maybe ", ""), ("I'd say ", ""),
          ("", ", I guess"), ("", " (not sure)"), ("", ", probably"), ("", "?"), ("", ", I think"), ("It might be ", "")]
UNKNOWNS = ["no idea", "No clue", "no way to tell", "no information", "unknown", "not sure", "I don't know", "can't tell",
            "hard to say", "no way of knowing"]
SUFFIX = {1: "st", 2: "nd", 3: "rd"}


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else SUFFIX.get(n % 10, 'th')}"


# -- the readers: every depth, strict and lenient ---------------------------------------------------


def placed(field: str, said: Any, meant: Any) -> list[tuple[str, str, Any]]:
    """``(schema, text, meant data or REFUSE)`` for a field's text read at every depth."""
    whole = [(field, said if isinstance(said, str) else json.dumps(said), meant)] if field != "tags" else []
    value = REFUSE if meant == REFUSE else {**BASE, field: meant}
    other = {**BASE, "category": "bug"}
    return [*whole, ("Ticket", json.dumps({**BASE, field: said}), value),
            ("Queue", json.dumps({"tickets": [other, {**BASE, field: said}]}), REFUSE if meant == REFUSE else {"tickets": [other, value]}),
            ("Case", json.dumps({"ticket": {**BASE, field: said}}), REFUSE if meant == REFUSE else {"ticket": value})]


def key_of(name: str, data: Any) -> str:
    schema = SCHEMAS[name]
    value = schema.validate(data)
    return canonical_key(canonical_form(exact_form(schema, value, schema.dump(value)), schema.json_schema))


def never_wrong(cases: list[tuple[str, str, Any]]) -> None:
    """Each text read by both readers is refused, or is exactly the value meant."""
    for name, text, meant in cases:
        for policy in (accord.Extract(), STRICT):
            reading = read(text, SCHEMAS[name], policy=policy)
            if not isinstance(reading, Reading):
                continue
            assert meant != REFUSE, (name, text, "read as", reading.data)
            assert reading.key == key_of(name, meant), (name, text, "read as", reading.data, "meant", meant)


def around(forms: list[str], field: str, wraps: list[tuple[str, str]]) -> list[tuple[str, str, Any]]:
    """Each form with words around it that make it no answer. A form that is a sentence of its own
    (``The answer is 7.``, ``Category: bug``) is wrapped with nothing after it: the words after a
    sentence's end are another sentence, read as the rules say (docs/parsing.md)."""
    return [case for form in forms for before, after in wraps if not (after and _sentence(form))
            for case in placed(field, f"{before}{form}{after}", REFUSE)]


def _sentence(form: str) -> bool:
    return form.rstrip("*").endswith((".", "!")) or ":" in form or " " in form.strip()


# -- the properties ---------------------------------------------------------------------------------


@RULES
@given(members, counts, cents, st.booleans(), st.data())
def test_negations_hedges_and_unknowns_before_and_after_are_refused(m, n, d, b, data):
    pick = data.draw(st.sampled_from(["category", "priority", "amount", "price", "urgent"]))
    forms = {"category": member_forms(m), "priority": count_forms(n), "amount": amount_forms(d), "price": amount_forms(d),
             "urgent": bool_forms(b)}[pick]
    form = data.draw(st.sampled_from(forms))
    never_wrong(around([form], pick, [*NEGATIONS, *HEDGES]) if pick != "urgent" else around([form], pick, HEDGES))
    unknown = data.draw(st.sampled_from(UNKNOWNS))
    never_wrong(placed(pick, unknown, REFUSE) + placed(pick, f"{form} ({unknown})", REFUSE))


@RULES
@given(members, counts, cents, st.booleans(), st.data())
def test_every_form_of_a_value_reads_as_that_value_or_is_refused(m, n, d, b, data):
    meant = {"category": m, "priority": n, "amount": str(d), "price": float(d), "urgent": b}
    for field, forms in (("category", member_forms(m)), ("priority", count_forms(n)), ("amount", amount_forms(d)),
                         ("price", amount_forms(d)), ("urgent", bool_forms(b))):
        form = data.draw(st.sampled_from(forms))
        never_wrong(placed(field, form, meant[field]))
    never_wrong(placed("urgent", b, b) + placed("amount", float(d), str(Decimal(repr(float(d))))))


@RULES
@given(counts)
def test_ordinals_and_ranks_are_no_counts(n):
    for said in (ordinal(n), f"{ordinal(n)} highest", f"#{n}", f"ranked {n}", f"{ordinal(n)} place", f"rank {n}"):
        never_wrong(placed("priority", said, REFUSE))


@RULES
@given(st.booleans(), st.sampled_from([0, 1, 1.0, 0.0, "1", "0", "on", "off"]))
def test_bools_for_numbers_and_numbers_for_bools_are_refused(b, number):
    for field in ("priority", "amount", "price"):
        never_wrong([case for case in placed(field, b, REFUSE) if case[0] != field])  # (the whole answer "true" has no number)
    never_wrong(placed("urgent", number, REFUSE))


@RULES
@given(st.lists(words, min_size=1, max_size=4, unique=True), st.data())
def test_a_list_spelled_in_a_string_is_the_list_it_spells_or_refused(tags, data):
    spelled = [", ".join(tags), "; ".join(tags), repr(tags), json.dumps(tags), "\n".join(f"- {t}" for t in tags),
               "(" + ", ".join(tags) + ")"]
    form = data.draw(st.sampled_from(spelled))
    never_wrong(placed("tags", form, tags))
    if len(tags) > 1:
        for joined in (" and ".join(tags), " or ".join(tags), ", ".join(tags[:-1]) + " and " + tags[-1], "\n".join(tags)):
            never_wrong(placed("tags", joined, REFUSE) if "," in joined or "\n" in joined else placed("tags", joined, [joined]))


MARKED = ["A first guess would be {other} but on reflection my final answer is:\n{meant}", "Example format: {other}. My answer: {meant}",
          "{other}\n\nCorrection: {meant}", "Draft:\n```json\n{other}\n```\nFinal answer:\n```json\n{meant}\n```"]
UNMARKED = ["{other}\n\n{meant}", "{meant}\n(Example format: {other})", "Final answer: {meant}\nActually: {other}",
            "I first wrote {other}.\n{meant}", "Final answer: {other}\nFinal answer: {meant}", "{meant} For example, {other}"]


@RULES
@given(members, members, counts, counts, st.booleans(), st.data())
def test_a_draft_an_example_or_a_correction_is_never_the_value(m1, m2, n1, n2, b, data):
    meant = {**BASE, "category": m1, "priority": n1, "urgent": b}
    other = {**BASE, "category": m2, "priority": n2, "urgent": not b}
    depth = data.draw(st.sampled_from(["Ticket", "Queue", "Case"]))

    def at(value: dict[str, Any]) -> Any:
        return value if depth == "Ticket" else {"tickets": [value]} if depth == "Queue" else {"ticket": value}

    for form in MARKED:  # the answer marked final, or refused
        never_wrong([(depth, form.format(other=json.dumps(at(other)), meant=json.dumps(at(meant))), at(meant))])
    for form in UNMARKED:  # no answer marked final: refused
        never_wrong([(depth, form.format(other=json.dumps(at(other)), meant=json.dumps(at(meant))), REFUSE)])
    never_wrong([(depth, f"{json.dumps(at(meant))}\nTo repeat: {json.dumps(at(meant))}", at(meant))])  # one value, twice
    # a second value inside a field's text: several members, numbers or yes/no answers
    second = data.draw(st.sampled_from([(", correction: ", ""), (". Final answer: ", ""), (" (or ", ")"), ("\n\nActually ", "")]))
    for field, first, then in (("category", m1, m2), ("priority", str(n1), str(n2)), ("urgent", "yes" if b else "no", "no" if b else "yes")):
        if first != then:
            never_wrong(placed(field, f"{first}{second[0]}{then}{second[1]}", REFUSE))
