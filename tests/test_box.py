"""The ballot box alone: no loop, no backend, no clock; ballots read by the real stages."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, model_validator

import accord
from accord import Schema, Settings, Usage, Vote, models
from accord._result import Ballot
from accord.read._read import Reading, read
from accord.run import _outcome as outcome
from accord.run._box import Box, Seat, Verdict
from accord.vote._predict import Computation, Floors
from accord.vote._vote import highest_score
from reviews import GOOD, OTHER, Review

REVIEW = Schema.of(Review)


def cast(box: Box, text: str, *, score: float | None = None, certified: bool | None = None, low: float | None = None) -> Seat:
    """Open a seat and cast the reading of ``text`` in it (with this margin, when given)."""
    seat = box.seat()
    reading = read(text, box.schema, (), box.vote.float_digits)
    assert isinstance(reading, Reading)
    box.heard(seat, low)
    ballot = Ballot(seat.index, 1, "valid", text, reading.value, reading.data, reading.key, min_margin=low)
    box.cast(seat, ballot, reading, score, certified)
    return seat


def key(text: str, schema: Schema[Any] = REVIEW) -> str:
    reading = read(text, schema)
    assert isinstance(reading, Reading)
    return reading.key


def test_an_empty_box_is_open() -> None:
    box = Box(Vote(k=5, gate=None), REVIEW)
    assert box.verdict() is None and box.done == 0 and box.all_done
    assert box.tally() == accord.Tally({}, 0, 5, 3)


def test_the_same_answer_in_different_formats_is_one_vote() -> None:
    box = Box(Vote(k=5, gate=None), REVIEW)
    first = cast(box, GOOD)
    cast(box, '```json\n{"sentiment": "Positive", "stars": "4"}\n```')
    assert box.verdict() is None  # two of five: the quorum is three
    cast(box, f"Here: {GOOD} ok")
    assert box.counts == {key(GOOD): 3} and box.first[key(GOOD)].slot == first.index == 0
    assert box.verdict() == Verdict("unanimous", key(GOOD))


def test_a_split_vote_is_hopeless_and_spoiled_seats_are_no_valid_ballot() -> None:
    split = Box(Vote(k=3, gate=None), REVIEW)
    for text in (GOOD, OTHER, '{"stars": 1, "sentiment": "negative"}'):
        cast(split, text)
    assert split.verdict() == Verdict("no quorum", None)
    spoiled = Box(Vote(k=3, gate=None), REVIEW)
    spoiled.spoil(spoiled.seat())
    assert spoiled.verdict() is None  # one spoiled of three: two may still agree
    spoiled.spoil(spoiled.seat(), accord.BackendError("down"))
    assert spoiled.verdict() == Verdict("no valid ballot", None)
    assert [seat.fault is None for seat in spoiled.seats] == [True, False] and spoiled.done == 2


def test_a_verdict_is_accepted_unless_the_run_failed() -> None:
    assert Verdict("unanimous", "k").accepted and Verdict("two ahead", "k").accepted  # a stop rule's own reason too
    assert not any(Verdict(reason, None).accepted for reason in ("no quorum", "no valid ballot", "budget"))


def test_ties_are_broken_by_the_vote_s_rule_over_the_model_scores() -> None:
    vote = Vote(k=2, quorum=1, early_stop=False, tie_break=highest_score, gate=None)
    box = Box(vote, REVIEW)
    cast(box, GOOD, score=-2.0)
    cast(box, OTHER, score=-0.5)
    assert box.verdict() == Verdict("k reached", key(OTHER))
    plain = Box(Vote(k=2, quorum=1, early_stop=False, gate=None), REVIEW)  # smallest key
    cast(plain, GOOD, score=-2.0)
    cast(plain, OTHER, score=-0.5)
    assert plain.verdict() == Verdict("k reached", min(key(GOOD), key(OTHER)))


def test_the_gate_accepts_a_certified_slot_0_alone() -> None:
    box = Box(Vote(k=5, gate=None), REVIEW, gating=True)
    cast(box, GOOD, certified=True)
    assert box.verdict() == Verdict("gate", key(GOOD))
    fragile = Box(Vote(k=5, gate=None), REVIEW, gating=True)
    cast(fragile, GOOD, certified=False)
    assert fragile.verdict() is None
    ungated = Box(Vote(k=5, gate=None), REVIEW)
    cast(ungated, GOOD, certified=True)
    assert ungated.verdict() is None
    crowded = Box(Vote(k=5, gate=None), REVIEW, gating=True)  # slot 0 was not alone when it finished
    seat = crowded.seat()
    crowded.seat()
    reading = read(GOOD, REVIEW)
    assert isinstance(reading, Reading)
    crowded.cast(seat, Ballot(0, 1, "valid", key=reading.key), reading, certified=True)
    assert crowded.verdict() is None


PLAIN: Computation = ("float32", False)
PERTURBED: Computation = ("float32", True)


def predicting(floor: float = 1.0) -> Box:
    """k=5 with a user floor: ballot 0 unperturbed, ballots 1-4 perturbed."""
    return Box(Vote(k=5, gate=None), REVIEW, Floors(None, None, {}, uniform=floor), [PLAIN] + [PERTURBED] * 4, gating=True)


def test_a_ballot_clear_of_the_floor_predicts_the_unrun_ones_and_settles_the_vote() -> None:
    box = predicting()
    cast(box, GOOD, low=2.0)
    assert box.verdict() == Verdict("settled", key(GOOD)) and box.predicted == {key(GOOD): 4}
    tally, extra, predicted = box.predict()
    assert (tally.counts, tally.done, extra, predicted) == ({key(GOOD): 5}, 5, {key(GOOD): 4}, 4)


def test_a_fragile_or_blind_ballot_predicts_nothing() -> None:
    fragile = predicting()
    cast(fragile, GOOD, low=0.5)
    assert fragile.verdict() is None and fragile.predict()[2] == 0 and fragile.predicted == {}
    blind = predicting()
    cast(blind, GOOD)  # no margins
    assert blind.seats[0].blind and blind.seats[0].low == math.inf
    assert blind.verdict() is None and blind.predict()[2] == 0


def test_two_finished_ballots_that_disagree_predict_nothing() -> None:
    box = predicting()
    cast(box, GOOD, low=2.0)
    cast(box, OTHER, low=2.0)
    assert box.predict()[2] == 0 and box.verdict() is None


def test_an_invalid_ballot_clear_of_the_floor_predicts_the_same_failure() -> None:
    box = predicting()
    seat = box.seat()
    box.heard(seat, 2.0)
    box.spoil(seat)
    assert box.verdict() == Verdict("no valid ballot", None)


def test_a_faulted_ballot_predicts_nothing() -> None:
    box = predicting()
    seat = box.seat()
    box.heard(seat, 2.0)
    box.spoil(seat, accord.BackendError("down"))
    assert box.predict()[2] == 0 and box.verdict() is None


class P(BaseModel):
    a: int
    b: int


class Switches(BaseModel):
    a: int
    b: int
    c: int

    @model_validator(mode="after")
    def exactly_one(self) -> Switches:
        if self.a + self.b + self.c != 1:
            raise ValueError("exactly one switch is on")
        return self


def test_fieldwise_assembles_each_field_s_winner() -> None:
    box = Box(Vote(k=3, fieldwise=True, gate=None), Schema.of(P))
    for text in ('{"a": 1, "b": 1}', '{"a": 1, "b": 2}', '{"a": 2, "b": 2}'):
        cast(box, text)
    verdict = box.verdict()
    assert verdict is not None and verdict.reason == "unbeatable" and box.assembled is not None
    assert verdict.winner == box.assembled[0] and box.assembled[1:] == (P(a=1, b=2), {"a": 1, "b": 2})
    assert box.field_agreement == pytest.approx({"a": 2 / 3, "b": 2 / 3}) and box.fallback is None


def test_an_assembly_that_does_not_validate_falls_back_to_the_whole_object_vote() -> None:
    switches = Schema.of(Switches)
    box = Box(Vote(k=3, fieldwise=True, gate=None), switches)
    for text in ('{"a": 1, "b": 0, "c": 0}', '{"a": 0, "b": 1, "c": 0}', '{"a": 0, "b": 0, "c": 1}'):
        cast(box, text)
    assert box.verdict() == Verdict("no quorum", None)  # each field's 0 wins; the whole objects split three ways
    assert box.assembled is None and box.fallback and "exactly one switch" in box.fallback[0]["msg"]


def result(box: Box, verdict: Verdict, *, plurality: bool = False, ballots: tuple[Ballot, ...] | None = None) -> accord.Result[Any]:
    found = tuple(box.first.values()) if ballots is None else ballots
    return outcome.result(box, verdict, ballots=found, usage=Usage(), backend=models.scripted([]), settings=Settings(),
                          plurality=plurality, seconds=0.25)


def test_the_result_of_an_accepted_verdict() -> None:
    box = Box(Vote(k=3, gate=None), REVIEW)
    cast(box, GOOD)
    cast(box, GOOD)
    done = result(box, Verdict("unanimous", key(GOOD)))
    assert done.stable and done.error is None and done.value == Review(stars=4, sentiment="positive")
    assert done.votes == {key(GOOD): 2} and done.agreement == 1.0 and done.key == key(GOOD)
    assert done.meta == {"seconds": 0.25, "k": 3, "quorum": 2} and done.environment["backend"] == "ScriptedBackend"


def test_the_errors_of_failed_verdicts_carry_their_result() -> None:
    split = Box(Vote(k=3, gate=None), REVIEW)
    cast(split, GOOD)
    cast(split, OTHER)
    failed = result(split, Verdict("no quorum", None))
    assert isinstance(failed.error, accord.NoConsensus) and failed.error.result is failed and failed.value is None
    plural = result(split, Verdict("no quorum", None), plurality=True)
    assert plural.error is None and not plural.stable and plural.key == min(key(GOOD), key(OTHER))
    assert isinstance(result(split, Verdict("budget", None)).error, accord.BudgetExceeded)
    faulted = Box(Vote(k=1, gate=None), REVIEW)
    faulted.spoil(faulted.seat(), accord.BackendError("down", status=503))
    error = result(faulted, Verdict("no valid ballot", None)).error
    assert isinstance(error, accord.BackendError) and error.status == 503
    invalid = Box(Vote(k=1, gate=None), REVIEW)
    invalid.spoil(invalid.seat())
    ballot = Ballot(0, 1, "invalid", "nope", error={"stage": "extract", "message": "no JSON found"})
    error = result(invalid, Verdict("no valid ballot", None), ballots=(ballot,)).error
    assert isinstance(error, accord.InvalidOutput) and "no JSON found" in str(error)


def test_the_fieldwise_result_says_how_it_was_decided() -> None:
    box = Box(Vote(k=3, fieldwise=True, gate=None), Schema.of(P))
    for text in ('{"a": 1, "b": 1}', '{"a": 1, "b": 2}', '{"a": 2, "b": 2}'):
        cast(box, text)
    verdict = box.verdict()
    assert verdict is not None
    assembled = result(box, verdict)
    assert assembled.value == P(a=1, b=2) and assembled.meta["fieldwise"] == "assembled" and assembled.stable
    assert assembled.agreement == pytest.approx(2 / 3)
    fell = Box(Vote(k=3, fieldwise=True, gate=None), Schema.of(Switches))
    for text in ('{"a": 1, "b": 0, "c": 0}', '{"a": 0, "b": 1, "c": 0}', '{"a": 0, "b": 0, "c": 1}'):
        cast(fell, text)
    fell_verdict = fell.verdict()
    assert fell_verdict is not None
    back = result(fell, fell_verdict, plurality=True)
    assert back.meta["fieldwise"] == "fell back to the whole-object winner" and back.meta["fieldwise_errors"]
    assert back.value == Switches(a=0, b=0, c=1)  # a three-way tie: the smallest key
