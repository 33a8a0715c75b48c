"""The vote end to end on scripted backends: one answer in many formats, early stopping, ties, plurality."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel

import accord
from accord import Stabilizer, Tally, Vote, models
from reviews import GOOD, Review


def test_same_answer_in_different_formats_is_one_stable_result() -> None:
    model = models.scripted([GOOD, '```json\n{"sentiment": "Positive", "stars": "4"}\n```', f"Here: {GOOD} ok"])
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("review this")
    assert result.value == Review(stars=4, sentiment="positive")
    assert result.stable and result.agreement == 1.0
    assert result.stopped_because == "unanimous"
    assert result.calls == 3 == len(result.ballots)
    assert list(result.votes.values()) == [3]


def test_split_vote_raises_no_consensus_with_the_tally() -> None:
    texts = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 2, "sentiment": "negative"}',
             '{"stars": 3, "sentiment": "neutral"}', '{"stars": 4, "sentiment": "positive"}']
    with pytest.raises(accord.NoConsensus) as info:
        Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5)).run("q")
    result = info.value.result
    assert not result.stable and result.value is None
    assert len(result.votes) == 4 and set(result.votes.values()) == {1}
    assert result.stopped_because == "no quorum"


def test_an_answer_no_valid_ballot_contests_is_returned_unstable_and_strict_raises() -> None:
    # Ballot 0 valid; every other ballot invalid on every attempt (Retry(attempts=1)): the quorum of
    # 2 of 3 is out of reach, yet no valid ballot disagrees. One plain call would have returned it.
    texts = [GOOD, "no idea", "still no idea"]
    result = Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=3), retry=accord.Retry(attempts=1)).run("q")
    assert result.value == Review(stars=4, sentiment="positive") and result.error is None
    assert not result.stable and result.stopped_because == "uncontested" and result.votes == {result.key: 1}
    assert [b.status for b in result.ballots] == ["valid", "invalid", "invalid"]
    with pytest.raises(accord.NoConsensus) as info:
        Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=3, on_no_consensus="strict"),
                   retry=accord.Retry(attempts=1)).run("q")
    assert info.value.result.stopped_because == "no quorum" and info.value.result.value is None
    # A valid ballot that disagrees is dissent: no quorum raises, as before.
    split = [GOOD, '{"stars": 1, "sentiment": "negative"}', "no idea"]
    with pytest.raises(accord.NoConsensus):
        Stabilizer(models.scripted(split), schema=Review, vote=Vote(k=3), retry=accord.Retry(attempts=1)).run("q")
    with pytest.raises(accord.ConfigError, match='"strict"'):
        Stabilizer(models.scripted(texts), schema=Review, vote=Vote(on_no_consensus="quorum"))


def test_plurality_on_request() -> None:
    texts = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 1, "sentiment": "negative"}',
             '{"stars": 3, "sentiment": "neutral"}', '{"stars": 4, "sentiment": "positive"}', '{"stars": 5, "sentiment": "positive"}']
    result = Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5, on_no_consensus="plurality")).run("q")
    assert result.value is not None and result.value.stars == 1 and not result.stable and result.error is None


def test_identical_ballots_stop_early() -> None:
    model = models.scripted([GOOD] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("q")
    assert result.calls == 3 and result.stopped_because == "unanimous"


def test_dissent_runs_one_more_at_a_time() -> None:
    other = '{"stars": 2, "sentiment": "negative"}'
    model = models.scripted([GOOD, other, GOOD, GOOD, other])
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("q")
    assert result.calls == 4 and result.stopped_because == "unbeatable" and result.agreement == 0.75


def test_no_early_stop_runs_all_k() -> None:
    model = models.scripted([GOOD] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5, early_stop=False)).run("q")
    assert result.calls == 5 and result.stopped_because == "k reached"


def test_winner_value_is_the_earliest_ballot_of_its_form() -> None:
    texts = ['{"stars": 4, "sentiment": "positive"}', '{"sentiment": "positive", "stars": 4}', GOOD]
    result = Stabilizer(models.scripted(texts), schema=Review).run("q")
    assert result.value is result.ballots[0].value


def test_a_custom_stop_rule_accepts_with_its_own_reason() -> None:
    class TwoAhead(accord.StopRule):
        def __call__(self, tally: Tally) -> str | None:
            return "two ahead" if tally.lead - tally.runner_up >= 2 else None

    result = Stabilizer(models.scripted([GOOD] * 5), schema=Review, vote=Vote(k=5, early_stop=TwoAhead())).run("q")
    assert result.stable and result.stopped_because == "two ahead" and result.calls == 3


def test_choice_schemas_and_json_schema_dicts() -> None:
    result = Stabilizer(models.scripted(["Positive", "positive.", "POSITIVE"]), schema=Literal["positive", "negative"]).run("q")
    assert result.value == "positive"
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
    result = Stabilizer(models.scripted(['{"n": "3"}', '{"n": 3.0}', '{"n": 3}']), schema=schema).run("q")
    assert result.value == {"n": 3}


def test_fieldwise_result_serializes_its_assembled_value() -> None:
    class P(BaseModel):
        a: int
        b: int

    texts = ['{"a": 1, "b": 1}', '{"a": 1, "b": 2}', '{"a": 2, "b": 2}']
    result = Stabilizer(models.scripted(texts), schema=P, vote=Vote(k=3, fieldwise=True)).run("q")
    assert result.value == P(a=1, b=2) and json.loads(result.to_json())["value"] == {"a": 1, "b": 2}


def test_result_to_json_round_trips_through_json() -> None:
    result = Stabilizer(models.scripted([GOOD] * 3), schema=Review).run("q")
    data = json.loads(result.to_json())
    assert data["value"] == {"stars": 4, "sentiment": "positive"} and data["calls"] == 3
    assert len(data["ballots"]) == 3 and data["stopped_because"] == "unanimous"


def test_on_ballot_hook_sees_every_call() -> None:
    seen: list[accord.Ballot] = []
    result = Stabilizer(models.scripted(["x", GOOD, GOOD, GOOD]), schema=Review, hooks=accord.Hooks(after_ballot=seen.append)).run("q")
    assert len(seen) == result.calls
