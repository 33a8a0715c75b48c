"""Field roles: decisive fields are voted, prose is carried (schema/_roles, vote/_decisive, run/_box).

The default rule is checked on schemas as applications write them; carrying, labels, the auto
rule and fieldwise voting on scripted and function backends (the vote does not depend on a model).
"""

from __future__ import annotations

import itertools
from datetime import date
from decimal import Decimal
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import accord
from accord.read._canonical import canonical_form, canonical_key
from accord.schema._roles import parse, render, roles_of


class Ticket(BaseModel):
    category: Literal["billing", "bug", "account", "other"]
    priority: int = Field(ge=1, le=5)
    needs_human: bool
    customer_name: str
    order_number: str
    tags: list[str]
    summary: str


class Line(BaseModel):
    description: str
    quantity: int
    unit_price: Decimal


class Invoice(BaseModel):
    vendor: str
    invoice_number: str
    issued: date
    due: date
    currency: Literal["EUR", "USD", "GBP"]
    lines: list[Line]
    total: Decimal
    notes: str | None = None


class Profile(BaseModel):
    name: str
    birth_date: date
    city: str
    employer: str
    skills: list[str]
    languages: list[str]
    bio: str


class Action(BaseModel):
    owner: str
    due: date | None
    task: str


class Meeting(BaseModel):
    title: str
    held_on: date
    attendees: list[str]
    decisions: list[str]
    action_items: list[Action]
    summary: str


def test_the_default_rule_tells_decisions_from_prose_on_application_schemas() -> None:
    assert accord.Schema.of(Ticket).describe()["roles"] == {
        "category": "decisive", "priority": "decisive", "needs_human": "decisive", "customer_name": "auto",
        "order_number": "auto", "tags[]": "auto (a set of labels)", "summary": "prose",
    }
    assert accord.Schema.of(Invoice).describe()["roles"] == {
        "vendor": "auto", "invoice_number": "auto", "issued": "decisive", "due": "decisive", "currency": "decisive",
        "lines[].description": "prose", "lines[].quantity": "decisive", "lines[].unit_price": "decisive",
        "total": "decisive", "notes": "prose",
    }
    assert accord.Schema.of(Profile).describe()["roles"] == {
        "name": "auto", "birth_date": "decisive", "city": "auto", "employer": "auto",
        "skills[]": "auto (a set of labels)", "languages[]": "auto (a set of labels)", "bio": "prose",
    }
    assert accord.Schema.of(Meeting).describe()["roles"] == {
        "title": "auto", "held_on": "decisive", "attendees[]": "auto", "decisions[]": "auto",
        "action_items[].owner": "auto", "action_items[].due": "decisive", "action_items[].task": "prose", "summary": "prose",
    }


def test_constraints_make_a_string_decisive_and_the_root_is_never_prose() -> None:
    class Shapes(BaseModel):
        code: str = Field(pattern=r"^[A-Z]{3}$")
        email_note: str = Field(json_schema_extra={"format": "email"})
        short_note: str = Field(max_length=40)
        long_note: str = Field(max_length=4000)
        summary_kind: Literal["long", "short"]

    roles = accord.Schema.of(Shapes).describe()["roles"]
    assert roles == {"code": "decisive", "email_note": "decisive", "short_note": "decisive", "long_note": "prose",
                     "summary_kind": "decisive"}
    assert accord.Schema.of(str).describe()["roles"] == {"$": "decisive"}
    assert accord.Schema.of(Literal["a", "b"]).describe()["roles"] == {"$": "decisive"}
    assert accord.Schema.of(accord.Regex(r"\d+")).describe()["roles"] == {"$": "decisive"}


def test_names_are_read_by_their_last_word_in_any_case_convention() -> None:
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in
              ("shortSummary", "task_description", "Reason-Text", "reason_code", "summary_id", "notes")}}
    roles = roles_of(schema).describe()
    assert roles == {"shortSummary": "prose", "task_description": "prose", "Reason-Text": "prose",
                     "reason_code": "auto", "summary_id": "auto", "notes": "prose"}


def test_the_users_word_wins_by_annotation_and_by_vote_roles() -> None:
    class Said(BaseModel):
        summary: accord.Decisive[str]
        title: accord.Prose[str]
        line: accord.Prose[Line]

    roles = accord.Schema.of(Said).describe()["roles"]
    assert roles["summary"] == "decisive" and roles["title"] == "prose"
    assert roles["line.quantity"] == roles["line.unit_price"] == roles["line.description"] == "prose"
    dict_schema = Ticket.model_json_schema()
    overridden = accord.Schema.of(dict_schema).roles({"summary": "decisive", "customer_name": "prose"}).describe()
    assert overridden["summary"] == "decisive" and overridden["customer_name"] == "prose"
    with pytest.raises(accord.ConfigError, match="does not have"):
        accord.Stabilizer(accord.models.scripted(["{}"]), dict_schema, vote=accord.Vote(roles={"summry": "prose"}))
    with pytest.raises(accord.ConfigError, match="prose"):
        accord.Vote(roles={"summary": "maybe"})
    with pytest.raises(accord.ConfigError, match="x-accord-role"):
        roles_of({"type": "object", "properties": {"a": {"type": "string", "x-accord-role": "vital"}}})


@pytest.mark.parametrize("path", ["summary", "lines[].description", "[]", "grid[][]", "a.b.c", "$"])
def test_paths_render_as_they_parse(path: str) -> None:
    assert render(parse(path)) == path


def ticket(summary: str, *, category: str = "billing", tags: tuple[str, ...] = ("refund", "card"), name: str = "Ana Ruiz") -> str:
    import json

    return json.dumps({"category": category, "priority": 4, "needs_human": True, "customer_name": name,
                       "order_number": "A-1042", "tags": list(tags), "summary": summary})


def test_a_summary_worded_anew_on_every_call_never_blocks_the_vote() -> None:
    summaries = ["Charged twice in May.", "The customer was billed twice for May.", "Double charge, wants a refund.",
                 "Refund request for a duplicate charge.", "Billed two times."]
    result = accord.Stabilizer(accord.models.scripted([ticket(s) for s in summaries]), Ticket).run("Ticket from Ana Ruiz ...")
    assert result.stable and result.stopped_because == "unanimous" and result.calls == 3
    assert result.value is not None and result.value.summary == summaries[0]  # the first ballot's (slot 0)
    assert result.voted == ("category", "priority", "needs_human", "customer_name", "order_number", "tags[]")
    assert result.carried == {"summary": 3}
    assert len(result.votes) == 1 and "summary" not in result.key
    assert all(b.key == result.key for b in result.ballots)
    assert result.to_dict()["carried"] == {"summary": 3} and result.to_dict()["voted"][0] == "category"


def test_fieldwise_voting_carries_prose_too() -> None:
    texts = [ticket("One.", tags=("refund",)), ticket("Two, said otherwise."), ticket("Three."), ticket("Four.")]
    result = accord.Stabilizer(accord.models.scripted(texts), Ticket, vote=accord.Vote(fieldwise=True)).run("Ticket ...")
    assert result.stable and result.meta["fieldwise"] == "assembled"
    assert result.value is not None and result.value.tags == ["refund", "card"] and result.value.summary == "Two, said otherwise."
    assert "summary" not in (result.field_agreement or {})


def test_a_decision_that_differs_still_splits_the_vote() -> None:
    texts = [ticket("Same words.", category=c) for c in ("billing", "bug", "account", "other", "billing")]
    with pytest.raises(accord.NoConsensus) as caught:
        accord.Stabilizer(accord.models.scripted(texts), Ticket).run("Ticket ...")
    assert caught.value.result is not None and len(caught.value.result.votes) == 4


def test_tags_in_another_order_or_case_are_one_answer_but_other_tags_are_not() -> None:
    texts = [ticket("a", tags=("Refund", "card")), ticket("b", tags=("card", "refund")), ticket("c", tags=(" CARD", "refund"))]
    result = accord.Stabilizer(accord.models.scripted(texts), Ticket).run("Ticket ...")
    assert result.stable and result.calls == 3 and len(result.votes) == 1
    assert result.value is not None and result.value.tags == ["Refund", "card"]  # as the first ballot wrote them
    texts = [ticket("a", tags=("refund",)), ticket("b", tags=("refund", "card")), ticket("c", tags=("card",))] * 2
    with pytest.raises(accord.NoConsensus):
        accord.Stabilizer(accord.models.scripted(texts), Ticket).run("Ticket ...")


def test_a_name_copied_from_the_input_is_voted_however_long_and_a_composed_text_turns_prose() -> None:
    prompt = "Ticket from Maria de los Angeles Ruiz Gomez: I was charged twice."
    long_name = "Maria de los Angeles Ruiz Gomez"
    texts = [ticket("x", name=long_name), ticket("y", name=long_name.upper()), ticket("z", name="Maria Ruiz")]
    with pytest.raises(accord.NoConsensus):  # two names: a real disagreement on a decisive field
        accord.Stabilizer(accord.models.scripted(texts * 2), Ticket).run(prompt)
    texts = [ticket("x", name="Ana"), ticket("y", name="a customer who writes from a Gmail address"),
             ticket("z", name="a customer who was charged twice")]
    result = accord.Stabilizer(accord.models.scripted(texts), Ticket).run("Ticket: I was charged twice.")
    assert result.stable and "customer_name" in result.carried and result.carried["customer_name"] == 3
    assert "customer_name" not in result.voted
    assert all(b.key == result.key for b in result.ballots)  # every ballot's key after the field turned prose


class Summary(BaseModel):
    label: Literal["a", "b"]
    note: str


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=60), min_size=5, max_size=5), st.permutations(range(5)))
def test_prose_is_never_the_reason_for_no_consensus_and_the_order_of_ballots_does_not_matter(notes: list[str], order: list[int]) -> None:
    import json

    texts = [json.dumps({"label": "a", "note": notes[i]}) for i in order]
    result = accord.Stabilizer(accord.models.scripted(texts), Summary).run("?")
    assert result.stable and result.votes == {'{"label":"a"}': result.calls}


def test_a_schema_without_prose_votes_exactly_as_before() -> None:
    class Person(BaseModel):
        name: str
        age: int

    schema = accord.Schema.of(Person)
    texts = ['{"name": "Ann", "age": 30}', '{"name": "Ann", "age": 31}', '{"name": "Ann", "age": 30}', '{"name": "Ann", "age": 30}']
    result = accord.Stabilizer(accord.models.scripted(texts), Person).run("?")
    assert result.key == canonical_key(canonical_form({"name": "Ann", "age": 30}, schema.json_schema))
    assert result.carried == {} and result.voted == ("name", "age")
    assert set(result.votes) == {'{"age":30,"name":"Ann"}', '{"age":31,"name":"Ann"}'}


def test_a_function_model_with_a_drifting_summary_gets_an_answer_under_the_default_policy() -> None:
    count = itertools.count()

    def my_llm(prompt: str) -> str:
        return ticket(f"Summary number {next(count)} of this ticket, in other words.")

    result = accord.Stabilizer(accord.models.function(my_llm, name="drifting"), Ticket).run("Ticket ...")
    assert result.stable and result.carried == {"summary": 3}


def carried_keys(result: accord.Result[Any]) -> set[str]:
    return set(result.carried)
