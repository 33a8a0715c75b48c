"""Predicted ballots end to end, on a local-like scripted backend with measured noise floors."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pytest

import accord
from accord import Completion, Retry, Stabilizer, Vote
from reviews import GOOD, OTHER, Review


class Measured(accord.models.ScriptedBackend):
    """A local-like backend with measured floors: precision 0.4, the small perturbations 0.01."""

    gives_margins = True
    perturbable = True

    def __init__(self, items: Iterable[Any], dtype: str = "float32") -> None:
        super().__init__(items)
        self.dtype = dtype

    def noise(self) -> accord.models.Noise:
        return accord.models.Noise.measured(self.dtype, {"precision": 0.4, "batch": 0.01, "attention": 0.01, "threads": 0.0}, 0.01)


def margined(margins: tuple[float, ...], text: str = GOOD) -> Completion:
    return Completion(text, margins=margins)


def test_a_fragile_first_ballot_settles_when_it_predicts_the_majority() -> None:
    # float32: ballots 2-4 run in float32 under the small perturbations (0.01 < 0.1): predicted.
    result = Stabilizer(Measured([margined((5.0, 0.1))]), schema=Review).run("q")
    assert result.calls == 1 and result.stopped_because == "settled" and result.stable
    assert result.fragile_steps == 1 and result.meta["predicted"] == {result.key: 3}
    # On a near tie even for the small perturbations, nothing is predicted: the ballots run.
    tied = [margined((5.0, 0.005)), margined((5.0, 0.3)), margined((5.0, 2.0))]
    voted = Stabilizer(Measured(tied), schema=Review).run("q")
    assert voted.calls == 3 and voted.stopped_because == "unanimous"


def test_a_bfloat16_deployment_settles_on_its_float32_ballot() -> None:
    # Ballot 0 (bfloat16) is within the precision floor of every float32 ballot: none predicted;
    # ballot 1 (the float32 reference) clears the small floor: it predicts ballots 2-4.
    split = [margined((5.0, 0.3)), margined((5.0, 0.1), OTHER)]
    result = Stabilizer(Measured(split, dtype="bfloat16"), schema=Review).run("q")
    assert result.value is not None
    assert result.calls == 2 and result.stopped_because == "settled" and result.value.stars == 2
    assert result.votes == {result.key: 1, result.ballots[0].key: 1} and result.meta["predicted"] == {result.key: 3}
    # Clear of the precision floor plus the small one: ballot 0 predicts all four.
    clear = Stabilizer(Measured([margined((5.0, 0.5))], dtype="bfloat16"), schema=Review).run("q")
    assert clear.calls == 1 and clear.stopped_because == "gate"


def test_an_invalid_first_ballot_predicts_the_same_failure() -> None:
    model = Measured([margined((5.0, 0.1), "not json at all")] * 5)
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, schema=Review, retry=Retry(attempts=1)).run("q")
    assert caught.value.result.calls == 1 and caught.value.result.stopped_because == "no valid ballot"


def test_a_user_floor_predicts_across_any_two_computations() -> None:
    texts = [margined((5.0, 0.1)), margined((5.0, 2.0), OTHER)]
    result = Stabilizer(Measured(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert result.value is not None
    assert result.calls == 2 and result.stopped_because == "settled" and result.value.stars == 2
    # An infinite floor predicts nothing: every ballot is voted on.
    infinite = Vote(k=5, gate=accord.MarginGate(floor=math.inf))
    voted = Stabilizer(Measured([margined((5.0, 2.0))] * 5), schema=Review, vote=infinite).run("q")
    assert voted.calls == 3 and voted.stopped_because == "unanimous"


def test_without_early_stopping_nothing_is_predicted() -> None:
    model = Measured([margined((5.0, 0.1))] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5, early_stop=False, gate=accord.MarginGate())).run("q")
    assert result.calls == 5 and result.stopped_because == "k reached"
