"""Many prompts, one batch: ``Stabilizer.map`` and ``amap`` decide them here.

At most ``concurrency`` model calls are in flight across every prompt, and at most
``concurrency`` prompts have started (a budget's clock starts with its prompt's turn). With a
ledger, each prompt is claimed before it is decided (``ledger/_batch``): a prompt another worker
decides is waited for and its answer replayed. A failed prompt never loses the others: its Result
carries the error. The results come back in input order, with a progress bar (``_report``) for a
long batch on a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _check
from .._errors import AccordError
from .._result import Result, StopReason
from .._types import Prompt, Usage
from ._drive import adrive
from ._report import Progress, ended

if TYPE_CHECKING:
    from .._stabilizer import Stabilizer
    from ._watch import Watch

T = TypeVar("T")
log = logging.getLogger("accord")


async def many(
    stab: Stabilizer[T], items: Sequence[Prompt], *, concurrency: int, progress: bool | None, refresh: bool
) -> list[Result[T]]:
    """Decide ``items`` with ``stab``, at most ``concurrency`` model calls in flight; input order kept."""
    _check.integer("", "concurrency", concurrency)
    for prompt in items:
        _check.prompt(prompt)
    limit = asyncio.Semaphore(concurrency)  # model calls in flight, across every prompt
    turns = asyncio.Semaphore(concurrency)  # prompts started: a budget's clock starts with its turn
    bar = Progress(len(items), progress)
    batch = stab._batch(refresh)  # the ledger's claims: a prompt another worker decides is waited for

    async def one(prompt: Prompt) -> Result[T]:
        watch = stab._watch(prompt)  # a prompt another worker decided is a run (a replay) too
        if batch is not None:
            result: Result[T] = await batch.decide(prompt, turns, functools.partial(decide_one, watch=watch))
        else:
            async with turns:
                result = await decide_one(prompt, watch=watch)
        ended(result, watch)
        if watch is not None:
            await watch.settle()
        bar.advance()
        return result

    async def decide_one(prompt: Prompt, recalled: bool = False, *, watch: Watch | None = None) -> Result[T]:
        try:
            result = None if recalled else stab._recall(prompt, refresh)
            if result is None:
                pending = stab._begin(prompt)
                result = await adrive(stab._flow(prompt, pending, watch), stab.model, limit, watch)
                result = stab._remember(prompt, result, refresh, pending)
        except Exception as exc:  # a bug below must not lose the other prompts
            log.exception("prompt failed")
            result = failed(exc, stab)
        return result

    with bar, batch if batch is not None else contextlib.nullcontext():
        return list(await asyncio.gather(*(one(p) for p in items)))


def failed(exc: BaseException, stab: Stabilizer[Any]) -> Result[Any]:
    """The Result of a prompt whose decision raised: its error, no value, no ballots."""
    error = exc if isinstance(exc, AccordError) else AccordError(f"{type(exc).__name__}: {exc}")
    return Result(None, False, 0.0, {}, (), StopReason.ERROR, Usage(), stab.schema.name, stab.model.fingerprint, error=error)
