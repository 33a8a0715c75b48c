"""The serving deployment's floor, learned against a reference deployment: ``models.openai(...,
reference=B)`` (the reference itself, asked as the server is asked: :mod:`._referee`).

:class:`Learner` learns the serving deployment's floor against the reference, with no manual
step: over the first :data:`LEARN` first ballots (and every :data:`REFRESH`-th after), the
reference's logits along the serving deployment's tokens (one teacher-forced pass over the
messages the server read, ``TransformersBackend.forced``) against the serving deployment's
``top_logprobs``:

    delta(t) = max over v listed at t of |(l_a - l_v) - (l'_a - l'_v)|,  a = the serving token

along the tokens both have (``accord calibrate``'s measure, :func:`._calibrate.gap_change`). The
competitors ``v`` are the tokens the server's grammar allowed (masked ones are not listed), so the
floor bounds the gap changes over the tokens a reference decoding in the same format may choose.
The floor is the largest delta seen; it is stored beside the calibrated floors
(``http_noise_floors.json``) under ``"<dtype> vs <reference fingerprint>"`` and raised when a
later comparison sees more. Until it is learned every first ballot goes to the reference. A
comparison whose prompt the reference tokenizes to another length than the server counted is not
another deployment's noise but another prompt: it is not learned, and ``describe()["gate"]`` says so.

The exchange asks :meth:`Learner.wants` before each first ballot; for one to compare it asks for
:data:`TOP` alternatives per token and hands the backend what it sent and got as the
Completion's ``steps`` (:class:`~accord._types.TokenSteps`); :func:`taught` feeds them to the
learner and hands the Completion on without them.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..._types import Completion, Request, TokenSteps
from .._base import Backend, Noise
from . import _calibrate as calibration
from ._calibrate import stored_floor

if TYPE_CHECKING:
    from ._backend import OpenAIBackend

log = logging.getLogger("accord.openai")

LEARN = 8  # first ballots compared before the learned floor is used
REFRESH = 16  # after that, one first ballot in this many is compared again
TOP = 5  # alternatives per token asked for while comparing


@runtime_checkable
class Forcing(Protocol):
    """A reference that can be fed another deployment's tokens (``TransformersBackend.forced``)."""

    def forced(self, prompt: Any, steps: Sequence[tuple[str, Any]]) -> list[tuple[str, dict[str, float]]]: ...


class Learner:
    """The serving deployment's floor, learned against the reference (see the module docstring)."""

    def __init__(self, reference: Backend, dtype: str | None) -> None:
        self.reference, self.dtype = reference, dtype
        self.forcing = reference if isinstance(reference, Forcing) else None  # a local model: it can learn
        self.key = f"{dtype or calibration.UNSPECIFIED} vs {reference.fingerprint}"
        self.floor = 0.0
        self.samples = 0
        self.steps = 0
        self.seen = 0  # first ballots since learning was done
        self.other_prompt: tuple[int, int] | None = None  # (server's, reference's) prompt tokens, where they differed
        self.loaded: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def can_learn(self) -> bool:
        return self.forcing is not None

    def learned(self, server: str, model: str) -> float | None:
        """The floor to use: the stored or learned one once :data:`LEARN` samples are in, else None."""
        with self._lock:
            if (server, model) not in self.loaded:
                self.loaded.add((server, model))
                entry = calibration.table().get("servers", {}).get(server, {}).get(model, {}).get(self.key)
                if isinstance(entry, dict) and isinstance(entry.get("floor"), (int, float)):
                    self.floor = max(self.floor, float(entry["floor"]))
                    self.samples = max(self.samples, int(entry.get("samples", 0)))
                    self.steps = max(self.steps, int(entry.get("steps", 0)))
            return self.floor if self.samples >= LEARN else None

    def wants(self) -> bool:
        """Whether the next first ballot is compared (learning, or its refresh turn)."""
        if not self.can_learn:
            return False
        with self._lock:
            if self.samples < LEARN:
                return True
            self.seen += 1
            return self.seen % REFRESH == 0

    def observe(self, request: Request, sent: TokenSteps, server: str, model: str) -> None:
        """Compare one serving answer's tokens with the reference's logits on them, fed the
        messages the server read (what the exchange sent and got); store the floor."""
        steps, messages = sent.steps, sent.messages
        if not steps or self.forcing is None:
            return
        mine, theirs = _prompt_tokens(self.reference, messages), sent.prompt_tokens
        if mine is not None and isinstance(theirs, int) and mine != theirs:
            with self._lock:
                first, self.other_prompt = self.other_prompt is None, (theirs, mine)
            if first:
                log.warning("the reference reads another prompt than %s (%d prompt tokens there, %d here: another chat "
                            "template?): its answers are another computation; not learned from", server, theirs, mine)
            return
        forced = self.forcing.forced(messages, steps)
        delta, compared = calibration.gap_change(steps, forced)
        if not compared or not math.isfinite(delta):
            return
        with self._lock:
            raised = delta > self.floor
            self.floor, self.steps, self.samples = max(self.floor, delta), self.steps + compared, self.samples + 1
            store = self.samples >= LEARN and (raised or self.samples == LEARN)
            entry = {"floor": round(self.floor, 6), "steps": self.steps, "samples": self.samples, "source": "learned",
                     "reference": self.reference.fingerprint,
                     "measured": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        if store:
            calibration.store(server, model, self.key, entry)

    def status(self) -> str:
        with self._lock:
            said = f"{min(self.samples, LEARN)} of {LEARN} first ballots compared"
            if self.other_prompt is not None:
                said += (f"; the reference reads another prompt than the server ({self.other_prompt[0]} prompt tokens there, "
                         f"{self.other_prompt[1]} here)")
            return said


def _prompt_tokens(reference: Backend, messages: Any) -> int | None:
    """How many tokens the reference's chat template makes of ``messages`` (None: it cannot say)."""
    count = getattr(reference, "prompt_tokens", None)
    return int(count(messages)) if callable(count) else None


def floor_for(learner: Learner | None, server: str, model: str, dtype: str | None) -> float | None:
    """The floor of one server and model: learned against the reference when the learner can
    learn (None until it has), else the one ``accord calibrate`` measured for ``dtype``."""
    if learner is not None and learner.can_learn:
        return learner.learned(server, model)
    return stored_floor(server, model, dtype)


def taught(learner: Learner | None, request: Request, server: str, model: str | None, completion: Completion) -> Completion:
    """A first ballot the learner asked to compare (its ``steps``, the exchange's): compared
    with the reference's logits on its tokens; the Completion handed on without them."""
    if completion.steps is None:
        return completion
    if learner is not None and model:
        try:
            learner.observe(request, completion.steps, server, model)
        except Exception:
            log.exception("learning the floor against the reference failed")
    return replace(completion, steps=None)


def gate_said(backend: OpenAIBackend, noise: Noise | None) -> tuple[str, str | None]:
    """What the margin gate does with this backend, in words (``describe()["gate"]``), and where
    its floor comes from: "given", "calibrated", "learned", "learning" or None."""
    known = backend._known_all()
    if not backend.logprobs or any(k is not None and k.logprobs in ("ignored", "rejected") for k in known):
        return "stood aside: the server returns no logprobs (logprobs=False, or dropped)", None
    if noise is not None and noise.learned is not None:
        return learned_said(backend, noise.learned)
    if noise is None or noise.floor is None:
        return ("stood aside: no noise floor is known for this server (accord calibrate --model openai:URL, "
                "noise_floor=, or reference=)"), None
    if backend.noise_floor is not None:
        return f"on: floor {noise.floor:.4g} (given)", "given"
    learner = backend._learner
    if learner is not None and learner.can_learn:
        if math.isinf(noise.floor):
            return f"on: every first ballot goes to the reference while the floor is learned ({learner.status()})", "learning"
        return f"on: floor {noise.floor:.4g}, learned against the reference", "learned"
    if math.isinf(noise.floor):
        return "on: every first ballot goes to the reference (no floor known against it)", None
    return f"on: floor {noise.floor:.4g} (calibrated)", "calibrated"


def learned_said(backend: OpenAIBackend, view: Any) -> tuple[str, str]:
    """The gate over the noise learned from the server's own ballots (:mod:`._noise`), in words."""
    from ...vote._gate import RISK

    tail = view.tail_at(None)
    if tail is None:
        return ("on, learning: this server's noise is learned from its own ballots (no reference); until enough "
                "ballots of one prompt were compared, every answer is voted"), "learning"
    deployments = [(server, model) for server, model in view.deployments if model]
    found = [view.learner.summary(server, model, RISK) for server, model in deployments]
    loads = ", ".join(sorted({str(f["trusted_up_to"]) for f in found if f["trusted_up_to"]}))
    return (f"on: accepts one ballot where the chance that this server's noise flips a decisive step is under "
            f"{RISK:g} (learned from {sum(f['steps'] for f in found)} steps of its own ballots; at loads {loads} "
            f"in flight; past them it keeps learning)"), "learned"
