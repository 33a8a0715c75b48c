"""What the run loop and its drivers say to each other: the calls to start (:class:`Call`,
in a :class:`Step`), what came of each (:class:`Outcome`), a driver's notice that a call waits
for a shared concurrency limit (:class:`Queued`); the text a streamed call just wrote
(:class:`Delta`, handed out by the driver); and one ballot slot's calls (:class:`Slot`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._types import Completion, Request
from ._box import Seat

if TYPE_CHECKING:
    from ..backends._base import Backend


@dataclass(frozen=True)
class Call:
    """One model call to start: ``id`` orders outcomes, ``slot`` is the ballot it is for;
    ``backend``: the deployment to call when not the run's own (a reference deciding)."""

    id: int
    slot: int
    request: Request
    backend: Backend | None = None


@dataclass(frozen=True)
class Step:
    """Start these calls; send back what finishes, or an empty list after ``timeout`` seconds."""

    start: tuple[Call, ...]
    timeout: float | None


@dataclass(frozen=True)
class Outcome:
    """A finished call: its completion, or the exception it raised, and how long it took."""

    call: Call
    completion: Completion | None
    error: BaseException | None
    seconds: float


@dataclass(frozen=True)
class Queued:
    """A driver's notice, sent beside the Outcomes: ``call`` waits for a free slot of a shared
    concurrency limit (``started=False``), or has just reached the model (``started=True``). A
    driver that starts every call at once (``drive``, a test) sends none."""

    call: Call
    started: bool


@dataclass(frozen=True)
class Delta:
    """Text a streamed call just wrote."""

    call: Call
    text: str


@dataclass
class Slot:
    """One ballot slot's calls: the latest request and the attempts so far; ``seat`` is its vote."""

    seat: Seat
    request: Request
    calls: int = 0
    outputs: int = 0
    faults: int = 0

    @property
    def index(self) -> int:
        return self.seat.index
