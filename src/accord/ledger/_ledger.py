"""The decision ledger: once accord has accepted an answer, the same request gets it again.

The ledger is keyed by everything that decides an answer (:mod:`._keys`): the request, the
schema's canonical JSON Schema, the policy and the backend's logical fingerprint, never the
environment (device, dtype, host), so another worker gets the same answer. A run is stored as
JSON (:mod:`._codec`) in a store (:mod:`._store`): an SQLite file (:mod:`._sqlite`, the
default) or a PostgreSQL database shared by workers on many hosts (:mod:`._postgres`):

    contexts what a stabilizer adds to every key: schema, policy and model (canonical JSON)
    keys     key -> its request (canonical JSON) and context
    runs     one row per finished run: outcome, value, the Result as JSON, ``superseded_by``
    ballots  every ballot of every run, as JSON (text, data, error, perturbation, usage, timing)
    answers  key -> its current answer: an accepted run, the only kind that is ever replayed
    claims   key -> the worker deciding it now, with a lease (:mod:`._batch`: ``map`` by many workers)

Everything is JSON; nothing is pickled or evaluated. A failed write never loses an answer:
``remember`` logs a warning and reports the failure in ``result.ledger`` (``meta["ledger_error"]``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from .._errors import ConfigError, LedgerError
from .._records import LedgerRecord
from .._result import Result
from . import _codec
from ._batch import Batch
from ._keys import Keys, Subject, key_prefix
from ._migrations import Copied, copy
from ._open import exists, is_dsn, open_store, shown
from ._pending import Pending, brief

log = logging.getLogger("accord")
T = TypeVar("T")

_EXPORT_BATCH = 500  # runs per read while exporting

def default_path() -> Path:
    """``ledger.sqlite3`` in the user data dir (platformdirs), e.g. ``~/.local/share/accord``."""
    import platformdirs

    return Path(platformdirs.user_data_dir("accord")) / "ledger.sqlite3"


class Ledger:
    """Sticky, replayable, resumable results: ``Stabilizer(..., ledger=Ledger())``.

    ``path``: the SQLite file (created when missing; default :func:`default_path`), or a
    ``postgresql://`` DSN (the schema ``accord`` in that database, created when missing).
    ``ttl``: seconds (or a timedelta) after which an answer is decided again. ``timeout``:
    seconds to wait for another writer's lock (and for a server to answer a connection) before
    giving up with :class:`~accord.LedgerError`. ``lease``: seconds a worker's claim on a prompt
    of ``Stabilizer.map`` lasts unless renewed (it is renewed every third of that while the
    worker lives). Raises LedgerError at once when the file is corrupt, foreign or from a newer
    accord, or the server is unreachable or refuses the role.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        ttl: float | timedelta | None = None,
        timeout: float = 5.0,
        lease: float = 30.0,
    ) -> None:
        if isinstance(ttl, timedelta):
            ttl = ttl.total_seconds()
        if ttl is not None and not ttl > 0:
            raise ConfigError(f"Ledger(ttl=...) must be positive seconds or None, got {ttl!r}")
        if not timeout > 0:
            raise ConfigError(f"Ledger(timeout=...) must be positive seconds, got {timeout!r}")
        if not lease > 0:
            raise ConfigError(f"Ledger(lease=...) must be positive seconds, got {lease!r}")
        target = path if path is not None else default_path()
        self._store = open_store(target, timeout=float(timeout))
        self.where = self._store.where  # the file, or the DSN without its password
        self.path = None if is_dsn(target) else Path(self.where)
        self.ttl = ttl
        self.timeout = float(timeout)
        self.lease = float(lease)
        self._keys = Keys()

    def __repr__(self) -> str:
        return f"Ledger({self.where!r})"

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()

    def key(self, subject: Subject, prompt: Any) -> str:
        """The ledger key of ``prompt`` under ``subject`` (a Stabilizer, or what it decides with:
        model, schema, policy), a sha256 in hex. A ConfigError when the model has no identity."""
        return self._keys.entry(subject, prompt).key

    # -- what the run path calls (``run._decider``) -------------------------------------------

    def recall(self, subject: Subject, prompt: Any) -> Result[Any] | None:
        """The current accepted answer for ``prompt``, replayed; None on a miss.

        A ledger that cannot be read is a miss (with a warning): the run decides afresh.
        """
        try:
            entry = self._keys.entry(subject, prompt)
            answer = self._store.answer(entry.key)
            if answer is None and entry.legacy is not None:  # stored under the key version before (``_keys``)
                answer = self._store.answer(entry.legacy)
            if answer is None or (self.ttl is not None and time.time() - answer.decided > self.ttl):
                return None
            return _codec.decode(answer, subject.schema)
        except ConfigError:  # a model without an identity: refused, never a guess
            raise
        except Exception as exc:  # noqa: BLE001 - a broken ledger must never stop a run
            log.warning("accord ledger: recall failed, deciding afresh (%s)", brief(exc))
            return None

    def begin(self, subject: Subject, prompt: Any) -> Pending | None:
        """Open a run before its first call, so its ballots are stored as they come.

        A run killed mid-way stays in the ledger as ``interrupted``, with the ballots it made:
        history, never replayed. ``remember(..., pending=...)`` completes it. None when the
        ledger cannot be written (the run goes on; ``remember`` reports the failure). A prompt
        claimed in a batch needs none: its claim opened the run (``Ticket.pending``).
        """
        try:
            run_id = self._store.open_run(self._keys.entry(subject, prompt))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the run goes on; remember stores its ballots
            log.warning("accord ledger: cannot open the run (%s); its ballots are stored when it ends", brief(exc))
            return None
        return Pending(self, run_id)

    def remember(
        self, subject: Subject, prompt: Any, result: Result[T], refresh: bool = False, pending: Pending | None = None
    ) -> Result[T]:
        """Store the run; return the answer to give the caller.

        That is ``result`` itself, unless another writer decided the same key first (and
        ``refresh`` is False): then it is the first writer's Result, replayed. Never raises: a
        failed write is logged and reported in ``result.ledger`` (``meta["ledger_error"]``).
        """
        try:
            entry = self._keys.entry(subject, prompt)
            run = _codec.encode(result, subject.schema)
            opened = pending.run_id if pending is not None else None
            owner = pending.owner if pending is not None and pending.key == entry.key else None
            run_id, winner = self._store.store_run(entry, run, refresh=refresh, ttl=self.ttl, opened=opened, release=owner)
            if pending is not None and owner is not None:  # let go, naming the key's answer
                pending.released = True
                pending.answer = winner if winner is not None else (run_id if run.outcome == "accepted" else None)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed write never costs the answer
            log.warning("accord ledger: the run was not recorded (%s); returning its answer", brief(exc))
            return _with_ledger(result, LedgerRecord(error_type=type(exc).__name__, error_message=str(exc)[:500]))
        if winner is not None:
            try:  # the first writer's answer; what this run spent deciding it too is its usage
                return dataclasses.replace(_codec.decode(self._store.replay(winner), subject.schema), usage=result.usage)
            except Exception as exc:  # noqa: BLE001 - then the caller gets its own answer
                log.warning("accord ledger: cannot replay the first writer's answer (%s)", brief(exc))
        return _with_ledger(result, LedgerRecord(entry.key, run_id))

    def batch(self, subject: Subject, *, refresh: bool = False) -> Batch:
        """The claims of one batch over this ledger (a ``map``, or one run), so that workers running
        the same prompts at once decide each once (:mod:`._batch`); a context manager."""
        return Batch(self, subject, refresh=refresh)

    # -- reading it back (the CLI) -----------------------------------------------------------

    def runs(self, *, limit: int | None = 50, key: str | None = None) -> list[dict[str, Any]]:
        """Run summaries, newest first (optionally only those of keys starting with ``key``);
        ``limit``: an int >= 1, or None for all."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"runs(limit=...) must be an int >= 1 or None, got {limit!r}")
        prefix = key_prefix(key) if key else None
        return [_codec.summary(row) for row in self._store.runs(limit=limit, prefix=prefix)]

    def show(self, key: str) -> dict[str, Any]:
        """Everything about one key (a unique prefix will do): what it hashes and every run, oldest first."""
        found = self._store.keys(key_prefix(key), limit=2)
        if len(found) != 1:
            raise LedgerError(f"no key starts with {key!r}" if not found else f"the key prefix {key!r} is ambiguous")
        record = self._store.show(found[0])
        if record is None:
            raise LedgerError(f"no key starts with {key!r}")
        runs = [_codec.full(row, with_request=False) for row in record.runs]
        current = next((r["run"] for r in runs if r["current"]), None)
        material = {**json.loads(record.material), "request": json.loads(record.request)}
        return {"key": record.key, "material": dict(sorted(material.items())), "current": current, "runs": runs}

    def export(self) -> Iterator[dict[str, Any]]:
        """Every run with its request and ballots, oldest first (one JSONL line each)."""
        last = 0
        while rows := self._store.export(after=last, limit=_EXPORT_BATCH):
            for row in rows:
                yield _codec.full(row, with_request=True)
            last = rows[-1].run


def migrate(source: str | os.PathLike[str], target: str, *, timeout: float = 5.0) -> Copied:
    """Copy the ledger at ``source`` (a file, or a DSN) into the empty PostgreSQL ledger ``target``.

    Every context, key, run, ballot and answer, in one transaction of ``target``, with run ids
    and times kept: ``runs``, ``show`` and ``export`` then read the same from both, and every
    answer replays. ``source`` is left as it was. LedgerError when there is no ledger at
    ``source`` or ``target`` holds runs already.
    """
    if not is_dsn(target):
        raise ConfigError("migrate(...) copies into a PostgreSQL ledger: the target must be a postgresql:// DSN")
    if not exists(source, timeout=timeout):
        raise LedgerError(f"no ledger at {shown(source)}")
    from ._postgres import PostgresStore

    origin, destination = open_store(source, timeout=timeout), open_store(target, timeout=timeout)
    try:
        assert isinstance(destination, PostgresStore)
        return copy(origin, destination)
    finally:
        origin.close()
        destination.close()


def _with_ledger(result: Result[T], record: LedgerRecord) -> Result[T]:
    new = dataclasses.replace(result, ledger=record)  # meta["ledger"] or meta["ledger_error"] with it
    if result.error is not None:
        result.error.result = new  # the raised error carries the Result the caller would see
    return new
