"""The run's policy: everything that shapes a run besides the prompt, schema and backend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._result import Ballot
from .._retry import Budget, Retry
from .._types import Settings
from ..observe._prices import Prices
from ..read._extract import Extract
from ..vote._vote import Vote


@dataclass(frozen=True)
class Policy:
    """Everything that shapes a run besides the prompt, schema and backend."""

    vote: Vote = field(default_factory=Vote)
    retry: Retry = field(default_factory=Retry)
    budget: Budget = field(default_factory=Budget)
    settings: Settings = field(default_factory=Settings)
    hint: bool = True
    normalizers: tuple[Callable[[str], str], ...] = ()
    on_ballot: Callable[[Ballot], Any] | None = None
    perturb: Any = None
    extract: Extract = field(default_factory=Extract)
    system: str | None = None
    examples: tuple[tuple[str, str], ...] = ()  # (input, output as rendered), see _examples
    prices: Prices | None = None

    @property
    def plurality(self) -> bool:
        """No quorum returns the plurality winner (``Vote(on_no_consensus="plurality")``)."""
        return self.vote.on_no_consensus == "plurality"

    @property
    def strict(self) -> bool:
        """No quorum is NoConsensus even when no valid ballot dissents (``"strict"``; ``_outcome``)."""
        return self.vote.on_no_consensus == "strict"
