"""The decision ledger: once accord has accepted an answer, the same request gets it again.

From the front door down:

    _ledger      the front door (Ledger): recall, begin, remember, batch; migrate
    _batch       many workers, one batch: a claim with a lease per prompt (a Ticket per prompt)
    _pending     a run in progress (its ballots stored as they are made)
    _keys        the key: everything that decides an answer (a Subject), canonical JSON, hashed
    _codec       a Result as stored, and back: JSON only
    _open        which store a path names, opened (the factory above the stores)
    _sqlite      the SQLite store (the default); _postgres (+ _postgres_connection): PostgreSQL
    _migrations  the format: one version for every store, and the steps that reach it
    _store       what a store must do (the protocol), and the rows that cross
"""

from ._ledger import Ledger, default_path, migrate
from ._open import exists

__all__ = ["Ledger", "default_path", "exists", "migrate"]
