"""A loop's retry decodes under a grammar that bounds the field it looped in (``schema._bounds``):
the bound on the loops the embedded model writes, through ``$ref``, ``Optional`` and nested
items; the run loop hands it to the backend and still validates against the run's own schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

import accord
from accord import Completion, Retry, Schema, Stabilizer, Vote, models
from accord.read._loops import LOOP, find_loop
from accord.schema._bounds import _items_at, _string_length_at, bounded


class Ticket(BaseModel):
    category: str
    tags: list[str]
    summary: str


class Item(BaseModel):
    description: str
    amount: float


class Invoice(BaseModel):
    number: str
    items: list[Item]
    note: str | None = None


TICKET = Schema(Ticket)
SENTENCE = "I'm disputing with my bank now. "


def bound_of(schema: Schema[Any], text: str) -> dict[str, Any] | None:
    loop = find_loop(text, early=True)
    assert loop is not None, text
    tighter = bounded(schema, text, loop)
    return None if tighter is None else tighter.json_schema


def test_a_string_that_loops_is_bounded_to_its_text_up_to_the_first_stretch() -> None:
    head = '{"category": "billing", "tags": ["refund"], "summary": "Charged twice. '
    found = bound_of(TICKET, head + SENTENCE * 3)
    # The periodic tail begins at the ". " that ends "Charged twice. " (it repeats too): the bound
    # ends at "now", the first stretch as the loop finder aligned it.
    assert found is not None and found["properties"]["summary"]["maxLength"] == len("Charged twice. " + SENTENCE) - 2
    assert found["title"] == "Ticket" and "maxItems" not in found["properties"]["tags"]
    assert "maxLength" not in (TICKET.json_schema or {})["properties"]["summary"]  # the run's schema is untouched


def test_a_list_item_over_and_over_is_bounded_to_the_items_written_before_the_loop() -> None:
    head = '{"category": "technical", "tags": ["setup", "tutorial", '
    found = bound_of(TICKET, head + '"tutorial", ' * 8)
    assert found is not None and found["properties"]["tags"]["maxItems"] == 2  # "setup", "tutorial"
    assert "maxLength" not in found["properties"]["summary"]


def test_a_loop_in_nested_items_behind_a_ref_bounds_that_path_only() -> None:
    schema = Schema(Invoice)
    head = '{"number": "A-1", "items": [{"description": "Widget", "amount": 1.0}, {"description": "'
    found = bound_of(schema, head + "Widget and bolt. " * 5)
    assert found is not None
    inlined = found["properties"]["items"]["items"]
    assert "$ref" not in inlined and inlined["properties"]["description"]["maxLength"] == len("Widget and bolt. ")
    assert "maxLength" not in found["$defs"]["Item"]["properties"]["description"]  # other references keep theirs
    items = '{"number": "A-1", "items": ['
    row = '{"description": "Widget", "amount": 1.0}, '
    found = bound_of(schema, items + row * 9)
    assert found is not None and found["properties"]["items"]["maxItems"] == 1


def test_a_loop_across_whole_items_bounds_the_array_it_began_in() -> None:
    # The embedded model's invoices: the same line item over and over, the loop found from a number on.
    text = '{"number": "A-1", "items": [{"description": "Desk", "amount": 2.0}, ' + '{"description": "Pen", "amount": 1.0}, ' * 8
    loop = find_loop(text, early=True)
    assert loop is not None and loop.path == "items[].amount"
    found = bound_of(Schema(Invoice), text)
    assert found is not None and found["properties"]["items"]["maxItems"] == 2  # "Desk", then "Pen" once


def test_a_string_a_pattern_bounds_already_is_left_alone_and_a_union_bounds_its_string_branch() -> None:
    price = {"anyOf": [{"type": "number"}, {"type": "string", "pattern": "^-?\\d+(\\.\\d+)?$"}]}
    decimal = Schema({"type": "object", "properties": {"price": price}})
    assert bound_of(decimal, '{"price": "' + "10.00.0.1" * 10) is None
    either = Schema({"type": "object", "properties": {"note": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}})
    found = bound_of(either, '{"note": "' + "Pay soon please. " * 5)
    assert found is not None and found["properties"]["note"]["anyOf"] == [{"type": "integer"}, {"type": "string", "maxLength": 17}]


def test_an_optional_string_is_bounded_in_its_branch_that_is_not_null() -> None:
    head = '{"number": "A-1", "items": [], "note": "'
    found = bound_of(Schema(Invoice), head + "Pay soon please. " * 5)
    assert found is not None
    branches = found["properties"]["note"]["anyOf"]
    assert [b.get("maxLength") for b in branches] == [len("Pay soon please. "), None]


def test_nothing_is_bounded_where_no_bound_fits() -> None:
    assert bound_of(TICKET, "Well. " + "I think so. " * 8) is None  # outside JSON
    strict = Schema({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 5}}})
    assert bound_of(strict, '{"tags": ["a", ' + '"tutorial", ' * 9) is None  # the bound would break minItems
    wrong = Schema({"type": "object", "properties": {"other": {"type": "string"}}})
    assert bound_of(wrong, '{"summary": "' + SENTENCE * 3) is None  # a path the schema lacks


def looped(text: str) -> Completion:
    return Completion(text, LOOP, usage=accord.Usage(prompt_tokens=50, completion_tokens=40))


GOOD = '{"category": "billing", "tags": ["refund"], "summary": "Charged twice."}'


def test_the_retry_carries_the_bound_and_the_next_loop_adds_its_own() -> None:
    tags = '{"category": "technical", "tags": ["setup", ' + '"tutorial", ' * 8
    summary = '{"category": "billing", "tags": ["refund"], "summary": "' + SENTENCE * 3
    model = models.scripted([looped(tags), looped(summary), "not json at all", GOOD])
    result = Stabilizer(model, Ticket, vote=Vote(k=1), retry=Retry(attempts=4, close_prose=False)).run("Ticket: charged twice.")
    assert result.value is not None and result.value.summary == "Charged twice."
    schemas = [request.schema for request in model.requests]
    assert schemas[0].json_schema == TICKET.json_schema
    second, third, fourth = (s.json_schema or {} for s in schemas[1:])
    assert second["properties"]["tags"]["maxItems"] == 2 and "maxLength" not in second["properties"]["summary"]
    assert third["properties"]["tags"]["maxItems"] == 2 and third["properties"]["summary"]["maxLength"] == len(SENTENCE)
    assert fourth == third  # an invalid (not looped) retry keeps the slot's bounds


def test_a_bounded_retry_is_still_validated_against_the_run_s_schema() -> None:
    class Note(BaseModel):
        summary: str = Field(min_length=2)

    text = '{"summary": "' + "ok. " * 20
    model = models.scripted([looped(text), '{"summary": "longer than the bound, and valid"}'])
    result = Stabilizer(model, Note, vote=Vote(k=1), retry=Retry(attempts=2, close_prose=False)).run("q")
    assert (model.requests[1].schema.json_schema or {})["properties"]["summary"]["maxLength"] == 4  # "ok. "
    assert result.value is not None and result.value.summary == "longer than the bound, and valid"
    floor = Schema({"type": "object", "properties": {"summary": {"type": "string", "minLength": 20}}})
    assert bound_of(floor, text) is None  # a bound under the field's own minLength is not set


def test_the_counts_read_past_escaped_quotes_and_brackets_inside_strings() -> None:
    text = r'{"tags": ["a \"[b\"]", "c, d", "e'
    assert _items_at(text, len(text)) == 3
    assert _string_length_at(text, len(text)) == 1
    quoted = r'{"summary": "say \"hi\" twice'
    assert _string_length_at(quoted, len(quoted)) == len('say "hi" twice')
    unicode = r'{"summary": "caf\u00e9 \\ ok'
    assert _string_length_at(unicode, len(unicode)) == len("café \\ ok")  # each escape is the one character it stands for
    assert _string_length_at('{"a": "closed"', 14) is None and _items_at('{"a": 1', 7) is None


def test_lists_of_labels_are_bounded_in_a_server_s_grammar_to_their_choices_or_eight():
    from typing import Literal

    from accord.backends.openai import _wire as wire
    from accord.schema._bounds import LABELS, bounded_labels

    class Ticket(BaseModel):
        tags: list[str]
        kinds: list[Literal["bug", "billing", "account"]] | None = None
        capped: list[str] = Field(default_factory=list, max_length=20)

    schema = Schema(Ticket)
    bounded_ = bounded_labels(schema, frozenset({"tags[]", "kinds[]", "capped[]"}))
    properties = bounded_.json_schema["properties"]
    assert properties["tags"]["maxItems"] == LABELS == 8
    assert [b.get("maxItems") for b in properties["kinds"]["anyOf"]] == [3, None]  # its three choices; null stays null
    assert properties["capped"]["maxItems"] == 20  # the schema's own bound is kept
    assert bounded_labels(schema, frozenset()) is schema and schema.json_schema["properties"]["tags"].get("maxItems") is None
    sent = wire.format_for(wire.grammar_schema(schema, frozenset({"tags[]"})))[0]
    assert sent["json_schema"]["schema"]["properties"]["tags"]["maxItems"] == 8  # what response_format carries
    assert schema.validate({"tags": [str(n) for n in range(12)]}).tags[11] == "11"  # still read by the run's own schema
