"""A reference deciding: the Result of a run whose first ballot a reference deployment replaced.

A backend with a ``reference`` (``models.openai(..., reference=...)``) runs slot 0 alone, as the
margin gate does. When the gate certifies it (every step clears the floor), it is the answer.
Otherwise the loop (:meth:`~._loop._Run.refer`) hands the prompt to the reference: a run of one
greedy ballot there, under what is left of the budget, given as many attempts as the serving
ballot took (:func:`held_to`): a serving answer valid on its first call is stood in for by the
reference's first call alone, since a retry with feedback is another computation than that call
(a reference with no valid answer leaves the vote to the serving deployment); a serving answer
that took a retry (a loop, a cut) lets the reference take one too. This module
builds that run's budget and merges its Result with the serving deployment's ballots:

    ballots           the serving ballots first (``deployment == "serving"``), then the
                      reference's (``"reference"``), numbered after them
    stopped_because   "reference" (or the reference run's failure: "no valid ballot", "budget")
    referral          decided by the reference, and per deployment its calls, and the serving
                      ballot's answer and fragile steps (``meta``: ``decided_by``, ``serving``,
                      ``reference``)
    usage             both deployments' calls

docs/determinism.md proves why this answer does not move with the serving deployment's load or
dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._records import Referral
from .._result import Ballot, Result, StopReason
from .._retry import Budget, Retry
from .._types import Usage
from ._outcome import describe

if TYPE_CHECKING:
    from ..backends._base import Backend

REFERENCE = StopReason.REFERENCE


def budget_left(budget: Budget, spent_seconds: float, calls: int, usage: Usage) -> Budget:
    """What the serving deployment's calls left of the run's budget (at least a little of each)."""
    return Budget(
        max_seconds=None if budget.max_seconds is None else max(budget.max_seconds - spent_seconds, 1e-3),
        max_calls=None if budget.max_calls is None else max(budget.max_calls - calls, 1),
        max_total_tokens=None if budget.max_total_tokens is None else max(budget.max_total_tokens - (usage.total_tokens or 0), 1),
        max_cost=None if budget.max_cost is None else max(budget.max_cost - (usage.cost or 0.0), 1e-12),
    )


def held_to(retry: Retry, attempts: int) -> Retry:
    """The reference's retry policy: at most the ``attempts`` (calls with output) the serving
    ballot took, feedback retries and grown cuts alike."""
    return replace(retry, attempts=max(1, attempts), stop=None)


def has_room(budget: Budget, calls: int) -> bool:
    """The call budget allows one more call (the reference's)."""
    return budget.max_calls is None or calls < budget.max_calls


def merged(
    decided: Result[Any], serving: Sequence[Ballot], usage: Usage, backend: Backend, reference: Backend, *, seconds: float
) -> Result[Any]:
    """The reference run's Result with the serving ballots before its own (see the module docstring)."""
    offset = 1 + max((b.slot for b in serving), default=0)
    ballots = (*serving, *(replace(b, slot=b.slot + offset) for b in decided.ballots))
    first = next((b for b in serving if b.status == "valid"), None)
    referral = Referral(
        True, len(decided.ballots), reference.fingerprint, serving_calls=len(serving), serving_answer=first.key if first else None,
        serving_min_margin=first.min_margin if first else None, serving_fragile_steps=first.fragile_steps if first else None,
        serving_fragile_at=(first.fragile_at or None) if first else None,
    )
    accepted = decided.error is None or decided.stable
    environment = {**decided.environment, **describe(backend), REFERENCE: describe(reference)}
    result = replace(
        decided, ballots=ballots, usage=usage + decided.usage, original_usage=usage + decided.usage,
        stopped_because=REFERENCE if accepted and decided.stable else decided.stopped_because,
        fingerprint=backend.fingerprint, meta={**decided.meta, "seconds": round(seconds, 6)}, environment=environment,
        fragile=False, referral=referral, gate="reference",
    )
    if result.error is not None:
        result.error.result = result
    return result
