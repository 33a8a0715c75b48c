"""Perturbation ensembles and the margin gate on the real embedded model."""

from __future__ import annotations

import math
from typing import Literal

import pytest
from pydantic import BaseModel

import accord
from accord import MarginGate, Perturb, Perturbation, Stabilizer, Vote
from accord.backends.local._backend import TransformersBackend
from accord.backends.local._calibrate import gap_change, measure

pytestmark = pytest.mark.model

PROMPT = "Classify the sentiment of this text as positive, negative or neutral.\nText: The food was cold and the waiter was rude."


def test_the_default_perturbations_really_change_the_logits(local_model: TransformersBackend) -> None:
    floors = measure(local_model, prompts=[PROMPT], steps=8)
    assert set(floors) == {"precision", "batch", "attention", "threads"}
    # bfloat16 compute moves the logits most; a batch neighbour and eager attention move them a
    # little (a different reduction order). Threads may not move them on every CPU: reported, not assumed.
    assert floors["precision"] > 0.01
    assert floors["batch"] > 0 and floors["attention"] > 0


def test_gap_change_measures_the_leader_gap() -> None:
    import torch

    ref = torch.tensor([[3.0, 1.0, 0.0]])
    assert gap_change(ref, ref) == 0.0
    assert gap_change(ref, torch.tensor([[3.0, 1.5, 0.0]])) == pytest.approx(0.5)


def test_each_ballot_records_its_perturbation(local_model: TransformersBackend) -> None:
    stab = Stabilizer(local_model, Literal["positive", "negative", "neutral"], vote=Vote(k=3, early_stop=False, gate=None))
    result = stab.run(PROMPT)
    assert {b.slot: b.meta.get("perturbation") for b in result.ballots} == {0: None, 1: "precision", 2: "batch"}
    assert result.environment["perturbations"] == ["batch", "precision"]
    assert result.environment["dtype"] == "float32" and result.environment["model"] == "SmolLM2-135M-Instruct"


def test_a_batch_neighbour_keeps_our_row_whole(local_model: TransformersBackend) -> None:
    plain = local_model.unconstrained(PROMPT, accord.Settings(max_tokens=12))
    batched = local_model.unconstrained(PROMPT, accord.Settings(max_tokens=12), Perturbation("batch"))
    assert batched.meta["perturbation"] == "batch"
    assert batched.margins is not None and len(batched.margins) == batched.usage.completion_tokens
    assert batched.text[:8] == plain.text[:8]  # the same answer, give or take the last bits


def test_perturb_configuration() -> None:
    assert Perturb().for_ballot(0) is None
    chosen = [Perturb("batch", "precision").for_ballot(i) for i in (1, 2, 3)]
    assert [p.kind if p else None for p in chosen] == ["batch", "precision", "batch"]
    assert Perturb(()).for_ballot(3) is None
    with pytest.raises(accord.ConfigError):
        Perturbation("cosmic rays")


def test_the_gate_accepts_a_certified_first_ballot_after_one_call(local_model: TransformersBackend) -> None:
    result = Stabilizer(local_model, Literal["positive", "negative", "neutral"],
                        vote=Vote(k=5, gate=MarginGate(floor=0.0))).run(PROMPT)
    assert result.calls == 1 and result.stopped_because == "gate" and result.stable
    assert result.fragile_steps == 0 and result.min_margin is not None


YESNO = "Answer yes or no. Is Paris the capital of France?"  # the true/false step: fragile under precision


class YesNo(BaseModel):
    answer: bool


def test_a_fragile_first_ballot_settles_on_the_float32_answer_in_both_deployments(local_model: TransformersBackend) -> None:
    float32 = Stabilizer(local_model, YesNo).run(YESNO)
    first = float32.ballots[0]
    assert first.fragile_steps and first.min_margin is not None and first.min_margin < local_model.noise_floors()["precision"]
    # Its margins clear the floor of the float32 perturbations: ballots 2-4 are predicted.
    assert float32.stopped_because == "settled" and float32.calls == 1 and float32.meta["predicted"] == {float32.key: 3}
    bf16 = accord.models.local(dtype="bfloat16")
    bfloat16 = Stabilizer(bf16, YesNo).run(YESNO)
    assert bfloat16.key == float32.key
    if bfloat16.stopped_because == "settled":  # fragile in bfloat16 too: its float32 ballot decided
        assert bfloat16.calls == 2 and sorted(b.meta["dtype"] for b in bfloat16.ballots) == ["bfloat16", "float32"]
    else:
        assert bfloat16.stopped_because == "gate" and bfloat16.calls == 1


def test_a_fragile_first_ballot_is_voted_without_a_precision_ballot(local_model: TransformersBackend) -> None:
    result = Stabilizer(local_model, Literal["positive", "negative", "neutral"],
                        vote=Vote(k=5, gate=MarginGate(floor=math.inf), perturb=Perturb("batch", "attention"))).run(PROMPT)
    assert result.calls >= 3 and result.stopped_because not in ("gate", "settled")


def test_a_bfloat16_deployment_perturbs_around_the_float32_reference(local_model: TransformersBackend) -> None:
    """Its precision ballot is the float32 deployment's own computation, bit for bit."""
    bf16 = accord.models.local(dtype="bfloat16")
    schema = Literal["positive", "negative", "neutral"]
    ours = sorted(Stabilizer(bf16, schema, vote=Vote(k=3, early_stop=False, gate=None)).run(PROMPT).ballots, key=lambda b: b.slot)
    assert [b.meta["dtype"] for b in ours] == ["bfloat16", "float32", "float32"]  # ballots finish in any order
    theirs = Stabilizer(local_model, schema, vote=Vote(k=1, gate=None)).run(PROMPT)
    assert ours[1].text == theirs.ballots[0].text
    assert ours[1].min_margin == theirs.ballots[0].min_margin
    own = Stabilizer(bf16, schema, vote=Vote(k=2, early_stop=False, gate=None, perturb=Perturb(reference=None))).run(PROMPT)
    assert [b.meta["dtype"] for b in sorted(own.ballots, key=lambda b: b.slot)] == ["bfloat16", "float32"]  # a cast of the bf16 weights
    with pytest.raises(accord.ConfigError):
        Perturb(reference="float64")


def test_the_embedded_model_ships_its_noise_floor(local_model: TransformersBackend) -> None:
    floor = local_model.noise_floor()
    assert floor is not None and floor > 0


def test_compute_dtype_names_where_each_ballot_computes() -> None:
    from accord.vote._perturb import compute_dtype

    p = Perturb()  # precision, batch, attention, threads around float32
    assert [compute_dtype("float32", p.for_ballot(i)) for i in range(5)] == ["float32", "bfloat16"] + ["float32"] * 3
    assert [compute_dtype("bfloat16", p.for_ballot(i)) for i in range(5)] == ["bfloat16"] + ["float32"] * 4
    own = Perturb(reference=None)
    assert [compute_dtype("bfloat16", own.for_ballot(i)) for i in range(3)] == ["bfloat16", "float32", "bfloat16"]
    assert compute_dtype("float32", Perturbation("precision", "float16")) == "float16"
