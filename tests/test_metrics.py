"""The stability metrics the audit and the benchmarks share (TARr@N, TARa@N, divergence, agreement)."""

from __future__ import annotations

from typing import Any, Literal

from accord import Stabilizer, Vote, models
from accord.cli._metrics import Spread, accuracy_by_condition, distinct, first_divergence, majority_share, total_agreement


def test_total_agreement_rate() -> None:
    assert total_agreement([["a", "a"], ["a", "b"], ["c", "c"], ["d", "d"]]) == 0.75
    assert total_agreement([]) == 0.0


def test_first_divergence_index() -> None:
    assert first_divergence([[1, 2, 3], [1, 2, 3]]) is None
    assert first_divergence([[1, 2, 3], [1, 5, 3], [1, 2, 3]]) == 1
    assert first_divergence(["abc", "ab"]) == 2  # one is a prefix of the other
    assert first_divergence(["x", "y"]) == 0


def test_distinct_and_majority() -> None:
    assert distinct(["a", "b", "a"]) == 2
    assert majority_share(["a", "b", "a", "a"]) == 0.75


def test_accuracy_by_condition_and_spread() -> None:
    acc = accuracy_by_condition({"fp32": [1, 2, 3], "bf16": [1, 0, 3]}, [1, 2, None])
    assert acc == {"fp32": 1.0, "bf16": 0.5}
    s = Spread.of(list(acc.values()))
    assert (s.minimum, s.mean, s.maximum) == (0.5, 0.75, 1.0)


def test_tarr_below_tara_when_texts_differ_but_answers_agree() -> None:
    # Scripted "conditions": the same answer written differently in each run.
    runs = {"c1": ["Positive.", "7"], "c2": ["positive", "The answer is 7."]}
    raw = [[runs[c][i] for c in runs] for i in range(2)]
    schemas: list[Any] = [Literal["positive", "negative"], int]
    stab_answers = [
        [Stabilizer(models.scripted([runs[cond][i]]), schema, vote=Vote(k=1)).run("q").key for cond in runs]
        for i, schema in enumerate(schemas)
    ]
    assert total_agreement(raw) == 0.0 and total_agreement(stab_answers) == 1.0
