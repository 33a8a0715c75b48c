"""The margin gate end to end: slot 0 alone only when the gate can certify it."""

from __future__ import annotations

import accord
from accord import Completion, Stabilizer, Vote
from reviews import GOOD, Review


def test_the_gate_waits_for_slot_0_only_when_it_can_certify_it() -> None:
    class Margined(accord.models.ScriptedBackend):
        gives_margins = True

    texts = [Completion(GOOD, margins=(5.0, 0.1))] * 5
    no_floor = Stabilizer(Margined(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate()))
    assert no_floor.run("q").calls == 3  # no floor: plain voting, quorum started at once
    certified = Stabilizer(Margined([Completion(GOOD, margins=(5.0, 2.0))]), schema=Review,
                           vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert certified.calls == 1 and certified.stopped_because == "gate" and certified.fragile_steps == 0
    fragile = Stabilizer(Margined(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert fragile.calls == 3 and fragile.ballots[0].fragile_steps == 1 and fragile.stopped_because == "unanimous"
