"""The PostgreSQL store: one ledger shared by workers on many hosts (psycopg 3, the ``postgres`` extra).

Chosen by a ``postgresql://`` (or ``postgres://``) DSN. The tables of :mod:`._store` live in the
schema ``accord`` of that database, created on first use, with their format in
``accord.version`` (:mod:`._migrations`); a schema ``accord`` that holds anything else is
refused. Times are the server's clock, so a lease means the same to every worker, whatever its
own clock says.

The connection (opening, the schema, retries, error mapping, the DSN without its password) is
:mod:`._postgres_connection`.

Durability: a finished run (``store_run``) commits as durably as the server commits anything
(its ``synchronous_commit``); what is only worth something while a run is in flight (the opened
run, each ballot as it is made, claims and their leases) commits with ``synchronous_commit=off``:
a crash of the server may lose the last of those (never corrupts), and the run's end stores every
ballot again. SQLite's store makes the same trade (``synchronous=NORMAL``). Every psycopg error leaves as a
:class:`~accord.LedgerError`, and no message holds the password: ``where`` is the DSN without
it, and the text of every error is scrubbed of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg

from .._errors import LedgerError
from ._postgres_connection import PostgresConnection, first_or_none, one, send
from ._store import TABLES, Answer, Claim, EncodedRun, Entry, Holder, KeyRecord, RunRow, key_span, run_row

_NOW = "extract(epoch from clock_timestamp())::float8"  # Unix seconds, the server's clock

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
_BATCH = 500  # rows per read while dumping


class PostgresStore(PostgresConnection):
    """The ledger's tables in the schema ``accord`` of a PostgreSQL database; see :class:`~accord.ledger._store.Store`."""

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # -- writing -----------------------------------------------------------------------------

    def open_run(self, entry: Entry) -> int:
        sql = (
            f"WITH {_ENTRY} INSERT INTO accord.runs (key, created, outcome, stopped_because, calls, refresh, result) "
            f"VALUES (%(key)s, {_NOW}, 'interrupted', '', 0, false, '{{}}') RETURNING id"
        )
        return int(self._write(lambda c: one(c.execute(sql, entry._asdict())), atomic=False))

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
        cursors = send(c, first)
        run_id = first_or_none(cursors[2])
        if run_id is None:  # ``opened`` is not a run of this key: nothing was written, store a new run
            if not accepted:
                return self._store_run(c, entry, run, refresh=refresh, ttl=ttl, opened=None)
            run_id = one(send(c, [(_NEW_RUN, {**params, "opened": None})])[0])
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
        send(c, [*second, ("COMMIT", None)])
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
            got, held, *answer = send(c, [
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


def _answer(row: Any) -> Answer:
    """An answer as ``_ANSWER`` selects it: run, decided, key, created, value, result, ballots."""
    return Answer(int(row[0]), float(row[1]), str(row[2]), float(row[3]), row[4], str(row[5]), list(row[6]))


def _full(row: Any) -> RunRow:
    return run_row(row[:12])._replace(result=row[12], ballots=list(row[13]))

