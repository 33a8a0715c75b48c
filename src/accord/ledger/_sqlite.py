"""The SQLite store: one file (the stdlib ``sqlite3``, WAL mode), the ledger's embedded default.

The file says it is an accord ledger in its header (``application_id`` "ACCD") and gives its
format in ``user_version``; an empty file gets the tables, a file of an older format is upgraded
in place (:mod:`._migrations`), any other is refused. Claims are rows of ``claims`` on this
host's clock (``time.time()``), so the processes sharing the file share the leases. One connection
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .._errors import LedgerError
from ._migrations import SCHEMA_VERSION, check_version, steps_after
from ._store import TABLES, Answer, Claim, EncodedRun, Entry, Holder, KeyRecord, RunRow, key_span, run_row

T = TypeVar("T")

APPLICATION_ID = 0x41434344  # "ACCD" in the SQLite header: this file is an accord ledger

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
_CLAIM = (
    "INSERT INTO claims (key, owner, expires, run) VALUES (?, ?, ?, NULL) "
    "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires, run = NULL"
)
_BATCH = 500  # rows per read while dumping, keys per statement in claims


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
        return self._write(lambda c: _open_run(c, entry))

    def record_ballot(self, run: int, seq: int, status: str, body: str) -> None:
        self._write(
            lambda c: c.execute("INSERT OR REPLACE INTO ballots (run, seq, status, body) VALUES (?, ?, ?, ?)", (run, seq, status, body))
        )

    def store_run(
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None, release: str | None = None
    ) -> tuple[int, int | None]:
        def work(c: sqlite3.Connection) -> tuple[int, int | None]:
            run_id, winner = self._store_run(c, entry, run, refresh=refresh, ttl=ttl, opened=opened)
            if release is not None:
                answer = winner if winner is not None else (run_id if run.outcome == "accepted" else None)
                _release(c, entry.key, release, answer)
            return run_id, winner

        return self._write(work)

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

    def look(self, keys: Sequence[str]) -> dict[str, tuple[Answer | None, Holder | None]]:
        def fetch(c: sqlite3.Connection) -> dict[str, tuple[Answer | None, Holder | None]]:
            now, out = time.time(), {}
            for key in keys:
                current = c.execute("SELECT run, decided FROM answers WHERE key = ?", (key,)).fetchone()
                held = c.execute("SELECT owner, expires, run FROM claims WHERE key = ?", (key,)).fetchone()
                if current is not None or held is not None:
                    answer = None if current is None else self._answer(c, current[0], current[1])
                    out[key] = answer, None if held is None else Holder(held[0], held[1] > now, held[2])
            return out

        return self._read(fetch)

    def _answer(self, c: sqlite3.Connection, run: int, decided: float | None) -> Answer:
        answer = self._run(c, run, decided)
        if answer is None:
            raise LedgerError(f"the ledger at {self.path} lost run {run}")
        return answer

    def _run(self, c: sqlite3.Connection, run: int, decided: float | None = None) -> Answer | None:
        row = c.execute(_RUN, (run,)).fetchone()
        if row is None:
            return None
        ballots = [body for (body,) in c.execute(_BALLOTS, (run,)).fetchall()]
        key, created, value, result = row
        return Answer(run, created if decided is None else decided, key, created, value, result, ballots)

    # -- claims ------------------------------------------------------------------------------

    def claim(self, entry: Entry, owner: str, *, lease: float, ttl: float | None, refresh: bool, begin: bool = False) -> Claim:
        def work(c: sqlite3.Connection) -> Claim:
            now = time.time()  # BEGIN IMMEDIATE: no other writer between this read and the claim
            held = c.execute("SELECT owner, expires, run FROM claims WHERE key = ?", (entry.key,)).fetchone()
            if held is not None and held[0] != owner and held[1] > now:
                return Claim("taken", holder=Holder(held[0], True, held[2]))
            if not refresh:
                current = c.execute("SELECT run, decided FROM answers WHERE key = ?", (entry.key,)).fetchone()
                if current is not None and not (ttl is not None and now - current[1] > ttl):
                    return Claim("answered", self._answer(c, current[0], current[1]))
            c.execute(_CLAIM, (entry.key, owner, now + lease))
            return Claim("mine", run=_open_run(c, entry) if begin else None)

        return self._write(work)

    def renew(self, owner: str, keys: Sequence[str], *, lease: float) -> None:
        def work(c: sqlite3.Connection) -> None:
            for part in _parts(keys):
                marks = ", ".join("?" * len(part))
                sql = f"UPDATE claims SET expires = ? WHERE owner = ? AND key IN ({marks}) AND expires > 0"  # never one let go
                c.execute(sql, (time.time() + lease, owner, *part))

        self._write(work)

    def release(self, key: str, owner: str, run: int | None) -> None:
        self._write(lambda c: _release(c, key, owner, run))

    def holders(self, keys: Sequence[str]) -> dict[str, Holder]:
        def fetch(c: sqlite3.Connection) -> dict[str, Holder]:
            now, out = time.time(), {}
            for part in _parts(keys):
                marks = ", ".join("?" * len(part))
                for key, owner, expires, run in c.execute(f"SELECT key, owner, expires, run FROM claims WHERE key IN ({marks})", part):
                    answer = self._run(c, run) if run is not None and expires <= now else None
                    out[key] = Holder(owner, expires > now, run, answer)
            return out

        return self._read(fetch)

    # -- listing -----------------------------------------------------------------------------

    def runs(self, *, limit: int | None, prefix: str | None) -> list[RunRow]:
        where, params = ("WHERE r.key >= ? AND r.key < ?", list(key_span(prefix))) if prefix else ("", [])
        sql = f"{_SUMMARY} {where} ORDER BY r.id DESC LIMIT ?"
        rows = self._read(lambda c: c.execute(sql, (*params, -1 if limit is None else limit)).fetchall())
        return [run_row(row) for row in rows]

    def keys(self, prefix: str, *, limit: int) -> list[str]:
        lo, hi = key_span(prefix)
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
        return run_row(row[:-1])._replace(result=row[-1], ballots=ballots)

    def dump(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        columns = TABLES[table]
        width = 2 if table == "ballots" else 1  # the primary key: (run, seq), or the first column
        order = ", ".join(columns[:width])
        select = f"SELECT {', '.join(columns)} FROM {table}"
        first = f"{select} ORDER BY {order} LIMIT ?"
        after = f"{select} WHERE ({order}) > ({', '.join('?' * width)}) ORDER BY {order} LIMIT ?"
        sql, params = first, (_BATCH,)
        while rows := self._fetchall(sql, params):
            yield [(*row[:7], bool(row[7]), *row[8:]) if table == "runs" else tuple(row) for row in rows]
            sql, params = after, (*rows[-1][:width], _BATCH)

    def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self._read(lambda c: c.execute(sql, params).fetchall())

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
        """Check the file is an accord ledger; create the tables in an empty one, upgrade an older one."""
        if self._format(conn) < SCHEMA_VERSION:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = self._format(conn)  # another process may have done it meanwhile: then no step is left
                for step in steps_after(version):
                    for statement in step.sqlite:
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        for table in (*TABLES, "claims"):  # a few page reads: catch a wrecked file now
            conn.execute(f"SELECT * FROM {table} LIMIT 1").fetchall()

    def _format(self, conn: sqlite3.Connection) -> int:
        """The file's format version (0: an empty file); LedgerError for a foreign or a newer file."""
        # one statement, one snapshot: another process may be creating the tables right now
        app, tables, version = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master),"
            " (SELECT user_version FROM pragma_user_version)"
        ).fetchone()
        if app == 0 and tables == 0:
            return 0
        if app != APPLICATION_ID:
            raise LedgerError(f"{self.path} is an SQLite database but not an accord ledger; pass another path")
        check_version(version, self.where)
        return int(version)

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


def _open_run(c: sqlite3.Connection, entry: Entry) -> int:
    now = time.time()
    _store_entry(c, entry, now)
    cursor = c.execute(
        "INSERT INTO runs (key, created, outcome, stopped_because, calls, refresh, result) VALUES (?, ?, 'interrupted', '', 0, 0, '{}')",
        (entry.key, now),
    )
    return int(cursor.lastrowid or 0)


def _release(c: sqlite3.Connection, key: str, owner: str, run: int | None) -> None:
    c.execute("UPDATE claims SET expires = 0, run = ? WHERE key = ? AND owner = ?", (run, key, owner))


def _parts(keys: Sequence[str]) -> Iterator[Sequence[str]]:
    """``keys`` in slices short enough for one statement's parameters."""
    for start in range(0, len(keys), _BATCH):
        yield keys[start : start + _BATCH]


def _busy(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (a full disk does)
            conn.execute("ROLLBACK")
