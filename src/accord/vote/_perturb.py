"""Perturbation ensembles: what accord varies between the ballots of one run, to sample the noise.

A greedy run repeated in one process is bit-identical, so k identical local ballots prove nothing.
Ballot 0 runs unperturbed (the deployment as given); ballot i > 0 runs under one perturbation of
the kind a serving stack varies, cycling through the set:

    precision   the compute in another precision (float32 weights: bfloat16; bfloat16: float32)
    batch       one long batch neighbour, left padding (what a busy server does to a request)
    attention   the other attention implementation (sdpa <-> eager)
    threads     another intra-op thread count (a different reduction split)

Perturbed ballots sample the noise around one *reference* computation, the weights in float32
as the model's files give them (``reference="float32"``, the default): in a float32 deployment
that is the deployment itself and ``precision`` runs in bfloat16; in a bfloat16 deployment
``precision`` runs the float32 reference and the other kinds run on it too. So two deployments
of one model vote over the same perturbed computations, and their answers agree wherever the
deployment's own ballot was fragile. ``reference=None`` perturbs the deployment's own dtype
(no float32 copy in memory; ``precision`` then casts the deployed weights).

These are perturbations, not deployment conditions: the deployment (its dtype, threads) is what
the user gave the backend, and accord never changes it outside one perturbed ballot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .._errors import ConfigError

KINDS = ("precision", "batch", "attention", "threads")


REFERENCES = ("float32", None)


@dataclass(frozen=True)
class Perturbation:
    """One perturbation: ``kind``, an optional ``value`` (e.g. ``batch`` neighbours) and the
    ``reference`` precision it runs around ("float32", or None for the deployment's own)."""

    kind: str
    value: Any = None
    reference: str | None = "float32"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown perturbation {self.kind!r}; choose from {', '.join(KINDS)}")
        if self.reference not in REFERENCES:
            raise ConfigError(f"Perturbation reference must be 'float32' or None, got {self.reference!r}")

    def describe(self) -> str:
        return self.kind if self.value is None else f"{self.kind}={self.value}"

    def __str__(self) -> str:
        return self.describe()


def compute_dtype(deployed: str, perturbation: Perturbation | None) -> str:
    """The dtype a ballot under ``perturbation`` computes in, in a deployment in ``deployed``
    (the one place that decides it: the local backend runs it, the vote predicts with it)."""
    if perturbation is None:
        return deployed
    if perturbation.kind == "precision":
        if perturbation.value is not None:
            return str(perturbation.value).removeprefix("torch.")
        if perturbation.reference is not None and deployed != perturbation.reference:
            return perturbation.reference
        return "bfloat16" if deployed == "float32" else "float32"
    return perturbation.reference or deployed


@dataclass(frozen=True)
class Perturb:
    """The perturbations ballots 1, 2, ... run under, in turn (ballot 0 runs unperturbed).

    ``accord.Perturb()`` uses all four kinds; ``accord.Perturb("precision", "batch")`` picks;
    ``accord.Perturb(Perturbation("batch", 2))`` sets values. ``accord.Perturb(())`` turns
    perturbation off (every ballot runs as the deployment does). ``reference``: "float32" (the
    default) runs perturbed ballots around the float32 computation; None around the deployment's
    own dtype (see the module docstring).
    """

    kinds: tuple[Perturbation, ...]
    reference: str | None

    def __init__(self, *kinds: str | Perturbation | tuple[()], reference: str | None = "float32") -> None:
        if reference not in REFERENCES:
            raise ConfigError(f"Perturb(reference=...) must be 'float32' or None, got {reference!r}")
        if len(kinds) == 1 and kinds[0] == ():
            chosen: tuple[Perturbation, ...] = ()
        elif not kinds:
            chosen = tuple(Perturbation(k, reference=reference) for k in KINDS)
        else:
            chosen = tuple(
                replace(k, reference=reference) if isinstance(k, Perturbation) else Perturbation(str(k), reference=reference)
                for k in kinds
            )
        object.__setattr__(self, "kinds", chosen)
        object.__setattr__(self, "reference", reference)

    def for_ballot(self, index: int) -> Perturbation | None:
        if index == 0 or not self.kinds:
            return None
        return self.kinds[(index - 1) % len(self.kinds)]

    def describe(self) -> list[str]:
        return [k.describe() for k in self.kinds]
