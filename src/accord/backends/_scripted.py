"""A test double that ships with the library: ``accord.models.scripted(["...", "..."])``."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from .._errors import BackendError, ConfigError
from .._types import Completion, Request, Usage
from ._base import Backend
from ._renamed import deprecated

DEFAULT_NAME = "scripted"


class ScriptedBackend(Backend):
    """Returns the scripted items in turn, one per call.

    An item is a string, a :class:`~accord.Completion`, or an exception instance (raised on that
    call, to inject a fault). Calls past the end raise a non-retryable BackendError. ``requests``
    records every Request received, in call order. ``name`` names the model (its fingerprint;
    ``fingerprint=`` is the older spelling, deprecated).
    """

    blocking = False
    fingerprint: str

    def __init__(self, items: Iterable[Any], *, name: str = DEFAULT_NAME, fingerprint: str | None = None) -> None:
        if fingerprint is not None:
            deprecated("fingerprint", "name=", "models.scripted")
            if name not in (DEFAULT_NAME, fingerprint):
                raise ConfigError(f"models.scripted(name={name!r}, fingerprint={fingerprint!r}): give one (fingerprint= is name='s older spelling)")
            name = fingerprint
        self.items = list(items)
        self.fingerprint = name
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def generate(self, request: Request) -> Completion:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
        if index >= len(self.items):
            raise BackendError(f"scripted backend exhausted after {len(self.items)} calls")
        item = self.items[index]
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Completion):
            return item
        return Completion(str(item), "stop", Usage(calls=1))


def scripted(items: Iterable[Any], *, name: str = DEFAULT_NAME, fingerprint: str | None = None) -> ScriptedBackend:
    """A backend that returns ``items`` in turn (strings, Completions, or exceptions to raise),
    named ``name`` (``fingerprint=`` is its older spelling, deprecated)."""
    return ScriptedBackend(items, name=name, fingerprint=fingerprint)
