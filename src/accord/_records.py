"""The typed records a :class:`~accord.Result` holds beside its value: how fragile the answer is,
what a reference deployment did, how a fieldwise vote ended, what the ledger did. Each writes
itself into ``Result.meta`` under the keys a reader (and a stored ledger) knows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fragility:
    """What is known of a fragile answer (``Result.fragility``; ``meta["fragile"]``): the first
    deciding ballot's ``steps`` below the noise floor and their count (``fragile_steps``), its
    smallest margin, and the ``competing`` answer where another was seen."""

    steps: tuple[int, ...] = ()
    fragile_steps: int | None = None
    min_margin: float | None = None
    competing: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"steps": list(self.steps), "fragile_steps": self.fragile_steps, "min_margin": self.min_margin,
                "competing": self.competing}


@dataclass(frozen=True)
class Referral:
    """What a reference deployment did (``Result.referral``; ``meta["decided_by"]``,
    ``meta["reference"]`` and ``meta["serving"]``).

    ``decided``: the reference's run is the answer; False when it gave no valid value and the
    serving deployment voted (``stopped_because``: why the reference's run ended). ``calls`` and
    ``fingerprint``: the reference's. Where it decided, ``serving_calls`` and the serving
    deployment's first valid ballot: its ``serving_answer`` (key), margin and fragile steps.
    """

    decided: bool
    calls: int
    fingerprint: str
    stopped_because: str | None = None
    serving_calls: int | None = None
    serving_answer: str | None = None
    serving_min_margin: float | None = None
    serving_fragile_steps: int | None = None
    serving_fragile_at: tuple[int, ...] | None = None

    def to_meta(self) -> dict[str, Any]:
        """The ``meta`` entries a reader sees."""
        if not self.decided:
            said = {"calls": self.calls, "stopped_because": self.stopped_because, "fingerprint": self.fingerprint}
            return {"reference": {**said, "decided": False}, "decided_by": "serving"}
        serving: dict[str, Any] = {"calls": self.serving_calls, "answer": self.serving_answer}
        if self.serving_answer is not None:
            at = list(self.serving_fragile_at) if self.serving_fragile_at is not None else None
            serving.update(min_margin=self.serving_min_margin, fragile_steps=self.serving_fragile_steps, fragile_at=at)
        return {"decided_by": "reference", "serving": serving,
                "reference": {"calls": self.calls, "fingerprint": self.fingerprint}}


@dataclass(frozen=True)
class Fieldwise:
    """How a fieldwise vote ended (``Result.fieldwise``; ``meta["fieldwise"]``): ``how`` is
    "assembled", "fell back to the whole-object winner" (with the assembly's validation
    ``errors``, ``meta["fieldwise_errors"]``) or "undecided"."""

    how: str
    errors: tuple[dict[str, Any], ...] = ()

    def to_meta(self) -> dict[str, Any]:
        return {"fieldwise": self.how, **({"fieldwise_errors": [dict(e) for e in self.errors]} if self.errors else {})}


@dataclass(frozen=True)
class LedgerRecord:
    """What the decision ledger did with the answer (``Result.ledger``; ``meta["ledger"]`` and
    ``meta["ledger_error"]``): stored or found under ``key`` as ``run`` (``decided``: when a
    replayed decision was made), or, when the write failed, the error's ``error_type`` and
    ``error_message``."""

    key: str | None = None
    run: int | None = None
    decided: float | None = None
    error_type: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error_type is not None

    def to_meta(self) -> dict[str, Any]:
        if self.failed:
            return {"ledger_error": {"type": self.error_type, "message": self.error_message}}
        return {"ledger": {"key": self.key, "run": self.run, **({"decided": self.decided} if self.decided is not None else {})}}

