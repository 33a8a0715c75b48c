"""The PostgreSQL store: one ledger shared by workers on many hosts (psycopg 3, the ``postgres`` extra).

Chosen by a ``postgresql://`` (or ``postgres://``) DSN. The tables of :mod:`._store` live in the
schema ``accord`` of that database, created on first use, with their format in
``accord.version`` (:mod:`._migrations`); a schema ``accord`` that holds anything else is
refused. Times are the server's clock, so a lease means the same to every worker, whatever its
own clock says.

One connection per store and process, in autocommit mode, guarded by a lock so that threads may
share it. It is closed before a fork (a libpq connection must not cross one) and reopened on
first use. A connection the server dropped (a restart) is noticed before it is used and
replaced; an operation that loses its connection midway raises LedgerError (a read is tried once
more on a new connection; a write is not, since it may have committed). A write waits up to
``timeout`` for another writer's row lock (``lock_timeout``).

Durability: a finished run (``store_run``) commits as durably as the server commits anything
(its ``synchronous_commit``); what is only worth something while a run is in flight (the opened
run, each ballot as it is made, claims and their leases) commits with ``synchronous_commit=off``:
a crash of the server may lose the last of those (never corrupts), and the run's end stores every
ballot again. SQLite's store makes the same trade (``synchronous=NORMAL``). Every psycopg error leaves as a
:class:`~accord.LedgerError`, and no message holds the password: ``where`` is the DSN without
it, and the text of every error is scrubbed of it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import psycopg
from psycopg import conninfo

from .._errors import ConfigError, LedgerError
from ._migrations import SCHEMA_VERSION, check_version, steps_after
from ._store import TABLES, Answer, Claim, EncodedRun, Entry, Holder, KeyRecord, RunRow, key_span, run_row

T = TypeVar("T")

LOCK_ID = 0x41434344  # "ACCD": the advisory lock held while the schema is created or upgraded
_NOW = "extract(epoch from clock_timestamp())::float8"  # Unix seconds, the server's clock
_RETRIES = 3  # a transaction that lost a deadlock or a serialization check is run again this often

_ENTRY = (
    "c AS (INSERT INTO accord.contexts (id, material) VALUES (%(context)s, %(material)s) ON CONFLICT DO NOTHING), "
    f"k AS (INSERT INTO accord.keys (key, context, request, created) VALUES (%(key)s, %(context)s, %(request)s, {_NOW}) "
    "ON CONFLICT DO NOTHING)"
)  # the key and its context, stored once: CTEs of the statement that stores a run
_RUN_COLUMNS = "outcome, stopped_because, error, calls, refresh, value, result"
_COLUMNS = "r.id, r.key, r.created, r.outcome, r.stopped_because, r.error, r.calls, r.refresh, r.value, r.superseded_by"
_JOINS = "FROM accord.runs r LEFT JOIN accord.answers a ON a.run = r.id LEFT JOIN accord.keys k ON k.key = r.key"
_BALLOTS = "ARRAY(SELECT b.body FROM accord.ballots b WHERE b.run = r.id ORDER BY b.seq)"
_SUMMARY = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request {_JOINS}"
_FULL = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request, r.result, {_BALLOTS} {_JOINS}"
_ANSWER = (
    f"SELECT a.run, a.decided, r.key, r.created, r.value, r.result, {_BALLOTS}, {_NOW} - a.decided "
    "FROM accord.answers a JOIN accord.runs r ON r.id = a.run WHERE a.key = %s"
)
_LOOK = (
    f"SELECT a.run, a.decided, r.key, r.created, r.value, r.result, {_BALLOTS}, {_NOW} - a.decided, "
    f"c.owner, c.expires > {_NOW}, c.run FROM (SELECT %s::text COLLATE \"C\" AS key) q "
    "LEFT JOIN accord.answers a ON a.key = q.key LEFT JOIN accord.runs r ON r.id = a.run LEFT JOIN accord.claims c ON c.key = q.key"
)  # a key's answer (as _ANSWER) and its claim, in one read
_CURRENT = f"SELECT run, {_NOW} - decided FROM accord.answers WHERE key = %s"  # under the key's advisory lock
_RUN_FIELDS = _RUN_COLUMNS.split(", ")
_BALLOTS_OF = "json_array_elements(%(ballots)s::json) WITH ORDINALITY AS t(b, n)"  # the [status, body] pairs, in order
_REOPEN = (
    f"WITH r AS (UPDATE accord.runs SET ({_RUN_COLUMNS}) = ({', '.join(f'%({name})s' for name in _RUN_FIELDS)}) "
    "WHERE id = %(opened)s AND key = %(key)s RETURNING id), "
    f"b AS (INSERT INTO accord.ballots (run, seq, status, body) SELECT r.id, t.n - 1, t.b ->> 0, t.b ->> 1 FROM r, {_BALLOTS_OF} "
    "ON CONFLICT (run, seq) DO UPDATE SET status = excluded.status, body = excluded.body), "
    "d AS (DELETE FROM accord.ballots WHERE run IN (SELECT id FROM r) AND seq >= json_array_length(%(ballots)s::json)) "
    "SELECT id FROM r"
)  # the run open_run made, completed, with its ballots as they ended (those stored as they came are replaced)
_NEW_RUN = (
    f"WITH {_ENTRY}, r AS (INSERT INTO accord.runs (key, created, {_RUN_COLUMNS}) "
    f"VALUES (%(key)s, {_NOW}, {', '.join(f'%({name})s' for name in _RUN_FIELDS)}) RETURNING id), "
    f"b AS (INSERT INTO accord.ballots (run, seq, status, body) SELECT r.id, t.n - 1, t.b ->> 0, t.b ->> 1 FROM r, {_BALLOTS_OF}) "
    "SELECT id FROM r"
)  # the key, its context, the run and its ballots: one statement
_HOLDER = f"SELECT owner, expires > {_NOW}, run FROM accord.claims WHERE key = %s"
_CLAIM = (
    f"INSERT INTO accord.claims AS c (key, owner, expires, run) VALUES (%s, %s, {_NOW} + %s, NULL) "
    "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires, run = NULL "
    f"WHERE c.owner = excluded.owner OR c.expires <= {_NOW} RETURNING 1"
)  # one statement, under the row's lock: two workers never both get it
_SCHEMA = (
    "SELECT n.oid IS NOT NULL, EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = n.oid AND relname = 'version'), "
    "(SELECT count(*) FROM pg_class WHERE relnamespace = n.oid), n.oid IS NULL OR has_schema_privilege(n.oid, 'USAGE') "
    "FROM (SELECT to_regnamespace('accord') AS oid) n"
)  # from the catalogs: what a role without rights on the schema may still see
_BATCH = 500  # rows per read while dumping


class PostgresStore:
    """The ledger's tables in the schema ``accord`` of a PostgreSQL database; see :class:`~accord.ledger._store.Store`."""

    def __init__(self, dsn: str, *, timeout: float) -> None:
        self.where = redact(dsn)
        self.timeout = timeout
        self._dsn = dsn  # holds the password: used to connect, never shown
        self._secrets = secrets_of(dsn)
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = 0
        self._durable = "on"  # the server's synchronous_commit, for the commits that must last
        _OPEN.add(self)
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- writing -----------------------------------------------------------------------------

    def open_run(self, entry: Entry) -> int:
        sql = (
            f"WITH {_ENTRY} INSERT INTO accord.runs (key, created, outcome, stopped_because, calls, refresh, result) "
            f"VALUES (%(key)s, {_NOW}, 'interrupted', '', 0, false, '{{}}') RETURNING id"
        )
        return int(self._write(lambda c: _one(c.execute(sql, entry._asdict())), atomic=False))

    def record_ballot(self, run: int, seq: int, status: str, body: str) -> None:
        sql = (
            "INSERT INTO accord.ballots (run, seq, status, body) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (run, seq) DO UPDATE SET status = excluded.status, body = excluded.body"
        )
        self._write(lambda c: c.execute(sql, (run, seq, status, body)), atomic=False)

    def store_run(
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None
    ) -> tuple[int, int | None]:
        return self._write(lambda c: self._store_run(c, entry, run, refresh=refresh, ttl=ttl, opened=opened))

    def _store_run(
        self, c: psycopg.Connection[Any], entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None
    ) -> tuple[int, int | None]:
        """One transaction in two round trips: the run with its ballots and the key's answer as it
        stands; then the answer's change and COMMIT. The key's advisory lock keeps every other
        writer of its answer out in between."""
        key, accepted = entry.key, run.outcome == "accepted"
        values = (run.outcome, run.stopped_because, run.error, run.calls, refresh, run.value, run.result)
        params = {**entry._asdict(), **dict(zip(_RUN_FIELDS, values, strict=True)), "opened": opened,
                  "ballots": json.dumps(run.ballots, ensure_ascii=False)}  # fmt: skip
        first: list[tuple[str, Any]] = [
            ("BEGIN", None),
            ("SELECT set_config('synchronous_commit', %s, true), pg_advisory_xact_lock(hashtextextended(%s, 0))",
             (self._durable, key)),  # a finished run lasts; no other writer of this key's answer until COMMIT
            (_REOPEN if opened is not None else _NEW_RUN, params),
            *([(_CURRENT, (key,))] if accepted else [("COMMIT", None)]),
        ]  # fmt: skip
        cursors = _send(c, first)
        run_id = _first(cursors[2])
        if run_id is None:  # ``opened`` is not a run of this key: nothing was written, store a new run
            if not accepted:
                return self._store_run(c, entry, run, refresh=refresh, ttl=ttl, opened=None)
            run_id = _one(_send(c, [(_NEW_RUN, {**params, "opened": None})])[0])
        if not accepted:
            return run_id, None
        current = cursors[-1].fetchone()
        winner, second = None, list[tuple[str, Any]]()
        if current is None:
            second = [(f"INSERT INTO accord.answers (key, run, decided) VALUES (%s, %s, {_NOW})", (key, run_id))]
        elif not refresh and not (ttl is not None and current[1] > ttl):
            winner = int(current[0])  # the first writer won
            second = [("UPDATE accord.runs SET superseded_by = %s WHERE id = %s", (winner, run_id))]
        else:
            second = [(f"UPDATE accord.answers SET run = %s, decided = {_NOW} WHERE key = %s", (run_id, key)),
                      ("UPDATE accord.runs SET superseded_by = %s WHERE id = %s", (run_id, current[0]))]  # fmt: skip
        _send(c, [*second, ("COMMIT", None)])
        return run_id, winner

    # -- reading -----------------------------------------------------------------------------

    def answer(self, key: str) -> Answer | None:
        row = self._read(lambda c: c.execute(_ANSWER, (key,)).fetchone())
        return None if row is None else _answer(row)

    def replay(self, run: int) -> Answer:
        sql = f"SELECT r.id, r.created, r.key, r.created, r.value, r.result, {_BALLOTS} FROM accord.runs r WHERE r.id = %s"
        row = self._read(lambda c: c.execute(sql, (run,)).fetchone())
        if row is None:
            raise LedgerError(f"the ledger at {self.where} lost run {run}")
        return _answer(row)

    def look(self, key: str) -> tuple[Answer | None, Holder | None]:
        row = self._read(lambda c: c.execute(_LOOK, (key,)).fetchone())
        assert row is not None, "one row, whatever the key"
        return (None if row[0] is None else _answer(row)), (None if row[8] is None else Holder(*row[8:11]))

    # -- claims ------------------------------------------------------------------------------

    def claim(self, entry: Entry, owner: str, *, lease: float, ttl: float | None, refresh: bool) -> Claim:
        def work(c: psycopg.Connection[Any]) -> Claim:
            key = entry.key
            got, held, *answer = _send(c, [
                (_CLAIM, (key, owner, lease)),  # one statement, atomic by itself: the claim is ours once it commits
                (_HOLDER, (key,)),
                *([] if refresh else [(_ANSWER, (key,))]),  # read after the claim: a worker that decided it and let go is seen
            ])  # fmt: skip
            if got.fetchone() is None:
                holder = held.fetchone()
                return Claim("taken", holder=Holder(*holder) if holder is not None else None)
            row = answer[0].fetchone() if answer else None
            if row is not None and not (ttl is not None and row[7] > ttl):
                c.execute("UPDATE accord.claims SET expires = 0, run = %s WHERE key = %s AND owner = %s", (row[0], key, owner))
                return Claim("answered", _answer(row))
            return Claim("mine")

        return self._write(work, atomic=False)

    def renew(self, owner: str, keys: Sequence[str], *, lease: float) -> None:
        sql = f"UPDATE accord.claims SET expires = {_NOW} + %s WHERE owner = %s AND key = ANY(%s)"
        self._write(lambda c: c.execute(sql, (lease, owner, list(keys))), atomic=False)

    def release(self, key: str, owner: str, run: int | None) -> None:
        sql = "UPDATE accord.claims SET expires = 0, run = %s WHERE key = %s AND owner = %s"
        self._write(lambda c: c.execute(sql, (run, key, owner)), atomic=False)

    def holders(self, keys: Sequence[str]) -> dict[str, Holder]:
        sql = f"SELECT key, owner, expires > {_NOW}, run FROM accord.claims WHERE key = ANY(%s)"
        rows = self._read(lambda c: c.execute(sql, (list(keys),)).fetchall())
        return {key: Holder(owner, live, run) for key, owner, live, run in rows}

    # -- listing -----------------------------------------------------------------------------

    def runs(self, *, limit: int | None, prefix: str | None) -> list[RunRow]:
        where, params = ("WHERE r.key >= %s AND r.key < %s", list(key_span(prefix))) if prefix else ("", [])
        sql = f"{_SUMMARY} {where} ORDER BY r.id DESC LIMIT %s"  # LIMIT NULL: every row
        return [run_row(row) for row in self._read(lambda c: c.execute(sql, (*params, limit)).fetchall())]

    def keys(self, prefix: str, *, limit: int) -> list[str]:
        sql = "SELECT key FROM accord.keys WHERE key >= %s AND key < %s ORDER BY key LIMIT %s"
        return [key for (key,) in self._read(lambda c: c.execute(sql, (*key_span(prefix), limit)).fetchall())]

    def show(self, key: str) -> KeyRecord | None:
        def fetch(c: psycopg.Connection[Any]) -> KeyRecord | None:
            found = c.execute(
                "SELECT k.request, c.material FROM accord.keys k JOIN accord.contexts c ON c.id = k.context WHERE k.key = %s", (key,)
            ).fetchone()
            if found is None:
                return None
            rows = c.execute(f"{_FULL} WHERE r.key = %s ORDER BY r.id", (key,)).fetchall()
            return KeyRecord(key, found[0], found[1], [_full(row) for row in rows])

        return self._read(fetch)

    def export(self, *, after: int, limit: int) -> list[RunRow]:
        sql = f"{_FULL} WHERE r.id > %s ORDER BY r.id LIMIT %s"
        return [_full(row) for row in self._read(lambda c: c.execute(sql, (after, limit)).fetchall())]

    # -- copying a whole ledger (accord ledger migrate) --------------------------------------

    def dump(self, table: str) -> Iterator[list[tuple[Any, ...]]]:
        columns = TABLES[table]
        width = 2 if table == "ballots" else 1  # the primary key: (run, seq), or the first column
        order = ", ".join(columns[:width])
        select_ = f"SELECT {', '.join(columns)} FROM accord.{table}"
        first = f"{select_} ORDER BY {order} LIMIT %s"
        after = f"{select_} WHERE ({order}) > ({', '.join(['%s'] * width)}) ORDER BY {order} LIMIT %s"
        sql, params = first, (_BATCH,)
        while rows := self._fetchall(sql, params):
            yield [tuple(row) for row in rows]
            sql, params = after, (*rows[-1][:width], _BATCH)

    def load(self, tables: dict[str, Iterable[list[tuple[Any, ...]]]]) -> dict[str, int]:
        """Copy the rows of every table into this empty ledger, in one transaction; rows per table."""

        def work(c: psycopg.Connection[Any]) -> dict[str, int]:
            if c.execute("SELECT EXISTS (SELECT 1 FROM accord.keys)").fetchone() != (False,):
                raise LedgerError(f"the ledger at {self.where} holds runs already: migrate into an empty one")
            counts = {}
            for table, batches in tables.items():
                counts[table] = 0
                with c.cursor().copy(f"COPY accord.{table} ({', '.join(TABLES[table])}) FROM STDIN") as copy:
                    for batch in batches:
                        for row in batch:
                            copy.write_row(row)
                        counts[table] += len(batch)
            c.execute(
                "SELECT setval(pg_get_serial_sequence('accord.runs', 'id'), coalesce(max(id), 1), max(id) IS NOT NULL) FROM accord.runs"
            )  # new runs get ids above the copied ones
            return counts

        return self._write(work, durable=True)  # fmt: skip

    def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self._read(lambda c: c.execute(sql, params).fetchall())

    # -- the connection ----------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        """A live connection (reopened after a fork or when the server dropped it); call with the lock held."""
        conn = self._conn
        if conn is not None and (self._pid != os.getpid() or conn.closed or conn.broken or _dropped(conn)):
            self._drop()
            conn = None
        if conn is None:
            conn = self._open()
            self._conn, self._pid = conn, os.getpid()
        return conn

    def _open(self) -> psycopg.Connection[Any]:
        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=max(2, math.ceil(self.timeout)),  # libpq's floor is 2 s
                tcp_user_timeout=int(max(self.timeout, 10.0) * 1000),  # a dead host fails a call, never hangs it
                fallback_application_name="accord",
            )
        except psycopg.Error as exc:
            raise self._error(exc, connecting=True) from None  # libpq's text, scrubbed; its exception never shown
        try:
            self._durable = str(_one(conn.execute(
                "SELECT current_setting('synchronous_commit'), set_config('lock_timeout', %s, false)",
                (f"{max(1, round(self.timeout * 1000))}ms",),
            )))  # fmt: skip
            self._adopt(conn)
            conn.execute("SELECT set_config('synchronous_commit', 'off', false)")  # the commits of runs in flight
        except BaseException as exc:
            with contextlib.suppress(Exception):
                conn.close()
            if isinstance(exc, psycopg.Error):
                raise self._error(exc) from exc
            raise
        return conn

    def _drop(self) -> None:
        """Forget the connection; close it unless it came from the parent of a fork."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()

    def _adopt(self, conn: psycopg.Connection[Any]) -> None:
        """Check the schema is an accord ledger; create it in a database without one, upgrade an older one."""
        if self._format(conn) < SCHEMA_VERSION:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))  # one worker creates it; the others wait
                version = self._format(conn)  # and then find no step left
                if version == 0:
                    conn.execute("CREATE SCHEMA IF NOT EXISTS accord")
                for step in steps_after(version):
                    for statement in step.postgres:
                        conn.execute(statement)
                if version == 0:
                    conn.execute("INSERT INTO accord.version (version) VALUES (%s)", (SCHEMA_VERSION,))
                else:
                    conn.execute("UPDATE accord.version SET version = %s", (SCHEMA_VERSION,))
        tables = ", ".join(f"accord.{table}" for table in (*TABLES, "claims"))
        conn.execute(f"SELECT 1 FROM {tables} LIMIT 0")  # reads nothing: a role that may not read them fails now

    def _format(self, conn: psycopg.Connection[Any]) -> int:
        """The ledger's format version (0: no ledger yet); LedgerError for a foreign or a newer one."""
        schema, versioned, objects, usable = _one_row(conn.execute(_SCHEMA))
        if not usable:
            raise LedgerError(f"permission denied on the ledger at {self.where} (no USAGE on schema accord); "
                              "grant the role the privileges in docs/ledger.md")  # fmt: skip
        if not versioned:
            if schema and objects:
                raise LedgerError(f"the database at {self.where} has a schema 'accord' that is not an accord ledger; use another database")
            return 0
        rows = conn.execute("SELECT version FROM accord.version").fetchall()
        if len(rows) != 1:
            raise LedgerError(f"the ledger at {self.where} is damaged (accord.version holds {len(rows)} rows, not 1)")
        check_version(rows[0][0], self.where)
        return int(rows[0][0])

    # -- operations --------------------------------------------------------------------------

    def _read(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work`` on a live connection; once more on a new one when the first was lost midway."""
        with self._lock:
            for attempt in range(2):
                conn = self._connection()
                try:
                    return work(conn)
                except psycopg.Error as exc:
                    lost = conn.closed or conn.broken
                    if lost:
                        self._drop()
                        if attempt == 0:
                            continue
                    raise self._error(exc, lost=lost) from exc
            raise AssertionError("unreachable")

    def _write(self, work: Callable[[psycopg.Connection[Any]], T], *, atomic: bool = True, durable: bool = False) -> T:
        """``work`` in one transaction (``atomic``; else a single statement, atomic by itself);
        ``durable``: committed with the server's own ``synchronous_commit`` (see the module's docstring).

        A transaction that lost a deadlock or a serialization check rolled back: it runs again.
        One that lost its connection is not run again: it may have committed.
        """
        with self._lock:
            for attempt in range(_RETRIES + 1):
                conn = self._connection()
                try:
                    if not atomic:
                        return work(conn)
                    with conn.transaction():
                        if durable:
                            conn.execute("SELECT set_config('synchronous_commit', %s, true)", (self._durable,))
                        return work(conn)
                except BaseException as exc:
                    lost = conn.closed or conn.broken
                    if not lost:
                        _abandon(conn)  # a transaction that ``work`` began itself and could not end
                    if not isinstance(exc, psycopg.Error):
                        raise
                    if lost:
                        self._drop()
                    elif exc.sqlstate in ("40001", "40P01") and attempt < _RETRIES:
                        continue
                    raise self._error(exc, lost=lost) from exc
            raise AssertionError("unreachable")

    def _error(self, exc: psycopg.Error, *, connecting: bool = False, lost: bool = False) -> LedgerError:
        lines = str(exc).strip().splitlines()
        text = self._scrub(lines[0].strip() if lines else type(exc).__name__)
        state = exc.sqlstate or ""
        if connecting:
            return LedgerError(f"cannot connect to the ledger at {self.where} ({text}); check that the server runs and takes this role")
        if state == "42501":
            return LedgerError(f"permission denied on the ledger at {self.where} ({text}); grant the role the privileges in docs/ledger.md")
        if state == "55P03":
            return LedgerError(f"the ledger at {self.where} stayed locked by another writer for more than {self.timeout:g} s")
        if state.startswith("53"):
            return LedgerError(f"the database of the ledger at {self.where} is out of resources ({text}): free disk space or connections")
        if lost or state.startswith(("08", "57P")):
            return LedgerError(f"lost the connection to the ledger at {self.where} ({text}); the next call reconnects")
        return LedgerError(f"the ledger at {self.where} failed: {text}")

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def has_ledger(dsn: str, *, timeout: float) -> bool:
    """Whether the database at ``dsn`` holds an accord ledger (the table ``accord.version``); creates nothing."""
    where, secrets = redact(dsn), secrets_of(dsn)
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(2, math.ceil(timeout))) as conn:
            return _one_row(conn.execute(_SCHEMA))[1] is True
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        for secret in secrets:
            text = text.replace(secret, "***")
        raise LedgerError(f"cannot connect to the ledger at {where} ({text}); check that the server runs and takes this role") from None


def redact(dsn: str) -> str:
    """The DSN as messages show it: ``postgresql://user@host:port/dbname``, never the password or other options."""
    try:
        parts = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise ConfigError("Ledger(...): the postgresql:// DSN cannot be parsed (see the libpq connection URI format)") from None
    user, host, port, dbname = (str(parts.get(name) or "") for name in ("user", "host", "port", "dbname"))
    socket = host.startswith("/")
    netloc = (f"{quote(user, safe='')}@" if user else "") + ("" if socket else host) + (f":{port}" if port else "")
    return f"postgresql://{netloc}/{quote(dbname, safe='')}" + (f"?host={quote(host)}" if socket else "")


def secrets_of(dsn: str) -> list[str]:
    """Every form of the password the DSN holds (as written, decoded, in its options), longest first."""
    found = {str(conninfo.conninfo_to_dict(dsn).get("password") or "")}
    with contextlib.suppress(ValueError):
        raw = urlsplit(dsn).password or ""
        found |= {raw, unquote(raw)}
    return sorted((s for s in found if s), key=len, reverse=True)


def _send(c: psycopg.Connection[Any], statements: Sequence[tuple[str, Any]]) -> list[psycopg.Cursor[Any]]:
    """The statements in one round trip (libpq's pipeline mode); their cursors, results fetched.

    On the first error the rest are skipped, so a transaction begun here stays open, aborted:
    :func:`_abandon` ends it.
    """
    with c.pipeline() as pipeline:
        cursors = [c.execute(sql, params) for sql, params in statements]
        pipeline.sync()
    return cursors


def _abandon(c: psycopg.Connection[Any]) -> None:
    """Roll back a transaction left open on ``c`` (by an error between BEGIN and COMMIT)."""
    if c.info.transaction_status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            c.execute("ROLLBACK")


def _dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server closed an idle connection: it then has something to read (its goodbye, or EOF)."""
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        return True


def _one(cursor: psycopg.Cursor[Any]) -> Any:
    return _one_row(cursor)[0]


def _one_row(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    assert row is not None, "the statement returns one row"
    return row


def _first(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    return None if row is None else row[0]


def _answer(row: Any) -> Answer:
    """An answer as ``_ANSWER`` selects it: run, decided, key, created, value, result, ballots."""
    return Answer(int(row[0]), float(row[1]), str(row[2]), float(row[3]), row[4], str(row[5]), list(row[6]))


def _full(row: Any) -> RunRow:
    return run_row(row[:12])._replace(result=row[12], ballots=list(row[13]))


# Stores with a connection in this process: closed before a fork, so that no libpq connection
# crosses it (the child and the parent would share one socket); each reopens on first use.
_OPEN: weakref.WeakSet[PostgresStore] = weakref.WeakSet()


def _before_fork() -> None:
    for store in list(_OPEN):
        with store._lock:
            store._drop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)
