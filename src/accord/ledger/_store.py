"""What the ledger's front door asks of a store, and the rows that cross between them.

A store keeps six relations (the SQLite store's tables; the PostgreSQL store keeps the same in
the schema ``accord``), in the format of :mod:`._migrations`:

    contexts  id -> material: what a stabilizer adds to every key (canonical JSON)
    keys      key -> its request (canonical JSON) and context
    runs      one row per run: outcome, value, the Result as JSON, ``superseded_by``
    ballots   (run, seq) -> status and body: every ballot of every run, as JSON
    answers   key -> its current answer (an accepted run) and when it was decided
    claims    key -> the worker deciding it now (``owner``), until when (``expires``), and the
              answer's run once it let go: a lease, so a killed worker's claims run out

Values cross the boundary as JSON text, exactly as stored (the codec makes and reads them);
times are Unix seconds; run ids are positive integers, increasing in the order runs were opened.
Every operation is atomic. Every failure is a :class:`~accord.LedgerError` whose message says
what to do and never holds a password.

:func:`~._open.open_store` (in :mod:`._open`, above the stores) chooses the store by the path:
an SQLite file (:mod:`._sqlite`) or a ``postgresql://`` DSN (:mod:`._postgres`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

RunOutcome = str  # "accepted" | "unstable" | "failed" | "interrupted" (opened, never finished)

# The columns of each table as ``Store.dump`` yields them (and ``accord ledger migrate`` copies
# them), parents before children.
TABLES: dict[str, tuple[str, ...]] = {
    "contexts": ("id", "material"),
    "keys": ("key", "context", "request", "created"),
    "runs": ("id", "key", "created", "outcome", "stopped_because", "error", "calls", "refresh", "value", "result",
             "superseded_by"),
    "ballots": ("run", "seq", "status", "body"),
    "answers": ("key", "run", "decided"),
}  # fmt: skip


class Entry(NamedTuple):
    """A key and what it hashes: the request and the context (id and canonical JSON material)."""

    key: str
    request: str
    context: str
    material: str
    legacy: str | None = None  # the key an earlier key version gave the same run, still looked up (``_keys``)


class EncodedRun(NamedTuple):
    """A finished run as the codec encodes it: the columns of ``runs`` and the ballots in order."""

    outcome: RunOutcome
    stopped_because: str
    error: str | None  # the error type of a failed run
    calls: int
    value: str | None  # the value's JSON data; None: no value
    result: str  # Result.to_dict() without value and ballots, as JSON
    ballots: list[tuple[str, str]]  # (status, body) per ballot


class Answer(NamedTuple):
    """A key's current answer, with what replaying it needs."""

    run: int
    decided: float
    key: str
    created: float
    value: str | None
    result: str
    ballots: list[str]  # bodies, in order


class RunRow(NamedTuple):
    """One run as ``runs``, ``show`` and ``export`` list it; ``result`` and ``ballots`` only in full rows."""

    run: int
    key: str
    created: float
    outcome: RunOutcome
    stopped_because: str
    error: str | None
    calls: int
    refresh: bool
    value: str | None
    superseded_by: int | None
    current: bool
    request: str | None
    result: str | None = None
    ballots: list[str] | None = None


class KeyRecord(NamedTuple):
    """One key, what it hashes, and every run of it (full rows, oldest first)."""

    key: str
    request: str
    material: str
    runs: list[RunRow]


class Holder(NamedTuple):
    """A key's claim as a worker waiting for it sees it."""

    owner: str
    live: bool  # held, and its lease has not run out
    run: int | None  # the key's accepted run, set when its owner let go after deciding it
    answer: Answer | None = None  # that run, as ``replay`` reads it (``holders`` reads it with the claim)


class Claim(NamedTuple):
    """What ``Store.claim`` found: ``"mine"`` (decide it), ``"taken"`` (another owner holds it) or ``"answered"``."""

    state: str
    answer: Answer | None = None  # the current answer when ``"answered"``
    holder: Holder | None = None  # who holds it when ``"taken"``
    run: int | None = None  # when ``"mine"`` and asked to ``begin``: the run opened for it (as ``open_run``)


class Store(Protocol):
    """The operations of the ledger's front door, with the semantics every store keeps."""

    where: str  # for messages: a file path, or a DSN without its password

    def open_run(self, entry: Entry) -> int:
        """Store the key (once) and open an ``interrupted`` run of it with no ballots; its id."""
        ...

    def record_ballot(self, run: int, seq: int, status: str, body: str) -> None:
        """Store (or replace) ballot ``seq`` of an open run."""
        ...

    def store_run(
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None, release: str | None = None
    ) -> tuple[int, int | None]:
        """In one transaction: the run, its ballots, the key's current answer, and (``release``: an
        owner) that owner's claim on the key let go, naming the answer's run. ``(run id, winner)``.

        ``opened``: the run ``open_run`` made for this key, completed here (its ballots replaced
        by ``run.ballots``, which hold them all); a new run when None or not of this key.
        An accepted run becomes the current answer when the key has none, the current one is
        older than ``ttl`` seconds, or ``refresh``; the answer it replaces gets ``superseded_by``
        = this run. Otherwise the first writer won: this run gets ``superseded_by`` = the
        current answer, whose id is returned as ``winner`` (None in every other case).
        """
        ...

    def answer(self, key: str) -> Answer | None:
        """The key's current answer, or None."""
        ...

    def replay(self, run: int) -> Answer:
        """Run ``run`` (as an answer decided when it was created); LedgerError when it is gone."""
        ...

    def look(self, keys: Sequence[str]) -> dict[str, tuple[Answer | None, Holder | None]]:
        """Each key's current answer and claim, in one read: what a worker looks at before claiming
        them (a key with neither is absent)."""
        ...

    def claim(self, entry: Entry, owner: str, *, lease: float, ttl: float | None, refresh: bool, begin: bool = False) -> Claim:
        """Claim the key for ``owner`` for ``lease`` seconds, in one round trip.

        ``"taken"`` when another owner holds a live claim (nothing changes). Otherwise, unless
        ``refresh``, a current answer no older than ``ttl`` is returned as ``"answered"`` (and
        the key is left unclaimed); else the claim is ``owner``'s (``"mine"``), whoever held it before
        (an expired lease, a released claim, or ``owner`` itself). The answer is read after the
        claim is taken, so a worker that decided the key and let go in between is seen. ``begin``:
        a key that is ``"mine"`` gets its run opened too (as ``open_run``), its id in ``Claim.run``.
        """
        ...

    def renew(self, owner: str, keys: Sequence[str], *, lease: float) -> None:
        """Extend ``owner``'s claims on ``keys`` to ``lease`` seconds from now; never one it let go
        (a renewal that read the keys before a release and comes after it changes nothing)."""
        ...

    def release(self, key: str, owner: str, run: int | None) -> None:
        """Let go of ``owner``'s claim on ``key``; ``run``: the key's accepted run, for the workers waiting on it."""
        ...

    def holders(self, keys: Sequence[str]) -> dict[str, Holder]:
        """The claims on ``keys`` (a key never claimed is absent); a claim let go naming a run comes
        with that run (``Holder.answer``), so a waiting worker replays it without another read."""
        ...

    def runs(self, *, limit: int | None, prefix: str | None) -> list[RunRow]:
        """Summaries, newest first, at most ``limit``; only keys starting with ``prefix`` (lower-case hex)."""
        ...

    def keys(self, prefix: str, *, limit: int) -> list[str]:
        """The keys that start with ``prefix`` (lower-case hex), at most ``limit``."""
        ...

    def show(self, key: str) -> KeyRecord | None:
        """The key, what it hashes and every run of it; None when the key is not stored."""
        ...

    def export(self, *, after: int, limit: int) -> list[RunRow]:
        """Full rows of the runs with an id above ``after``, oldest first, at most ``limit``."""
        ...

    def dump(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        """Every row of ``table`` (one of :data:`TABLES`), its columns in that order, in batches, in key order."""
        ...

    def close(self) -> None:
        """Release the connection (a store used again reopens it)."""
        ...


def run_row(row: Sequence[Any]) -> RunRow:
    """A summary row as the stores select it: the run's columns, then ``current`` and ``request``."""
    run, key, created, outcome, stopped, error, calls, refresh, value, superseded, current, request = row
    return RunRow(run, key, created, outcome, stopped, error, calls, bool(refresh), value, superseded, bool(current), request)


def key_span(prefix: str) -> tuple[str, str]:
    """The range of keys that start with a lower-case hex ``prefix`` (an index range, not a scan)."""
    return prefix, prefix + "g"  # "g" sorts after every hex digit (byte order: the stores compare keys as bytes)
