"""Stage 7, vote: the tally of canonical forms and the rules that decide it.

Stop rules are small callables over a :class:`Tally` that return the reason they fire (or None),
and compose with ``|`` like tenacity's stop conditions::

    stop_when_unanimous | stop_when_unbeatable | stop_when_confident(0.95)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _check
from .._errors import ConfigError
from .._result import StopReason
from ._gate import MarginGate
from ._perturb import Perturb

#: What a run does when no answer reaches the quorum (``Vote(on_no_consensus=...)``).
ON_NO_CONSENSUS = ("raise", "plurality", "strict")


@dataclass(frozen=True)
class Tally:
    """What the stop rules see: votes per canonical key, ballots finished, k and quorum."""

    counts: dict[str, int]
    done: int  # ballots finished, valid or not
    k: int
    quorum: int

    @property
    def valid(self) -> int:
        return sum(self.counts.values())

    @property
    def remaining(self) -> int:
        return self.k - self.done

    @property
    def ranked(self) -> list[tuple[str, int]]:
        """Keys by votes, most first; equal counts by smallest key (independent of ballot order)."""
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def lead(self) -> int:
        return self.ranked[0][1] if self.counts else 0

    @property
    def runner_up(self) -> int:
        ranked = self.ranked
        return ranked[1][1] if len(ranked) > 1 else 0

    @property
    def hopeless(self) -> bool:
        """No answer, old or new, can still reach the quorum."""
        return self.lead + self.remaining < self.quorum


class StopRule:
    """Base of the early-stopping rules; ``a | b`` fires with the first rule that fires."""

    def __call__(self, tally: Tally) -> str | None:
        raise NotImplementedError

    def __or__(self, other: StopRule) -> StopRule:
        return stop_any(self, other)


class stop_any(StopRule):
    def __init__(self, *rules: StopRule) -> None:
        self.rules = rules

    def __call__(self, tally: Tally) -> str | None:
        for rule in self.rules:
            reason = rule(tally)
            if reason:
                return reason
        return None

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.rules))


class _Unanimous(StopRule):
    """The leader holds the quorum and no valid ballot dissents."""

    def __call__(self, tally: Tally) -> str | None:
        return StopReason.UNANIMOUS if tally.lead >= tally.quorum and tally.lead == tally.valid else None

    def __repr__(self) -> str:
        return "stop_when_unanimous"


class _Unbeatable(StopRule):
    """The leader holds the quorum and cannot be caught within the k ballots."""

    def __call__(self, tally: Tally) -> str | None:
        ok = tally.lead >= tally.quorum and tally.lead > tally.runner_up + tally.remaining
        return StopReason.UNBEATABLE if ok else None

    def __repr__(self) -> str:
        return "stop_when_unbeatable"


class stop_when_confident(StopRule):
    """Adaptive-Consistency: with a uniform prior, P(leader's share > 1/2) >= ``probability``."""

    def __init__(self, probability: float = 0.95) -> None:
        if not 0.5 < probability < 1:
            raise ConfigError(f"stop_when_confident needs 0.5 < probability < 1, got {probability}")
        self.probability = probability

    def __call__(self, tally: Tally) -> str | None:
        lead = tally.lead
        if lead == 0:
            return None
        return StopReason.CONFIDENT if share_above_half(lead, tally.valid - lead) >= self.probability else None

    def __repr__(self) -> str:
        return f"stop_when_confident({self.probability})"


def share_above_half(votes: int, others: int) -> float:
    """P(p > 1/2) for p ~ Beta(votes + 1, others + 1): P(Binomial(votes + others + 1, 1/2) <= votes)."""
    n = votes + others + 1
    return sum(math.comb(n, i) for i in range(votes + 1)) / (1 << n)  # 2**n, an exact int


stop_when_unanimous: StopRule = _Unanimous()
"""Stop when the leader holds the quorum and no valid ballot dissents (stopped_because "unanimous")."""
stop_when_unbeatable: StopRule = _Unbeatable()
"""Stop when the leader holds the quorum and cannot be caught within the k ballots ("unbeatable")."""
DEFAULT_EARLY_STOP = stop_when_unanimous | stop_when_unbeatable | stop_when_confident(0.95)


@dataclass(frozen=True)
class Candidate:
    """One answer in a tie: its key, votes, and the model scores of its ballots (may be empty)."""

    key: str
    votes: int
    scores: tuple[float, ...] = ()


TieBreak = Callable[[list[Candidate]], str]


def smallest_key(candidates: list[Candidate]) -> str:
    """Tie rule: the smallest canonical key (depends only on the answers, never on ballot order)."""
    return min(c.key for c in candidates)


def highest_score(candidates: list[Candidate]) -> str:
    """Tie rule: the best mean model score when every candidate has one, else the smallest key."""
    if all(c.scores for c in candidates):
        best = max(sum(c.scores) / len(c.scores) for c in candidates)
        candidates = [c for c in candidates if sum(c.scores) / len(c.scores) == best]
    return smallest_key(candidates)


@dataclass(frozen=True)
class Vote:
    """How ballots are counted.

    ``k``: at most k ballots (1 to 1000). ``quorum``: the votes the winner needs, an int or a fraction of k
    (rounded up); default ``k // 2 + 1``. ``early_stop``: True for the default rules (unanimous,
    unbeatable, confident), False to always run k ballots, or any :class:`StopRule`.
    ``fieldwise``: vote each field path separately. ``tie_break``: picks among answers with equal
    votes. ``gate``: the :class:`~accord.MarginGate` that may accept the first ballot alone when
    every decisive step of it clears the noise floor (on by default; ``gate=None`` turns it off,
    and then every answer takes a vote).
    ``float_digits``: None (the default) keeps every digit of a number in the vote key, so
    distinct amounts never merge; an int from 1 to 17 rounds floats to that many significant
    digits first, so every two floats that round alike are one answer (``float_digits=9``
    merges ``10000000.01``, ``10000000.02`` and ``10000000.04``): an opt-in for floats computed
    with noise, never for amounts a model writes. ``roles``: the role of
    some fields, ``{path: "prose" | "decisive"}`` (paths like ``items[].note``), over the
    default rule (``schema/_roles``; docs/vote.md): only decisive fields are voted, prose is
    carried from a ballot that holds the winning decision.

    ``on_no_consensus``: "raise" (the default) raises :class:`~accord.NoConsensus` when valid
    ballots disagree and none can reach the quorum, but returns an answer that every valid ballot
    holds while every other ballot failed (``stable=False``, ``stopped_because="uncontested"``: one
    plain call would have returned it); "strict" raises then too; "plurality" returns the
    plurality winner (``stable=False``) instead of raising. ``perturb``: the perturbations ballots
    1.. run under (None, the default: every kind, on backends that can apply them;
    ``accord.Perturb(())`` for none).
    """

    k: int = 5
    quorum: int | float | None = None
    early_stop: bool | StopRule = True
    fieldwise: bool = False
    tie_break: TieBreak = field(default=smallest_key)
    gate: Any = field(default_factory=MarginGate)
    float_digits: int | None = None
    roles: Mapping[str, str] | tuple[tuple[str, str], ...] = ()
    on_no_consensus: str = "raise"
    perturb: Perturb | None = None

    def __post_init__(self) -> None:
        _check.vote(self)
        object.__setattr__(self, "roles", _roles(self.roles))
        needed = self.needed
        if not 1 <= needed <= self.k:
            raise ConfigError(f"Vote quorum must be between 1 and k={self.k}, got {self.quorum!r}")
        digits = self.float_digits
        if digits is not None and (not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= 17):
            raise ConfigError(f"Vote(float_digits=...) must be None or an int from 1 to 17, got {digits!r}")
        if not isinstance(self.early_stop, (bool, StopRule)):
            raise ConfigError("Vote(early_stop=...) must be True, False or a stop rule")
        if self.on_no_consensus not in ON_NO_CONSENSUS:
            raise ConfigError(f'Vote(on_no_consensus=...) must be "raise", "plurality" or "strict", got {self.on_no_consensus!r}')
        _check.one_of("Vote", "perturb", self.perturb, Perturb)

    @property
    def needed(self) -> int:
        """The quorum as a number of votes."""
        q = self.quorum
        if q is None:
            return self.k // 2 + 1
        if isinstance(q, bool) or not isinstance(q, (int, float)):
            raise ConfigError(f"Vote(quorum=...) must be an int or a fraction, got {q!r}")
        if isinstance(q, float) and 0 < q <= 1:
            return max(1, math.ceil(q * self.k - 1e-9))
        if isinstance(q, float) and not q.is_integer():
            raise ConfigError(f"Vote(quorum=...) must be an int or a fraction in (0, 1], got {q!r}")
        return int(q)

    @property
    def stop_rule(self) -> StopRule | None:
        if self.early_stop is True:
            return DEFAULT_EARLY_STOP
        return self.early_stop or None

    def decide(self, tally: Tally) -> str | None:
        """The reason the vote is decided now, or None while it is open."""
        rule = self.stop_rule
        if rule is not None and tally.counts:
            reason = rule(tally)
            if reason:
                return reason
        if tally.remaining <= 0 and tally.lead >= tally.quorum:
            return StopReason.K_REACHED
        return None

    @property
    def role_overrides(self) -> dict[str, str]:
        """``roles`` as the dict it was given."""
        return dict(self.roles)

    def winner(self, tally: Tally, scores: dict[str, tuple[float, ...]] | None = None) -> str | None:
        """The winning key: most votes, ties broken by ``tie_break``."""
        if not tally.counts:
            return None
        top = tally.lead
        tied = [Candidate(k, v, (scores or {}).get(k, ())) for k, v in tally.counts.items() if v == top]
        return tied[0].key if len(tied) == 1 else self.tie_break(tied)


def _roles(roles: Any) -> tuple[tuple[str, str], ...]:
    """``Vote(roles=...)`` checked, as sorted ``(path, role)`` pairs (hashable, one spelling)."""
    pairs = roles.items() if isinstance(roles, Mapping) else roles
    try:
        checked = sorted((str(path), role) for path, role in pairs if isinstance(path, str))
    except (TypeError, ValueError):
        raise ConfigError(f'Vote(roles=...) must map field paths to "prose" or "decisive", got {roles!r}') from None
    bad = [f"{path}: {role!r}" for path, role in checked if role not in ("prose", "decisive")]
    if bad or len(checked) != len(list(roles.items() if isinstance(roles, Mapping) else roles)):
        raise ConfigError(f'Vote(roles=...) must map field paths to "prose" or "decisive", got {", ".join(bad) or roles!r}')
    return tuple(checked)
