"""What a finished run tells the world: its log record (``accord_*`` fields) and its watch's end,
for every run (run, arun, map, stream; ledger replays too); and the progress bar of a map."""

from __future__ import annotations

import logging
import sys
from typing import Any

from .._result import Result
from ._watch import Watch

log = logging.getLogger("accord")


def ended(result: Result[Any], watch: Watch | None) -> None:
    """Every run ends here (run, arun, map, stream; ledger replays too): its log record, its watch."""
    if log.isEnabledFor(logging.INFO):
        fields = run_fields(result, watch)
        if result.error is not None:
            log.info("run failed: %s", result.error, extra=fields)
        else:
            log.info("decided %s after %d calls (%s)", result.key, result.calls, result.stopped_because, extra=fields)
    if watch is not None:
        watch.end(result)


def run_fields(result: Result[Any], watch: Watch | None = None) -> dict[str, Any]:
    """The structured fields of a run's log record (``extra=``; every name starts ``accord_``)."""
    usage = result.usage
    return {
        "accord_event": "run",
        "accord_schema": result.schema,
        "accord_outcome": "failed" if result.error is not None else "stable" if result.stable else "unstable",
        "accord_stopped_because": result.stopped_because.value,
        "accord_key": result.key,
        "accord_agreement": result.agreement,
        "accord_calls": result.calls,
        "accord_replayed": result.replayed,
        "accord_error": type(result.error).__name__ if result.error is not None else None,
        "accord_prompt_tokens": usage.prompt_tokens,
        "accord_completion_tokens": usage.completion_tokens,
        "accord_cost": usage.cost,
        "accord_seconds": round(usage.seconds, 6),
        "accord_trace_id": watch.trace_id() if watch is not None else None,
    }


class Progress:
    """A rich progress bar over prompts; shown when asked, or by default on a terminal."""

    def __init__(self, total: int, enabled: bool | None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Progress:
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
