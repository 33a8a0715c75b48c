"""The operations an exchange yields, and how each is sent with a sync or an async client.

An exchange (:mod:`._exchange`) yields a :class:`Chat` (a :class:`Respond` over the Responses
API) or a :class:`ListModels` and receives its reply (or the exception it raised); the drivers
(:mod:`._drivers`) send it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

from ..._types import Completion
from ._chunks import STREAM_OPTIONS, Chunks
from ._clients import Server
from ._responses import Events


def chat_endpoint(client: Any) -> Any:
    """The client's ``chat.completions.create``."""
    return client.chat.completions.create


def responses_endpoint(client: Any) -> Any:
    """The client's ``responses.create``."""
    return client.responses.create


@dataclass(frozen=True)
class Chat:
    """One chat completion (``chat.completions.create``)."""

    server: Server
    params: dict[str, Any]
    timeout: float | None = None  # the run's time left: an abandoned call does not outlive its budget
    answer: bool = False  # the ballot's answer (not the probe): what ``stream`` streams

    endpoint = staticmethod(chat_endpoint)
    streaming: ClassVar[dict[str, Any]] = {"stream": True, "stream_options": STREAM_OPTIONS}

    def options(self, client: Any) -> dict[str, Any]:
        if self.timeout is None:
            return self.params
        return {**self.params, "timeout": capped(getattr(client, "timeout", None), self.timeout)}

    def call(self, client: Any) -> Any:
        return self.endpoint(client)(**self.options(client))

    async def acall(self, client: Any) -> Any:
        return await self.endpoint(client)(**self.options(client))

    def stream(self, client: Any) -> Any:
        return self.endpoint(client)(**self.options(client), **self.streaming)

    async def astream(self, client: Any) -> Any:
        return await self.endpoint(client)(**self.options(client), **self.streaming)

    def chunks(self) -> Chunks:
        """What puts the streamed answer back together."""
        return Chunks()


@dataclass(frozen=True)
class Respond(Chat):
    """The same call over the Responses API (``responses.create``); streamed, its events."""

    endpoint = staticmethod(responses_endpoint)
    streaming: ClassVar[dict[str, Any]] = {"stream": True}

    def chunks(self) -> Chunks:
        return Events()


def capped(timeout: Any, left: float) -> Any:
    """The client's timeout, no part of it longer than the time the run has left."""
    if isinstance(timeout, (int, float)):
        return min(float(timeout), left)
    parts = ("connect", "read", "write", "pool")
    if timeout is not None and all(hasattr(timeout, p) for p in parts):
        # the client's own Timeout class (httpx or httpx2): no import here, where ballot threads would race on it
        return type(timeout)(**{p: left if getattr(timeout, p) is None else min(getattr(timeout, p), left) for p in parts})
    return left


@dataclass(frozen=True)
class ListModels:
    server: Server

    def call(self, client: Any) -> Any:
        return [model.id for model in client.models.list().data]

    async def acall(self, client: Any) -> Any:
        return [model.id for model in (await client.models.list()).data]


Op = Any  # Chat (Respond) | ListModels
Exchange = Generator[Op, Any, Completion]
