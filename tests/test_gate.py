"""The margin gate end to end: slot 0 alone only when the gate can certify it."""

from __future__ import annotations

import asyncio

import accord
from accord import Completion, Stabilizer, Vote
from reviews import GOOD, OTHER, Review


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


class _Margined(accord.models.ScriptedBackend):
    gives_margins = True


def test_a_result_says_when_it_rests_on_fragile_steps_and_when_the_gate_stood_aside() -> None:
    gate = Vote(k=5, gate=accord.MarginGate(floor=1.0))
    fragile = Stabilizer(_Margined([Completion(GOOD, margins=(5.0, 0.1, 0.2))] * 5), schema=Review, vote=gate).run("q")
    assert fragile.stable and fragile.stopped_because == "unanimous" and fragile.fragile is True  # unanimous, and fragile
    assert fragile.meta["gate"] == "fragile" and fragile.meta["fragile"]["steps"] == [1, 2] and "fragile=True" in repr(fragile)
    assert fragile.meta["fragile"]["competing"] is None and fragile.to_dict()["fragile"] is True
    split = Stabilizer(_Margined([Completion(GOOD, margins=(0.1,)), Completion(OTHER, margins=(0.1,))] * 3), schema=Review,
                       vote=gate).run("q")
    assert split.fragile is True and split.meta["fragile"]["competing"] is not None  # the other answer, where one was seen
    certified = Stabilizer(_Margined([Completion(GOOD, margins=(5.0, 2.0))]), schema=Review, vote=gate).run("q")
    assert certified.fragile is False and certified.meta["gate"] == "certified"
    aside = Stabilizer(_Margined([Completion(GOOD, margins=(5.0, 0.1))] * 5), schema=Review, vote=Vote(k=5, gate=accord.MarginGate())).run("q")
    assert aside.fragile is None and aside.meta["gate"].startswith("stood aside") and aside.calls == 3  # today's vote


def test_a_fragile_first_ballot_is_decided_on_the_reference_and_each_ballot_says_where_it_ran() -> None:
    reference = accord.models.scripted([OTHER], name="reference-f32")
    serving = _Margined([Completion(GOOD, margins=(5.0, 0.1))] * 5)
    serving.reference = reference
    result = Stabilizer(serving, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert result.value == Review.model_validate_json(OTHER) and result.stopped_because == "reference" and result.stable
    assert [(b.slot, b.meta["deployment"]) for b in result.ballots] == [(0, "serving"), (1, "reference")]
    assert result.calls == 2 and result.usage.calls == 2 and result.fragile is False and result.meta["decided_by"] == "reference"
    assert result.meta["serving"]["fragile_at"] == [1] and result.meta["reference"] == {"calls": 1, "fingerprint": "reference-f32"}
    assert result.environment["reference"]["fingerprint"] == "reference-f32" and len(serving.requests) == 1
    certified = _Margined([Completion(GOOD, margins=(5.0, 2.0))])
    certified.reference = accord.models.scripted([OTHER])
    clear = Stabilizer(certified, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert clear.stopped_because == "gate" and clear.calls == 1 and clear.ballots[0].meta["deployment"] == "serving"
    budget = _Margined([Completion(GOOD, margins=(0.1,))] * 5)
    budget.reference = accord.models.scripted([OTHER])
    spent = Stabilizer(budget, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0), on_no_consensus="plurality"),
                       budget=accord.Budget(max_calls=1)).run("q")
    assert spent.calls == 1 and spent.stopped_because == "budget"  # no call left for the reference: as without one


def test_the_reference_decides_in_the_async_drivers_too() -> None:
    serving = _Margined([Completion(GOOD, margins=(0.1,))] * 5)
    serving.reference = accord.models.scripted([OTHER])
    result = asyncio.run(Stabilizer(serving, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).arun("q"))
    assert result.stopped_because == "reference" and result.value.stars == 2 and result.ballots[1].meta["deployment"] == "reference"


def test_a_reference_without_a_valid_value_leaves_the_decision_to_the_serving_deployments_vote() -> None:
    serving = _Margined([Completion(GOOD, margins=(5.0, 0.1))] * 5)
    serving.reference = accord.models.scripted(['{"stars": "many"'] * 3, name="reference-f32")  # never valid
    result = Stabilizer(serving, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert result.value == Review.model_validate_json(GOOD) and result.stable and result.stopped_because == "unanimous"
    assert result.meta["decided_by"] == "serving" and result.meta["reference"]["decided"] is False
    reference_calls = [b for b in result.ballots if b.meta.get("deployment") == "reference"]
    # Asked once, as the serving ballot was: a retry with feedback is another computation than that call.
    assert len(reference_calls) == result.meta["reference"]["calls"] == 1
    assert all(b.status == "invalid" for b in reference_calls) and len(serving.requests) == 3
    assert result.usage.calls == result.calls == len(result.ballots)


def test_the_reference_takes_as_many_attempts_as_the_serving_ballot_took() -> None:
    # The serving ballot needed a retry (its first answer was invalid): the reference may take one too.
    serving = _Margined([Completion('{"stars": "many"'), Completion(GOOD, margins=(5.0, 0.1))] + [Completion(GOOD, margins=(5.0, 0.1))] * 5)
    serving.reference = accord.models.scripted(['{"stars": "many"', OTHER], name="reference-f32")
    result = Stabilizer(serving, schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert result.stopped_because == "reference" and result.value == Review.model_validate_json(OTHER)
    assert [b.meta.get("deployment") for b in result.ballots] == ["serving", "serving", "reference", "reference"]
