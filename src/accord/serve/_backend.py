"""The backend a proxied request's Stabilizer calls: the upstreams' ``accord.models.openai``
backends (``accord.models.anthropic`` for upstreams that speak Messages), round-robin per ballot,
as one :class:`~accord.models.Backend`.

With one upstream it is that backend as it is, under another name: the same fingerprint, so
the same request gets the same ledger key from the proxy as from a Python program calling
``accord.models.openai(base_url=URL, model=M)`` with the same schema and policy (and the same
calibrated noise floor, stored under the URL). With several
it reads as ``models.openai(base_url=[...])`` would: ballots go round-robin, it constrains and
gives margins where every upstream does, and its noise floor is the largest.

A request that forwards fields of its own (``top_p``, ``presence_penalty``, ...) gets a
:meth:`Upstream.tagged` copy whose fingerprint names them, so its answer is kept apart in the
ledger from the same request without them. Only the declared backend surface is used.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

from .. import AccordError, Completion, Request
from ..models import Backend, Noise

DESCRIBED = 1.0  # seconds a description is reused: every run records one, and it changes only as a server is learned


class Upstream(Backend):
    """One model on every upstream (see the module docstring)."""

    fingerprint: str

    def __init__(self, backends: Sequence[Backend], model: str, tag: str = "") -> None:
        if not backends:
            raise ValueError("an Upstream needs at least one backend")
        self.backends = tuple(backends)
        self.model = model
        self.tag = tag
        self._turn = itertools.count()
        self._described: tuple[float, dict[str, object]] | None = None
        prefix = f"{self.backends[0].fingerprint.partition(':')[0]}:{model}@"  # openai:MODEL@ (anthropic:MODEL@)
        shown = [b.fingerprint.removeprefix(prefix) for b in self.backends]
        fingerprint = f"{prefix}{'|'.join(shown)}" if len(shown) > 1 else self.backends[0].fingerprint
        self.fingerprint = f"{fingerprint}+{tag}" if tag else fingerprint

    def tagged(self, tag: str) -> Upstream:
        """This upstream under a fingerprint that also names ``tag`` (forwarded fields)."""
        return Upstream(self.backends, self.model, tag)

    def _next(self) -> Backend:
        return self.backends[next(self._turn) % len(self.backends)]

    def generate(self, request: Request) -> Completion:
        return self._next().generate(request)

    async def agenerate(self, request: Request) -> Completion:
        return await self._next().agenerate(request)

    @property
    def constrains(self) -> bool:  # computed from the upstreams
        return all(b.constrains for b in self.backends)

    def constrains_for(self, schema: Any) -> bool:
        return all(b.constrains_for(schema) for b in self.backends)

    def enforces(self, schema: Any) -> bool:
        return all(b.enforces(schema) for b in self.backends)

    def wraps(self, schema: Any) -> bool:
        return all(b.wraps(schema) for b in self.backends)

    @property
    def gives_margins(self) -> bool:
        return all(b.gives_margins for b in self.backends)

    @property
    def one_at_a_time(self) -> bool:
        return any(b.one_at_a_time for b in self.backends)

    @property
    def blocking(self) -> bool:
        return any(b.blocking for b in self.backends)

    @property
    def default_max_tokens(self) -> int:
        return self.backends[0].default_max_tokens

    @property
    def sizes_max_tokens(self) -> bool:
        return self.backends[0].sizes_max_tokens

    def noise(self) -> Noise | None:
        found = [b.noise() for b in self.backends]
        if any(n is None or n.floor is None for n in found):
            return None
        floors = [n.floor for n in found if n is not None and n.floor is not None]
        dtypes = {n.dtype for n in found if n is not None}
        return Noise(max(floors), dtypes.pop() if len(dtypes) == 1 else None)

    def map_error(self, exc: BaseException) -> AccordError:
        return self.backends[0].map_error(exc)

    def describe(self) -> dict[str, object]:
        """The upstreams' own descriptions (what every Result records), at most ``DESCRIBED`` seconds old."""
        now = time.monotonic()
        if self._described is not None and now - self._described[0] < DESCRIBED:
            return dict(self._described[1])
        if len(self.backends) == 1 and not self.tag:
            facts = self.backends[0].describe()
        else:
            facts = {"backend": "accord serve", "fingerprint": self.fingerprint, "upstreams": [b.describe() for b in self.backends]}
        self._described = (now, facts)
        return dict(facts)

    def telemetry(self) -> dict[str, str | int]:
        attrs = self.backends[0].telemetry()
        if len(self.backends) > 1:
            attrs = {k: v for k, v in attrs.items() if not k.startswith("server.")}
        return attrs
