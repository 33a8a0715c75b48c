"""Which store a path names, opened: the factory above the stores.

A ``postgresql://`` (or ``postgres://``) DSN opens the PostgreSQL store (:mod:`._postgres`,
which needs psycopg 3, imported only then), anything else an SQLite file (:mod:`._sqlite`).
The stores import their rows from :mod:`._store`; this module imports the stores, so the
protocol stands below them and the choice above.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .._errors import LedgerError
from ._sqlite import SQLiteStore
from ._store import Store


def is_dsn(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a database server rather than a file."""
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def open_store(path: str | os.PathLike[str], *, timeout: float) -> Store:
    """The store for ``path``: a PostgreSQL database for a DSN, else an SQLite file (created when missing)."""
    if is_dsn(path):
        need_psycopg()
        from ._postgres import PostgresStore

        return PostgresStore(str(path), timeout=timeout)
    return SQLiteStore(path, timeout=timeout)


def exists(path: str | os.PathLike[str], *, timeout: float = 5.0) -> bool:
    """Whether a ledger is at ``path`` already (looking creates nothing): the file, or the schema in the database."""
    if is_dsn(path):
        need_psycopg()
        from ._postgres_connection import has_ledger

        return has_ledger(str(path), timeout=timeout)
    return Path(path).is_file()


def shown(path: str | os.PathLike[str]) -> str:
    """A path or DSN as messages show it: a DSN without its password (nor any option)."""
    if is_dsn(path):
        need_psycopg()
        from ._postgres_connection import redact

        return redact(str(path))
    return str(path)


def need_psycopg() -> None:
    """LedgerError saying how to install psycopg 3 when it is missing (it is imported only for a DSN)."""
    if importlib.util.find_spec("psycopg") is None:
        raise LedgerError("a postgresql:// ledger needs psycopg 3: pip install 'accord[postgres]'")
