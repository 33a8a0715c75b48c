"""What an actor builds its Stabilizer from: a :class:`Recipe`, picklable, built once per actor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..._errors import ConfigError
from ..._stabilizer import Options, Stabilizer
from ...ledger import Ledger
from ...ledger._open import shown

_OPTIONS = frozenset(Options.__optional_keys__) - {"ledger"}  # the ledger is Recipe(ledger=DSN), opened per actor


class Recipe:
    """How each actor makes its Stabilizer: ``Recipe(model, schema, ledger=..., **options)``.

    ``model``: a function of no arguments that returns the backend (``accord.models.openai``
    with its URL bound by ``functools.partial``, a function that wraps ``models.function``...);
    it is called once per actor, on the actor, so a client, a socket or a loaded model never
    travels. ``schema``: as :class:`~accord.Stabilizer` takes it. ``ledger``: a
    ``postgresql://`` DSN shared by every actor (or an SQLite file, for actors of one host);
    ``lease``, ``ledger_timeout`` and ``ttl`` are :class:`~accord.ledger.Ledger`'s. ``options``:
    the Stabilizer's keyword options (``vote``, ``retry``, ``budget``, ``prices``, ...).

    Everything given must pickle (Ray sends the recipe to each actor with cloudpickle). An unknown
    option is a :class:`~accord.ConfigError` here, on the driver, not on the actors.
    The repr never shows the DSN's password.
    """

    def __init__(
        self,
        model: Callable[[], Any],
        schema: Any,
        *,
        ledger: str | None = None,
        lease: float = 30.0,
        ledger_timeout: float = 5.0,
        ttl: float | timedelta | None = None,
        **options: Any,
    ) -> None:
        if not callable(model):
            raise ConfigError(f"Recipe(model=...) must be a function that returns a backend, got {type(model).__name__}")
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise ConfigError(f"Recipe() got unknown options {unknown}; it takes the Stabilizer's: {', '.join(sorted(_OPTIONS))}")
        if ledger is not None and not isinstance(ledger, str):
            raise ConfigError(f"Recipe(ledger=...) must be a DSN or a file path (a str), got {type(ledger).__name__}")
        self.model = model
        self.schema = schema
        self.ledger = ledger
        self.lease = lease
        self.ledger_timeout = ledger_timeout
        self.ttl = ttl
        self.options = dict(options)

    def __repr__(self) -> str:
        where = ""
        if self.ledger is not None:
            try:
                where = f", ledger={shown(self.ledger)!r}"
            except Exception:  # noqa: BLE001 - a repr never raises; a DSN unread (no psycopg) is not shown
                where = ", ledger='postgresql://...'"
        return f"Recipe({getattr(self.model, '__name__', type(self.model).__name__)}, {self.schema!r}{where})"

    def open_ledger(self) -> Ledger | None:
        """The ledger of this recipe, opened (None without one)."""
        if self.ledger is None:
            return None
        return Ledger(self.ledger, lease=self.lease, timeout=self.ledger_timeout, ttl=self.ttl)

    def build(self, ledger: Ledger | None = None) -> Stabilizer[Any]:
        """The Stabilizer: the backend made now, with ``ledger`` (:meth:`open_ledger`'s)."""
        return Stabilizer(self.model(), self.schema, ledger=ledger, **self.options)
