"""The ballot box: the votes cast so far, and what they decide. Pure: no clock, backend or I/O.

The run loop opens one :class:`Seat` per ballot slot (:meth:`Box.seat`), reports the smallest
margin of every attempt (:meth:`Box.heard`) and how each slot ended: a valid ballot
(:meth:`Box.cast`) or none (:meth:`Box.spoil`: invalid output out of retries, or a backend
fault). After every step it asks for the :meth:`Box.verdict`, checked in this order:

    gate       slot 0 alone, certified by the margin gate (no fragile decoding step)
    paired     slot 0 and the next valid ballot agree, both within the learned noise's risk together
    decided    the vote policy decides the tally: the whole object (``Vote.decide``), or
               fieldwise every path of the assembled tree (``_fieldwise``), the assembly
               re-validated against the schema (else the whole-object vote decides)
    settled    counting the unrun ballots that the finished ones predict (``_predict``), the
               leader holds the quorum and cannot be caught
    unreadable every output unreadable, the lead slot's retries spent, nothing left in flight:
               "no valid ballot" (``_unreadable``); the same once a slot's first failed output
               retraced, byte for byte, a slot that spent every attempt (``_absorb``)
    hopeless   no answer can reach the quorum: "no quorum" (valid ballots) or "no valid ballot"

The budget is the loop's to judge. Once the run is over, ``_outcome`` builds the Result from what
the box holds: the tally, the first ballot of each answer, the winner (ties broken by the vote's
rule over the model scores), the fieldwise assembly, the field agreement, the predicted ballots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .._result import StopReason
from ..read._canonical import canonical_form, canonical_key
from ..read._exact import exact_form
from ..schema._schema import Schema, ValidationFailure
from ..vote import _fieldwise as fieldwise
from ..vote._decisive import Decisions
from ..vote._vote import Tally, Vote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._errors import AccordError
    from .._result import Ballot
    from ..read._read import Reading
    from ..vote._gate import Margins
    from ..vote._predict import Computation, Floors

BUDGET = "budget"


class Verdict(NamedTuple):
    """Why the run is over (``Result.stopped_because``) and the winning key (None: no winner)."""

    reason: str
    winner: str | None

    @property
    def accepted(self) -> bool:
        """The vote accepted the winner (the Result is stable)."""
        reason = self.reason
        return (reason if type(reason) is StopReason else StopReason(reason)).accepted  # a stop rule's own reason too


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
    risk: float | None = None  # the learned gate: the chance its valid ballot's decisive steps were flipped


@dataclass(frozen=True)
class Cast:
    """A valid ballot in the box: where it sat, the ballot, and what reading it gave."""

    seat: Seat
    ballot: Ballot
    reading: Reading
    score: float | None


class Box:
    """The ballot box of one run.

    ``floors`` and ``computations`` (where ballot i would compute, for every i < k) are given
    when unrun ballots may be predicted; ``gating`` when the margin gate may accept slot 0 alone.
    ``decisions``: the roles of the run's fields (``vote/_decisive``): every tally counts the
    decisive part of a ballot only, and a field that turns prose has every ballot counted again.
    """

    def __init__(
        self,
        vote: Vote,
        schema: Schema[Any],
        floors: Floors | None = None,
        computations: Sequence[Computation | None] = (),
        gating: bool = False,
        *,
        decisions: Decisions | None = None,
    ) -> None:
        self.vote, self.schema, self.floors, self.gating = vote, schema, floors, gating
        self.fields = decisions  # every field's role, for the Result (plain ones too)
        self.decisions = decisions if decisions is not None and not decisions.plain else None
        self.casts: list[Cast] = []
        self.known: dict[int, tuple[Reading, str]] = {}  # id(reading) -> (reading, its vote key)
        self.computations = tuple(computations)
        self.k, self.quorum = vote.k, vote.needed
        self.seats: list[Seat] = []
        self.counts: dict[str, int] = {}  # votes per canonical key
        self.first: dict[str, Ballot] = {}  # the first ballot (lowest slot) of each answer: its value, prose included, is the answer's
        self.scores: dict[str, list[float]] = {}  # model scores per key, for tie rules
        self.flats: list[dict[Any, str]] = []  # fieldwise: each valid ballot, flattened to path -> key
        self.gate_key: str | None = None
        self.pair_key: str | None = None  # ballot 0 and the next valid ballot agree within the learned risk
        self.field_agreement: dict[str, float] | None = None
        self.assembled: tuple[str, Any, Any] | None = None  # (key, value, data) of a valid fieldwise assembly
        self.fallback: list[dict[str, Any]] | None = None  # why the assembly did not validate
        self.predicted: dict[str, int] = {}  # unrun ballots counted when the vote settled
        self.unreadable = False  # every output unreadable, and the lead's retries spent (run/_unreadable)
        self.retraced = False  # a first failed output retraced a spent slot's: no other slot is opened (run/_absorb)
        self.unasked = 0  # slots that rule ended without asking them again
        # The learned gate (vote/_gate): slot 0 accepted but checked (its server), what the vote made of
        # it (True: kept, False: contradicted), and whether slot 0 ran at a load with no samples yet.
        self.checking: str | None = None
        self.checked: bool | None = None
        self.learning = False

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

    def key_of(self, reading: Reading) -> str:
        """The vote key of a reading: the canonical key of its decisive part (worked out once per
        reading while no field turns prose)."""
        if self.decisions is None:
            return reading.key
        known = self.known.get(id(reading))
        if known is None or known[0] is not reading:
            known = self.known[id(reading)] = (reading, self.decisions.key(reading.form, reading.key))
        return known[1]

    def cast(self, seat: Seat, ballot: Ballot, reading: Reading, score: float | None = None, certified: bool | None = None, *,
             risk: float | None = None) -> None:
        """``seat`` ended on a valid ballot: it votes for its reading's decisive part (``risk``: the
        learned gate's chance that its decisive steps were flipped, where it read one)."""
        seat.risk = risk
        self.casts.append(Cast(seat, ballot, reading, score))
        if self.decisions is not None and self.decisions.observe(reading.form):
            self.recount()  # a field turned prose: every ballot's vote key changes
        else:
            self.count(self.casts[-1])
        if self.gating and seat.index == 0 and len(self.seats) == 1 and certified:
            self.gate_key = seat.key
        elif self.gating and self.gate_key is None:
            self.pair_key = self.paired()

    def gated(self, seat: Seat, margins: Margins, server: str | None) -> None:
        """What the learned gate said of slot 0: accepted but checked by a second ballot (``checking``:
        the server it ran on), or run at a load with no samples yet (``learning``)."""
        if seat.index != 0:
            return
        if margins.checked and seat.key is not None:
            self.checking = server or ""
        self.learning = self.learning or margins.learning

    def paired(self) -> str | None:
        """Ballot 0 and one more valid ballot, the only two, agree; the chance that both were
        flipped (their learned risks, multiplied: two batches, two draws of the noise) is under
        the gate's risk. Their answer, else None (docs/determinism.md, "After a fragile ballot")."""
        gate = self.vote.gate
        valid = [cast.seat for cast in self.casts]
        if gate is None or len(valid) != 2 or valid[0].index != 0 or self.vote.fieldwise:
            return None
        first, second = valid
        if first.key is None or first.key != second.key or first.risk is None or second.risk is None:
            return None
        return first.key if first.risk * second.risk <= gate.risk else None

    def count(self, cast: Cast) -> None:
        seat, ballot = cast.seat, cast.ballot
        key = self.key_of(cast.reading)
        seat.finished, seat.key = True, key
        self.counts[key] = self.counts.get(key, 0) + 1
        held = self.first.get(key)
        if held is None or ballot.slot < held.slot:
            self.first[key] = ballot
        if self.vote.fieldwise:
            self.flats.append(self.flat_of(cast))
        if cast.score is not None:
            self.scores.setdefault(key, []).append(cast.score)

    def recount(self) -> None:
        self.counts, self.first, self.scores, self.flats, self.known = {}, {}, {}, [], {}
        for cast in self.casts:
            self.count(cast)

    def keys(self) -> dict[int, str]:
        """Each valid ballot's final vote key, by ``id`` of the ballot (its key as recorded may be
        one a later ballot changed, when a field turned prose)."""
        return {id(cast.ballot): cast.seat.key for cast in self.casts if cast.seat.key is not None}

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

    def settle_check(self, verdict: Verdict) -> bool | None:
        """A checked slot 0 (``checking``), judged by the vote: kept (True) or contradicted (False);
        None when there is nothing to judge (no check, no winner, or no second valid ballot)."""
        if self.checking is None or verdict.winner is None or not self.seats or self.seats[0].key is None:
            return None
        if sum(self.counts.values()) < 2:
            return None
        self.checked = verdict.winner == self.seats[0].key
        return self.checked

    def verdict(self) -> Verdict | None:
        """The verdict once the vote is over (see the module docstring), else None."""
        if self.gate_key is not None:
            return Verdict("gate", self.gate_key)
        if self.pair_key is not None:
            return Verdict("paired", self.pair_key)
        tally = self.tally()
        decided = self.decide_fields(tally) if self.vote.fieldwise and self.flats else self.decide_whole(tally)
        if decided:
            return decided
        if (self.unreadable or self.retraced) and self.all_done and not tally.valid:
            return Verdict("no valid ballot", None)  # the others would be asked the same prompt (run/_unreadable, _absorb)
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
        data = assembly.data if self.decisions is None else self.carry(assembly.data)
        try:
            value = self.schema.validate(data)
        except ValidationFailure as failure:
            self.fallback = failure.errors
            whole = self.decide_whole(tally)
            return whole or (Verdict("no quorum", None) if tally.hopeless else None)
        data = self.schema.dump(value)
        full = canonical_form(exact_form(self.schema, value, data), self.schema.json_schema, self.vote.float_digits)
        key = canonical_key(full) if self.decisions is None else self.decisions.key(full, canonical_key(full))
        self.assembled = (key, value, data)
        return Verdict(assembly.reason, key)

    def carry(self, decided: Any) -> Any:
        """The fieldwise decision with its prose: a ballot's whole data where one holds exactly this
        decision (the lowest slot), else the decision with the prose of the ballot that agrees
        with it on the most paths grafted in."""
        assert self.decisions is not None
        wanted = canonical_key(decided)
        ordered = sorted(self.casts, key=lambda c: c.ballot.slot)
        for cast in ordered:
            if self.key_of(cast.reading) == wanted:  # its decisive part's key, worked out once
                return cast.reading.data
        mine = fieldwise.flatten(decided, self.schema.json_schema)
        best = max(ordered, key=lambda c: sum(mine.get(p) == k for p, k in self.flat_of(c).items()), default=None)
        return decided if best is None else self.decisions.graft(decided, best.reading.data)

    def flat_of(self, cast: Cast) -> dict[Any, str]:
        form = cast.reading.form if self.decisions is None else self.decisions.project(cast.reading.form)
        return fieldwise.flatten(form, self.schema.json_schema)

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
