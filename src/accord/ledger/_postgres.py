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
from ._postgres_connection import PostgresConnection, one, one_row, send
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
    f"SELECT q.key, a.run, a.decided, r.key, r.created, r.value, r.result, {_BALLOTS}, "
    f"c.owner, c.expires > {_NOW}, c.run FROM unnest(%s::text[]) AS q(key) "
    "LEFT JOIN accord.answers a ON a.key = q.key LEFT JOIN accord.runs r ON r.id = a.run LEFT JOIN accord.claims c ON c.key = q.key "
    "WHERE a.key IS NOT NULL OR c.key IS NOT NULL"
)  # each key's answer (as _ANSWER) and claim, in one read
_RUN_FIELDS = _RUN_COLUMNS.split(", ")
_RUN_VALUES = ", ".join(f"%({name})s" for name in _RUN_FIELDS)
_FRESH = f"NOT %(refresh)s AND (%(ttl)s::float8 IS NULL OR {_NOW} - a.decided <= %(ttl)s::float8)"  # an answer to replay
_STORE = (
    f"WITH {_ENTRY}, "
    "cur AS (SELECT a.run FROM accord.answers a WHERE a.key = %(key)s), "  # under the key's advisory lock: as it stands
    f"won AS (SELECT a.run FROM accord.answers a WHERE a.key = %(key)s AND %(accepted)s AND {_FRESH}), "  # the first writer won
    f"re AS (UPDATE accord.runs SET ({_RUN_COLUMNS}, superseded_by) = ({_RUN_VALUES}, (SELECT run FROM won)) "
    "WHERE id = %(opened)s AND key = %(key)s RETURNING id), "  # the run open_run made, completed
    f"nw AS (INSERT INTO accord.runs (key, created, {_RUN_COLUMNS}, superseded_by) "
    f"SELECT %(key)s, {_NOW}, {_RUN_VALUES}, (SELECT run FROM won) WHERE NOT EXISTS (SELECT FROM re) RETURNING id), "
    "r AS (SELECT id FROM re UNION ALL SELECT id FROM nw), "
    "b AS (INSERT INTO accord.ballots (run, seq, status, body) SELECT r.id, t.n - 1, t.b ->> 0, t.b ->> 1 "
    "FROM r, json_array_elements(%(ballots)s::json) WITH ORDINALITY AS t(b, n) "
    "ON CONFLICT (run, seq) DO UPDATE SET status = excluded.status, body = excluded.body), "  # those stored as they came: replaced
    "d AS (DELETE FROM accord.ballots WHERE run IN (SELECT id FROM re) AND seq >= json_array_length(%(ballots)s::json)), "
    "ok AS (SELECT id FROM r WHERE %(accepted)s AND NOT EXISTS (SELECT FROM won)), "  # this run is the answer now
    f"an AS (INSERT INTO accord.answers (key, run, decided) SELECT %(key)s, id, {_NOW} FROM ok "
    "ON CONFLICT (key) DO UPDATE SET run = excluded.run, decided = excluded.decided), "
    "old AS (UPDATE accord.runs SET superseded_by = (SELECT id FROM ok) WHERE id = (SELECT run FROM cur) AND EXISTS (SELECT FROM ok)), "
    "rel AS (UPDATE accord.claims SET expires = 0, run = coalesce((SELECT run FROM won), (SELECT id FROM ok)) "
    "WHERE key = %(key)s AND owner = %(owner)s) "  # owner NULL: no claim to let go
    "SELECT (SELECT id FROM r), (SELECT run FROM won)"
)  # the key, its context, the run, its ballots, the answer, the claim let go: one statement
_HOLDER = f"SELECT owner, expires > {_NOW}, run FROM accord.claims WHERE key = %s"
_CLAIM = (
    f"INSERT INTO accord.claims AS c (key, owner, expires, run) VALUES (%s, %s, {_NOW} + %s, NULL) "
    "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires, run = NULL "
    f"WHERE c.owner = excluded.owner OR c.expires <= {_NOW} RETURNING 1"
)  # one statement, under the row's lock: two workers never both get it
_GO = "%(begin)s AND EXISTS (SELECT FROM mine) AND NOT EXISTS (SELECT FROM ans)"  # the key is ours to decide: open its run
_TAKE = (
    f"WITH ans AS (SELECT a.run, a.decided, r.key, r.created, r.value, r.result, {_BALLOTS} "
    f"FROM accord.answers a JOIN accord.runs r ON r.id = a.run WHERE a.key = %(key)s AND {_FRESH}), "
    f"mine AS (SELECT FROM accord.claims WHERE key = %(key)s AND owner = %(owner)s AND expires > {_NOW}), "
    "rel AS (UPDATE accord.claims SET expires = 0, run = (SELECT run FROM ans) "
    "WHERE key = %(key)s AND owner = %(owner)s AND EXISTS (SELECT FROM ans)), "  # answered: let go at once, naming it
    f"c AS (INSERT INTO accord.contexts (id, material) SELECT %(context)s, %(material)s WHERE {_GO} ON CONFLICT DO NOTHING), "
    f"k AS (INSERT INTO accord.keys (key, context, request, created) SELECT %(key)s, %(context)s, %(request)s, {_NOW} "
    f"WHERE {_GO} ON CONFLICT DO NOTHING), "
    "o AS (INSERT INTO accord.runs (key, created, outcome, stopped_because, calls, refresh, result) "
    f"SELECT %(key)s, {_NOW}, 'interrupted', '', 0, false, '{{}}' WHERE {_GO} RETURNING id) "
    "SELECT ans.*, (SELECT id FROM o) FROM (SELECT) q LEFT JOIN ans ON true"
)  # after the claim (a statement of its own, so it sees what committed before the claim was ours): the answer, or the run opened
_RELEASED = (
    f"SELECT c.key, c.owner, c.expires > {_NOW}, c.run, r.id, r.created, r.key, r.created, r.value, r.result, {_BALLOTS} "
    f"FROM accord.claims c LEFT JOIN accord.runs r ON r.id = c.run AND c.expires <= {_NOW} WHERE c.key = ANY(%s)"
)  # the claims, with the run each names once let go (as ``replay`` reads it)
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
        self, entry: Entry, run: EncodedRun, *, refresh: bool, ttl: float | None, opened: int | None, release: str | None = None
    ) -> tuple[int, int | None]:
        """One transaction in one round trip: the key's advisory lock (no other writer of its answer
        until COMMIT), then one statement that stores the run and decides the answer as it stands."""
        key, accepted = entry.key, run.outcome == "accepted"
        values = (run.outcome, run.stopped_because, run.error, run.calls, refresh, run.value, run.result)
        params = {**entry._asdict(), **dict(zip(_RUN_FIELDS, values, strict=True)), "opened": opened, "accepted": accepted,
                  "refresh": refresh, "ttl": ttl, "owner": release, "ballots": json.dumps(run.ballots, ensure_ascii=False)}  # fmt: skip
        statements: list[tuple[str, Any]] = [
            ("BEGIN", None),
            ("SELECT set_config('synchronous_commit', %s, true), pg_advisory_xact_lock(hashtextextended(%s, 0))",
             (self._durable, key)),  # a finished run lasts
            (_STORE, params),
            ("COMMIT", None),
        ]  # fmt: skip

        def work(c: psycopg.Connection[Any]) -> tuple[int, int | None]:
            run_id, winner = one_row(send(c, statements)[2])
            return int(run_id), None if winner is None else int(winner)

        return self._write(work, atomic=False)  # the transaction is the statements' own

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

    def look(self, keys: Sequence[str]) -> dict[str, tuple[Answer | None, Holder | None]]:
        rows = self._read(lambda c: c.execute(_LOOK, (list(keys),)).fetchall())
        return {row[0]: ((None if row[1] is None else _answer(row[1:])), (None if row[8] is None else Holder(*row[8:11])))
                for row in rows}  # fmt: skip

    # -- claims ------------------------------------------------------------------------------

    def claim(self, entry: Entry, owner: str, *, lease: float, ttl: float | None, refresh: bool, begin: bool = False) -> Claim:
        key = entry.key
        params = {**entry._asdict(), "owner": owner, "refresh": refresh, "ttl": ttl, "begin": begin}
        statements: list[tuple[str, Any]] = [
            (_CLAIM, (key, owner, lease)),  # one statement, atomic by itself: the claim is ours once it commits
            (_HOLDER, (key,)),
            (_TAKE, params),  # read after the claim: a worker that decided it and let go is seen
        ]

        def work(c: psycopg.Connection[Any]) -> Claim:
            got, held, taken = send(c, statements)
            if got.fetchone() is None:
                holder = held.fetchone()
                return Claim("taken", holder=Holder(*holder) if holder is not None else None)
            row = one_row(taken)
            if row[0] is not None:
                return Claim("answered", _answer(row))
            return Claim("mine", run=None if row[7] is None else int(row[7]))

        return self._write(work, atomic=False)

    def renew(self, owner: str, keys: Sequence[str], *, lease: float) -> None:
        sql = f"UPDATE accord.claims SET expires = {_NOW} + %s WHERE owner = %s AND key = ANY(%s) AND expires > 0"  # never one let go
        self._write(lambda c: c.execute(sql, (lease, owner, list(keys))), atomic=False)

    def release(self, key: str, owner: str, run: int | None) -> None:
        sql = "UPDATE accord.claims SET expires = 0, run = %s WHERE key = %s AND owner = %s"
        self._write(lambda c: c.execute(sql, (run, key, owner)), atomic=False)

    def holders(self, keys: Sequence[str]) -> dict[str, Holder]:
        rows = self._read(lambda c: c.execute(_RELEASED, (list(keys),)).fetchall())
        return {row[0]: Holder(row[1], row[2], row[3], None if row[4] is None else _answer(row[4:])) for row in rows}

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

