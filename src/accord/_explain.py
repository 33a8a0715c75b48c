"""A Result in plain words: ``print(result)`` and ``result.explain()``.

:func:`verdict` is one line (what was decided, after how many calls, why it stopped); the audit
report opens with a verdict of its own in the same plain words (``cli/_audit_report.verdict``). :func:`explain` adds what was voted and what was
carried, the ballots run and predicted, what the margin gate did, usage and cost. Both read only
the Result, so a replayed or stored Result reads the same as a fresh one.

The words for each ``stopped_because`` and ``gate`` value are :data:`STOPS` and :data:`GATES`;
docs/result.md lists them as a glossary (a test keeps the two equal).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._result import Result

STOPS: dict[str, str] = {
    "unanimous": "every ballot agreed and the quorum was reached, so no more were drawn",
    "unbeatable": "the leader had more votes than the ballots left could overturn",
    "confident": "the leader's share passed the confidence rule",
    "k reached": "all k ballots ran and the leader holds the quorum",
    "gate": "the margin gate accepted the first ballot: no decisive token was near a tie, so one call was enough",
    "paired": "the first ballot was near a tie, a second ballot in another batch agreed, and the noise this server "
              "showed makes the chance that both were flipped smaller than the gate's risk: accepted after two calls",
    "settled": "the ballots still to run were predicted from those run (their margins were wider than the noise between them), "
               "and with them the leader holds the quorum",
    "reference": "a reference deployment decided between the serving answers",
    "uncontested": "no answer reached the quorum, but no valid ballot disagreed with this one (not stable)",
    "no quorum": "the ballots disagreed and no answer reached the quorum",
    "no valid ballot": "no ballot gave a valid answer",
    "budget": "the budget (calls, time or cost) ran out before the vote decided",
    "error": "the prompt could not be run",
}

GATES: dict[str, str] = {
    "certified": "the first ballot's decisive tokens were all clear of the noise floor: accepted after one call",
    "voted": "a decisive token was near a tie, so the vote decided, with the ballots run or predicted; "
             "the winning ballots were clear of the floor",
    "fragile": "every ballot for the answer had a decisive token below the noise floor: noise could flip it elsewhere",
    "reference": "a reference deployment settled the near-tie",
    "checked": "the first ballot was clear of the learned noise, and a second ballot checked it all the same (one "
               "accepted answer in a few is checked, so the learned noise keeps learning): the vote kept it",
    "contradicted": "the first ballot was clear of the learned noise, but the ballot that checked it disagreed and the "
                    "vote decided otherwise: recorded, and the noise learned from it",
    "learning": "this server's noise was not yet learned at the load the first ballot ran at: the vote decided, "
                "and its ballots were learned from",
    "stood aside": "no margins or no noise floor for this backend: the vote alone decided",
}


def stop_words(reason: str) -> str:
    """The glossary's words for a ``stopped_because`` value (a stop rule's own reason: named)."""
    return STOPS.get(reason, f"your stop rule said {reason!r}")


def gate_words(gate: str | None) -> str | None:
    """The glossary's words for a ``Result.gate`` value; None without a gate."""
    if gate is None:
        return None
    if gate.startswith("stood aside"):
        why = gate.partition(":")[2].strip()
        return f"stood aside: {why or GATES['stood aside']}"
    return f"{gate}: {GATES[gate]}" if gate in GATES else gate


def verdict(result: Result[Any]) -> str:
    """One line: what was decided, after how many calls, and why it stopped."""
    calls = f"{result.original_calls} call{'s' if result.original_calls != 1 else ''}"
    reason = stop_words(result.stopped_because.value)
    if result.replayed:
        return f"Replayed from the ledger (no call now): decided earlier after {calls}; {reason}."
    if result.error is not None and result.value is None:
        return f"Not decided after {calls}: {reason} ({type(result.error).__name__})."
    if not result.stable:
        return f"Answered but not stable after {calls}: {reason}."
    fragile = " Fragile: noise could flip it on another load or dtype." if result.fragile else ""
    return f"Decided after {calls}: {reason}.{fragile}"


def explain(result: Result[Any]) -> str:
    """Several lines in plain words (see the module docstring)."""
    lines = [verdict(result), *_decided(result), _ballots(result)]
    lines.append(f"  stopped:  {result.stopped_because.value}: {stop_words(result.stopped_because.value)}")
    gate = gate_words(result.gate)
    if gate is not None:
        lines.append(f"  gate:     {gate}")
    lines.append(_usage(result))
    if result.error is not None:
        lines.append(f"  error:    {type(result.error).__name__}: {_short(str(result.error))}")
    return "\n".join(lines)


def _decided(result: Result[Any]) -> list[str]:
    """The value, the fields voted (and how many ballots agreed) and the prose carried."""
    lines = []
    if result.data is not None or result.value is not None:
        lines.append(f"  value:    {_short(result.data if result.data is not None else result.value)}")
    valid = sum(1 for b in result.ballots if b.status == "valid")
    winners = result.votes.get(result.key, 0) if result.key is not None else 0
    if result.voted and valid:
        fields = ", ".join("the answer" if path == "$" else path for path in result.voted)
        lines.append(f"  voted:    {fields} ({winners} of {valid} valid ballots agreed on them)")
    if result.carried and result.value is not None:
        versions = ", ".join(f"{path} ({n} version{'s' if n != 1 else ''})" for path, n in result.carried.items())
        lines.append(f"  carried:  {versions}: prose, not voted; the value keeps the first winning ballot's")
    return lines


def _ballots(result: Result[Any]) -> str:
    """Ballots run (of k, with the quorum), predicted, valid, invalid and retried."""
    statuses = [b.status for b in result.ballots]
    retried = sum(1 for b in result.ballots if b.attempt > 1)
    k, quorum, predicted = result.meta.get("k"), result.meta.get("quorum"), result.meta.get("predicted")
    line = f"  ballots:  {len(result.ballots)} run"
    if k is not None:
        line += f" of up to k={k}" + (f" (quorum {quorum})" if quorum is not None else "")
    if isinstance(predicted, dict) and predicted:
        line += f", {sum(int(n) for n in predicted.values())} predicted, not run"
    return line + f"; {statuses.count('valid')} valid, {statuses.count('invalid')} invalid, {retried} retries"


def _usage(result: Result[Any]) -> str:
    usage = result.usage
    tokens = "tokens not reported" if usage.total_tokens is None else f"{usage.prompt_tokens or 0} in, {usage.completion_tokens or 0} out"
    if usage.cached_tokens:
        tokens += f" ({usage.cached_tokens} in from the provider's cache)"
    cost = "" if usage.cost is None else f", cost {usage.cost:.6g}"
    return f"  usage:    {usage.calls} call{'s' if usage.calls != 1 else ''}, {tokens}, {usage.seconds:.2f} s{cost}"


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= limit else text[: limit - 3] + "..."
