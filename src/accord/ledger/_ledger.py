"""The decision ledger: once accord has accepted an answer, the same request gets it again.

A SQLite file (the stdlib ``sqlite3``, WAL mode) keyed by everything that decides an answer: the
request, the schema's canonical JSON Schema, the policy and the backend's logical fingerprint,
never the environment (device, dtype, host), so another worker gets the same answer.

    contexts what a stabilizer adds to every key: schema, policy and model (canonical JSON)
    keys     key -> its request (canonical JSON) and context
    runs     one row per finished run: outcome, value, the Result as JSON, ``superseded_by``
    ballots  every ballot of every run, as JSON (text, data, error, perturbation, usage, timing)
    answers  key -> its current answer: an accepted run, the only kind that is ever replayed

Everything is JSON; nothing is pickled or evaluated. A failed write never loses an answer:
``remember`` logs a warning and reports the failure in ``result.meta["ledger_error"]``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, TypeVar

from .._canonical import canonical_key
from .._errors import ConfigError, LedgerError
from .._types import Usage
from .._result import Ballot, Result
from .._schema import Schema

log = logging.getLogger("accord")
T = TypeVar("T")

APPLICATION_ID = 0x41434344  # "ACCD" in the SQLite header: this file is an accord ledger
SCHEMA_VERSION = 1
KEY_VERSION = 1  # bump when the key material changes shape: old answers then miss, never go stale

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


def default_path() -> Path:
    """``ledger.sqlite3`` in the user data dir (platformdirs), e.g. ``~/.local/share/accord``."""
    import platformdirs

    return Path(platformdirs.user_data_dir("accord")) / "ledger.sqlite3"


class Ledger:
    """Sticky, replayable, resumable results: ``Stabilizer(..., ledger=Ledger())``.

    ``path``: the SQLite file (created when missing; default :func:`default_path`). ``ttl``:
    seconds (or a timedelta) after which an answer is decided again. ``timeout``: seconds to wait
    for another writer's lock before giving up with :class:`~accord.LedgerError`.
    Raises LedgerError at once when the file is corrupt, foreign, or from a newer accord.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, ttl: float | timedelta | None = None, timeout: float = 5.0
    ) -> None:
        if isinstance(ttl, timedelta):
            ttl = ttl.total_seconds()
        if ttl is not None and not ttl > 0:
            raise ConfigError(f"Ledger(ttl=...) must be positive seconds or None, got {ttl!r}")
        if not timeout > 0:
            raise ConfigError(f"Ledger(timeout=...) must be positive seconds, got {timeout!r}")
        self.path = Path(path) if path is not None else default_path()
        self.ttl = ttl
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._contexts: weakref.WeakKeyDictionary[Any, tuple[Any, Any, str, _Context]] = weakref.WeakKeyDictionary()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(f"cannot create the ledger's folder {self.path.parent}: {exc.strerror}") from exc
        with self._lock:
            self._connection()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # -- the key -----------------------------------------------------------------------------

    def key(self, stabilizer: Any, prompt: Any) -> str:
        """The ledger key of ``prompt`` under this stabilizer (a sha256, hex)."""
        return self._key(stabilizer, prompt)[0]

    def _key(self, stabilizer: Any, prompt: Any) -> tuple[str, str, _Context]:
        """``(key, request JSON, context)``: the key hashes ``head + request + tail``."""
        context = self._context(stabilizer)
        request = canonical_key(prompt)
        return hashlib.sha256((context.head + request + context.tail).encode()).hexdigest(), request, context

    def _context(self, stab: Any) -> _Context:
        """Everything in the key but the request, cached per stabilizer.

        ``head + canonical_key(prompt) + tail`` is the canonical JSON (sorted keys, no spaces)
        of ``{"ledger", "model", "policy", "request", "schema"}``.
        """
        fingerprint = str(getattr(stab.model, "fingerprint", None) or _qualname(type(stab.model)))
        with self._lock:
            cached = self._contexts.get(stab)
            if cached and cached[0] is stab.policy and cached[1] is stab.schema and cached[2] == fingerprint:
                return cached[3]
            ledger, model = canonical_key(KEY_VERSION), canonical_key(fingerprint)
            policy, schema = canonical_key(describe_policy(stab.policy)), canonical_key(describe_schema(stab.schema))
            head = f'{{"ledger":{ledger},"model":{model},"policy":{policy},"request":'
            tail = f',"schema":{schema}}}'
            material = f'{{"ledger":{ledger},"model":{model},"policy":{policy},"schema":{schema}}}'  # without the request
            context = _Context(head, tail, hashlib.sha256(material.encode()).hexdigest(), material)
            self._contexts[stab] = (stab.policy, stab.schema, fingerprint, context)
            return context

    # -- what the Stabilizer calls -----------------------------------------------------------

    def recall(self, stabilizer: Any, prompt: Any) -> Result[Any] | None:
        """The current accepted answer for ``prompt``, replayed; None on a miss.

        A ledger that cannot be read is a miss (with a warning): the run decides afresh.
        """
        try:
            key = self._key(stabilizer, prompt)[0]
            row = self._read(lambda c: c.execute("SELECT run, decided FROM answers WHERE key = ?", (key,)).fetchone())
            if row is None or self._expired(row[1], time.time()):
                return None
            return self._replay(row[0], stabilizer.schema)
        except Exception as exc:  # a broken ledger must never stop a run
            log.warning("accord ledger: recall failed, deciding afresh (%s)", _brief(exc))
            return None

    def begin(self, stabilizer: Any, prompt: Any) -> Pending | None:
        """Open a run before its first call, so its ballots are stored as they come.

        A run killed mid-way stays in the ledger as ``interrupted``, with the ballots it made:
        history, never replayed. ``remember(..., pending=...)`` completes it. None when the
        ledger cannot be written (the run goes on; ``remember`` reports the failure).
        """
        try:
            key, request, context = self._key(stabilizer, prompt)
            run_id = self._write(lambda c: self._open_run(c, key, request, context))
        except Exception as exc:
            log.warning("accord ledger: cannot open the run (%s); its ballots are stored when it ends", _brief(exc))
            return None
        return Pending(self, run_id)

    def _open_run(self, c: sqlite3.Connection, key: str, request: str, context: _Context) -> int:
        now = time.time()
        c.execute("INSERT OR IGNORE INTO contexts (id, material) VALUES (?, ?)", (context.id, context.material))
        c.execute(
            "INSERT OR IGNORE INTO keys (key, context, request, created) VALUES (?, ?, ?, ?)", (key, context.id, request, now)
        )
        cursor = c.execute(
            "INSERT INTO runs (key, created, outcome, stopped_because, calls, refresh, result) "
            "VALUES (?, ?, 'interrupted', '', 0, 0, '{}')",
            (key, now),
        )
        return int(cursor.lastrowid or 0)

    def remember(
        self, stabilizer: Any, prompt: Any, result: Result[T], refresh: bool = False, pending: Pending | None = None
    ) -> Result[T]:
        """Store the run; return the answer to give the caller.

        That is ``result`` itself, unless another writer decided the same key first (and
        ``refresh`` is False): then it is the first writer's Result, replayed. Never raises: a
        failed write is logged and reported in ``result.meta["ledger_error"]``.
        """
        try:
            key, request, context = self._key(stabilizer, prompt)
            run = _encode(result, stabilizer.schema)
            opened = pending.run_id if pending is not None else None
            run_id, winner = self._write(lambda c: self._store(c, key, request, context, run, refresh, opened))
        except Exception as exc:
            log.warning("accord ledger: the run was not recorded (%s); returning its answer", _brief(exc))
            return _with_meta(result, ledger_error={"type": type(exc).__name__, "message": str(exc)[:500]})
        if winner is not None:
            try:
                return self._replay(winner, stabilizer.schema)  # type: ignore[return-value]
            except Exception as exc:
                log.warning("accord ledger: cannot replay the first writer's answer (%s)", _brief(exc))
        return _with_meta(result, ledger={"key": key, "run": run_id})

    def _store(
        self, c: sqlite3.Connection, key: str, request: str, context: _Context, run: dict[str, Any], refresh: bool,
        opened: int | None = None,
    ) -> tuple[int, int | None]:
        """Inside one write transaction: the run, its ballots, and the key's current answer.

        ``opened``: the run row ``begin`` made; it is completed, its early ballots replaced by
        the final list (which holds them all).
        """
        now = time.time()
        c.execute("INSERT OR IGNORE INTO contexts (id, material) VALUES (?, ?)", (context.id, context.material))
        c.execute(
            "INSERT OR IGNORE INTO keys (key, context, request, created) VALUES (?, ?, ?, ?)", (key, context.id, request, now)
        )
        values = (run["outcome"], run["stopped_because"], run["error"], run["calls"], int(refresh), run["value"], run["result"])
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
            [(run_id, seq, status, body) for seq, (status, body) in enumerate(run["ballots"])],
        )
        if run["outcome"] != "accepted":
            return run_id, None
        current = c.execute("SELECT run, decided FROM answers WHERE key = ?", (key,)).fetchone()
        if current is not None and not refresh and not self._expired(current[1], now):
            c.execute("UPDATE runs SET superseded_by = ? WHERE id = ?", (current[0], run_id))  # first writer won
            return run_id, int(current[0])
        c.execute("INSERT OR REPLACE INTO answers (key, run, decided) VALUES (?, ?, ?)", (key, run_id, now))
        if current is not None:
            c.execute("UPDATE runs SET superseded_by = ? WHERE id = ?", (run_id, current[0]))
        return run_id, None

    def _replay(self, run_id: int, schema: Schema[Any]) -> Result[Any]:
        def fetch(c: sqlite3.Connection) -> tuple[Any, list[Any]]:
            row = c.execute("SELECT key, created, value, result FROM runs WHERE id = ?", (run_id,)).fetchone()
            ballots = c.execute(_BALLOTS, (run_id,)).fetchall()
            return row, ballots

        row, ballots = self._read(fetch)
        if row is None:
            raise LedgerError(f"the ledger at {self.path} lost run {run_id}")
        return _decode(row, [b[0] for b in ballots], schema, run_id)

    def _expired(self, decided: float, now: float) -> bool:
        return self.ttl is not None and now - decided > self.ttl

    # -- reading it back (the CLI) -----------------------------------------------------------

    def runs(self, *, limit: int | None = 50, key: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first (optionally only those of keys starting with ``key``)."""
        where, params = ("WHERE r.key >= ? AND r.key < ?", list(_span(key))) if key else ("", [])
        sql = f"{_SUMMARY} {where} ORDER BY r.id DESC LIMIT ?"
        rows = self._read(lambda c: c.execute(sql, (*params, -1 if limit is None else limit)).fetchall())
        return [_summary(row) for row in rows]

    def show(self, key: str) -> dict[str, Any]:
        """Everything about one key (a unique prefix will do): what it hashes and every run, oldest first."""

        def fetch(c: sqlite3.Connection) -> tuple[Any, list[Any]]:
            found = c.execute(
                "SELECT k.key, k.request, c.material FROM keys k JOIN contexts c ON c.id = k.context "
                "WHERE k.key >= ? AND k.key < ? LIMIT 2",
                _span(key),
            ).fetchall()
            if len(found) != 1:
                raise LedgerError(f"no key starts with {key!r}" if not found else f"the key prefix {key!r} is ambiguous")
            runs = c.execute(f"{_FULL} WHERE r.key = ? ORDER BY r.id", (found[0][0],)).fetchall()
            return found[0], runs

        (full, request, context), rows = self._read(fetch)
        runs = [self._full(row, with_request=False) for row in rows]
        current = next((r["run"] for r in runs if r["current"]), None)
        material = {**json.loads(context), "request": json.loads(request)}
        return {"key": full, "material": dict(sorted(material.items())), "current": current, "runs": runs}

    def export(self) -> Iterator[dict[str, Any]]:
        """Every run with its request and ballots, oldest first (one JSONL line each)."""
        last = 0
        while True:
            rows = self._read(lambda c: c.execute(f"{_FULL} WHERE r.id > ? ORDER BY r.id LIMIT 500", (last,)).fetchall())
            if not rows:
                return
            for row in rows:
                yield self._full(row, with_request=True)
            last = rows[-1][0]

    def _full(self, row: Any, *, with_request: bool) -> dict[str, Any]:
        out = _summary(row[:-1])
        out["result"] = json.loads(row[-1])
        if not with_request:
            out.pop("request")
        bodies = self._read(lambda c: c.execute(_BALLOTS, (out["run"],)).fetchall())
        out["ballots"] = [json.loads(b[0]) for b in bodies]
        return out

    # -- SQLite ------------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """The open connection (one per Ledger, reopened in a forked child); call with the lock held."""
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


_COLUMNS = "r.id, r.key, r.created, r.outcome, r.stopped_because, r.error, r.calls, r.refresh, r.value, r.superseded_by"
_JOINS = "FROM runs r LEFT JOIN answers a ON a.run = r.id LEFT JOIN keys k ON k.key = r.key"
_SUMMARY = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request {_JOINS}"
_FULL = f"SELECT {_COLUMNS}, a.run IS NOT NULL, k.request, r.result {_JOINS}"
_BALLOTS = "SELECT body FROM ballots WHERE run = ? ORDER BY seq"


class _Context(NamedTuple):
    head: str
    tail: str
    id: str
    material: str


def _summary(row: Any) -> dict[str, Any]:
    run, key, created, outcome, stopped, error, calls, refresh, value, superseded, current, request = row
    return {
        "run": run,
        "key": key,
        "created": created,
        "outcome": outcome,
        "stopped_because": stopped,
        "error": error,
        "calls": calls,
        "refresh": bool(refresh),
        "value": None if value is None else json.loads(value),
        "current": bool(current),
        "superseded_by": superseded,
        "request": json.loads(request) if request is not None else None,
    }


# -- Result <-> JSON -------------------------------------------------------------------------


class Pending:
    """A run in progress: ``record`` stores each ballot as it is made (the run's ``on_ballot``)."""

    def __init__(self, ledger: Ledger, run_id: int) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self._seq = 0
        self._lock = threading.Lock()

    def record(self, ballot: Ballot) -> None:
        with self._lock:
            seq, self._seq = self._seq, self._seq + 1
        body = _json(ballot.to_dict())
        try:
            self.ledger._write(
                lambda c: c.execute("INSERT OR REPLACE INTO ballots (run, seq, status, body) VALUES (?, ?, ?, ?)",
                                    (self.run_id, seq, ballot.status, body))
            )
        except Exception as exc:  # the final write stores every ballot again
            log.warning("accord ledger: a ballot was not stored yet (%s)", _brief(exc))


def _encode(result: Result[Any], schema: Schema[Any]) -> dict[str, Any]:
    """The row of one run: JSON text only."""
    accepted = result.error is None and result.stable
    outcome = "accepted" if accepted else ("failed" if result.error is not None else "unstable")
    has_value = result.value is not None or (accepted and result.key is not None)
    doc = result.to_dict()
    doc.pop("value")
    ballots = [(b.status, _json(b.to_dict())) for b in result.ballots]
    return {
        "outcome": outcome,
        "stopped_because": result.stopped_because,
        "error": type(result.error).__name__ if result.error is not None else None,
        "calls": result.calls,
        "value": _json(schema.dump(result.value)) if has_value else None,
        "result": _json({k: v for k, v in doc.items() if k != "ballots"}),
        "ballots": ballots,
    }


def _decode(row: Any, bodies: list[str], schema: Schema[Any], run_id: int) -> Result[Any]:
    """Rebuild an accepted Result: values validated again through the schema, ballots as Ballots."""
    key, created, value, doc = row[0], row[1], row[2], json.loads(row[3])
    ballots = tuple(_ballot(json.loads(body), schema) for body in bodies)
    meta = {**doc.get("meta", {}), "ledger": {"key": key, "run": run_id, "decided": created}}
    return Result(
        value=schema.validate(json.loads(value)) if value is not None else None,
        stable=doc["stable"],
        agreement=doc["agreement"],
        votes=dict(doc["votes"]),
        ballots=ballots,
        stopped_because=doc["stopped_because"],
        usage=_usage(doc["usage"]),
        schema=doc.get("schema", ""),
        fingerprint=doc.get("fingerprint", ""),
        key=doc.get("key"),
        field_agreement=doc.get("field_agreement"),
        min_margin=doc.get("min_margin"),
        fragile_steps=doc.get("fragile_steps"),
        replayed=True,
        meta=meta,
        environment=doc.get("environment", {}),
        data=json.loads(value) if value is not None else None,
    )


def _ballot(d: dict[str, Any], schema: Schema[Any]) -> Ballot:
    value = schema.validate(d["data"]) if d["status"] == "valid" else None
    fields = {f.name for f in dataclasses.fields(Ballot)} - {"usage", "value"}
    return Ballot(value=value, usage=_usage(d.get("usage") or {}), **{k: v for k, v in d.items() if k in fields})


def _usage(d: dict[str, Any]) -> Usage:
    return Usage(d.get("prompt_tokens"), d.get("completion_tokens"), d.get("seconds", 0.0), d.get("calls", 0))


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr)


def _with_meta(result: Result[T], **extra: Any) -> Result[T]:
    new = dataclasses.replace(result, meta={**result.meta, **extra})
    if result.error is not None:
        result.error.result = new  # the raised error carries the Result the caller would see
    return new


# -- describing the policy and schema for the key --------------------------------------------


def describe_schema(schema: Schema[Any]) -> dict[str, Any]:
    """The schema part of the key: its canonical JSON Schema (or the grammar text)."""
    if schema.kind == "grammar":
        return {"kind": "grammar", "lark": schema.source.lark}
    return {"kind": schema.kind, "json_schema": schema.json_schema}


# Policy fields that decide whether and how fast a run ends, never which answer it accepts.
# Everything else is in the key, new fields included: a miss is better than a stale hit.
_POLICY_NOT_IN_KEY = frozenset({"budget", "on_ballot", "plurality"})
_RETRY_NOT_IN_KEY = frozenset({"wait", "transport_attempts", "transport_stop"})


def describe_policy(policy: Any) -> dict[str, Any]:
    """The policy part of the key: vote, retry attempts, settings, normalizers, schema hint, perturbation.

    Callables go by qualified name. Left out: the budget, transport retries and their waits,
    ``on_ballot`` and ``on_no_consensus``.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(policy):
        value = getattr(policy, f.name)
        if f.name in _POLICY_NOT_IN_KEY:
            continue
        if f.name == "retry":
            kept = [g.name for g in dataclasses.fields(value) if g.name not in _RETRY_NOT_IN_KEY]
            out["retry"] = {name: describe(getattr(value, name)) for name in kept}
        elif f.name == "vote":
            out["vote"] = {**describe(value), "quorum": value.needed, "early_stop": describe(value.stop_rule)}
        else:
            out[f.name] = describe(value)
    return out


def describe(obj: Any, depth: int = 0) -> Any:
    """A stable JSON description of a policy object: never an address, never pickled."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth > 4:
        return _qualname(type(obj))
    if isinstance(obj, (list, tuple)):
        return [describe(v, depth + 1) for v in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, functools.partial):
        return {"partial": _qualname(obj.func), "args": describe(obj.args, depth + 1), "keywords": describe(obj.keywords, depth + 1)}
    if inspect.isroutine(obj) or isinstance(obj, type):
        return _qualname(obj)
    if dataclasses.is_dataclass(obj):
        fields = {f.name: describe(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj)}
        return {"type": _qualname(type(obj)), **fields}
    own = getattr(obj, "describe", None)
    if callable(own):
        return describe(own(), depth + 1)
    if type(obj).__repr__ is not object.__repr__:
        text = repr(obj)
        if " at 0x" not in text:
            return text
    attrs = {k: describe(v, depth + 1) for k, v in sorted(getattr(obj, "__dict__", {}).items()) if not k.startswith("_")}
    return {"type": _qualname(type(obj)), **attrs}


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"


# -- small helpers ---------------------------------------------------------------------------


def _busy(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # SQLite may have rolled back already (a full disk does)
            pass


def _span(prefix: str) -> tuple[str, str]:
    """The range of keys that start with a hex ``prefix`` (an index range, not a scan)."""
    text = prefix.strip().lower()
    if not text or any(ch not in "0123456789abcdef" for ch in text):
        raise LedgerError(f"a ledger key is hexadecimal, got {prefix!r}")
    return text, text + "g"  # "g" sorts after every hex digit


def _brief(exc: BaseException) -> str:
    """An error in one line, for logs: its type and message, never the request."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}"
