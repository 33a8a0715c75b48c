"""A batch's Results as Arrow columns: one row per prompt, in the batch's order.

    value              the value as JSON text (null when the run has none)
    stable             the vote accepted it
    agreement          the winner's votes / valid ballots
    calls              model calls this row made now (0 for an answer the ledger replayed)
    stopped_because    why the run ended ("unanimous", "k reached", "budget", "error", ...)
    replayed           the answer came from the ledger (decided before, or by another actor)
    prompt_tokens      tokens this row spent now (null when the backend does not report them)
    completion_tokens
    cost               what this row's calls cost (null without prices)
    error_type         the failure's class name (``NoConsensus``, ``InvalidOutput``, ...), null when it did not fail
    error_message      the failure in words (at most :data:`MESSAGE_CHARS` characters)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..._result import Result

MESSAGE_CHARS = 2000

COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("value", pa.string()),
    ("stable", pa.bool_()),
    ("agreement", pa.float64()),
    ("calls", pa.int64()),
    ("stopped_because", pa.string()),
    ("replayed", pa.bool_()),
    ("prompt_tokens", pa.int64()),
    ("completion_tokens", pa.int64()),
    ("cost", pa.float64()),
    ("error_type", pa.string()),
    ("error_message", pa.string()),
)
"""The output columns, by name and Arrow type, in order (``Stabilize(prefix=...)`` prefixes them)."""


def row(result: Result[Any]) -> tuple[Any, ...]:
    """One Result as the values of :data:`COLUMNS`."""
    error = result.error
    usage = result.usage
    value = None if result.value is None else json.dumps(result.data, ensure_ascii=False, sort_keys=False)
    return (
        value,
        bool(result.stable),
        float(result.agreement),
        int(result.calls),
        result.stopped_because,
        bool(result.replayed),
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cost,
        None if error is None else type(error).__name__,
        None if error is None else _brief(str(error)),
    )


def refused(error: Exception) -> tuple[Any, ...]:
    """The row of a prompt refused before any run (not a prompt at all: a number, a null)."""
    return (None, False, 0.0, 0, "error", False, None, None, None, type(error).__name__, _brief(str(error)))


def table(base: pa.Table, rows: Sequence[tuple[Any, ...]], prefix: str) -> pa.Table:
    """``base`` with the columns of ``rows`` appended (``prefix`` before each name)."""
    for index, (name, kind) in enumerate(COLUMNS):
        base = base.append_column(pa.field(prefix + name, kind), pa.array([r[index] for r in rows], type=kind))
    return base


def _brief(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
