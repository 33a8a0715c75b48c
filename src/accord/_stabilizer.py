"""The public entry point: ``Stabilizer(model, schema=...).run(prompt) -> Result``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, overload

from . import _check
from ._errors import ConfigError
from ._result import Ballot, Result
from ._retry import Budget, Retry
from ._spellings import Grouped, grouped, telemetry_default
from ._threads import run_coroutine
from ._types import Prompt, Settings
from .backends._base import Backend, as_backend
from .backends._function import FunctionBackend
from .observe._hooks import Hooks
from .observe._prices import Prices
from .observe._telemetry import Telemetry
from .prompt._examples import render_examples
from .prompt._prompting import Prompting
from .read._extract import Extract
from .run._decider import Decider, LedgerSide
from .run._map import many
from .run._partial import Decided, Partial, Partials, changed
from .run._policy import Policy
from .schema._bounds import unbounded_lists
from .schema._schema import Schema
from .vote._perturb import Perturb
from .vote._vote import Vote

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("accord")

class Options(TypedDict, total=False):
    """The keyword options of :class:`Stabilizer` (for type checkers; the signature is the truth).

    The last group are the deprecated spellings (``_spellings``): they still work, with a
    ``DeprecationWarning`` naming the new one."""

    vote: Vote | None
    retry: Retry | None
    budget: Budget | None
    settings: Settings | None
    prompting: Prompting | None
    extract: Extract | None
    ledger: Any
    hooks: Hooks | None
    telemetry: Telemetry | bool | None
    prices: Prices | None
    normalize: Sequence[Callable[[str], str]]
    schema_in_prompt: bool
    max_tokens: int | None
    temperature: float
    seed: int | None
    stop: Sequence[str] | None
    on_no_consensus: str
    on_ballot: Callable[[Ballot], Any] | None
    perturb: Any
    system: str | None
    examples: Iterable[tuple[str, Any]]


class Stabilizer(Generic[T]):
    """Turns one model into a stable, validated answer per prompt.

    ``model``: a backend from ``accord.models`` (a plain function is wrapped with
    ``models.function``). ``schema``: a pydantic model, ``Literal[...]``/``Enum``, a plain type, a
    JSON Schema dict, ``accord.Regex`` or ``accord.Grammar``.

    How the answer is chosen: ``vote`` (an :class:`~accord.Vote`: k ballots, the quorum, the
    margin gate, what to do without consensus, the perturbations), ``retry`` (an
    :class:`~accord.Retry`: invalid output asked again with feedback) and ``budget`` (an
    :class:`~accord.Budget`: the run's time, calls, total tokens and cost).

    How each call is made and read: ``settings`` (an :class:`~accord.Settings`: ``max_tokens`` per
    call, ``temperature``, ``seed``, ``stop``, ``top_p``, ``top_k``), ``prompting`` (an
    :class:`~accord.Prompting`: the system prompt, worked examples, the schema in the prompt) and
    ``extract`` (an :class:`~accord.Extract`: how text becomes data, and the text normalizers).

    What is kept and who is told: ``ledger`` (an :class:`~accord.Ledger`: accepted answers
    replayed), ``hooks`` (an :class:`~accord.Hooks`: user code called as the run goes),
    ``telemetry`` (OpenTelemetry spans: on when the application configured a tracer provider;
    ``accord.Telemetry(...)`` to choose the provider or record content, False for none) and
    ``prices`` (an :class:`~accord.Prices`, so every Usage has a ``cost`` and
    ``Budget(max_cost=...)`` works).

    The spellings of the release before (``max_tokens=``, ``system=``, ``on_ballot=``, ...) still
    work, with a ``DeprecationWarning`` that names the new one (``_spellings``).
    """

    @overload
    def __init__(self: Stabilizer[T], model: Any, schema: type[T], **options: Unpack[Options]) -> None: ...
    @overload
    def __init__(self: Stabilizer[Any], model: Any, schema: Any, **options: Unpack[Options]) -> None: ...

    def __init__(
        self,
        model: Any,
        schema: Any,
        *,
        vote: Vote | None = None,
        retry: Retry | None = None,
        budget: Budget | None = None,
        settings: Settings | None = None,
        prompting: Prompting | None = None,
        extract: Extract | None = None,
        ledger: Any = None,
        hooks: Hooks | None = None,
        telemetry: Telemetry | bool | None = None,
        prices: Prices | None = None,
        **deprecated: Any,
    ) -> None:
        self.model: Backend = _backend(model)
        self.schema: Schema[T] = Schema.of(schema)
        given = {"vote": vote, "retry": retry, "budget": budget, "settings": settings, "prompting": prompting,
                 "extract": extract, "hooks": hooks, "prices": prices}
        _check_kinds(given, telemetry)
        options = grouped(deprecated, given)
        self.policy = _policy(self.model, self.schema, options, given)
        self.schema.roles(self.policy.vote.role_overrides)  # a path of Vote(roles=...) the schema lacks: a ConfigError now
        self.ledger: LedgerSide | None = ledger
        self.hooks = hooks
        telemetry = telemetry_default(telemetry)
        self.telemetry: Telemetry | None = None if telemetry is False else telemetry if isinstance(telemetry, Telemetry) else Telemetry()
        self._decider().check()  # the model's identity, now: one a ledger cannot trust is a ConfigError here, never a guess

    def describe(self) -> dict[str, Any]:
        """What this stabilizer decides with: the model, the schema with the role of each field
        (``{path: "decisive" | "prose" | "auto"}``, ``Vote(roles=...)`` applied), and the vote;
        ``warnings``, where there are any: what in the schema is likely to cost calls (a list of
        objects with no ``max_length``)."""
        vote = self.policy.vote
        described: dict[str, Any] = {
            "model": self.model.fingerprint,
            "schema": self.schema.name,
            "roles": self.schema.roles(vote.role_overrides).describe(),
            "vote": {"k": vote.k, "quorum": vote.needed, "fieldwise": vote.fieldwise, "gate": vote.gate is not None},
        }
        lists = unbounded_lists(self.schema)
        if lists:
            described["warnings"] = [
                f"{path}: a list of objects with no bound; a small model may keep adding items until max_tokens. "
                f"Give it one (Field(max_length=N)); see docs/retry.md, 'Bound your schema'" for path in lists]
        return described

    def run(self, prompt: Prompt, *, refresh: bool = False) -> Result[T]:
        """Decide one prompt. Raises an :class:`~accord.OutputError` (with ``.result``) on failure.

        With a ledger, an accepted answer for the same request is replayed without a model call;
        ``refresh=True`` decides again and supersedes it. A prompt not decided yet is claimed in
        the ledger, as :meth:`map` claims its prompts: runs of it at once (threads, processes,
        hosts) decide it once, and the others replay that answer.
        """
        *_, result = self._decider().stream(_check.prompt(prompt), refresh, streaming=False)
        assert isinstance(result, Result)
        return _deliver(result)

    async def arun(self, prompt: Prompt, *, refresh: bool = False) -> Result[T]:
        """Async :meth:`run`: the ballots of the prompt run concurrently on the event loop."""
        async for item in self._decider().astream(_check.prompt(prompt), refresh, streaming=False):
            result = item
        assert isinstance(result, Result)
        return _deliver(result)

    def stream(self, prompt: Prompt, *, refresh: bool = False) -> Generator[Partial[T] | Decided[T], None, None]:
        """Decide one prompt, showing the first ballot as it is written: a :class:`~accord.Partial`
        per text delta of ballot slot 0, then one :class:`~accord.Decided` with the Result (a
        failed run's too: ``result.error`` is set, nothing is raised). A backend that cannot
        stream gives its whole text as one delta. See ``_partial`` for how a UI should use it.
        The prompt is claimed in the ledger as :meth:`run` claims it.
        """
        partials = Partials(self.schema)
        for item in self._decider().stream(_check.prompt(prompt), refresh):
            if isinstance(item, Result):
                yield Decided(item, changed(item))
            else:
                yield partials.feed(item.call.slot, item.call.request.attempt, item.text)

    async def astream(self, prompt: Prompt, *, refresh: bool = False) -> AsyncGenerator[Partial[T] | Decided[T], None]:
        """Async :meth:`stream`: ``async for event in stab.astream(prompt)``."""
        partials = Partials(self.schema)
        async with contextlib.aclosing(self._decider().astream(_check.prompt(prompt), refresh)) as items:
            async for item in items:  # a reader that stops early ends the run now (closing it)
                if isinstance(item, Result):
                    yield Decided(item, changed(item))
                else:
                    yield partials.feed(item.call.slot, item.call.request.attempt, item.text)

    def _decider(self) -> Decider[T]:
        """What decides this stabilizer's prompts, one way for run, stream and map (``run._decider``)."""
        return Decider(self.model, self.schema, self.policy, ledger=self.ledger, hooks=self.hooks, telemetry=self.telemetry)

    def map(
        self, prompts: Iterable[Prompt], *, concurrency: int = 8, progress: bool | None = None, refresh: bool = False
    ) -> list[Result[T]]:
        """Decide many prompts with at most ``concurrency`` model calls in flight; input order kept.

        A failed prompt never loses the others: its Result has ``.error`` set (and ``stable``
        False) instead of raising. With a ledger, each prompt is claimed before it is decided, so
        workers running the same batch at once decide each prompt once and all return every Result.
        """
        return run_coroutine(self.amap(prompts, concurrency=concurrency, progress=progress, refresh=refresh))

    async def amap(
        self, prompts: Iterable[Prompt], *, concurrency: int = 8, progress: bool | None = None, refresh: bool = False
    ) -> list[Result[T]]:
        """Async :meth:`map` (``run.many`` decides the batch)."""
        return await many(self._decider(), _check.prompts(prompts), concurrency=concurrency, progress=progress, refresh=refresh)


def _deliver(result: Result[T]) -> Result[T]:
    if result.error is not None:
        raise result.error
    return result


_KINDS: dict[str, type] = {"vote": Vote, "retry": Retry, "budget": Budget, "settings": Settings, "prompting": Prompting,
                           "extract": Extract, "hooks": Hooks, "prices": Prices}


def _backend(model: Any) -> Backend:
    if isinstance(model, Backend) or hasattr(model, "generate"):
        return as_backend(model)
    if callable(model):
        return FunctionBackend(model)
    raise ConfigError(f"model must be an accord backend or a function, got {type(model).__name__}")


def _check_kinds(given: dict[str, Any], telemetry: Any) -> None:
    for name, value in given.items():
        kind = _KINDS[name]
        if value is not None and not isinstance(value, kind):
            raise ConfigError(f"{name}= must be an accord.{kind.__name__}, got {type(value).__name__}")
    if not (telemetry is None or isinstance(telemetry, (bool, Telemetry))):
        raise ConfigError(f"telemetry= must be an accord.Telemetry, False or None, got {type(telemetry).__name__}")
    budget = given["budget"]
    if budget is not None and budget.max_cost is not None and given["prices"] is None:
        raise ConfigError("Budget(max_cost=...) needs prices= (an accord.Prices; Prices({}) when the backend reports costs)")


def _policy(model: Backend, schema: Schema[Any], options: Grouped, given: dict[str, Any]) -> Policy:
    retry, budget, prices = given["retry"], given["budget"], given["prices"]
    vote, prompting, extract = options.vote, options.prompting, options.extract
    _check.function("", "on_ballot", options.on_ballot, optional=True)
    return Policy(
        vote=vote,
        retry=retry or Retry(),
        budget=budget or Budget(),
        settings=options.settings,
        hint=prompting.schema_in_prompt,
        normalizers=tuple(extract.normalize),
        on_ballot=options.on_ballot,
        # Ballot i > 0 runs under a perturbation when the backend can apply one (local models).
        perturb=vote.perturb if vote.perturb is not None else (Perturb() if model.perturbable else None),
        extract=replace(extract, normalize=()),  # the normalizers are the policy's own (and the key's, as before)
        system=prompting.system,
        examples=render_examples(schema, prompting.examples),
        prices=prices,
    )
