"""Property tests for the pure stages: normalize, canonicalize, vote, fieldwise assembly."""

from __future__ import annotations

import json
import random
from datetime import date
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, model_validator

import accord
from accord import Schema, Stabilizer, Vote, models
from accord.read._canonical import canonical_form, canonical_key, label
from accord.read._normalize import normalize
from accord.read._read import Reading, read
from accord.vote._decisive import Decisions


class Address(BaseModel):
    city: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


class Person(BaseModel):
    name: Annotated[str, accord.Normalize(str.casefold)]
    age: int = Field(ge=0, le=150)
    score: float
    member: bool
    mood: Literal["happy", "sad", "calm"]
    born: date
    tags: set[str]
    pets: list[str]
    address: Address
    nickname: str | None = None


SCHEMA = Schema.of(Person)
JSON_SCHEMA = SCHEMA.json_schema

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=12), st.sampled_from(["yes", "No", " 3 ", "4.0", "Happy", " calm ", "2024-02-03", "March 5, 2024"]))
json_data = st.recursive(json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(
    st.sampled_from(["name", "age", "score", "member", "mood", "born", "tags", "pets", "address", "city", "zip", "x"]), kids, max_size=5)),
    max_leaves=20)

people = st.builds(
    Person,
    name=st.text(min_size=1, max_size=10).map(str.casefold),
    age=st.integers(0, 150),
    score=st.floats(-1e6, 1e6, allow_nan=False),
    member=st.booleans(),
    mood=st.sampled_from(["happy", "sad", "calm"]),
    born=st.dates(),
    tags=st.sets(st.text(max_size=5), max_size=4),
    pets=st.lists(st.text(max_size=5), max_size=3),
    address=st.builds(Address, city=st.text(max_size=8), zip=st.from_regex(r"^\d{5}$", fullmatch=True)),
    nickname=st.one_of(st.none(), st.text(max_size=6)),
)


@given(json_data)
def test_normalization_is_idempotent(data: Any) -> None:
    once = normalize(data, JSON_SCHEMA, (accord.casefold, accord.collapse_whitespace))
    assert normalize(once, JSON_SCHEMA, (accord.casefold, accord.collapse_whitespace)) == once


@given(json_data)
def test_normalization_never_makes_a_valid_value_invalid(data: Any) -> None:
    try:
        SCHEMA.validate(data)
    except accord.schema._schema.ValidationFailure:
        return
    assert isinstance(read(json.dumps(data), SCHEMA), Reading)


def _rewrite(person: Person, rng: random.Random) -> str:
    """The same value written another way: key order, set order, spacing, number and case forms."""
    data = json.loads(person.model_dump_json())
    data["tags"] = rng.sample(data["tags"], len(data["tags"]))
    if rng.random() < 0.5:
        data["age"] = str(data["age"])
    if rng.random() < 0.5:
        data["mood"] = f" {data['mood'].upper()} "
    if rng.random() < 0.5:
        data["member"] = "yes" if data["member"] else "no"
    items = list(data.items())
    rng.shuffle(items)
    text = json.dumps(dict(items), indent=rng.choice([None, 2]))
    return rng.choice([text, f"```json\n{text}\n```", f"Here you go: {text} Thanks!"])


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(people, st.randoms(use_true_random=False))
def test_canonical_keys_equal_for_equal_values(person: Person, rng: random.Random) -> None:
    first = read(_rewrite(person, rng), SCHEMA)
    second = read(_rewrite(person, rng), SCHEMA)
    assert isinstance(first, Reading) and isinstance(second, Reading)
    assert first.key == second.key
    assert first.value == second.value


class Labelled(BaseModel):
    tags: list[str]
    keywords: set[str]


LABELLED = Schema.of(Labelled)
label_texts = st.lists(st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
                                 st.sampled_from([", ", ",", " ", "", ".", "Billing", "billing", " billing. ", "BILLING", "refund",
                                                  "Refund!", "'refund'"])), max_size=6)


@settings(deadline=None)
@given(label_texts, label_texts)
def test_a_list_of_labels_holds_the_labels_of_its_vote_key_each_once(tags: list[str], keywords: list[str]) -> None:
    """The canonical key of the value, its lists of labels read as labels, is its vote key: no
    item the key makes empty (", "), no duplicate the key drops ("Billing" beside "billing")."""
    reading = read(json.dumps({"tags": tags, "keywords": keywords}), LABELLED)
    assert isinstance(reading, Reading), reading
    decisions = Decisions(LABELLED.roles())
    vote_key = decisions.key(reading.form, reading.key)
    value = reading.value
    as_labels = {"keywords": sorted(label(t) for t in value.keywords), "tags": sorted(label(t) for t in value.tags)}
    assert canonical_key(as_labels) == vote_key
    assert all(as_labels["tags"]) and len(set(as_labels["tags"])) == len(value.tags)
    again = read(value.model_dump_json(), LABELLED)  # the value read again: the same value, the same keys
    assert isinstance(again, Reading) and again.value == value and again.key == reading.key and not again.coercions


@given(st.floats(-1e9, 1e9, allow_nan=False))
def test_float_rounding_groups_transitively(x: float) -> None:
    schema = {"type": "number"}
    a = canonical_key(canonical_form(x, schema, 6))
    assert a == canonical_key(canonical_form(float(json.loads(a)), schema, 6))


answers = st.lists(st.sampled_from(["1", "2", "3", "nope", "2.0", " 3 "]), min_size=1, max_size=7)


@settings(deadline=None)
@given(answers, st.randoms(use_true_random=False))
def test_the_winner_does_not_depend_on_ballot_order(texts: list[str], rng: random.Random) -> None:
    def decide(order: list[str]) -> tuple[Any, ...]:
        stab = Stabilizer(models.scripted(order), schema=int, vote=Vote(k=len(order), early_stop=False, on_no_consensus="plurality"),
                          retry=accord.Retry(attempts=1), prompting=accord.Prompting(schema_in_prompt=False))
        try:
            result = stab.run("q")
        except accord.AccordError as error:
            assert error.result is not None, error  # every error of a run carries its Result
            result = error.result
        return result.key, result.value, result.votes, result.stable

    shuffled = list(texts)
    rng.shuffle(shuffled)
    assert decide(texts) == decide(shuffled)


class Item(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class Order(BaseModel):
    id: int
    items: list[Item]
    labels: set[str]
    note: str | None = None
    total: float = Field(ge=0)

    @model_validator(mode="after")
    def labels_need_a_note(self) -> Order:  # a cross-field rule an assembly can break
        if self.labels and self.note is None:
            raise ValueError("labels need a note")
        return self


orders = st.fixed_dictionaries(
    {
        "id": st.integers(1, 3),
        "items": st.lists(st.fixed_dictionaries({"sku": st.sampled_from(["a", "b"]), "qty": st.integers(1, 2)}), min_size=1, max_size=2),
        "labels": st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=2),
        "note": st.one_of(st.none(), st.sampled_from(["n1", "n2"])),
        "total": st.sampled_from([0.0, 1.5, 2.25]),
    }
).filter(lambda o: o["note"] is not None or not o["labels"])
# Two valid orders whose field winners assemble into an invalid one (labels without a note).
CLASHING = ['{"id": 1, "items": [{"sku": "a", "qty": 1}], "labels": ["x"], "note": "n1", "total": 0}',
            '{"id": 1, "items": [{"sku": "a", "qty": 1}], "labels": [], "total": 0}']


@settings(deadline=None, max_examples=150)
@given(st.lists(st.one_of(orders.map(json.dumps), st.sampled_from([*CLASHING, "garbage", '{"id": 1, "items": [], "labels": [], "total": -1}'])),
                min_size=1, max_size=5))
def test_fieldwise_assembly_validates_or_falls_back_and_values_always_validate(texts: list[str]) -> None:
    stab = Stabilizer(models.scripted(texts), schema=Order, vote=Vote(k=len(texts), fieldwise=True, on_no_consensus="plurality"),
                      retry=accord.Retry(attempts=1))
    try:
        result = stab.run("q")
    except accord.AccordError as error:
        assert error.result is not None, error  # every error of a run carries its Result
        result = error.result
    if result.value is not None:
        Order.model_validate(result.value.model_dump())  # never an unvalidated value
        assert isinstance(result.value, Order)
    mode = result.meta.get("fieldwise")
    if mode == "assembled":
        assert result.field_agreement is not None
    elif result.value is not None:
        assert result.key in result.votes  # whole-object winner (fallback or plurality)


class Switches(BaseModel):
    a: int = Field(ge=0, le=1)
    b: int = Field(ge=0, le=1)
    c: int = Field(ge=0, le=1)

    @model_validator(mode="after")
    def exactly_one(self) -> Switches:
        if self.a + self.b + self.c != 1:
            raise ValueError("exactly one switch is on")
        return self


ONE_HOT = ['{"a": 1, "b": 0, "c": 0}', '{"a": 0, "b": 1, "c": 0}', '{"a": 0, "b": 0, "c": 1}']


@settings(deadline=None, max_examples=100)
@given(st.lists(st.sampled_from(ONE_HOT), min_size=3, max_size=7))
def test_an_assembly_that_does_not_validate_falls_back_to_the_whole_object_winner(texts: list[str]) -> None:
    stab = Stabilizer(models.scripted(texts), schema=Switches,
                      vote=Vote(k=len(texts), fieldwise=True, early_stop=False, on_no_consensus="plurality"))
    result = stab.run("q")
    whole = max(set(texts), key=lambda t: (texts.count(t), -ONE_HOT.index(t)))
    assert isinstance(result.value, Switches)
    if result.meta.get("fieldwise") == "assembled":
        assert result.field_agreement and result.stable
    elif result.meta["fieldwise"] == "undecided":  # some field had no quorum
        assert not result.stable and result.key is not None and result.votes[result.key] == texts.count(whole)
    else:
        assert result.meta["fieldwise"] == "fell back to the whole-object winner"
        assert result.meta["fieldwise_errors"]
        assert result.key is not None and result.votes[result.key] == texts.count(whole)


def test_the_classic_split_assembles_an_invalid_object_and_falls_back() -> None:
    result = Stabilizer(models.scripted(ONE_HOT), schema=Switches, vote=Vote(k=3, fieldwise=True, on_no_consensus="plurality")).run("q")
    # Each field's majority is 0, so the assembly {a: 0, b: 0, c: 0} breaks the model's rule.
    assert result.meta["fieldwise"] == "fell back to the whole-object winner"
    assert "exactly one switch" in result.meta["fieldwise_errors"][0]["msg"]
    assert not result.stable and result.value == Switches(a=0, b=0, c=1)  # a three-way tie: smallest key
