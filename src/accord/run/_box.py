"""The ballot box: the votes cast so far, and what they decide. Pure: no clock, backend or I/O.

The run loop opens one :class:`Seat` per ballot slot (:meth:`Box.seat`), reports the smallest
margin of every attempt (:meth:`Box.heard`) and how each slot ended: a valid ballot
(:meth:`Box.cast`) or none (:meth:`Box.spoil`: invalid output out of retries, or a backend
fault). After every step it asks for the :meth:`Box.verdict`, checked in this order:

    gate       slot 0 alone, certified by the margin gate (no fragile decoding step)
    decided    the vote policy decides the tally: the whole object (``Vote.decide``), or
               fieldwise every path of the assembled tree (``_fieldwise``), the assembly
               re-validated against the schema (else the whole-object vote decides)
    settled    counting the unrun ballots that the finished ones predict (``_predict``), the
               leader holds the quorum and cannot be caught
    hopeless   no answer can reach the quorum: "no quorum" (valid ballots) or "no valid ballot"

The budget is the loop's to judge. Once the run is over, ``_outcome`` builds the Result from what
the box holds: the tally, the first ballot of each answer, the winner (ties broken by the vote's
rule over the model scores), the fieldwise assembly, the field agreement, the predicted ballots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..read._canonical import canonical_form, canonical_key
from ..read._exact import exact_form
from ..schema._schema import Schema, ValidationFailure
from ..vote import _fieldwise as fieldwise
from ..vote._vote import Tally, Vote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._errors import AccordError
    from .._result import Ballot
    from ..read._read import Reading
    from ..vote._predict import Computation, Floors

BUDGET = "budget"
FAILED = frozenset({"no quorum", "no valid ballot", BUDGET})  # any other reason (a stop rule's own too) accepts


class Verdict(NamedTuple):
    """Why the run is over (``Result.stopped_because``) and the winning key (None: no winner)."""

    reason: str
    winner: str | None

    @property
    def accepted(self) -> bool:
        """The vote accepted the winner (the Result is stable)."""
        return self.reason not in FAILED


@dataclass
class Seat:
    """One ballot slot, as the vote sees it."""

    index: int
    computation: Computation | None = None  # where it computes (None: predicts nothing)
    finished: bool = False
    key: str | None = None  # its answer, once finished valid
    fault: AccordError | None = None  # the backend fault it ended on
    low: float = math.inf  # the smallest margin over its attempts
    blind: bool = False  # an attempt without margins: predicts nothing


class Box:
    """The ballot box of one run.

    ``floors`` and ``computations`` (where ballot i would compute, for every i < k) are given
    when unrun ballots may be predicted; ``gating`` when the margin gate may accept slot 0 alone.
    """

    def __init__(
        self,
        vote: Vote,
        schema: Schema[Any],
        floors: Floors | None = None,
        computations: Sequence[Computation | None] = (),
        gating: bool = False,
    ) -> None:
        self.vote, self.schema, self.floors, self.gating = vote, schema, floors, gating
        self.computations = tuple(computations)
        self.k, self.quorum = vote.k, vote.needed
        self.seats: list[Seat] = []
        self.counts: dict[str, int] = {}  # votes per canonical key
        self.first: dict[str, Ballot] = {}  # the earliest ballot of each answer: its value is the answer's
        self.scores: dict[str, list[float]] = {}  # model scores per key, for tie rules
        self.flats: list[dict[Any, str]] = []  # fieldwise: each valid ballot, flattened to path -> key
        self.gate_key: str | None = None
        self.field_agreement: dict[str, float] | None = None
        self.assembled: tuple[str, Any, Any] | None = None  # (key, value, data) of a valid fieldwise assembly
        self.fallback: list[dict[str, Any]] | None = None  # why the assembly did not validate
        self.predicted: dict[str, int] = {}  # unrun ballots counted when the vote settled

    # -- what the loop reports -----------------------------------------------------------------

    def seat(self) -> Seat:
        """Open the next ballot slot."""
        index = len(self.seats)
        seat = Seat(index, self.computations[index] if index < len(self.computations) else None)
        self.seats.append(seat)
        return seat

    def heard(self, seat: Seat, min_margin: float | None) -> None:
        """One attempt of ``seat`` came back with this smallest margin (None: no margins)."""
        if min_margin is None:
            seat.blind = True
        else:
            seat.low = min(seat.low, min_margin)

    def cast(self, seat: Seat, ballot: Ballot, reading: Reading, score: float | None = None, certified: bool | None = None) -> None:
        """``seat`` ended on a valid ballot: it votes for ``reading.key``."""
        key = reading.key
        seat.finished, seat.key = True, key
        self.counts[key] = self.counts.get(key, 0) + 1
        self.first.setdefault(key, ballot)
        if self.vote.fieldwise:
            self.flats.append(fieldwise.flatten(reading.form, self.schema.json_schema))
        if score is not None:
            self.scores.setdefault(key, []).append(score)
        if self.gating and seat.index == 0 and len(self.seats) == 1 and certified:
            self.gate_key = key

    def spoil(self, seat: Seat, fault: AccordError | None = None) -> None:
        """``seat`` ended without a valid ballot (``fault``: on this backend error)."""
        seat.finished, seat.fault = True, fault

    # -- what the loop asks --------------------------------------------------------------------

    @property
    def done(self) -> int:
        """Slots finished, valid or not."""
        return sum(seat.finished for seat in self.seats)

    @property
    def all_done(self) -> bool:
        """Every slot opened so far has finished."""
        return all(seat.finished for seat in self.seats)

    def tally(self) -> Tally:
        return Tally(dict(self.counts), self.done, self.k, self.quorum)

    def winner(self, tally: Tally) -> str | None:
        """The most voted key, ties broken by the vote's rule (over the model scores)."""
        return self.vote.winner(tally, {key: tuple(values) for key, values in self.scores.items()})

    def verdict(self) -> Verdict | None:
        """The verdict once the vote is over (see the module docstring), else None."""
        if self.gate_key is not None:
            return Verdict("gate", self.gate_key)
        tally = self.tally()
        decided = self.decide_fields(tally) if self.vote.fieldwise and self.flats else self.decide_whole(tally)
        if decided:
            return decided
        settled = self.settle()
        if settled:
            return settled
        if tally.hopeless and not (self.vote.fieldwise and tally.valid):
            return self.hopeless(tally)
        return None

    # -- the decisions ---------------------------------------------------------------------------

    def decide_whole(self, tally: Tally) -> Verdict | None:
        reason = self.vote.decide(tally)
        return Verdict(reason, self.winner(tally)) if reason else None

    def decide_fields(self, tally: Tally) -> Verdict | None:
        """Fieldwise: decided when every assembled path is; falls back to the whole-object vote."""
        assembly = fieldwise.decide(self.flats, tally.done, self.vote)
        self.field_agreement = assembly.agreement
        if assembly.hopeless:
            return Verdict("no quorum", None)
        if assembly.reason is None:
            return None
        try:
            value = self.schema.validate(assembly.data)
        except ValidationFailure as failure:
            self.fallback = failure.errors
            whole = self.decide_whole(tally)
            return whole or (Verdict("no quorum", None) if tally.hopeless else None)
        data = self.schema.dump(value)
        key = canonical_key(canonical_form(exact_form(self.schema, value, data), self.schema.json_schema, self.vote.float_digits))
        self.assembled = (key, value, data)
        return Verdict(assembly.reason, key)

    def settle(self) -> Verdict | None:
        """The vote with the predicted ballots counted: settled once the leader holds the quorum
        and cannot be caught, or hopeless once no answer can reach it."""
        if self.floors is None:
            return None
        tally, extra, predicted = self.predict()
        if not predicted:
            return None
        if tally.lead >= tally.quorum and tally.lead > tally.runner_up + tally.remaining:
            self.predicted = extra
            return Verdict("settled", self.winner(tally))
        if tally.hopeless:
            return self.hopeless(tally)
        return None

    def predict(self) -> tuple[Tally, dict[str, int], int]:
        """The tally with every unrun ballot that exactly one finished outcome predicts, the
        votes those predictions add, and how many unrun ballots were predicted."""
        floors = self.floors
        assert floors is not None
        sources = [s for s in self.seats if s.finished and s.fault is None and not s.blind and s.computation is not None]
        counts, extra, predicted = dict(self.counts), dict[str, int](), 0
        for index in range(len(self.seats), self.k):
            here = self.computations[index] if index < len(self.computations) else None
            if here is None:
                continue
            outcomes = set()
            for source in sources:
                assert source.computation is not None
                distance = floors.distance(here, source.computation)
                if distance is not None and (distance == 0.0 or source.low > distance):
                    outcomes.add(source.key)
            if len(outcomes) == 1:
                key = outcomes.pop()
                predicted += 1
                if key is not None:  # None: the same invalid output
                    counts[key] = counts.get(key, 0) + 1
                    extra[key] = extra.get(key, 0) + 1
        return Tally(counts, self.done + predicted, self.k, self.quorum), extra, predicted

    @staticmethod
    def hopeless(tally: Tally) -> Verdict:
        return Verdict("no quorum" if tally.valid else "no valid ballot", None)
