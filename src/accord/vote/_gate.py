"""The margin gate: accept one ballot alone when no decoding step was numerically fragile.

A step is fragile when the gap between the best and second-best allowed logit is below the noise
floor (the largest logit change the numeric perturbations cause). A ballot with margins and no
fragile step would come out the same under that noise, so one call suffices. Under a floor of 0
(logits measured not to move at all) an exact tie is not fragile: nothing moves it, and the
argmax breaks it the same way each time. Over HTTP such ties are common and harmless: a
constrained answer's key ``"answer"`` is tokenized ``a|ns|wer`` or ``ans|wer`` at exactly the same
logprob (seen on vLLM in bfloat16).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._errors import ConfigError

if TYPE_CHECKING:
    from ..backends._base import Backend


SHOWN = 16  # fragile step positions kept per ballot


@dataclass(frozen=True)
class Margins:
    """What the gate saw in one completion."""

    min_margin: float | None
    fragile_steps: int | None
    floor: float | None
    certified: bool | None  # None: the gate stood aside (no margins or no floor)
    steps: tuple[int, ...] = ()  # the fragile steps (0-based token positions), the first few


@dataclass(frozen=True)
class MarginGate:
    """``floor``: the noise floor in logits; None asks the backend for its measured floor."""

    floor: float | None = None

    def __post_init__(self) -> None:
        if self.floor is not None and (isinstance(self.floor, bool) or not self.floor >= 0):
            raise ConfigError(f"MarginGate(floor=...) must be >= 0 or None, got {self.floor!r}")

    def floor_for(self, backend: Backend | None) -> float | None:
        """This gate's floor, else the floor of the backend's ``noise()`` (None when unknown)."""
        if self.floor is not None or backend is None:
            return self.floor
        noise = backend.noise()
        return None if noise is None or noise.floor is None else float(noise.floor)

    def check(self, margins: tuple[float, ...] | None, backend: Backend | None = None) -> Margins:
        floor = self.floor_for(backend)
        if not margins:
            return Margins(None, None, floor, None)
        low = min(margins)
        if floor is None:
            return Margins(low, None, None, None)
        below = [i for i, m in enumerate(margins) if m < floor]
        return Margins(low, len(below), floor, not below, tuple(below[:SHOWN]))
