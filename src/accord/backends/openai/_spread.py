"""Ballots that sample a server's batch noise, instead of k copies of one batch.

Over HTTP accord cannot perturb the computation: the server decides what a request is batched
with, and that batch is what moves its logits (continuous batching changes the kernels' shapes
and reduction order). Greedy ballots of one prompt sent at once land in the same batches and are
computed the same way: k copies, which only look like agreement. So, by default, the OpenAI
backend spreads the ballots of one prompt (``spread=True``; measured in docs/http.md):

- **one at a time**: a ballot waits until the previous ballot of the same prompt is answered, so
  ballots of one prompt never share a batch (ballots of other prompts still run concurrently).
  The backend says ``one_at_a_time``, so the run's driver holds the next ballot back; it takes no
  slot of a ``map``'s concurrency bound while it waits, and the server keeps that many requests
  (a lock per prompt also orders two runs of one prompt at once);
- **batch neighbours**: ballot i >= 1 goes out with ``neighbours(i)`` other requests of other
  lengths (filler text, greedy, up to as many tokens as the ballot may write) sent with it and
  cancelled once it is answered, so each ballot shares its batches with a different company.
  The backend's own ballots of other prompts in flight count as neighbours (fewer are sent): a
  busy ``map`` already gives every ballot company, and sends none;
- with several base URLs, ballots also go round-robin across the servers.

Ballot 0 goes alone, as the deployment would send it. The neighbours' tokens are the cost: they
are spent only on ballots after the first, i.e. when the margin gate did not accept the first
ballot alone. Their answers are not part of the Result; their count and the tokens of those that
finished are, in ``Usage.neighbour_requests`` and ``neighbour_tokens``. Neighbours go only to a
server of the user's own (``OpenAIBackend.neighbours``: loopback, private addresses, one-label
names): a hosted API bills them and batches its traffic as it will, so there they change nothing
the ballots would not see anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any

from ..._types import Completion, Request
from ._ops import chat_endpoint

#: Batch neighbours sent beside ballot i (i >= 1): a different count for each ballot.
NEIGHBOURS = (0, 1, 3, 6, 2, 5, 4, 7)
FILLER = (
    "The committee met again on Thursday to review the quarterly figures, and the discussion ran long. ",
    "Rain had fallen all night over the valley, and by morning the river was high and brown. ",
    "Our records show that the shipment left the warehouse on time but was held at the border. ",
)
_ASKS = ("Summarize the text above in two sentences.", "Continue the story.", "List three facts from the text.")


def neighbours(ballot: int) -> int:
    """How many batch neighbours ballot ``ballot`` is sent with (none for ballot 0)."""
    return NEIGHBOURS[ballot % len(NEIGHBOURS)] if ballot > 0 else 0


def neighbour_messages(turn: int) -> list[dict[str, str]]:
    """The chat messages of one neighbour: a prompt whose length varies with ``turn``."""
    text = "".join(FILLER[(turn + i) % len(FILLER)] for i in range(1 + turn % 7))
    return [{"role": "user", "content": text + _ASKS[turn % len(_ASKS)]}]


def prompt_key(request: Request) -> str:
    """What makes two requests ballots of the same prompt: the input sent and the schema."""
    return json.dumps([request.input, request.schema.name], sort_keys=True, default=str)


class Turns:
    """Per prompt, one ballot at a time: a lock per prompt key, for threads and for event loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, tuple[threading.Lock, int]] = {}
        self._tasks: dict[tuple[int, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            lock, users = self._threads.get(key, (threading.Lock(), 0))
            self._threads[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._threads[key]
                if users == 1:
                    del self._threads[key]
                else:
                    self._threads[key] = (lock, users - 1)

    @contextlib.asynccontextmanager
    async def ahold(self, key: str) -> AsyncIterator[None]:
        slot = (id(asyncio.get_running_loop()), key)
        with self._lock:
            lock, users = self._tasks.get(slot, (asyncio.Lock(), 0))
            self._tasks[slot] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._tasks[slot]
                if users == 1:
                    del self._tasks[slot]
                else:
                    self._tasks[slot] = (lock, users - 1)


class Spreader:
    """One backend's spreading: one ballot of a prompt at a time (:class:`Turns`), its ballots in
    flight counted (they are each other's neighbours already), its neighbours numbered."""

    def __init__(self) -> None:
        self.turns = Turns()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._neighbour_turn = 0

    @contextlib.contextmanager
    def hold(self, request: Request) -> Iterator[None]:
        """The block runs once the previous ballot of this prompt is answered, counted in flight."""
        with self.turns.hold(prompt_key(request)), self._flying():
            yield

    @contextlib.asynccontextmanager
    async def ahold(self, request: Request) -> AsyncIterator[None]:
        """The async twin of :meth:`hold`."""
        async with self.turns.ahold(prompt_key(request)):
            with self._flying():
                yield

    @contextlib.contextmanager
    def _flying(self) -> Iterator[None]:
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def neighbours_for(self, ballot: int, model: str | None, max_tokens: int, busy: int = 0) -> list[dict[str, Any]]:
        """The batch neighbours that go beside this ballot: ``neighbours(ballot)``, less the other
        ballots of this backend in flight and the ``busy`` requests of others the server last said
        it runs (none for ballot 0, or before the model is known)."""
        with self._lock:
            others = self._in_flight - 1 + max(0, busy)
        count = max(0, neighbours(ballot) - others) if model else 0
        if not count or model is None:
            return []
        return self.numbered(model, count, max_tokens)

    def numbered(self, model: str, count: int, max_tokens: int) -> list[dict[str, Any]]:
        """``count`` neighbours, each of another length than the last ones sent."""
        with self._lock:
            first, self._neighbour_turn = self._neighbour_turn, self._neighbour_turn + count
        return [neighbour_params(model, first + i, max_tokens) for i in range(count)]


class Sent:
    """The neighbours that went beside one ballot: how many, and the tokens the finished ones reported."""

    def __init__(self, count: int = 0) -> None:
        self.count, self.tokens = count, None  # type: int, int | None

    def heard(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        total = getattr(usage, "total_tokens", None)
        if total is None and usage is not None:  # the Responses API's
            total = (getattr(usage, "input_tokens", 0) or 0) + (getattr(usage, "output_tokens", 0) or 0)
        if isinstance(total, int):
            self.tokens = (self.tokens or 0) + total


def noted(completion: Completion, sent: Sent | int) -> Completion:
    """The ballot's Completion, with the neighbours that went beside it: ``meta["neighbours"]``,
    and in its usage (``Usage.neighbour_requests``, ``neighbour_tokens``)."""
    sent = sent if isinstance(sent, Sent) else Sent(sent)
    if not sent.count:
        return completion
    usage = replace(completion.usage, neighbour_requests=completion.usage.neighbour_requests + sent.count,
                    neighbour_tokens=sent.tokens if completion.usage.neighbour_tokens is None else
                    completion.usage.neighbour_tokens + (sent.tokens or 0))
    return replace(completion, usage=usage, meta={**completion.meta, "neighbours": sent.count})


def neighbour_params(model: str, turn: int, max_tokens: int) -> dict[str, Any]:
    """The keyword arguments of one neighbour's ``chat.completions.create``."""
    return {"model": model, "messages": neighbour_messages(turn), "max_tokens": max_tokens, "temperature": 0.0}


@contextlib.asynccontextmanager
async def abeside(client: Any, neighbours: list[dict[str, Any]], endpoint: Callable[[Any], Any] = chat_endpoint) -> AsyncIterator[Sent]:
    """The neighbours in flight on this event loop while the block runs; cancelled when it ends.

    ``endpoint(client)`` sends one (the API the ballots speak: ``client.responses.create`` for
    the Responses API). A neighbour's failure is not the ballot's: it is dropped. The block gets
    a :class:`Sent`, filled in once the block ends (the finished neighbours' tokens).
    """
    create = endpoint(client)
    sent = Sent(len(neighbours))
    tasks = [asyncio.ensure_future(create(**params)) for params in neighbours]
    try:
        yield sent
    finally:
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is None:
                sent.heard(task.result())
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def traffic(client: Any, params: Callable[[int], dict[str, Any]], count: int,
                  endpoint: Callable[[Any], Any] = chat_endpoint) -> AsyncIterator[None]:
    """``count`` requests always in flight while the block runs (``params(turn)`` builds each,
    ``endpoint(client)`` sends it; a finished or failed one is sent again), cancelled when it
    ends: a busy server."""
    create = endpoint(client)

    async def keep_sending(lane: int) -> None:
        for turn in itertools.count(lane, count):
            try:
                await create(**params(turn))
            except Exception:  # noqa: BLE001 - background traffic: its failures are not the caller's
                await asyncio.sleep(0.2)

    tasks = [asyncio.ensure_future(keep_sending(lane)) for lane in range(count)]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.contextmanager
def beside(new_client: Callable[[], Any], neighbours: list[dict[str, Any]], endpoint: Callable[[Any], Any] = chat_endpoint) -> Iterator[Sent]:
    """For a sync call: the neighbours in flight on a private event loop in a thread while the
    block runs (``new_client()`` builds that loop's async client, ``endpoint`` as
    :func:`abeside`'s); cancelled when it ends. The block gets a :class:`Sent` (:func:`abeside`)."""
    if not neighbours:
        yield Sent()
        return
    started = threading.Event()
    state: dict[str, Any] = {"sent": Sent(len(neighbours))}

    async def run() -> None:
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        client = new_client()
        try:
            async with abeside(client, neighbours, endpoint) as sent:
                state["sent"] = sent
                started.set()
                await state["stop"].wait()
        finally:
            started.set()
            await client.close()

    worker = threading.Thread(target=lambda: asyncio.run(run()), name="accord-neighbours", daemon=True)
    worker.start()
    started.wait(timeout=10)
    try:
        yield state["sent"]
    finally:
        if "stop" in state:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                state["loop"].call_soon_threadsafe(state["stop"].set)
        worker.join(timeout=30)
