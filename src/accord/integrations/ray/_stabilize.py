"""The callable class of ``Dataset.map_batches``: one Stabilizer per actor, a batch in, its answers out."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pyarrow as pa

from ..._errors import AccordError, ConfigError
from ..._result import Result
from . import _columns
from ._recipe import Recipe


class Stabilize:
    """Decides the prompts of one column, a batch at a time: ``ds.map_batches(Stabilize, fn_constructor_args=(recipe,), ...)``.

    Built once per actor: the recipe's ledger opened, its backend made, its Stabilizer built, and
    an event loop started in a thread of the actor, on which every batch runs
    ``Stabilizer.amap(prompts, concurrency=concurrency)``: at most ``concurrency`` model calls in
    flight at once (an async backend's on that loop, a sync backend's in threads).

    A batch (a ``pyarrow.Table``; a pandas DataFrame or a dict of columns is read as one) comes
    back as a ``pyarrow.Table``: its columns, then :data:`~accord.integrations.ray.COLUMNS`
    (each name after ``prefix``). ``column`` holds the prompts: strings, or lists of
    ``{"role": ..., "content": ...}`` messages. A row that fails (no consensus, invalid output,
    a backend error, a cell that is no prompt) has ``error_type`` and ``error_message`` set and
    the batch goes on; ``fail_on_error=True`` fails the batch instead, with an
    :class:`~accord.AccordError` naming the first failed row.
    """

    def __init__(
        self, recipe: Recipe, *, column: str = "prompt", concurrency: int = 8, prefix: str = "", fail_on_error: bool = False
    ) -> None:
        if not isinstance(recipe, Recipe):
            raise ConfigError(f"Stabilize(recipe) takes an accord.integrations.ray.Recipe, got {type(recipe).__name__}")
        if not isinstance(column, str) or not column:
            raise ConfigError(f"Stabilize(column=...) must name the prompt column, got {column!r}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"Stabilize(concurrency=...) must be an int >= 1, got {concurrency!r}")
        if not isinstance(prefix, str):
            raise ConfigError(f"Stabilize(prefix=...) must be a str, got {type(prefix).__name__}")
        self.column, self.concurrency, self.prefix, self.fail_on_error = column, concurrency, prefix, bool(fail_on_error)
        self.ledger = recipe.open_ledger()
        try:
            self.stabilizer = recipe.build(self.ledger)
        except BaseException:
            if self.ledger is not None:
                self.ledger.close()
            raise
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="accord-ray-loop", daemon=True)
        self._thread.start()

    def __call__(self, batch: Any) -> pa.Table:
        """The batch with its answers (see the class docstring)."""
        table = _as_table(batch)
        if self.column not in table.column_names:
            raise ConfigError(f"the batch has no column {self.column!r} (its columns: {', '.join(table.column_names)})")
        clash = sorted({self.prefix + name for name, _ in _columns.COLUMNS} & set(table.column_names))
        if clash:
            raise ConfigError(f"the batch has columns named like accord's output {clash}: pass Stabilize(prefix=...)")
        cells = table.column(self.column).to_pylist()
        rows: list[tuple[Any, ...] | None] = [None] * len(cells)
        prompts, where = [], []
        for index, cell in enumerate(cells):
            problem = _refusal(cell)
            if problem is None:
                prompts.append(cell)
                where.append(index)
            else:
                rows[index] = _columns.refused(problem)
        results: list[Result[Any]] = []
        if prompts:
            work = self.stabilizer.amap(prompts, concurrency=self.concurrency, progress=False)
            results = asyncio.run_coroutine_threadsafe(work, self._loop).result()
        for index, result in zip(where, results, strict=True):
            rows[index] = _columns.row(result)
        done = [r for r in rows if r is not None]
        if self.fail_on_error:
            for index, values in enumerate(done):
                if values[-2] is not None:
                    raise AccordError(f"row {index} of the batch failed ({values[-2]}): {values[-1]}")
        return _columns.table(table, done, self.prefix)

    def close(self) -> None:
        """Stop the loop and close the ledger (an actor's end does as much)."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if self.ledger is not None:
            self.ledger.close()

    def __enter__(self) -> Stabilize:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_table(batch: Any) -> pa.Table:
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, dict):
        return pa.table({name: list(values) if not hasattr(values, "__array__") else values for name, values in batch.items()})
    if type(batch).__name__ == "DataFrame" and hasattr(batch, "to_dict"):  # pandas, without importing it
        return pa.Table.from_pandas(batch, preserve_index=False)
    raise ConfigError(f"a batch must be a pyarrow.Table, a pandas DataFrame or a dict of columns, got {type(batch).__name__}")


def _refusal(cell: Any) -> ConfigError | None:
    """Why ``cell`` is no prompt (None when it is one): a string, or a non-empty list of messages."""
    if isinstance(cell, str):
        return None
    if isinstance(cell, list) and cell and all(isinstance(m, dict) and "role" in m and "content" in m for m in cell):
        return None
    return ConfigError(f"a prompt must be a string or a non-empty list of {{'role': ..., 'content': ...}} messages, got {type(cell).__name__}")
