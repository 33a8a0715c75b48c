"""Stability metrics over repeated runs (the audit and the benchmarks share them).

TARr@N and TARa@N are from Atil et al. 2024, "Non-Determinism of 'Deterministic' LLM Settings":
the share of prompts whose raw text (r) or parsed answer (a) was identical in all N runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MISSING = "<no answer>"


def total_agreement(per_prompt: Sequence[Sequence[Hashable]]) -> float:
    """TAR@N: the share of prompts whose N outcomes are all identical (a missing answer counts)."""
    if not per_prompt:
        return 0.0
    return sum(1 for outcomes in per_prompt if len(set(outcomes)) == 1) / len(per_prompt)


def distinct(outcomes: Sequence[Hashable]) -> int:
    return len(set(outcomes))


def first_divergence(sequences: Sequence[Sequence[Any]]) -> int | None:
    """The first index where the sequences (token ids, or characters) stop agreeing; None if all equal."""
    if len({tuple(s) for s in sequences}) <= 1:
        return None
    shortest = min(len(s) for s in sequences)
    for i in range(shortest):
        if len({s[i] for s in sequences}) > 1:
            return i
    return shortest


def majority_share(outcomes: Sequence[Hashable]) -> float:
    """The share of runs that gave the most common outcome (agreement of one prompt)."""
    if not outcomes:
        return 0.0
    return max(outcomes.count(o) for o in set(outcomes)) / len(outcomes)


@dataclass(frozen=True)
class Spread:
    minimum: float
    mean: float
    maximum: float

    @staticmethod
    def of(values: Sequence[float]) -> Spread:
        if not values:
            return Spread(0.0, 0.0, 0.0)
        return Spread(min(values), statistics.fmean(values), max(values))

    def to_dict(self) -> dict[str, float]:
        return {"min": self.minimum, "mean": self.mean, "max": self.maximum}


def accuracy_by_condition(answers: Mapping[str, Sequence[Hashable]], gold: Sequence[Hashable | None]) -> dict[str, float]:
    """Per condition: the share of prompts (with a gold answer) answered correctly."""
    scored = [i for i, g in enumerate(gold) if g is not None]
    if not scored:
        return {}
    return {cond: sum(1 for i in scored if outs[i] == gold[i]) / len(scored) for cond, outs in answers.items()}
