"""The end of a run: the :class:`~accord.Result`, and the typed error a failed run raises.

Built from the ballot box (``_box``) and every ballot the loop recorded:

    an accepted verdict        stable; the value is the winner's earliest ballot's, or the
                               fieldwise assembly's
    failed, plurality asked    the plurality winner when there is one, ``stable=False``, no error
    no quorum, uncontested     every valid ballot holds one answer and every other ballot failed
                               (invalid, looped, a fault): that answer, ``stable=False``, no error,
                               ``stopped_because="uncontested"``; one plain call would have
                               returned it (``on_no_consensus="strict"``: NoConsensus instead)
    failed                     an :class:`~accord.OutputError` carrying the Result:
                               BudgetExceeded    the budget ran out
                               NoConsensus       valid ballots, none can reach the quorum
                               BackendError      every finished slot failed in the backend
                               InvalidOutput     no valid output

The calls still in flight when the run ends are recorded as cancelled ballots (:func:`cancelled`).
:func:`environment` says where the answer was decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from .._errors import AccordError, BackendError, BudgetExceeded, InvalidOutput, NoConsensus
from .._records import Fieldwise, Fragility, Referral
from .._result import Ballot, Result, StopReason
from .._types import Settings, Usage
from ..backends._base import Backend
from ..determinism import environment as versions
from ._box import BUDGET, Box, Verdict

if TYPE_CHECKING:
    from ..vote._vote import Tally
    from ._calls import Call

UNCONTESTED = StopReason.UNCONTESTED  # no quorum, and no valid ballot against the answer (the module docstring)


def cancelled(calls: Iterable[tuple[Call, float, float]]) -> list[Ballot]:
    """A "cancelled" ballot for each ``(call, started, seconds)`` still on the model when the run
    ended: when it started (seconds into the run) and how long it had run; one call in its usage."""
    return [
        Ballot(call.slot, call.request.attempt, "cancelled", usage=Usage(seconds=ran, calls=1), started=started, seconds=ran)
        for call, started, ran in calls
    ]


def result(
    box: Box,
    verdict: Verdict,
    *,
    ballots: Sequence[Ballot],
    usage: Usage,
    backend: Backend,
    settings: Settings,
    plurality: bool,
    seconds: float,
    strict: bool = False,
    hint: dict[str, Any] | None = None,
    unreferred: dict[str, Any] | None = None,
) -> Result[Any]:
    """The Result of a run that ended on ``verdict``; a failed one carries its error (and the
    error the Result). ``hint``: what the schema's rendering in the prompt left out, when it did
    (``meta["schema_hint"]``). ``unreferred``: what a reference that gave no valid value did
    (``calls``, ``stopped_because``, ``fingerprint``: ``Result.referral``, with ``decided=False``),
    when the serving deployment then voted."""
    ballots = final_keys(box, ballots)
    tally = box.tally()
    reason, winner = chosen_winner(box, verdict, tally, plurality=plurality, strict=strict)
    chosen = box.first.get(winner) if winner is not None else None
    picked = Picked(chosen.value, chosen.data, agreement(tally, winner)) if chosen is not None else Picked(None, None, 0.0)
    picked, fieldwise = assembled(box, winner, picked)
    found = chosen is not None or (fieldwise is not None and fieldwise.how == "assembled")
    votes = dict(tally.ranked)
    failure = None if verdict.accepted or ((plurality or reason == UNCONTESTED) and found) else error(box, reason, votes, ballots)
    fragile, fragility = judged(reason, winner if found else None, ballots, votes)
    outcome: Result[Any] = Result(
        value=picked.value, data=picked.data, stable=verdict.accepted, agreement=picked.agreement, votes=votes,
        ballots=tuple(ballots), stopped_because=StopReason(reason), usage=usage, original_usage=usage,
        schema=box.schema.name, fingerprint=backend.fingerprint, key=winner if found else None, error=failure,
        field_agreement=box.field_agreement if box.vote.fieldwise else None, **roles(box), **margins(chosen),
        environment=environment(backend, settings, ballots, chosen), fragile=fragile,
        gate=gate_status(backend, box, reason, fragile), fragility=fragility, referral=unanswered(unreferred), fieldwise=fieldwise,
        meta={
            "seconds": round(seconds, 6),
            "k": box.k,
            "quorum": box.quorum,
            **({"predicted": dict(box.predicted)} if box.predicted else {}),
            **({"schema_hint": hint} if hint else {}),
        },
    )
    if failure is not None:
        failure.result = outcome
    return outcome


class Picked(NamedTuple):
    """The value a Result holds, its JSON data, and its agreement."""

    value: Any
    data: Any
    agreement: float


def margins(chosen: Ballot | None) -> dict[str, Any]:
    """What the Result takes of the winner's first ballot: its margins and engine."""
    if chosen is None:
        return {}
    return {"min_margin": chosen.min_margin, "fragile_steps": chosen.fragile_steps, "engine": chosen.engine}


def roles(box: Box) -> dict[str, Any]:
    """The fields the vote decided, and how many versions of each prose field the ballots wrote."""
    if box.fields is None:
        return {}
    return {"voted": box.fields.voted(), "carried": box.fields.carried(c.reading.form for c in box.casts)}


def unanswered(unreferred: dict[str, Any] | None) -> Referral | None:
    """A reference that gave no valid value, when the serving deployment then voted."""
    if not unreferred:
        return None
    return Referral(False, unreferred["calls"], unreferred["fingerprint"], unreferred["stopped_because"])


def final_keys(box: Box, ballots: Sequence[Ballot]) -> Sequence[Ballot]:
    """Each ballot with its final vote key (a field may have turned prose since it was read)."""
    if box.decisions is None:
        return ballots
    final = box.keys()
    return [replace(b, key=final[id(b)]) if id(b) in final and final[id(b)] != b.key else b for b in ballots]


def chosen_winner(box: Box, verdict: Verdict, tally: Tally, *, plurality: bool, strict: bool) -> tuple[str, str | None]:
    """Why the run ended and its winner: the verdict's, or, without one, the plurality winner
    when asked, or the one answer every valid ballot holds (``"uncontested"``)."""
    reason, winner = verdict
    uncontested = reason == "no quorum" and len(tally.counts) == 1 and not (plurality or strict)
    if winner is None and (plurality or uncontested) and tally.counts:
        return (UNCONTESTED if uncontested else reason), box.winner(tally)
    return reason, winner


def agreement(tally: Tally, winner: str | None) -> float:
    """The winner's votes over the valid ballots."""
    return tally.counts.get(winner, 0) / tally.valid if winner is not None and tally.valid else 0.0


def assembled(box: Box, winner: str | None, picked: Picked) -> tuple[Picked, Fieldwise | None]:
    """A fieldwise vote's value (the assembly, when it won) and how the vote ended."""
    if not box.vote.fieldwise:
        return picked, None
    if box.assembled is not None and winner == box.assembled[0]:
        weakest = min(box.field_agreement.values(), default=1.0) if box.field_agreement else 1.0
        return Picked(box.assembled[1], box.assembled[2], weakest), Fieldwise("assembled")
    if box.fallback is not None:
        return picked, Fieldwise("fell back to the whole-object winner", tuple(dict(e) for e in box.fallback))
    return picked, Fieldwise("undecided")


def judged(reason: str, winner: str | None, ballots: Sequence[Ballot], votes: dict[str, int]) -> tuple[bool | None, Fragility | None]:
    """Whether the answer rests on numerics noise could flip (``Result.fragile``), and, when it
    does, what is known: the first deciding ballot's fragile steps, the floor, the competing answer."""
    if winner is None:
        return None, None
    if reason in ("gate", "settled", "paired"):
        return False, None  # certified alone, or predicted within the measured floors, or a pair within the learned risk
    deciding = [b for b in ballots if b.status == "valid" and b.key == winner]
    judged_ = [b for b in deciding if b.fragile_steps is not None]
    if not judged_:
        return None, None  # no floor or no margins: the gate stood aside
    if any(b.fragile_steps == 0 for b in judged_):
        return False, None
    first = judged_[0]
    competing = next((key for key in votes if key != winner), None)
    return True, Fragility(first.fragile_at, first.fragile_steps, first.min_margin, competing)


def gate_status(backend: Backend, box: Box, reason: str, fragile: bool | None) -> str | None:
    """What the margin gate did, in words (``Result.gate``); None without a gate."""
    if box.vote.gate is None:
        return None
    if reason == "gate":
        return "certified"
    if box.checked is not None:  # the learned rule accepted slot 0; a second ballot checked it
        return "checked" if box.checked else "contradicted"
    if box.learning:
        return "learning"
    if not box.gating:
        said = describe(backend).get("gate")
        why = said if isinstance(said, str) and said.startswith("stood aside") else (
            "stood aside: the backend gives no margins or no noise floor is known")
        return why
    return "fragile" if fragile else "voted"


def error(box: Box, reason: str, votes: dict[str, int], ballots: Sequence[Ballot]) -> AccordError:
    """The typed error of a failed run (see the module docstring)."""
    shown = ", ".join(f"{key} x{count}" for key, count in list(votes.items())[:5])
    if reason == BUDGET:
        causes = failures(ballots)
        cause = next(iter(causes), None)
        said = ""
        if cause is not None:
            failed = sum(1 for b in ballots if b.status in ("error", "invalid"))
            last = next(b.error["message"] for b in reversed(ballots) if b.error and _cause(b) == cause)
            said = f"; {causes[cause]} of {failed} failed calls: {RAN_OUT.get(cause, cause)} (last: {last[:200]})"
        return BudgetExceeded(f"budget ran out before a decision ({len(ballots)} calls; votes: {shown or 'none'}{said})",
                              cause=cause, causes=causes)
    if votes:
        return NoConsensus(f"no answer can reach the quorum of {box.quorum} of {box.k} (votes: {shown})")
    faults = [seat.fault for seat in box.seats if seat.fault is not None]
    if faults and len(faults) == box.done:
        last = faults[-1]
        status = last.status if isinstance(last, BackendError) else None
        return BackendError(f"every ballot failed in the backend; last: {last}", status=status)
    last_error = next((b.error for b in reversed(ballots) if b.error), None)
    detail = f"; last: {last_error['message']}" if last_error else ""
    return InvalidOutput(f"no valid output in {len(ballots)} calls{ran_out(ballots)}{stopped_early(box)}{detail}")


def stopped_early(box: Box) -> str:
    """Why a run with no valid ballot ended before its quorum was out of reach, when a rule ended it."""
    if box.unreadable and (box.unasked or not box.tally().hopeless):  # run/_unreadable
        others = f", {box.unasked} other ballot{'s' * (box.unasked != 1)} not asked again" if box.unasked else ""
        return (" (no output held a value to read, and the first ballot's retries with feedback found none either: "
                f"the run stopped there{others})")
    if box.retraced and not box.tally().hopeless:  # run/_absorb
        return (" (a second ballot's first output repeated, byte for byte, the first ballot's, whose every attempt failed: "
                "the other ballots would have been asked the same, and were not)")
    return ""


RAN_OUT = {"invalid output (loop)": "looped", "invalid output (truncated)": "cut off at max_tokens"}


def ran_out(ballots: Sequence[Ballot]) -> str:
    """How many calls looped or were cut off, when any were (`` (3 looped, 1 cut off at max_tokens)``):
    the cause a reader of the error needs first, before what was read of the remains."""
    causes = failures(ballots)
    said = [f"{count} {RAN_OUT[cause]}" for cause, count in causes.items() if cause in RAN_OUT]
    return f" ({', '.join(said)})" if said else ""


def failures(ballots: Sequence[Ballot]) -> dict[str, int]:
    """What the failed calls failed with, the most frequent first (ties: the earliest seen):
    a backend fault by its exception's type, an invalid output by the stage it failed."""
    counts: dict[str, int] = {}
    for ballot in ballots:
        if ballot.status in ("error", "invalid") and ballot.error:
            cause = _cause(ballot)
            counts[cause] = counts.get(cause, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _cause(ballot: Ballot) -> str:
    error = ballot.error or {}
    if ballot.status == "invalid":
        return f"invalid output ({error.get('stage', 'unknown')})"
    return str(error.get("cause") or error.get("type") or "error")


def environment(backend: Backend, settings: Settings, ballots: Sequence[Ballot], chosen: Ballot | None) -> dict[str, Any]:
    """Where this answer was decided: versions, backend, settings, perturbations."""
    perturbations = sorted({str(b.perturbation) for b in ballots if b.perturbation is not None})
    engines = sorted({str(b.engine) for b in ballots if b.engine is not None})
    return {
        **versions(),
        **describe(backend),
        **({"engine": chosen.engine} if chosen and chosen.engine is not None else {}),
        **({"engines": engines} if len(engines) > 1 else {}),
        "settings": {f.name: value for f in fields(settings) if (value := getattr(settings, f.name)) is not None},
        "perturbations": perturbations,
    }


def describe(backend: Backend) -> dict[str, Any]:
    try:
        return dict(backend.describe())
    except Exception:  # noqa: BLE001 - describing a backend must never lose a result
        return {"backend": type(backend).__name__}
