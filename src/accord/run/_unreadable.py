"""Outputs with nothing in them to read: one slot's retries stand for the run's.

An output is unreadable when the reader found no value in it at all (``no JSON value found``, ``no
number found``: a Misreading of the extract stage whose every error is of type ``extract``),
as a model that answers in prose, noise or nothing writes. The other ballots of a run are asked the
same prompt, so while every output of the run is unreadable, retrying them all at once (``k``
ballots times ``Retry.attempts``) mostly buys more of the same:

- the first slot whose output is unreadable is the **lead**: it is asked again with its feedback,
  as any invalid output is, up to ``Retry.attempts``;
- another slot's unreadable output waits (**held**) while the lead retries;
- the first readable output of the run (a valid value, or one that failed validation, looped or
  was cut off) ends the rule: the held outputs are asked again, each with its own feedback, and
  the run goes on as usual;
- the lead out of attempts with every output still unreadable: the held slots end without
  another call, a later unreadable output ends its slot at once, and the run ends, once no call is
  left in flight, with ``InvalidOutput`` ("no valid ballot"), every ballot in its Result.

A lead that ends on a backend fault hands the lead to the first held slot. A near-valid output
(a validation error on one field) is readable: its retries are as they were. (On a deployment
with a reference, the reference still decides a run whose serving ballot gave nothing: the run
is not ended here.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..read._read import Misreading, Reading

if TYPE_CHECKING:
    from .._result import Ballot
    from .._types import Completion
    from ._calls import Call, Slot

RETRY, HOLD, DROP = "retry", "hold", "drop"


def unreadable(reading: Reading | Misreading) -> bool:
    """Whether the reader found no value at all in the output."""
    return isinstance(reading, Misreading) and reading.stage == "extract" and all(e.get("type") == "extract" for e in reading.errors)


@dataclass(frozen=True)
class Held:
    """An unreadable output whose retry waits on the lead: what ``retry_output`` takes."""

    slot: Slot
    call: Call
    completion: Completion
    reading: Misreading
    ballot: Ballot


class Unreadable:
    """The state of the rule for one run (see the module docstring)."""

    def __init__(self) -> None:
        self.only = True  # every output of the run so far unreadable
        self.lead: int | None = None  # the slot whose retries stand for the run's
        self.tried = False  # the lead ran out of attempts, every output still unreadable
        self.held: list[Held] = []

    def read(self, reading: Reading | Misreading) -> list[Held] | None:
        """Take in one output's reading: at the run's first readable one, the held retries to make
        now (a list, maybe empty); else None."""
        if not self.only or unreadable(reading):
            return None
        self.only, held, self.held = False, self.held, []
        return held

    def retry(self, index: int) -> str:
        """What slot ``index`` does with its unreadable (or, once the rule is over, any invalid)
        output: ``RETRY`` (as usual), ``HOLD`` (wait on the lead) or ``DROP`` (end the slot)."""
        if not self.only:
            return RETRY
        if self.lead is None:
            self.lead = index
        if index == self.lead:
            return RETRY
        return DROP if self.tried else HOLD

    def ended(self, index: int) -> list[Held] | None:
        """Slot ``index`` ran out of attempts: when it leads an all-unreadable run, the held slots
        to end without another call (a list, maybe empty); else None."""
        if not self.only or index != self.lead or self.tried:
            return None
        self.tried = True
        held, self.held = self.held, []
        return held

    def handed(self, index: int) -> Held | None:
        """Slot ``index`` ended on a backend fault: when it led, the first held slot leads now
        (returned, to be asked again)."""
        if not self.only or index != self.lead or self.tried:
            return None
        self.lead = None
        if not self.held:
            return None
        first = self.held.pop(0)
        self.lead = first.slot.index
        return first
