"""The SQLite store: one file (the stdlib ``sqlite3``, WAL mode), the ledger's embedded default.

The file says it is an accord ledger in its header (``application_id`` "ACCD") and gives its
format in ``user_version``; an empty file gets the tables, any other is refused. One connection
per store and process (reopened in a forked child), guarded by a lock so that threads may share
it. Every write is one ``BEGIN IMMEDIATE`` transaction; SQLite's busy handler waits up to
``timeout`` for another writer, and a busy error is retried with backoff until then. Readers
never wait for writers (WAL). Every sqlite3 error leaves as a :class:`~accord.LedgerError`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .._errors import LedgerError
from ._store import Answer, EncodedRun, Entry, KeyRecord, RunRow

T = TypeVar("T")

APPLICATION_ID = 0x41434344  # "ACCD" in the SQLite header: this file is an accord ledger
SCHEMA_VERSION = 1

_TABLES = (
    """CREATE TABLE IF NOT EXISTS contexts (id TEXT PRIMARY KEY, material TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS keys (
        key TEXT PRIMARY KEY, context TEXT NOT NULL REFERENCES contexts(id),
        request TEXT NOT NULL, created REAL NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL REFERENCES keys(key),
        created REAL NOT NULL,
        outcome TEXT NOT NULL,            -- accepted | unstable | failed | interrupted (never finished)
        stopped_because TEXT NOT NULL,
        error TEXT,                       -- the error type of a failed run
        calls INTEGER NOT NULL,
        refresh INTEGER NOT NULL,
        value TEXT,                       -- JSON data of the value (None: no value)
        result TEXT NOT NULL,             -- Result.to_dict() without value and ballots
        superseded_by INTEGER REFERENCES runs(id))""",
    "CREATE INDEX IF NOT EXISTS runs_by_key ON runs(key, id)",
    """CREATE TABLE IF NOT EXISTS ballots (
        run INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,
        status TEXT NOT NULL, body TEXT NOT NULL,  -- a rowid table: bodies of ~1 kB stay on one page
        PRIMARY KEY (run, seq))""",
    """CREATE TABLE IF NOT EXISTS answers (
        key TEXT PRIMARY KEY REFERENCES keys(key),
        run INTEGER NOT NULL REFERENCES runs(id), decided REAL NOT NULL)""",
)

_ENTRY = (
    "INSERT OR IGNORE INTO contexts (id, material) VALUES (?, ?)",
    "INSERT OR IGNORE INTO keys (key, context, request, created) VALUES (?, ?, ?, ?)",
)
_COLUMNS = "r.id, r.key, r.created, r.outcome, r.stopped_because, r.error, r.calls, r.refresh, r.value, r.superseded_by"
_JOINS = "FROM runs r LEFT JOIN answers a ON a.run = r.id LEFT JOIN keys k ON k.key = r.key"
_SUMMARY = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request {_JOINS}"
_FULL = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request, r.result {_JOINS}"
_RUN = "SELECT key, created, value, result FROM runs WHERE id = ?"
_BALLOTS = "SELECT body FROM ballots WHERE run = ? ORDER BY seq"


class SQLiteStore:
    """The ledger's tables in one SQLite file; see :class:`~accord.ledger._store.Store` for the operations."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self.timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create the ledger's folder {self.path.parent}: {exc.strerror}") from exc
        with self._lock:
            self._connection()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- writing -----------------------------------------------------------------------------

    def open_run(self, entry: Entry) -> int:
        def work(c: sqlite3.Connection) -> int:
            now = time.time()
            _store_entry(c, entry, now)
            cursor = c.execute(
                "INSERT INTO runs (key, created, outcome, stopped_because, calls, refresh, result) "
                "VALUES (?, ?, 'interrupted', '', 0, 0, '{}')",
                (entry.key, now),
            )
            return int(cursor.lastrowid or 0)

        return self._write(work)

    def record_ballot(self, run: int, seq: int, status: str, body: str) -> None:
        self._write(
            lambda c: c.execute("INSERT OR REPLACE INTO ballots (run, seq, status, body) VALUES (?, ?, ?, ?)", (run, seq, status, body))
        )

    def store_run(
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None
    ) -> tuple[int, int | None]:
        return self._write(lambda c: self._store_run(c, entry, run, refresh=refresh, ttl=ttl, opened=opened))

    def _store_run(
        self, c: sqlite3.Connection, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None
    ) -> tuple[int, int | None]:
        now, key = time.time(), entry.key
        _store_entry(c, entry, now)
        values = (run.outcome, run.stopped_because, run.error, run.calls, int(refresh), run.value, run.result)
        if opened is not None and c.execute("SELECT 1 FROM runs WHERE id = ? AND key = ?", (opened, key)).fetchone():
            c.execute(
                "UPDATE runs SET outcome = ?, stopped_because = ?, error = ?, calls = ?, refresh = ?, value = ?, result = ? "
                "WHERE id = ?",
                (*values, opened),
            )
            c.execute("DELETE FROM ballots WHERE run = ?", (opened,))
            run_id = opened
        else:
            cursor = c.execute(
                "INSERT INTO runs (key, created, outcome, stopped_because, error, calls, refresh, value, result) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, now, *values),
            )
            run_id = int(cursor.lastrowid or 0)
        c.executemany(
            "INSERT INTO ballots (run, seq, status, body) VALUES (?, ?, ?, ?)",
            [(run_id, seq, status, body) for seq, (status, body) in enumerate(run.ballots)],
        )
        if run.outcome != "accepted":
            return run_id, None
        current = c.execute("SELECT run, decided FROM answers WHERE key = ?", (key,)).fetchone()
        if current is not None and not refresh and not (ttl is not None and now - current[1] > ttl):
            c.execute("UPDATE runs SET superseded_by = ? WHERE id = ?", (current[0], run_id))  # first writer won
            return run_id, int(current[0])
        c.execute("INSERT OR REPLACE INTO answers (key, run, decided) VALUES (?, ?, ?)", (key, run_id, now))
        if current is not None:
            c.execute("UPDATE runs SET superseded_by = ? WHERE id = ?", (run_id, current[0]))
        return run_id, None

    # -- reading -----------------------------------------------------------------------------

    def answer(self, key: str) -> Answer | None:
        def fetch(c: sqlite3.Connection) -> Answer | None:
            current = c.execute("SELECT run, decided FROM answers WHERE key = ?", (key,)).fetchone()
            return None if current is None else self._answer(c, current[0], current[1])

        return self._read(fetch)

    def replay(self, run: int) -> Answer:
        return self._read(lambda c: self._answer(c, run, None))

    def _answer(self, c: sqlite3.Connection, run: int, decided: float | None) -> Answer:
        row = c.execute(_RUN, (run,)).fetchone()
        if row is None:
            raise LedgerError(f"the ledger at {self.path} lost run {run}")
        ballots = [body for (body,) in c.execute(_BALLOTS, (run,)).fetchall()]
        key, created, value, result = row
        return Answer(run, created if decided is None else decided, key, created, value, result, ballots)

    def runs(self, *, limit: int | None, prefix: str | None) -> list[RunRow]:
        where, params = ("WHERE r.key >= ? AND r.key < ?", list(_span(prefix))) if prefix else ("", [])
        sql = f"{_SUMMARY} {where} ORDER BY r.id DESC LIMIT ?"
        rows = self._read(lambda c: c.execute(sql, (*params, -1 if limit is None else limit)).fetchall())
        return [_row(row) for row in rows]

    def keys(self, prefix: str, *, limit: int) -> list[str]:
        lo, hi = _span(prefix)
        rows = self._read(lambda c: c.execute("SELECT key FROM keys WHERE key >= ? AND key < ? LIMIT ?", (lo, hi, limit)).fetchall())
        return [key for (key,) in rows]

    def show(self, key: str) -> KeyRecord | None:
        def fetch(c: sqlite3.Connection) -> KeyRecord | None:
            found = c.execute(
                "SELECT k.request, c.material FROM keys k JOIN contexts c ON c.id = k.context WHERE k.key = ?", (key,)
            ).fetchone()
            if found is None:
                return None
            rows = c.execute(f"{_FULL} WHERE r.key = ? ORDER BY r.id", (key,)).fetchall()
            return KeyRecord(key, found[0], found[1], [self._full(c, row) for row in rows])

        return self._read(fetch)

    def export(self, *, after: int, limit: int) -> list[RunRow]:
        def fetch(c: sqlite3.Connection) -> list[RunRow]:
            rows = c.execute(f"{_FULL} WHERE r.id > ? ORDER BY r.id LIMIT ?", (after, limit)).fetchall()
            return [self._full(c, row) for row in rows]

        return self._read(fetch)

    def _full(self, c: sqlite3.Connection, row: Any) -> RunRow:
        ballots = [body for (body,) in c.execute(_BALLOTS, (row[0],)).fetchall()]
        return _row(row[:-1])._replace(result=row[-1], ballots=ballots)

    # -- the connection ----------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """The open connection (one per store, reopened in a forked child); call with the lock held."""
        if self._conn is None or self._pid != os.getpid():
            self._conn = self._retry(self._open)
            self._pid = os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        # timeout: SQLite's busy handler waits this long for another writer's lock
        conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            self._adopt(conn)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # durable across process crashes
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _adopt(self, conn: sqlite3.Connection) -> None:
        """Check the file is an accord ledger; create the tables in an empty one."""
        # one statement, one snapshot: another process may be creating the tables right now
        app, tables = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master)"
        ).fetchone()
        if app == 0 and tables == 0:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if conn.execute("PRAGMA application_id").fetchone()[0] == 0:  # no one else did it meanwhile
                    for statement in _TABLES:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
            app = APPLICATION_ID
        if app != APPLICATION_ID:
            raise LedgerError(f"{self.path} is an SQLite database but not an accord ledger; pass another path")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError(f"the ledger at {self.path} was written by a newer accord (format {version}); upgrade accord")
        for table in ("contexts", "keys", "runs", "ballots", "answers"):  # a few page reads: catch a wrecked file now
            conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()

    # -- transactions ------------------------------------------------------------------------

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        def attempt() -> T:
            with self._lock:
                return work(self._connection())

        return self._retry(attempt)

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` inside ``BEGIN IMMEDIATE``: one writer at a time, across threads and processes."""

        def attempt() -> T:
            with self._lock:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    out = work(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
                return out

        return self._retry(attempt)

    def _retry(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt``, retrying while another writer holds the lock, up to ``timeout``."""
        deadline = time.monotonic() + self.timeout
        pause = 0.005
        while True:
            try:
                return attempt()
            except sqlite3.Error as exc:
                if _busy(exc) and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.1)
                    continue
                raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> LedgerError:
        text = str(exc)
        if _busy(exc):
            return LedgerError(f"the ledger at {self.path} stayed locked by another writer for more than {self.timeout:g} s")
        if "full" in text:
            return LedgerError(f"the ledger at {self.path} is full ({text}): free disk space or use another path")
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return LedgerError(f"the ledger at {self.path} is corrupt or not an SQLite file ({text}); move it aside")
        return LedgerError(f"the ledger at {self.path} failed: {text}")


def _store_entry(c: sqlite3.Connection, entry: Entry, now: float) -> None:
    c.execute(_ENTRY[0], (entry.context, entry.material))
    c.execute(_ENTRY[1], (entry.key, entry.context, entry.request, now))


def _row(row: Any) -> RunRow:
    run, key, created, outcome, stopped, error, calls, refresh, value, superseded, current, request = row
    return RunRow(run, key, created, outcome, stopped, error, calls, bool(refresh), value, superseded, bool(current), request)


def _span(prefix: str) -> tuple[str, str]:
    """The range of keys that start with a lower-case hex ``prefix`` (an index range, not a scan)."""
    return prefix, prefix + "g"  # "g" sorts after every hex digit


def _busy(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (a full disk does)
            conn.execute("ROLLBACK")
