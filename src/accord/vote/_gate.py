"""The margin gate: accept one ballot alone when no decoding step was numerically fragile.

A step is fragile when the gap between the best and second-best allowed logit is below the noise
floor (the largest logit change the numeric perturbations cause). A ballot with margins and no
fragile step would come out the same under that noise, so one call suffices. Under a floor of 0
(logits measured not to move at all) an exact tie is not fragile: nothing moves it, and the
argmax breaks it the same way each time. Over HTTP such ties are common and harmless: a
constrained answer's key ``"answer"`` is tokenized ``a|ns|wer`` or ``ans|wer`` at exactly the same
logprob (seen on vLLM in bfloat16).

Where the backend learned its noise as a distribution (``Noise.learned``: an OpenAI-compatible
server's own ballots, ``backends/openai/_noise``), the gate reads that distribution instead of its
maximum (``rule="risk"``, the default): a ballot is accepted when the chance that the noise at its
load flips any of its decisive steps is at most ``risk`` (:mod:`._risk`), and never at a load the
samples do not reach. One accepted ballot in a few is still checked by a second ballot
(``Margins.checked``): the answer is voted as if the gate had not accepted it, and an accepted
answer the vote contradicts is recorded. ``rule="max"`` keeps the largest change ever seen as the floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .._errors import ConfigError
from ._risk import NoiseTail

if TYPE_CHECKING:
    from ..backends._base import Backend, Noise


SHOWN = 16  # fragile step positions kept per ballot
RISK = 1e-4  # the default: one answer in 10,000 may be flipped by the noise the samples show
RULES = ("risk", "max")


@runtime_checkable
class Learned(Protocol):
    """A deployment's noise learned as a distribution (``Noise.learned``)."""

    def tail_at(self, load: int | None) -> NoiseTail | None: ...  # None: no samples at this load yet

    def check_due(self) -> bool: ...  # this accepted ballot is checked by a second one

    def checked(self, agreed: bool, server: str | None) -> None: ...  # the vote kept a checked answer, or not


@dataclass(frozen=True)
class Margins:
    """What the gate saw in one completion."""

    min_margin: float | None
    fragile_steps: int | None
    floor: float | None
    certified: bool | None  # None: the gate stood aside (no margins or no floor)
    steps: tuple[int, ...] = ()  # the fragile steps (0-based token positions), the first few
    risk: float | None = None  # the learned rule: the chance the noise flips a decisive step (None: not read)
    checked: bool = False  # accepted by the learned rule, and checked by a second ballot all the same
    learning: bool = False  # the learned rule had no samples at this ballot's load


@dataclass(frozen=True)
class MarginGate:
    """``floor``: the noise floor in logits; None asks the backend for its measured floor.
    ``risk``: where the backend learned its noise as a distribution, the largest chance per answer
    that the noise flips a decisive step of an accepted ballot. ``rule``: ``"risk"`` (that
    distribution, where there is one) or ``"max"`` (the largest change seen, as a floor)."""

    floor: float | None = None
    risk: float = RISK
    rule: str = "risk"

    def __post_init__(self) -> None:
        if self.floor is not None and (isinstance(self.floor, bool) or not self.floor >= 0):
            raise ConfigError(f"MarginGate(floor=...) must be >= 0 or None, got {self.floor!r}")
        if isinstance(self.risk, bool) or not isinstance(self.risk, (int, float)) or not 0 < self.risk < 1:
            raise ConfigError(f"MarginGate(risk=...) must be a chance between 0 and 1, got {self.risk!r}")
        if self.rule not in RULES:
            raise ConfigError(f"MarginGate(rule=...) must be one of {', '.join(map(repr, RULES))}, got {self.rule!r}")

    def floor_for(self, backend: Backend | None) -> float | None:
        """This gate's floor, else the floor of the backend's ``noise()`` (None when unknown)."""
        if self.floor is not None or backend is None:
            return self.floor
        noise = backend.noise()
        return None if noise is None or noise.floor is None else float(noise.floor)

    def learned(self, backend: Backend | None, noise: Noise | None = None) -> Learned | None:
        """The backend's learned noise (``noise``: its ``noise()``, when read already), when this
        gate reads it (no floor given)."""
        if self.floor is not None or backend is None:
            return None
        noise = noise if noise is not None else backend.noise()
        found = None if noise is None else noise.learned
        return found if isinstance(found, Learned) else None

    def check(self, margins: tuple[float, ...] | None, backend: Backend | None = None, load: int | None = None) -> Margins:
        """What the gate makes of one ballot's decisive margins; ``load``: the requests the
        deployment had in flight while it ran (the learned rule holds only at loads it saw)."""
        noise = backend.noise() if self.floor is None and backend is not None else None  # read once per ballot
        learned = self.learned(backend, noise)
        if learned is not None and margins:
            return self.read_learned(margins, learned, load)
        floor = self.floor if self.floor is not None or noise is None or noise.floor is None else float(noise.floor)
        if not margins:
            return Margins(None, None, floor, None)
        low = min(margins)
        if floor is None:
            return Margins(low, None, None, None)
        below = [i for i, m in enumerate(margins) if m < floor]
        return Margins(low, len(below), floor, not below, tuple(below[:SHOWN]))

    def read_learned(self, margins: Sequence[float], learned: Learned, load: int | None) -> Margins:
        low = min(margins)
        tail = learned.tail_at(load)
        if tail is None or tail.n == 0:
            return Margins(low, None, math.inf, False, learning=True)  # an unseen load: learn, do not accept
        if self.rule == "max":  # the largest change seen, as a floor
            floor = tail.deltas[-1]
            below = [i for i, m in enumerate(margins) if m < floor]
            accepted = not below
            checked = accepted and learned.check_due()
            return Margins(low, len(below), floor, accepted and not checked, tuple(below[:SHOWN]), checked=checked)
        risk = tail.risk(margins)
        if risk is None:
            return Margins(low, None, math.inf, False, learning=True)
        share = self.risk / len(margins)  # a step is fragile when it alone could spend its share of the risk
        fragile = [i for i, m in enumerate(margins) if tail.past(m) / 2.0 > share]
        clears = tail.clears(share)  # the margin one step needs: the floor this rule amounts to here
        accepted = risk <= self.risk
        checked = accepted and learned.check_due()
        return Margins(low, len(fragile), clears, accepted and not checked, tuple(fragile[:SHOWN]), risk=risk, checked=checked)
