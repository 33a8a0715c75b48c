"""The PostgreSQL store's connection: opening it, checking and creating the schema, running an
operation on it, and mapping every psycopg error to a :class:`~accord.LedgerError`.

One connection per store and process, in autocommit mode, guarded by a lock so that threads may
share it. It is closed before a fork (a libpq connection must not cross one) and reopened on
first use. A connection the server dropped (a restart) is noticed before it is used and
replaced; an operation that loses its connection midway raises LedgerError (a read is tried once
more on a new connection; a write is not, since it may have committed). A write waits up to
``timeout`` for another writer's row lock (``lock_timeout``).

No message holds the password: ``where`` is the DSN without it (:func:`redact`), and the text of
every error is scrubbed of it (:func:`secrets_of`). The store's operations are in
:mod:`._postgres`.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import psycopg
from psycopg import conninfo

from .._errors import ConfigError, LedgerError
from ._migrations import SCHEMA_VERSION, check_version, steps_after
from ._store import TABLES

T = TypeVar("T")

LOCK_ID = 0x41434344  # "ACCD": the advisory lock held while the schema is created or upgraded
_RETRIES = 3  # a transaction that lost a deadlock or a serialization check is run again this often
_SCHEMA = (
    "SELECT n.oid IS NOT NULL, EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = n.oid AND relname = 'version'), "
    "(SELECT count(*) FROM pg_class WHERE relnamespace = n.oid), n.oid IS NULL OR has_schema_privilege(n.oid, 'USAGE') "
    "FROM (SELECT to_regnamespace('accord') AS oid) n"
)  # from the catalogs: what a role without rights on the schema may still see


class PostgresConnection:
    """One connection per store and process (reopened after a fork or a drop), behind a lock."""

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

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- the connection ----------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        """A live connection (reopened after a fork or when the server dropped it); call with the lock held."""
        conn = self._conn
        if conn is not None and (self._pid != os.getpid() or conn.closed or conn.broken or dropped(conn)):
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
            self._durable = str(one(conn.execute(
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
        schema, versioned, objects, usable = one_row(conn.execute(_SCHEMA))
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
                        abandon(conn)  # a transaction that ``work`` began itself and could not end
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
            return one_row(conn.execute(_SCHEMA))[1] is True
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


def send(c: psycopg.Connection[Any], statements: Sequence[tuple[str, Any]]) -> list[psycopg.Cursor[Any]]:
    """The statements in one round trip (libpq's pipeline mode); their cursors, results fetched.

    On the first error the rest are skipped, so a transaction begun here stays open, aborted:
    :func:`abandon` ends it.
    """
    # leaving the block sends the one Sync and reads every result (a sync inside it costs a round trip more)
    with c.pipeline():
        cursors = [c.execute(sql, params) for sql, params in statements]
    return cursors


def abandon(c: psycopg.Connection[Any]) -> None:
    """Roll back a transaction left open on ``c`` (by an error between BEGIN and COMMIT)."""
    if c.info.transaction_status in (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR):
        with contextlib.suppress(psycopg.Error):
            c.execute("ROLLBACK")


def dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server closed an idle connection: it then has something to read (its goodbye, or EOF)."""
    try:
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    except (OSError, ValueError, psycopg.Error):
        return True


def one(cursor: psycopg.Cursor[Any]) -> Any:
    return one_row(cursor)[0]


def one_row(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    assert row is not None, "the statement returns one row"
    return row


# Stores with a connection in this process: closed before a fork, so that no libpq connection
# crosses it (the child and the parent would share one socket); each reopens on first use.
_OPEN: weakref.WeakSet[PostgresConnection] = weakref.WeakSet()


def _before_fork() -> None:
    for store in list(_OPEN):
        with store._lock:
            store._drop()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)
