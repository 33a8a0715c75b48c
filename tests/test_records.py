"""Typed records: why a run ended is a StopReason, and no meta dict carries data between accord's layers."""

from __future__ import annotations

import json

import accord
from accord import StopReason


def test_a_stop_reason_is_the_string_it_was() -> None:
    assert StopReason.UNANIMOUS == "unanimous" and StopReason.K_REACHED == "k reached"
    assert StopReason("no valid ballot") is StopReason.NO_VALID_BALLOT
    assert {StopReason.GATE: 1}["gate"] == 1 and f"{StopReason.K_REACHED}" == str(StopReason.K_REACHED) == "k reached"
    assert json.dumps({"why": StopReason.BUDGET}) == '{"why": "budget"}' and repr(StopReason.GATE) == "'gate'"


def test_accepted_is_every_reason_but_the_failed_ones() -> None:
    failed = {"uncontested", "no quorum", "no valid ballot", "budget", "error"}
    assert {r.value for r in StopReason if not r.accepted} == failed
    assert StopReason("two ahead").accepted and StopReason("two ahead") is StopReason("two ahead")  # a stop rule's own


def test_a_result_holds_a_stop_reason_whose_accepted_is_stable() -> None:
    result = accord.Result("x", True, 1.0, {'"x"': 1}, (), "unanimous", accord.Usage())
    assert result.stopped_because is StopReason.UNANIMOUS and result.stopped_because.accepted == result.stable
    assert result.to_dict()["stopped_because"] == "unanimous" and "stopped_because='unanimous'" in repr(result)
