"""What each OpenAI-compatible server is known to do, remembered per (server, model).

Servers differ: some reject ``temperature`` or ``seed`` (HTTP 400/422), some accept
``response_format`` and ignore it (``transformers serve`` does), some return logprobs and some do
not. accord learns this from the answers it gets, once per server and model, and sends each
server only what it honours. The memory is process-wide by default (a new backend for the same
server starts from what the last one learned) and thread-safe; pass ``capabilities=Capabilities()``
to an :class:`~accord.backends.openai._backend.OpenAIBackend` to keep it private.

A server's Responses API (``models.openai(api="responses")``) is remembered apart from its chat
completions, under the URL of its endpoint (``.../v1/responses``): one server may honour
``response_format`` and not ``text.format``, or refuse ``seed`` on one API only. There the
facts are in that API's words (``Known.rejected`` holds ``text``, ``include``,
``max_output_tokens``), and ``response_format`` / ``logprobs`` say the same of ``text.format``
and ``include``.

    Known.rejected          parameters the server refused (they are no longer sent)
    Known.response_format   None (unknown), "honoured", "ignored" or "rejected"
    Known.logprobs          None (unknown), "returned", "ignored" or "rejected"
    Known.whitespace        how it writes strict JSON: None (no answer read yet), "compact" (no
                            whitespace between JSON tokens in any answer read so far) or "free"
                            (its grammar lets the model write whitespace there: final)

"compact" is provisional: a server whose grammar allows whitespace may write compact JSON where
the model chooses none, so one answer that shows free whitespace (:func:`._probe.free_whitespace`)
turns it to "free" for good, and nothing turns "free" back. A reference deployment decodes with
the grammar freedom recorded here (:mod:`._referee`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

Key = tuple[str, str]  # (redacted server URL, model); for the Responses API, the URL of its endpoint (.../responses)


@dataclass(frozen=True)
class Known:
    """The facts about one (server, model)."""

    rejected: frozenset[str] = frozenset()
    response_format: str | None = None
    logprobs: str | None = None
    whitespace: str | None = None
    probed: bool = False

    def accepts(self, param: str) -> bool:
        return param not in self.rejected

    def to_dict(self) -> dict[str, Any]:
        return {
            "rejected": sorted(self.rejected),
            "response_format": self.response_format,
            "logprobs": self.logprobs,
            "whitespace": self.whitespace,
        }


@dataclass
class Capabilities:
    """A thread-safe map from (server, model) to :class:`Known`."""

    _known: dict[Key, Known] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: Key) -> Known:
        with self._lock:
            return self._known.get(key, Known())

    def reject(self, key: Key, params: frozenset[str]) -> Known:
        """Remember that the server refused these parameters."""
        changes: dict[str, Any] = {}
        if params & {"response_format", "text"}:  # ``text``: the Responses API's (its key is the endpoint's)
            changes["response_format"] = "rejected"
        if params & {"logprobs", "top_logprobs", "include"}:
            changes["logprobs"] = "rejected"
        with self._lock:
            known = self._known.get(key, Known())
            known = replace(known, rejected=known.rejected | params, **changes)
            self._known[key] = known
            return known

    def learn(self, key: Key, **facts: str) -> None:
        """Record ``response_format=...`` or ``logprobs=...``; a refusal is never overwritten."""
        with self._lock:
            known = self._known.get(key, Known())
            kept: dict[str, Any] = {name: value for name, value in facts.items() if getattr(known, name) != "rejected"}
            self._known[key] = replace(known, **kept)

    def saw_json(self, key: Key, free: bool) -> None:
        """Record one strict JSON answer's whitespace: "free" once any answer shows it, else "compact"."""
        with self._lock:
            known = self._known.get(key, Known())
            if known.whitespace != "free":
                self._known[key] = replace(known, whitespace="free" if free else "compact")

    def claim_probe(self, key: Key) -> bool:
        """True exactly once per key: the caller runs the one structured-output probe."""
        with self._lock:
            known = self._known.get(key, Known())
            if known.probed or known.response_format is not None:
                return False
            self._known[key] = replace(known, probed=True)
            return True

    def release_probe(self, key: Key) -> None:
        """The probe failed for a transient reason: let a later call run it."""
        with self._lock:
            known = self._known.get(key, Known())
            self._known[key] = replace(known, probed=False)

    def forget(self) -> None:
        with self._lock:
            self._known.clear()


SHARED = Capabilities()
