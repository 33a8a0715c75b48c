"""Stage 8, Result: the value, how sure accord is, and how it got there."""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._records import Fieldwise, Fragility, LedgerRecord, Referral
from ._types import Usage

if TYPE_CHECKING:
    from ._errors import AccordError

T = TypeVar("T")


class StopReason(str, Enum):
    """Why a run ended (``Result.stopped_because``): a string, so ``reason == "unanimous"`` holds
    and stored ledgers read the same; :attr:`accepted` says whether the vote accepted the answer.

    Accepted: ``UNANIMOUS``, ``UNBEATABLE``, ``CONFIDENT`` (the early-stop rules), ``K_REACHED``
    (all k ballots ran and the leader holds the quorum), ``GATE`` (the margin gate certified
    ballot 0), ``PAIRED`` (ballot 0 and the next valid ballot agree, and the learned noise gives
    the chance that both were flipped as under the gate's risk), ``SETTLED`` (predicted ballots decided), ``REFERENCE`` (a reference deployment
    decided), and the reason any stop rule of your own returns (``StopReason("two ahead")``).
    Not accepted: ``UNCONTESTED`` (no quorum, but no valid ballot disagreed: the answer,
    ``stable=False``), ``NO_QUORUM``, ``NO_VALID_BALLOT``, ``BUDGET``, and ``ERROR`` (a prompt
    ``map`` could not run).
    """

    UNANIMOUS = "unanimous"
    UNBEATABLE = "unbeatable"
    CONFIDENT = "confident"
    K_REACHED = "k reached"
    GATE = "gate"
    PAIRED = "paired"
    SETTLED = "settled"
    REFERENCE = "reference"
    UNCONTESTED = "uncontested"
    NO_QUORUM = "no quorum"
    NO_VALID_BALLOT = "no valid ballot"
    BUDGET = "budget"
    ERROR = "error"

    __signature__ = inspect.Signature([inspect.Parameter("value", inspect.Parameter.POSITIONAL_ONLY)])

    @property
    def accepted(self) -> bool:
        """The vote accepted the answer (the Result is stable): every reason but the failed ones."""
        return self not in _NOT_ACCEPTED

    @classmethod
    def _missing_(cls, value: object) -> StopReason | None:
        """A stop rule's own reason: a new (accepted) member of that name, one per reason."""
        if not isinstance(value, str) or not value:
            return None
        member = str.__new__(cls, value)
        member._name_ = value
        member._value_ = value
        known = cls._value2member_map_.setdefault(value, member)
        return known if isinstance(known, cls) else None

    def __repr__(self) -> str:
        return repr(self.value)  # reads as the string it stands for, in a dict or a log line

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str(self), spec)


_NOT_ACCEPTED = frozenset(
    {StopReason.UNCONTESTED, StopReason.NO_QUORUM, StopReason.NO_VALID_BALLOT, StopReason.BUDGET, StopReason.ERROR}
)


@dataclass(frozen=True)
class Ballot:
    """One model call: what was sent and returned, and what accord made of it.

    ``slot`` is the vote slot (ballot number) and ``attempt`` the call within it (1 = first).
    ``status``: "valid", "invalid" (extraction or validation failed), "error" (the backend
    failed), or "cancelled" (abandoned once the vote was decided or the budget ran out).
    ``error`` is structured: ``{"stage", "message", "errors"}``. ``coercions``: what reading the
    text took, one ``{"path", "fix"}`` per repair or schema coercion (empty when it was valid JSON
    of the schema as written; see ``accord.Extract``).

    What accord's layers read of a ballot is typed: ``model``, ``engine`` and
    ``system_fingerprint`` (from its Completion), ``perturbation`` (what the request's
    perturbation's ``describe()`` said), ``fragile_at`` (the decoding steps below the noise
    floor, the first few), ``decisive_steps`` (the steps the gate read, when the rest wrote prose)
    and ``deployment`` ("serving" or "reference", under a reference deployment). ``meta`` is the
    record a reader sees: the backend's, with the last four written in from these fields.
    """

    slot: int
    attempt: int
    status: str
    text: str | None = None
    value: Any = None
    data: Any = None
    key: str | None = None
    error: dict[str, Any] | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    started: float = 0.0
    seconds: float = 0.0
    min_margin: float | None = None
    fragile_steps: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    coercions: tuple[dict[str, str], ...] = ()
    # typed, and written into meta: two ballots are equal when their records are
    model: str | None = field(default=None, compare=False)
    engine: str | None = field(default=None, compare=False)
    system_fingerprint: str | None = field(default=None, compare=False)
    perturbation: Any = field(default=None, compare=False)
    fragile_at: tuple[int, ...] = field(default=(), compare=False)
    decisive_steps: int | None = field(default=None, compare=False)
    deployment: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        said = {
            **({"perturbation": self.perturbation} if self.perturbation is not None else {}),
            **({"fragile_at": list(self.fragile_at)} if self.fragile_at else {}),
            **({"decisive_steps": self.decisive_steps} if self.decisive_steps is not None else {}),
            **({"deployment": self.deployment} if self.deployment is not None else {}),
        }
        if said:
            object.__setattr__(self, "meta", {**self.meta, **said})

    def to_dict(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "attempt": self.attempt,
            "status": self.status,
            "text": self.text,
            "data": self.data,
            "key": self.key,
            "error": _jsonable(self.error),
            "finish_reason": self.finish_reason,
            "usage": self.usage.to_dict(),
            "started": round(self.started, 6),
            "seconds": round(self.seconds, 6),
            "min_margin": _finite(self.min_margin),
            "fragile_steps": self.fragile_steps,
            "meta": _jsonable(self.meta),
            "coercions": [dict(c) for c in self.coercions],
        }


@dataclass(frozen=True)
class Result(Generic[T]):
    """The outcome of one run.

    ``value`` is always a validated value (or None when the run failed without a plurality).
    ``stable``: the vote policy accepted the value (quorum or an early-stop rule, or the margin
    gate, or the ballots it predicted). ``agreement``: winner's votes / valid ballots run. ``votes``: {canonical form: count}.
    ``ballots``: one record per model call of the decision. ``stopped_because``: a
    :class:`StopReason` (a string: "unanimous", "k reached", "budget", ...); its ``accepted`` is
    ``stable``.
    ``key``: the winning canonical form (the vote's key; the ledger's key is :attr:`ledger_key`). ``data``: the value's JSON data. ``environment``: library versions,
    backend, device, dtype, engine, model fingerprint, generation settings and the perturbations
    the ballots ran under.

    ``fragile``: True when the answer rests on numerics noise could flip: every ballot that voted
    for it had a decoding step below the noise floor, and neither the margin gate, predicted
    ballots nor a reference deployment decided it (:attr:`fragility`: the steps, the floor and
    the competing answer where known); False when one of those decided it or a ballot for it
    cleared the floor; None when the gate stood aside (no margins or no floor:
    :attr:`gate` says why). A fragile answer can be unanimous and stable: its ballots agree
    within one condition, and another condition (the server's load, its dtype) may not.

    ``voted``: the paths of the fields the vote decided (every leaf, where nothing is prose);
    ``carried``: for each prose field (a summary, a reason: generated text whose wording is not
    the point), how many distinct versions the valid ballots wrote. Prose is never voted and never
    the reason for NoConsensus: the value's prose is the first ballot's (lowest slot) among those
    that hold the winning decision (docs/vote.md, "Decisions and prose").

    What accord's layers read of a Result is typed: ``engine`` (who constrained the winning
    ballot's decoding), ``gate`` (what the margin gate did: "certified", "fragile", "voted",
    "reference", "learning", "checked", "contradicted", or "stood aside: ..." and why), ``fragility`` (:class:`Fragility`),
    ``referral`` (:class:`Referral`: a reference deployment's part), ``fieldwise``
    (:class:`Fieldwise`) and ``ledger`` (:class:`LedgerRecord`). ``meta`` is the record a reader
    sees, what ``to_dict()`` and the ledger hold: ``seconds``, ``k``, ``quorum``, ``predicted``,
    ``schema_hint``, and these fields written in under their old keys.

    ``usage`` and :attr:`calls` are what this run spent: nothing for an answer the ledger
    replayed (``replayed=True``), whose decision's are ``original_usage`` and
    :attr:`original_calls`.
    """

    value: T | None
    stable: bool
    agreement: float
    votes: dict[str, int]
    ballots: tuple[Ballot, ...]
    stopped_because: StopReason
    usage: Usage
    schema: str = ""
    fingerprint: str = ""
    key: str | None = None
    error: AccordError | None = None
    field_agreement: dict[str, float] | None = None
    min_margin: float | None = None
    fragile_steps: int | None = None
    replayed: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    data: Any = None
    original_usage: Usage | None = None
    fragile: bool | None = None
    voted: tuple[str, ...] = ()
    carried: dict[str, int] = field(default_factory=dict)
    # typed, and written into meta: two Results are equal when their records are
    engine: str | None = field(default=None, compare=False)
    gate: str | None = field(default=None, compare=False)
    fragility: Fragility | None = field(default=None, compare=False)
    referral: Referral | None = field(default=None, compare=False)
    fieldwise: Fieldwise | None = field(default=None, compare=False)
    ledger: LedgerRecord | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if type(self.stopped_because) is not StopReason:  # a stored or a rule's string
            object.__setattr__(self, "stopped_because", StopReason(self.stopped_because))
        said = {
            **({"engine": self.engine} if self.engine is not None else {}),
            **({"gate": self.gate} if self.gate is not None else {}),
            **({"fragile": self.fragility.to_dict()} if self.fragility is not None else {}),
            **(self.referral.to_meta() if self.referral is not None else {}),
            **(self.fieldwise.to_meta() if self.fieldwise is not None else {}),
            **(self.ledger.to_meta() if self.ledger is not None else {}),
        }
        if said:
            object.__setattr__(self, "meta", {**self.meta, **said})  # the record a reader sees, from the typed fields

    @property
    def calls(self) -> int:
        """Model calls this run made, every retry included: 0 for a replayed answer (``usage.calls``
        when the run decided too and another writer's answer came first)."""
        return self.usage.calls if self.replayed else len(self.ballots)

    @property
    def original_calls(self) -> int:
        """Model calls of the decision that made this answer (its ballots), replayed or not."""
        return len(self.ballots)

    @property
    def ledger_key(self) -> str | None:
        """The decision ledger's key of this answer (what ``accord ledger show`` takes); None
        without a ledger, or when the ledger could not store the run."""
        return self.ledger.key if self.ledger is not None else None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def coercions(self) -> tuple[dict[str, str], ...]:
        """What reading the winning value's text took (its first valid ballot's ``coercions``)."""
        for ballot in self.ballots:
            if ballot.status == "valid" and ballot.key == self.key:
                return ballot.coercions
        return ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.data,
            "stable": self.stable,
            "agreement": self.agreement,
            "votes": dict(self.votes),
            "stopped_because": self.stopped_because.value,
            "calls": self.calls,
            "usage": self.usage.to_dict(),
            "original_calls": self.original_calls,
            "original_usage": (self.original_usage or self.usage).to_dict(),
            "schema": self.schema,
            "fingerprint": self.fingerprint,
            "key": self.key,
            "ledger_key": self.ledger_key,
            "error": None if self.error is None else {"type": type(self.error).__name__, "message": str(self.error)},
            "field_agreement": self.field_agreement,
            "min_margin": _finite(self.min_margin),
            "fragile_steps": self.fragile_steps,
            "fragile": self.fragile,
            "voted": list(self.voted),
            "carried": dict(self.carried),
            "replayed": self.replayed,
            "coercions": [dict(c) for c in self.coercions],
            "meta": _jsonable(self.meta),
            "environment": _jsonable(self.environment),
            "ballots": [b.to_dict() for b in self.ballots],
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kwargs)

    def explain(self) -> str:
        """This Result in plain words: what was decided and how (the value, the fields voted and
        carried, ballots run and predicted, why it stopped, what the gate did, usage and cost);
        what ``print(result)`` shows. The first line is :meth:`verdict`."""
        from ._explain import explain

        return explain(self)

    def verdict(self) -> str:
        """One line: what was decided, after how many calls, and why it stopped."""
        from ._explain import verdict

        return verdict(self)

    def __str__(self) -> str:
        return self.explain()

    def __repr__(self) -> str:
        return (
            f"Result(value={self.value!r}, stable={self.stable}, agreement={self.agreement:.2f}, "
            f"calls={self.calls}, stopped_because={self.stopped_because.value!r}{', fragile=True' if self.fragile else ''})"
        )


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: a margin where the grammar forced every token is written as null."""
    return value if value is None or math.isfinite(value) else None


def _jsonable(data: Any) -> Any:
    """A JSON-safe copy (tuples to lists, non-finite floats to null, unknown objects to their repr)."""
    if isinstance(data, float):
        return _finite(data)
    if data is None or isinstance(data, (str, int, bool)):
        return data
    if isinstance(data, dict):
        return {str(k): _jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_jsonable(v) for v in data]
    return repr(data)
