"""What the ledger's front door asks of a store, and the rows that cross between them.

A store keeps five relations (the SQLite store's tables; another store keeps the same):

    contexts  id -> material: what a stabilizer adds to every key (canonical JSON)
    keys      key -> its request (canonical JSON) and context
    runs      one row per run: outcome, value, the Result as JSON, ``superseded_by``
    ballots   (run, seq) -> status and body: every ballot of every run, as JSON
    answers   key -> its current answer (an accepted run) and when it was decided

Values cross the boundary as JSON text, exactly as stored (the codec makes and reads them);
times are Unix seconds (``time.time()``); run ids are positive integers, increasing in the order
runs were opened. Every operation is atomic. Every failure is a :class:`~accord.LedgerError`
whose message says what to do and never holds a password.

:mod:`._sqlite` is the only store today; :func:`open_store` chooses the store by the path.
"""

from __future__ import annotations

import os
from typing import NamedTuple, Protocol

from .._errors import ConfigError

RunOutcome = str  # "accepted" | "unstable" | "failed" | "interrupted" (opened, never finished)


class Entry(NamedTuple):
    """A key and what it hashes: the request and the context (id and canonical JSON material)."""

    key: str
    request: str
    context: str
    material: str


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
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None
    ) -> tuple[int, int | None]:
        """In one transaction: the run, its ballots, and the key's current answer. ``(run id, winner)``.

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

    def close(self) -> None:
        """Release the connection (a store used again reopens it)."""
        ...


def is_dsn(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a database server rather than a file."""
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def open_store(path: str | os.PathLike[str], *, timeout: float) -> Store:
    """The store for ``path``: an SQLite file (created when missing)."""
    if is_dsn(path):  # never echo the DSN: it may hold a password
        raise ConfigError("Ledger(...): a postgresql:// DSN needs a PostgreSQL store, which this accord does not have; pass a file path")
    from ._sqlite import SQLiteStore  # here, not above: _sqlite imports this module's rows

    return SQLiteStore(path, timeout=timeout)
