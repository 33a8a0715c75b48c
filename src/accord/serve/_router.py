"""Which upstreams answer a request: the one its ``model`` names.

Configured with ``--upstream`` (no routes), one :class:`Deployment` serves every model name, and
the request's ``model`` is passed on as it is: the proxy of before routing, unchanged. With
routes (``--model`` / ``[models]``, ``._routes``), each name has its own Deployment, with its
upstreams, key, caps and default policy, and the upstream's own name for the model; any other
name is a 404 in OpenAI's shape (``model_not_found``), and ``GET /v1/models`` lists the names.

All Deployments share one :class:`~._upstream.Pool`: one connection pool, and one
``--concurrency`` bound on the upstream calls of every request and model together.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import ConfigError
from ._config import Config
from ._errors import unknown_model
from ._policy import Ask, server_default
from ._routes import WIRES, backend_options
from ._upstream import Pool, Upstreams


@dataclass(frozen=True)
class Deployment:
    """What serves one model name: its upstreams, its default policy and its caps."""

    upstreams: Upstreams
    default: Ask
    max_k: int
    max_seconds: float
    name: str | None = None  # the routed name (None: every name, unrouted)
    model: str | None = None  # the upstream's name for it (None: the request's)

    def upstream_model(self, requested: str) -> str:
        return self.model or requested


class Router:
    """The Deployments of one server (see the module docstring)."""

    def __init__(self, config: Config, observe: Callable[[int | None, float], None]) -> None:
        self.pool = Pool(config, observe)
        self.wire = self.pool.wire
        self.routed = bool(config.models)
        self.created = int(time.time())
        self.routes: dict[str, Deployment] = {}
        if not self.routed:
            default = server_default(config.policy, max_k=config.max_k, max_seconds=config.max_seconds)
            upstreams = Upstreams(self.pool, config.upstreams, key_env=WIRES[config.wire], backend=config.backend, wire=config.wire)
            self.only: Deployment | None = Deployment(upstreams, default, config.max_k, config.max_seconds)
            return
        self.only = None
        for route in config.models:
            max_k = route.max_k if route.max_k is not None else config.max_k
            max_seconds = float(route.max_seconds if route.max_seconds is not None else config.max_seconds)
            try:
                default = server_default({**config.policy, **route.policy}, max_k=max_k, max_seconds=max_seconds)
            except ConfigError as exc:
                raise ConfigError(f"models.{route.name}: {exc}") from None
            shared = {k: v for k, v in config.backend.items() if k in backend_options(route.wire)}  # the names its backend takes
            upstreams = Upstreams(self.pool, route.upstreams, key_env=route.key_env or WIRES[route.wire], backend={**shared, **route.backend},
                                  wire=route.wire)  # fmt: skip
            self.routes[route.name] = Deployment(upstreams, default, max_k, max_seconds, route.name, route.upstream_model)

    def pick(self, model: str) -> Deployment:
        """The Deployment for a request's ``model``; a 404 (``model_not_found``) for a name no route has."""
        if self.only is not None:
            return self.only
        found = self.routes.get(model)
        if found is None:
            raise unknown_model(model, list(self.routes))
        return found

    @property
    def deployments(self) -> list[Deployment]:
        return [self.only] if self.only is not None else list(self.routes.values())

    def models_body(self) -> bytes:
        """``GET /v1/models`` of a routed server: the configured names."""
        data = [{"id": name, "object": "model", "created": self.created, "owned_by": "accord-serve"} for name in self.routes]
        return json.dumps({"object": "list", "data": data}).encode()

    async def ready(self) -> dict[str, Any]:
        """Whether every upstream of every Deployment answers ``GET /models``."""
        answered = await asyncio.gather(*(d.upstreams.ready() for d in self.deployments))
        listed: list[dict[str, Any]]
        if self.only is not None:
            listed = [{"index": i, "ok": ok} for i, ok in enumerate(answered[0])]
        else:
            listed = [{"model": d.name, "index": i, "ok": ok} for d, oks in zip(self.deployments, answered, strict=True) for i, ok in enumerate(oks)]
        ok = all(u["ok"] for u in listed)
        return {"status": "ready" if ok else "not ready", "upstreams": listed}

    async def aclose(self) -> None:
        await self.pool.aclose()
