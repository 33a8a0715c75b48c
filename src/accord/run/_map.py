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
from collections.abc import Sequence
from typing import TypeVar

from .. import _check
from .._result import Result
from .._types import Prompt
from ._decider import Decider, Shared
from ._report import Progress

T = TypeVar("T")


async def many(
    decider: Decider[T], items: Sequence[Prompt], *, concurrency: int, progress: bool | None, refresh: bool
) -> list[Result[T]]:
    """Decide ``items``, at most ``concurrency`` model calls in flight; input order kept."""
    _check.integer("", "concurrency", concurrency)
    for prompt in items:
        _check.prompt(prompt)
    bar = Progress(len(items), progress)
    # The ledger's claims: a prompt another worker decides is waited for, and its answer replayed.
    claims = decider.ledger.batch(decider, refresh=refresh) if decider.ledger is not None else None
    # Prompts started (a budget's clock starts with its turn), and model calls in flight, across every prompt.
    shared = Shared(claims, turns=asyncio.Semaphore(concurrency), limit=asyncio.Semaphore(concurrency))

    async def one(prompt: Prompt) -> Result[T]:
        async for item in decider.astream(prompt, refresh, streaming=False, shared=shared):
            result = item
        assert isinstance(result, Result)
        bar.advance()
        return result

    with bar, claims if claims is not None else contextlib.nullcontext():
        return list(await asyncio.gather(*(one(p) for p in items)))
