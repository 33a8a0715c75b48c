"""The operations an exchange yields, and how each is sent with a sync or an async client.

An exchange (:mod:`._exchange`) yields a :class:`Create` or a :class:`ListModels` and receives
its reply (or the exception it raised). They have the shape the OpenAI backend's drivers send
(``op.server``, ``op.call(client)``, ``op.acall(client)``), so those drivers
(:mod:`accord.backends.openai._drivers`) send these too.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from ..._types import Completion
from ._clients import Server


@dataclass(frozen=True)
class Create:
    """One ``messages.create``; ``timeout``: the run's time left (an abandoned call does not outlive its budget)."""

    server: Server
    params: dict[str, Any]
    timeout: float | None = None

    def options(self, client: Any) -> dict[str, Any]:
        if self.timeout is None:
            return self.params
        return {**self.params, "timeout": capped(getattr(client, "timeout", None), self.timeout)}

    def call(self, client: Any) -> Any:
        return client.messages.create(**self.options(client))

    async def acall(self, client: Any) -> Any:
        return await client.messages.create(**self.options(client))


@dataclass(frozen=True)
class ListModels:
    """``GET /v1/models``: the ids of the models a server serves."""

    server: Server

    def call(self, client: Any) -> Any:
        return [model.id for model in client.models.list().data]

    async def acall(self, client: Any) -> Any:
        return [model.id for model in (await client.models.list()).data]


def capped(timeout: Any, left: float) -> Any:
    """The client's timeout (seconds, or an httpx-style ``Timeout`` of its own class), no part of
    it longer than the time the run has left."""
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return min(float(timeout), left)
    parts = ("connect", "read", "write", "pool")
    if timeout is not None and all(hasattr(timeout, p) for p in parts):
        return type(timeout)(**{p: left if getattr(timeout, p) is None else min(getattr(timeout, p), left) for p in parts})
    return left


Op = Any  # Create | ListModels
Exchange = Generator[Op, Any, Completion]
