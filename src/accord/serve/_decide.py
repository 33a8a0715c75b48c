"""A Job decided: the Stabilizer it needs (built once per shape and kept), run under the
request's :class:`~._wire.Tab`.

The Stabilizer of a request is ``accord.Stabilizer(upstream, schema, vote=..., retry=...,
budget=..., ...)`` from its Job: the schema (the JSON Schema given, or ``str`` for a free-text
vote), the ``accord`` policy, the generation settings, the backend of its model on the
upstreams its :class:`~._router.Deployment` names (tagged with its forwarded fields, which shape
the answer). Equal shapes share one Stabilizer, so the same request gets the same ledger key on
every replica.

With a ledger, the run goes through ``Stabilizer.amap([prompt])``, which claims the prompt
before deciding it: replicas that get the same request at once (a client's retry on another
replica while the first still runs) decide it once, and the other replays the answer.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from .. import AccordError, ConfigError, Extract, Ledger, Prompting, Result, Settings, Stabilizer, Telemetry, UnsupportedSchema
from ._config import Config
from ._errors import ApiError
from ._policy import NORMALIZERS
from ._router import Deployment
from ._translate import Job
from ._wire import CURRENT, Tab

_KEPT = 256  # Stabilizers kept (one per request shape); the least recently used go


class Decider:
    """Builds, keeps and runs the Stabilizers of the requests (see the module docstring)."""

    def __init__(self, config: Config, ledger: Ledger | None, tracer_provider: Any = None) -> None:
        self.config = config
        self.ledger = ledger
        self.telemetry = Telemetry(tracer_provider=tracer_provider) if tracer_provider is not None else None
        self._kept: OrderedDict[tuple[Any, ...], Stabilizer[Any]] = OrderedDict()

    def stabilizer(self, job: Job, deployment: Deployment) -> Stabilizer[Any]:
        schema_text = json.dumps(job.schema, sort_keys=True, separators=(",", ":")) if job.schema is not None else None
        shape = (job.mode == "text" and job.schema is None, deployment.name, job.model, schema_text, job.ask, job.temperature,
                 job.max_tokens, job.seed, job.stop, job.forward_tag)  # fmt: skip
        found = self._kept.get(shape)
        if found is not None:
            self._kept.move_to_end(shape)
            return found
        kind = "text" if job.mode == "text" else "schema"
        upstream = deployment.upstreams.backend(deployment.upstream_model(job.model), kind)
        if job.forward_tag:
            upstream = upstream.tagged(job.forward_tag)
        ask = job.ask
        try:
            made: Stabilizer[Any] = Stabilizer(
                upstream,
                job.schema if job.schema is not None else str,
                vote=replace(ask.vote(), on_no_consensus="plurality" if ask.plurality else "raise"),
                retry=ask.retry_policy(self.config.transport_attempts),
                budget=ask.budget(),
                settings=Settings(max_tokens=job.max_tokens, temperature=job.temperature, seed=job.seed, stop=job.stop),
                prompting=Prompting(schema_in_prompt=job.schema is not None and ask.schema_in_prompt),
                extract=Extract(normalize=[NORMALIZERS[name] for name in ask.normalize]),
                ledger=self.ledger,
                telemetry=self.telemetry,
            )
        except (UnsupportedSchema, ConfigError) as exc:
            param = "tools" if job.mode == "tool" else job.schema_param if job.schema is not None else None
            raise ApiError(400, f"accord cannot use this request: {exc}", param=param, code="unsupported_schema") from None
        self._kept[shape] = made
        while len(self._kept) > _KEPT:
            self._kept.popitem(last=False)
        return made

    async def decide(self, job: Job, deployment: Deployment, tab: Tab) -> tuple[Result[Any], str | None]:
        """The Result of ``job`` on ``deployment`` (a failed run's too: ``result.error`` set) and its ledger key."""
        stab = self.stabilizer(job, deployment)
        CURRENT.set(tab)  # this task's context: the calls the run starts inherit it
        prompt: Any = job.messages
        try:
            if self.ledger is not None:
                [result] = await stab.amap([prompt], concurrency=job.ask.k, progress=False, refresh=job.ask.refresh)
            else:
                result = await stab.arun(prompt)
        except ConfigError as exc:
            raise ApiError(400, f"accord cannot use these messages: {exc}", param=job.messages_param, code="invalid_messages") from None
        except AccordError as exc:
            if exc.result is None:
                raise
            result = exc.result
        key = self.ledger.key(stab, prompt) if self.ledger is not None else None
        return result, key
