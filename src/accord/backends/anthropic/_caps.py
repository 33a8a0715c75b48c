"""What each Messages server is known to do, remembered per (server, model).

How the schema travels depends on the model: Claude's newer models take it as
``output_config.format`` (structured outputs: the answer is constrained to the schema), older ones
refuse that and take it as one forced tool call (``tools`` with ``tool_choice`` naming the tool:
the answer is the tool's input), and a Messages-compatible server may take neither. With
``structured="auto"`` accord asks once per (server, model) (the probe, :mod:`._exchange`) and
remembers the answer here, process-wide by default; a parameter a server refuses (HTTP 400) is
remembered too and no longer sent.

    Known.structured   None (not known yet), "output_config", "tool" or "off" (the schema only
                       in the prompt)
    Known.rejected     parameters the server refused
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

Key = tuple[str, str]  # (redacted base URL, model)
#: How the schema may travel, best first: a refusal moves a server one step down.
MODES = ("output_config", "tool", "off")


@dataclass(frozen=True)
class Known:
    """The facts about one (server, model)."""

    structured: str | None = None
    rejected: frozenset[str] = frozenset()
    probed: bool = False

    def accepts(self, param: str) -> bool:
        return param not in self.rejected

    def to_dict(self) -> dict[str, Any]:
        return {"structured": self.structured, "rejected": sorted(self.rejected)}


@dataclass
class Capabilities:
    """A thread-safe map from (server, model) to :class:`Known`."""

    _known: dict[Key, Known] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, key: Key) -> Known:
        with self._lock:
            return self._known.get(key, Known())

    def reject(self, key: Key, params: frozenset[str]) -> None:
        """Remember that the server refused these parameters: refusing ``output_config`` or
        ``tools`` moves it to the next way down (:data:`MODES`)."""
        with self._lock:
            known = self._known.get(key, Known())
            known = replace(known, rejected=known.rejected | params)
            if "output_config" in params and known.structured in (None, "output_config"):
                known = replace(known, structured="tool")
            if "tools" in params:
                known = replace(known, structured="off")
            self._known[key] = known

    def learn(self, key: Key, structured: str) -> None:
        """Record how the schema travels; never back up a way the server refused."""
        with self._lock:
            known = self._known.get(key, Known())
            if known.structured is None or MODES.index(structured) > MODES.index(known.structured):
                self._known[key] = replace(known, structured=structured)

    def claim_probe(self, key: Key) -> bool:
        """True exactly once per key: the caller runs the one structured-output probe."""
        with self._lock:
            known = self._known.get(key, Known())
            if known.probed or known.structured is not None:
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
