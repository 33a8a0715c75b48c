"""The chance that a deployment's noise flips a ballot, read from samples of that noise.

A sample is one decoding step that two ballots of one prompt shared: the change of the gap
between the token written and a competitor both listed (``delta``, the measure ``accord
calibrate`` and the reference learner use). Two greedy ballots of one prompt are exchangeable
(either could have come first), so the signed change is symmetric: a step whose gap is ``m``
flips under another run's noise with chance ``P(delta > m) / 2``. A ballot is flipped when any
of its decisive steps is; by the union bound its risk is at most the sum over those steps.

:class:`NoiseTail` bounds ``P(delta > m)`` from above, with an honest margin for how few samples
there are (one-sided, at :data:`CONFIDENCE`):

- where samples reach past ``m``: the upper Poisson bound of their count, over the samples
  (``k`` of ``n`` past ``m`` bounds the chance by ``chi2(2k + 2) / 2n``; none: about ``3 / n``);
- past what the samples reach, a model: the changes' tail is taken to fall off no slower than an
  exponential. Two are fitted and the larger is kept: one from 0, ``exp(-m / s0)`` with ``s0`` the
  upper bound of the samples' mean; one past the tail threshold ``u`` (the :data:`TAIL` largest
  samples start there), the chance of passing ``u`` times ``exp(-(m - u) / s)`` with ``s`` the upper
  bound of the mean excess over ``u`` (peaks over a threshold). Each scale is bounded by the
  exponential mean's chi-square bound. The estimate is the smaller of the count's bound and the
  model's: a deployment whose changes were all 0 in ``n`` samples is bounded by ``3 / n`` at an
  exact tie and by nothing past it (the model says a change never seen is not there).

Too few samples (under :data:`MIN_STEPS`) say nothing: :meth:`NoiseTail.risk` is then None.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95  # one-sided: each bound holds with this chance at least
MIN_STEPS = 64  # samples before the tail says anything
TAIL = 0.05  # the share of the largest samples the exponential tail is fitted to
MIN_EXCESSES = 8  # samples strictly past the threshold needed to fit the tail
_Z = 1.6448536269514722  # the standard normal quantile at CONFIDENCE


def chi2_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile of a chi-square with ``dof`` degrees of freedom (Wilson-Hilferty; for
    ``p`` of 0.05 or 0.95, within about 1% from 2 degrees of freedom on)."""
    z = _Z if p >= 0.5 else -_Z
    if abs(p - CONFIDENCE) > 1e-9 and abs(p - (1 - CONFIDENCE)) > 1e-9:
        raise ValueError("chi2_quantile is set up for the confidence level only")
    if dof == 2:  # exact: an exponential with mean 2
        return -2.0 * math.log(1.0 - p)
    h = 2.0 / (9.0 * dof)
    return dof * max(0.0, 1.0 - h + z * math.sqrt(h)) ** 3


def count_bound(k: int, n: int) -> float:
    """An upper bound, at :data:`CONFIDENCE`, on a chance seen ``k`` times in ``n``."""
    return min(1.0, chi2_quantile(CONFIDENCE, 2 * k + 2) / (2.0 * n))


@dataclass(frozen=True)
class NoiseTail:
    """Samples of one deployment's gap changes, sorted, and the tail fitted to them."""

    deltas: tuple[float, ...]
    mean: float = 0.0  # s0: the upper bound of the samples' mean (the exponential from 0)
    threshold: float | None = None  # u: where the fitted tail starts (None: no tail fitted)
    beyond: float = 1.0  # the upper bound of P(delta > u)
    scale: float = 0.0  # the upper bound of the mean excess over u

    @classmethod
    def of(cls, deltas: Iterable[float]) -> NoiseTail:
        ordered = tuple(sorted(max(0.0, float(d)) for d in deltas if math.isfinite(d)))
        n = len(ordered)
        if n < MIN_STEPS:
            return cls(ordered)
        mean = 2.0 * sum(ordered) / chi2_quantile(1 - CONFIDENCE, 2 * n)
        top = max(MIN_EXCESSES, int(n * TAIL))
        u = ordered[max(0, n - top - 1)]
        excesses = [d - u for d in ordered if d > u]
        if len(excesses) < MIN_EXCESSES:
            return cls(ordered, mean)  # the samples pile up at their largest values: no tail to fit past them
        scale = 2.0 * sum(excesses) / chi2_quantile(1 - CONFIDENCE, 2 * len(excesses))
        return cls(ordered, mean, u, count_bound(len(excesses), n), scale)

    @property
    def n(self) -> int:
        return len(self.deltas)

    def past(self, margin: float) -> float:
        """An upper bound on the chance that one step's gap changes by more than ``margin``."""
        n = self.n
        k = n - bisect.bisect_right(self.deltas, margin)
        if margin <= 0:
            return count_bound(k, n)
        model = math.exp(-margin / self.mean) if self.mean > 0 else 0.0
        if self.threshold is not None and margin > self.threshold and self.scale > 0:
            model = max(model, self.beyond * math.exp(-(margin - self.threshold) / self.scale))
        elif self.threshold is not None and margin <= self.threshold:
            model = 1.0  # below the tail's threshold the count alone says
        return min(count_bound(k, n), model)

    def risk(self, margins: Sequence[float]) -> float | None:
        """An upper bound on the chance that another run's noise flips any of these decisive
        steps (each by half its :meth:`past`, summed); None with too few samples to say."""
        if self.n < MIN_STEPS:
            return None
        return min(1.0, sum(self.past(m) / 2.0 for m in margins))

    def quantiles(self, points: Sequence[float] = (0.5, 0.9, 0.99)) -> dict[str, float]:
        """The samples' quantiles and their largest, by name (``p50``, ``p90``, ``p99``, ``max``)."""
        if not self.deltas:
            return {}
        found = {f"p{round(q * 100):d}": self.deltas[min(self.n - 1, int(q * self.n))] for q in points}
        found["max"] = self.deltas[-1]
        return found

    def clears(self, risk: float) -> float | None:
        """The smallest margin one step needs for its share of ``risk`` alone (for the docs and
        ``describe()``): the margin past which ``past(m) / 2 <= risk``; None with too few samples."""
        if self.n < MIN_STEPS:
            return None
        low, high = 0.0, max(1.0, (self.deltas[-1] if self.deltas else 0.0) * 4 + 1.0)
        if self.past(high) / 2.0 > risk:
            return math.inf
        for _ in range(60):
            mid = (low + high) / 2.0
            low, high = (mid, high) if self.past(mid) / 2.0 > risk else (low, mid)
        return high
