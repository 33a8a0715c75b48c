"""Predicted ballots: the unrun ballots of a vote that the finished ones already determine.

Greedy decoding picks the argmax at every step. If a perturbation moves every gap between the
leader and a competitor by less than the ballot's smallest margin, the argmax survives at every
step and the perturbed ballot emits the same tokens: the same text, the same answer (or the same
invalid output, retried the same way). The measured noise floors bound those moves, so a
finished ballot *predicts* every unrun ballot whose computation is within its margin of its own.

A ballot's computation is its compute dtype and whether a small perturbation (batch neighbour,
attention implementation, thread count) runs on top. The distance between two computations is
the sum of the floors that separate them:

    the precision floor            when their dtypes differ
    the small floor of its dtype   for each side that runs under a batch, attention or threads
                                   perturbation (the largest of those three floors)

Two ballots of the same computation in one process are bit-identical (distance 0).

The vote then counts predicted ballots with the real ones: once the leader holds the quorum
and cannot be caught, the k-ballot vote is settled without running the rest
(``stopped_because="settled"``). With the default perturbations around the float32 reference,
that is the float32 computation's answer in every deployment: a float32 deployment's first
ballot predicts the three float32 perturbed ballots whenever its margins clear their floor
(about 4e-5 here); a bfloat16 deployment's first ballot predicts all four only when it clears
the precision floor, and otherwise its float32 ballot settles the vote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._perturb import compute_dtype

if TYPE_CHECKING:
    from ..backends._base import Backend
    from ._gate import MarginGate

Computation = tuple[str, bool]  # (compute dtype, under a small perturbation)

SMALL = ("batch", "attention", "threads")


@dataclass(frozen=True)
class Floors:
    """What separates two ballot computations, in logits (``None``: unknown, predict nothing)."""

    dtype: str | None  # the deployment's own dtype
    precision: float | None  # between the deployment's dtype and the other precision
    small: dict[str, float]  # per compute dtype: the largest floor of batch, attention, threads
    uniform: float | None = None  # a floor the user set: the distance between any two computations

    @classmethod
    def of(cls, backend: Backend, gate: MarginGate | None) -> Floors | None:
        """The floors a run can predict with, or None (a backend that is not local and perturbable)."""
        if not backend.perturbable:
            return None  # repeated calls to a server are not bit-identical, and nothing is measured
        noise = backend.noise()
        dtype = noise.dtype if noise is not None else None
        if gate is not None and gate.floor is not None:
            return cls(dtype, None, {}, uniform=float(gate.floor))
        if noise is None or not noise.floors or dtype is None:
            return None
        floors = noise.floors
        small = {dtype: max((v for k, v in floors.items() if k in SMALL), default=0.0)}
        if dtype != "float32" and noise.float32_floor is not None:
            small["float32"] = float(noise.float32_floor)
        return cls(dtype, floors.get("precision"), small)

    def computation(self, perturbation: Any) -> Computation | None:
        """Where a ballot under ``perturbation`` computes (None: a kind whose floor is not measured)."""
        if perturbation is not None and perturbation.value is not None:
            return None  # measured for the default neighbour and the other precision only
        small = perturbation is not None and perturbation.kind != "precision"
        return (compute_dtype(self.dtype or "an unknown dtype", perturbation), small)

    def distance(self, a: Computation, b: Computation) -> float | None:
        """A bound on how far the gaps of computation ``b`` can be from those of ``a``."""
        if a == b and not a[1]:
            return 0.0  # the same computation: bit-identical in one process
        if self.uniform is not None:
            return self.uniform
        total = 0.0
        if a[0] != b[0]:
            if self.precision is None:
                return None
            total += self.precision
        for dtype, perturbed in (a, b):
            if perturbed:
                if dtype not in self.small:
                    return None
                total += self.small[dtype]
        return total
