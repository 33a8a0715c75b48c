"""One prompt's way to its Result, the same for run, arun, stream, astream and map:

    recall    an accepted answer the ledger holds for the same request: replayed, no model call
    claim     the prompt claimed in the ledger (a batch of one, or the map's batch): runs of it
              elsewhere decide it once, and the others replay that answer
    begin     the ledger run its ballots are stored in as they are made (the claim's, or a new one)
    drive     the loop (``_loop``) run by a driver (``_drive``): worker threads or the event loop,
              slot 0's text handed out as it is written when the run streams
    remember  the run stored; the answer to give (the first writer's, when another was first)

A :class:`Decider` holds what a prompt is decided with (model, schema, policy), and the ledger,
hooks and telemetry. Of the ledger it asks only what :class:`LedgerSide` declares, and gives it
only the key material: the Decider itself, a :class:`~accord.ledger._keys.Subject`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from .._errors import AccordError
from .._result import Ballot, Result, StopReason
from .._threads import run_coroutine
from .._types import Prompt, Usage
from ..observe import _telemetry as telemetry
from ._calls import Delta
from ._drive import Flow, adrive, drive
from ._loop import decide
from ._report import ended
from ._watch import Watch

if TYPE_CHECKING:
    from ..backends._base import Backend
    from ..ledger._batch import Ticket
    from ..ledger._keys import Subject
    from ..ledger._pending import Pending
    from ..observe._hooks import Hooks
    from ..observe._telemetry import Telemetry
    from ..schema._schema import Schema
    from ._policy import Policy

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("accord")


class Claims(Protocol):
    """A ledger's claims over one batch of prompts (a context manager: they are renewed while open)."""

    def __enter__(self) -> Claims: ...
    def __exit__(self, *exc: object) -> None: ...
    async def claim(self, prompt: Prompt, turns: asyncio.Semaphore | None = None) -> Ticket:
        """The prompt's answer, or the right to decide it (holding one of ``turns``)."""
    def done(self, ticket: Ticket, result: Result[Any] | None) -> None:
        """The ticket's prompt is decided (None: its decision raised): let go of turn and claim."""


class LedgerSide(Protocol):
    """What the run path asks of a ledger (:class:`accord.Ledger` is one); ``subject`` is the key
    material: the model (its identity), the schema and the policy."""

    def key(self, subject: Subject, prompt: Prompt) -> str: ...
    def recall(self, subject: Subject, prompt: Prompt) -> Result[Any] | None: ...
    def begin(self, subject: Subject, prompt: Prompt) -> Pending | None: ...
    def remember(
        self, subject: Subject, prompt: Prompt, result: Result[R], refresh: bool = False, pending: Pending | None = None
    ) -> Result[R]: ...
    def batch(self, subject: Subject, *, refresh: bool = False) -> Claims: ...


@dataclass(frozen=True)
class Shared:
    """What the prompts of one map share: the ledger's ``claims`` (None without a ledger),
    ``turns`` (prompts started: a budget's clock starts with its turn) and ``limit`` (calls in flight)."""

    claims: Claims | None
    turns: asyncio.Semaphore
    limit: asyncio.Semaphore


class Decider(Generic[T]):
    """Decides prompts with a model, a schema and a policy, through the ledger when there is one."""

    def __init__(
        self, model: Backend, schema: Schema[T], policy: Policy, *,
        ledger: LedgerSide | None = None, hooks: Hooks | None = None, telemetry: Telemetry | None = None,
    ) -> None:
        self.model, self.schema, self.policy = model, schema, policy
        self.ledger, self.hooks, self.telemetry = ledger, hooks, telemetry

    def check(self) -> None:
        """The model's identity, now, when there is a ledger: one it cannot trust is a ConfigError."""
        if self.ledger is not None:
            self.ledger.key(self, "")

    def stream(self, prompt: Prompt, refresh: bool = False, *, streaming: bool = True) -> Iterator[Delta | Result[T]]:
        """recall -> claim -> begin -> drive -> remember in this thread (blocking calls in worker
        threads): slot 0's text as it is written when ``streaming``, then the Result."""
        watch = self.watch(prompt, streaming)
        try:
            result = self.recall(prompt, refresh)
            if result is None:
                with self._claims(refresh) as claims:
                    ticket = run_coroutine(claims.claim(prompt)) if claims is not None else None
                    result = yield from self._decided(prompt, refresh, ticket, claims, watch=watch, streaming=streaming)
        except BaseException as exc:  # GeneratorExit too: the reader stopped early
            if watch is not None:
                watch.crash(exc)
            raise
        ended(result, watch)
        if watch is not None:
            watch.settle_now()
        yield result

    def _decided(
        self, prompt: Prompt, refresh: bool, ticket: Ticket | None, claims: Claims | None, *, watch: Watch | None, streaming: bool
    ) -> Generator[Delta, None, Result[T]]:
        """begin -> drive -> remember, under the ticket's claim (let go with the Result)."""
        result = ticket.answer if ticket is not None else None
        try:
            if result is None:
                pending = self.begin(prompt, ticket)
                for item in drive(self.flow(prompt, pending, watch), self.model, watch, streaming=streaming):
                    if isinstance(item, Delta):
                        yield item
                    else:
                        result = self.remember(prompt, item, refresh, pending)
            assert result is not None
            return result
        finally:
            if claims is not None and ticket is not None:
                claims.done(ticket, result)

    async def astream(
        self, prompt: Prompt, refresh: bool = False, *, streaming: bool = True, shared: Shared | None = None
    ) -> AsyncGenerator[Delta | Result[T], None]:
        """:meth:`stream` on the running event loop; ``shared``: a map's, whose claims look for the
        answer themselves, and then a failure is the prompt's Result (its ``error`` set), never raised."""
        watch = self.watch(prompt, streaming)
        try:
            result = self.recall(prompt, refresh) if shared is None else None
            if result is None:
                with self._claims(refresh) if shared is None else contextlib.nullcontext(shared.claims) as claims:
                    decided = self._adecided(prompt, refresh, claims, shared, watch=watch, streaming=streaming)
                    async with contextlib.aclosing(decided):  # a reader that stops early lets go of the claim now
                        async for item in decided:
                            if isinstance(item, Delta):
                                yield item
                            else:
                                result = item
        except BaseException as exc:  # GeneratorExit too: the reader stopped early
            if watch is not None:
                watch.crash(exc)
            raise
        assert result is not None
        ended(result, watch)
        if watch is not None:
            await watch.settle()
        yield result

    async def _adecided(
        self, prompt: Prompt, refresh: bool, claims: Claims | None, shared: Shared | None, *, watch: Watch | None, streaming: bool
    ) -> AsyncGenerator[Delta | Result[T], None]:
        """claim -> begin -> drive -> remember, with a turn of a map's while it is decided."""
        turns = shared.turns if shared is not None else None
        ticket = await claims.claim(prompt, turns) if claims is not None else None
        if ticket is None and turns is not None:
            await turns.acquire()
        result = ticket.answer if ticket is not None else None
        try:
            if result is None:
                try:
                    pending = self.begin(prompt, ticket)
                    limit = shared.limit if shared is not None else None
                    driven = adrive(self.flow(prompt, pending, watch), self.model, watch, limit=limit, streaming=streaming)
                    async with contextlib.aclosing(driven):  # a reader that stops early cancels the calls now
                        async for item in driven:
                            if isinstance(item, Delta):
                                yield item
                            else:
                                result = self.remember(prompt, item, refresh, pending)
                except Exception as exc:
                    if shared is None:
                        raise
                    log.exception("prompt failed")  # a bug below must not lose the other prompts of a map
                    result = failed(exc, self)
            assert result is not None
            yield result
        finally:
            if claims is not None and ticket is not None:
                claims.done(ticket, result)
            elif turns is not None:
                turns.release()

    # -- the steps ---------------------------------------------------------------------------

    def recall(self, prompt: Prompt, refresh: bool) -> Result[T] | None:
        if self.ledger is None or refresh:
            return None
        return self.ledger.recall(self, prompt)

    def _claims(self, refresh: bool) -> contextlib.AbstractContextManager[Claims | None]:
        """The prompt's claim, as a batch of one (none without a ledger)."""
        return self.ledger.batch(self, refresh=refresh) if self.ledger is not None else contextlib.nullcontext()

    def begin(self, prompt: Prompt, ticket: Ticket | None) -> Pending | None:
        """The ledger run the ballots go to as they are made: the one the claim opened, or a new one."""
        if ticket is not None and ticket.pending is not None:
            return ticket.pending
        return self.ledger.begin(self, prompt) if self.ledger is not None else None

    def flow(self, prompt: Prompt, pending: Pending | None, watch: Watch | None) -> Flow:
        policy = self.policy
        if pending is not None:  # the ledger stores each ballot as it is made
            policy = replace(policy, on_ballot=_both(policy.on_ballot, pending.record))
        return decide(prompt, self.schema, self.model, policy, watch=watch)

    def remember(self, prompt: Prompt, result: Result[T], refresh: bool, pending: Pending | None) -> Result[T]:
        if self.ledger is None:
            return result
        return self.ledger.remember(self, prompt, result, refresh=refresh, pending=pending)

    def watch(self, prompt: Prompt, streaming: bool = False) -> Watch | None:
        """The run's hooks and spans; None when nothing listens (then the run pays nothing)."""
        tracer = telemetry.tracer(self.telemetry) if self.telemetry is not None else None
        if tracer is None and self.hooks is None:
            return None
        content = self.telemetry is not None and self.telemetry.content
        watch = Watch(self.hooks, tracer, content=content, backend=self.model, schema=self.schema, policy=self.policy, streaming=streaming)
        watch.begin(prompt)
        return watch


def failed(exc: BaseException, decider: Decider[Any]) -> Result[Any]:
    """The Result of a prompt whose decision raised: its error, no value, no ballots."""
    error = exc if isinstance(exc, AccordError) else AccordError(f"{type(exc).__name__}: {exc}")
    return Result(None, False, 0.0, {}, (), StopReason.ERROR, Usage(), decider.schema.name, decider.model.fingerprint, error=error)


def _both(first: Callable[[Ballot], Any] | None, second: Callable[[Ballot], Any]) -> Callable[[Ballot], Any]:
    if first is None:
        return second

    def both(ballot: Ballot) -> None:
        first(ballot)
        second(ballot)

    return both
