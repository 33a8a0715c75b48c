"""A run in progress in the ledger: its ballots are stored as they are made.

Below both the ledger's front door (:mod:`._ledger`, ``begin``) and the batch (:mod:`._batch`, a
claim opens the run with it): each opens a :class:`Pending`, and the run path hands it on to the
run it is for, explicitly, and then to ``remember``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .._result import Ballot
from . import _codec

if TYPE_CHECKING:
    from ._ledger import Ledger

log = logging.getLogger("accord")

class Pending:
    """A run in progress: ``record`` stores each ballot as it is made (the run's ``on_ballot``).

    One opened by a batch's claim names the claim's ``key`` and ``owner``: ``remember`` lets go of
    the claim with the run (``released``), naming the key's ``answer`` (its accepted run).
    """

    def __init__(self, ledger: Ledger, run_id: int, *, key: str | None = None, owner: str | None = None) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.key, self.owner = key, owner
        self.released = False
        self.answer: int | None = None
        self._seq = 0
        self._lock = threading.Lock()

    def record(self, ballot: Ballot) -> None:
        with self._lock:
            seq, self._seq = self._seq, self._seq + 1
        body = _codec.ballot_body(ballot)
        try:
            self.ledger._store.record_ballot(self.run_id, seq, ballot.status, body)
        except Exception as exc:  # noqa: BLE001 - the final write stores every ballot again
            log.warning("accord ledger: a ballot was not stored yet (%s)", brief(exc))


def brief(exc: BaseException) -> str:
    """An error in one line, for logs: its type and message, never the request."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}"
