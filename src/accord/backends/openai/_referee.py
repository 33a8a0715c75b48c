"""A reference deployment for an OpenAI-compatible server: ``models.openai(..., reference=B)``.

``B`` is another accord backend of the same weights: an in-process float32 copy
(``models.local(dtype="float32")``, ``models.transformers(path, dtype="float32")``) or a second
server (float32, batch-invariant, batch size 1). The run loop hands it every prompt whose first
ballot the margin gate did not certify (``accord.run._reference``); docs/determinism.md proves
why the answer then stays the same whatever the serving deployment's load or dtype.

:class:`Referee` is the reference computing what the serving deployment computes:

- the same prompt: the messages the server read (the schema in them exactly when the server
  needs it there), through the model's own chat template (vLLM applies the same one; the
  :class:`Learner` checks the prompt's token count against the server's ``usage``);
- for a schema sent as ``response_format``, the same grammar: exactly the JSON Schema sent (a
  bare type wrapped in ``{"answer": ...}`` and unwrapped again), compiled by xgrammar as vLLM
  compiles it (xgrammar lets the model spell a constant such as the key ``"answer"`` in any
  tokens; llguidance forces one spelling), and with the server's whitespace freedom:
  ``"free"`` (any whitespace between JSON tokens, the model's choice: vLLM's default) or
  ``"compact"`` (none: vLLM with ``disable_any_whitespace``). That freedom is detected from the
  server's own answers (:func:`._probe.free_whitespace`, remembered per server and model in
  :mod:`._caps`): free once any answer showed whitespace between tokens or listed a whitespace
  token as allowed, compact until then. The reference's ballot records it (``meta["json"]``).

A compact answer does not prove a compact server: the model may choose no whitespace where the
grammar allows it. On such a prompt the two grammars give the same greedy path, since every
token of a compact answer is allowed by both and the compact grammar allows a subset of the free
one's tokens; the detection switches to "free" at the first answer that differs.

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
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..._types import Completion, Request
from ...schema._schema import Schema
from .._base import Backend, Noise
from . import _calibrate as calibration
from . import _wire as wire

if TYPE_CHECKING:
    from ._backend import OpenAIBackend

log = logging.getLogger("accord.openai")

LEARN = 8  # first ballots compared before the learned floor is used
REFRESH = 16  # after that, one first ballot in this many is compared again
TOP = 5  # alternatives per token asked for while comparing
ENGINE = "xgrammar"  # the grammar engine a local reference decodes a server's JSON with (vLLM's)
STEPS = "token_steps"  # the completion meta key the exchange leaves what it sent and got under (taken out again)


class Referee(Backend):
    """The reference backend, asked as the serving deployment asks (see the module docstring)."""

    def __init__(self, inner: Backend, serving: OpenAIBackend) -> None:
        self.inner, self.serving = inner, serving
        self.blocking = inner.blocking
        self.gives_margins = inner.gives_margins

    @property
    def fingerprint(self) -> str:  # type: ignore[override]  # the reference's own
        return self.inner.fingerprint

    @property
    def default_max_tokens(self) -> int:  # type: ignore[override]  # the serving deployment's budget
        return self.serving.default_max_tokens

    @property
    def constrains(self) -> bool:  # type: ignore[override]  # the prompt the serving deployment gets
        return self.serving.constrains

    def constrains_for(self, schema: Schema[Any]) -> bool:
        return self.serving.constrains_for(schema)

    def generate(self, request: Request) -> Completion:
        fmt, wrapped = wire.format_for(request.schema)
        structured = fmt is not None and self.serving.constrains_for(request.schema)
        asked = request.with_settings(max_tokens=request.settings.max_tokens or self.serving.default_max_tokens)
        if structured:  # the prompt the serving deployment reads (no hint beside response_format), the schema it was sent
            asked = replace(wire.unhinted(asked), schema=_sent(request.schema))
        if structured and _local(self.inner):  # decoded as vLLM's xgrammar does: the server's whitespace, any spelling
            layout = self.whitespace()
            completion = self.inner.generate(asked, whitespace=layout, engine=ENGINE)  # type: ignore[call-arg]  # a local model's options
            completion = replace(completion, meta={**completion.meta, "json": layout})
        else:
            completion = self.inner.generate(asked)
        if structured and wrapped:
            inner = wire.unwrap(completion.text)
            if inner is not None:
                completion = replace(completion, text=inner, meta={**completion.meta, "wrapped": wire.WRAPPER})
        return completion

    def whitespace(self) -> str:
        """How the serving deployment writes strict JSON, as far as its answers showed (:mod:`._caps`):
        "free" when any of its servers is known to allow whitespace between tokens, else "compact"."""
        return "free" if any(k is not None and k.whitespace == "free" for k in self.serving._known_all()) else "compact"

    def noise(self) -> Noise | None:
        return None  # the reference decides with one ballot: no gate of its own

    def map_error(self, exc: BaseException) -> Any:
        return self.inner.map_error(exc)

    def identity(self) -> str:
        return self.inner.identity()

    def describe(self) -> dict[str, object]:
        return dict(self.inner.describe())

    def telemetry(self) -> dict[str, str | int]:
        return self.inner.telemetry()


@functools.lru_cache(maxsize=256)
def _sent(schema: Schema[Any]) -> Schema[Any]:
    """The JSON Schema the server is sent as ``response_format`` (closed; a bare schema wrapped),
    as a schema the reference decodes with."""
    fmt, _ = wire.format_for(schema)
    assert fmt is not None
    return Schema.of(fmt["json_schema"]["schema"])


def _local(backend: Backend) -> bool:
    from ..local._backend import TransformersBackend

    return isinstance(backend, TransformersBackend)


class Learner:
    """The serving deployment's floor, learned against the reference (see the module docstring)."""

    def __init__(self, reference: Backend, dtype: str | None) -> None:
        self.reference, self.dtype = reference, dtype
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
        return callable(getattr(self.reference, "forced", None))

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

    def observe(self, request: Request, sent: dict[str, Any], server: str, model: str) -> None:
        """Compare one serving answer's tokens with the reference's logits on them, fed the
        messages the server read (``sent``, the exchange's: ``messages``, ``steps``,
        ``prompt_tokens``); store the floor."""
        steps, messages = sent["steps"], sent["messages"]
        if not steps:
            return
        mine, theirs = _prompt_tokens(self.reference, messages), sent.get("prompt_tokens")
        if mine is not None and isinstance(theirs, int) and mine != theirs:
            with self._lock:
                first, self.other_prompt = self.other_prompt is None, (theirs, mine)
            if first:
                log.warning("the reference reads another prompt than %s (%d prompt tokens there, %d here: another chat "
                            "template?): its answers are another computation; not learned from", server, theirs, mine)
            return
        forced = self.reference.forced(messages, steps)  # type: ignore[attr-defined]  # can_learn checked it
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


def gate_said(backend: OpenAIBackend, noise: Noise | None) -> tuple[str, str | None]:
    """What the margin gate does with this backend, in words (``describe()["gate"]``), and where
    its floor comes from: "given", "calibrated", "learned", "learning" or None."""
    known = backend._known_all()
    if not backend.logprobs or any(k is not None and k.logprobs in ("ignored", "rejected") for k in known):
        return "stood aside: the server returns no logprobs (logprobs=False, or dropped)", None
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
