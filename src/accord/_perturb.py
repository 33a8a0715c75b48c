"""Perturbation ensembles: what accord varies between the ballots of one run, to sample the noise.

A greedy run repeated in one process is bit-identical, so k identical local ballots prove nothing.
Ballot 0 runs unperturbed (the deployment as given); ballot i > 0 runs under one perturbation of
the kind a serving stack varies, cycling through the set:

    precision   the compute in another precision (float32 weights: bfloat16; bfloat16: float32)
    batch       one long batch neighbour, left padding (what a busy server does to a request)
    attention   the other attention implementation (sdpa <-> eager)
    threads     another intra-op thread count (a different reduction split)

These are perturbations, not deployment conditions: the deployment (its dtype, threads) is what
the user gave the backend, and accord never changes it outside one perturbed ballot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from ._errors import ConfigError

KINDS = ("precision", "batch", "attention", "threads")


@dataclass(frozen=True)
class Perturbation:
    """One perturbation: ``kind`` and an optional ``value`` (e.g. ``batch`` neighbours)."""

    kind: str
    value: Any = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown perturbation {self.kind!r}; choose from {', '.join(KINDS)}")

    def describe(self) -> str:
        return self.kind if self.value is None else f"{self.kind}={self.value}"

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class Perturb:
    """The perturbations ballots 1, 2, ... run under, in turn (ballot 0 runs unperturbed).

    ``accord.Perturb()`` uses all four kinds; ``accord.Perturb("precision", "batch")`` picks;
    ``accord.Perturb(Perturbation("batch", 2))`` sets values. ``accord.Perturb(())`` turns
    perturbation off (every ballot runs as the deployment does).
    """

    kinds: tuple[Perturbation, ...]

    def __init__(self, *kinds: Union[str, Perturbation, tuple[()]]) -> None:
        if len(kinds) == 1 and kinds[0] == ():
            chosen: tuple[Perturbation, ...] = ()
        elif not kinds:
            chosen = tuple(Perturbation(k) for k in KINDS)
        else:
            chosen = tuple(k if isinstance(k, Perturbation) else Perturbation(str(k)) for k in kinds)
        object.__setattr__(self, "kinds", chosen)

    def for_ballot(self, index: int) -> Perturbation | None:
        if index == 0 or not self.kinds:
            return None
        return self.kinds[(index - 1) % len(self.kinds)]

    def describe(self) -> list[str]:
        return [k.describe() for k in self.kinds]
