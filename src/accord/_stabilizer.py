"""The public entry point: ``Stabilizer(model, schema=...).run(prompt) -> Result``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, overload

from . import _check
from ._errors import AccordError, ConfigError
from ._extract import Extract
from ._gate import MarginGate
from ._perturb import Perturb
from ._result import Ballot, Result
from ._retry import Budget, Retry
from ._schema import Schema
from ._types import Prompt, Settings, Usage
from ._vote import Vote
from .backends._base import Backend, as_backend
from .backends._function import FunctionBackend
from .run._drive import adrive, drive
from .run._loop import Policy, decide

if TYPE_CHECKING:
    from typing_extensions import Unpack

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger("accord")

DEFAULT_VOTE = Vote(k=5, gate=MarginGate())


class Options(TypedDict, total=False):
    """The keyword options of :class:`Stabilizer` (for type checkers; the signature is the truth)."""

    vote: Vote | None
    retry: Retry | None
    budget: Budget | None
    normalize: Sequence[Callable[[str], str]]
    schema_in_prompt: bool
    max_tokens: int | None
    temperature: float
    seed: int | None
    stop: Sequence[str] | None
    on_no_consensus: str
    on_ballot: Callable[[Ballot], Any] | None
    perturb: Any
    extract: Extract | None
    ledger: Any


class Stabilizer(Generic[T]):
    """Turns one model into a stable, validated answer per prompt.

    ``model``: a backend from ``accord.models`` (a plain function is wrapped with
    ``models.function``). ``schema``: a pydantic model, ``Literal[...]``/``Enum``, a plain type, a
    JSON Schema dict, ``accord.Regex`` or ``accord.Grammar``. ``vote``/``retry``/``budget``: the
    policies. ``normalize``: text normalizers (``str -> str``, e.g. ``accord.casefold``) applied to
    every free-text field before validation. ``schema_in_prompt``: add a short rendering of the schema to the prompt when the
    backend cannot constrain its output. ``on_no_consensus="plurality"`` returns the plurality
    (``stable=False``) instead of raising. ``on_ballot`` is called with every Ballot.
    ``perturb``: the perturbations ballots 1.. run under (default: all kinds, on backends that
    can apply them; ``accord.Perturb(())`` for none). ``extract``: how text becomes data
    (``accord.Extract(strict=True)`` reads only JSON as written, with no repair).
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
        normalize: Sequence[Callable[[str], str]] = (),
        schema_in_prompt: bool = True,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        on_no_consensus: str = "raise",
        on_ballot: Callable[[Ballot], Any] | None = None,
        perturb: Any = None,
        ledger: Any = None,
        extract: Extract | None = None,
    ) -> None:
        self.model: Backend
        if isinstance(model, Backend) or hasattr(model, "generate"):
            self.model = as_backend(model)
        elif callable(model):
            self.model = FunctionBackend(model)
        else:
            raise ConfigError(f"model must be an accord backend or a function, got {type(model).__name__}")
        self.schema: Schema[T] = Schema.of(schema)
        for name, value, kind in (("vote", vote, Vote), ("retry", retry, Retry), ("budget", budget, Budget), ("extract", extract, Extract)):
            if value is not None and not isinstance(value, kind):
                raise ConfigError(f"{name}= must be an accord.{kind.__name__}, got {type(value).__name__}")
        if on_no_consensus not in ("raise", "plurality"):
            raise ConfigError('on_no_consensus must be "raise" or "plurality"')
        _check.boolean("", "schema_in_prompt", schema_in_prompt)
        _check.function("", "on_ballot", on_ballot, optional=True)
        _check.one_of("", "perturb", perturb, Perturb)
        self.policy = Policy(
            vote=vote or DEFAULT_VOTE,
            retry=retry or Retry(),
            budget=budget or Budget(),
            settings=Settings(max_tokens=max_tokens, temperature=temperature, seed=seed, stop=_check.stop_strings(stop)),
            hint=schema_in_prompt,
            normalizers=_check.normalizers(normalize),
            plurality=on_no_consensus == "plurality",
            on_ballot=on_ballot,
            # Ballot i > 0 runs under a perturbation when the backend can apply one (local models).
            perturb=perturb if perturb is not None else (Perturb() if self.model.perturbable else None),
            extract=extract or Extract(),
        )
        self.ledger = ledger

    def _flow(self, prompt: Prompt, pending: Any = None) -> Any:
        policy = self.policy
        if pending is not None:  # the ledger stores each ballot as it is made
            policy = replace(policy, on_ballot=_both(policy.on_ballot, pending.record))
        return decide(prompt, self.schema, self.model, policy)

    def run(self, prompt: Prompt, *, refresh: bool = False) -> Result[T]:
        """Decide one prompt. Raises an :class:`~accord.OutputError` (with ``.result``) on failure.

        With a ledger, an accepted answer for the same request is replayed without a model call;
        ``refresh=True`` decides again and supersedes it.
        """
        prompt = _check_prompt(prompt)
        hit = self._recall(prompt, refresh)
        if hit is not None:
            return hit
        pending = self._begin(prompt)
        return _deliver(self._remember(prompt, drive(self._flow(prompt, pending), self.model), refresh, pending))

    async def arun(self, prompt: Prompt, *, refresh: bool = False) -> Result[T]:
        """Async :meth:`run`: the ballots of the prompt run concurrently on the event loop."""
        prompt = _check_prompt(prompt)
        hit = self._recall(prompt, refresh)
        if hit is not None:
            return hit
        pending = self._begin(prompt)
        return _deliver(self._remember(prompt, await adrive(self._flow(prompt, pending), self.model), refresh, pending))

    def _recall(self, prompt: Prompt, refresh: bool) -> Result[T] | None:
        if self.ledger is None or refresh:
            return None
        hit: Result[T] | None = self.ledger.recall(self, prompt)
        return hit

    def _begin(self, prompt: Prompt) -> Any:
        begin = getattr(self.ledger, "begin", None)
        return begin(self, prompt) if begin is not None else None

    def _remember(self, prompt: Prompt, result: Result[T], refresh: bool, pending: Any = None) -> Result[T]:
        if self.ledger is None:
            return result
        kept: Result[T] = self.ledger.remember(self, prompt, result, refresh=refresh, pending=pending)
        return kept

    def map(
        self, prompts: Iterable[Prompt], *, concurrency: int = 8, progress: bool | None = None, refresh: bool = False
    ) -> list[Result[T]]:
        """Decide many prompts with at most ``concurrency`` model calls in flight; input order kept.

        A failed prompt never loses the others: its Result has ``.error`` set (and ``stable``
        False) instead of raising. With a ledger, each prompt is claimed before it is decided, so
        workers running the same batch at once decide each prompt once and all return every Result.
        """
        return _run_coroutine(self.amap(prompts, concurrency=concurrency, progress=progress, refresh=refresh))

    async def amap(
        self, prompts: Iterable[Prompt], *, concurrency: int = 8, progress: bool | None = None, refresh: bool = False
    ) -> list[Result[T]]:
        items = _check.prompts(prompts)  # never one string: "abc" is not three prompts
        _check.integer("", "concurrency", concurrency)
        for prompt in items:
            _check_prompt(prompt)
        limit = asyncio.Semaphore(concurrency)  # model calls in flight, across every prompt
        turns = asyncio.Semaphore(concurrency)  # prompts started: a budget's clock starts with its turn
        bar = _Progress(len(items), progress)
        batch = self._batch(refresh)  # the ledger's claims: a prompt another worker decides is waited for

        async def one(prompt: Prompt) -> Result[T]:
            if batch is not None:
                result: Result[T] = await batch.decide(prompt, turns, decide_one)
            else:
                async with turns:
                    result = await decide_one(prompt)
            bar.advance()
            return result

        async def decide_one(prompt: Prompt, recalled: bool = False) -> Result[T]:
            try:
                result = None if recalled else self._recall(prompt, refresh)
                if result is None:
                    pending = self._begin(prompt)
                    result = await adrive(self._flow(prompt, pending), self.model, limit)
                    result = self._remember(prompt, result, refresh, pending)
            except Exception as exc:  # a bug below must not lose the other prompts
                log.exception("prompt failed")
                result = _failed(exc, self)
            return result

        with bar, batch if batch is not None else contextlib.nullcontext():
            return list(await asyncio.gather(*(one(p) for p in items)))

    def _batch(self, refresh: bool) -> Any:
        batch = getattr(self.ledger, "batch", None)
        return batch(self, refresh=refresh) if batch is not None else None


def _both(first: Callable[[Ballot], Any] | None, second: Callable[[Ballot], Any]) -> Callable[[Ballot], Any]:
    if first is None:
        return second

    def both(ballot: Ballot) -> None:
        first(ballot)
        second(ballot)

    return both


def _deliver(result: Result[T]) -> Result[T]:
    if result.error is not None:
        log.info("run failed: %s", result.error)
        raise result.error
    log.info("decided %s after %d calls (%s)", result.key, result.calls, result.stopped_because)
    return result


def _failed(exc: BaseException, stab: Stabilizer[Any]) -> Result[Any]:
    error = exc if isinstance(exc, AccordError) else AccordError(f"{type(exc).__name__}: {exc}")
    return Result(None, False, 0.0, {}, (), "error", Usage(), stab.schema.name, stab.model.fingerprint, error=error)


def _check_prompt(prompt: Any) -> Prompt:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt):
        return prompt
    raise ConfigError("a prompt must be a string or a non-empty list of {'role': ..., 'content': ...} messages")


def _run_coroutine(coro: Coroutine[Any, Any, R]) -> R:
    """Run a coroutine to completion, also from inside a running event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    values: list[R] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(asyncio.run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="accord-map")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return values[0]


class _Progress:
    """A rich progress bar over prompts; shown when asked, or by default on a terminal."""

    def __init__(self, total: int, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import Progress

            self.bar = Progress(transient=False)
            self.bar.start()
            self.task = self.bar.add_task("accord", total=self.total)
        return self

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
