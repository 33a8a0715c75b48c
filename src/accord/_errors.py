"""accord's exceptions, one tree under :class:`AccordError`.

    AccordError                  every error accord raises
    ├── ConfigError              a policy or argument that cannot work (also a ValueError)
    ├── UnsupportedSchema        a ``schema=`` accord cannot validate or constrain
    ├── ModelNotInstalled        a backend's model or package is missing; says how to install it
    ├── BackendError             a model call failed; ``.retryable`` says whether to try again
    ├── LedgerError              the decision ledger cannot be read or written
    └── OutputError              the run ended without a stable value; ``.result`` holds every ballot
        ├── InvalidOutput        no ballot produced a valid value
        ├── NoConsensus          valid ballots, but no answer reached the quorum
        └── BudgetExceeded       time, calls, tokens or cost ran out before a decision; ``.cause``

Every error may carry the :class:`~accord.Result` of the run it ended (``.result``); output
errors always do, so no ballot is ever lost.

Exceptions that are not accord's: an ``Exception`` (or an ``asyncio.CancelledError``) raised by a
model call is that ballot's ``BackendError``; one raised by a schema's own code while reading an
output makes that output invalid. ``KeyboardInterrupt``, ``SystemExit`` and cancelling the
awaiting task propagate unchanged (see docs/api.md, "Errors").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._result import Result


class AccordError(Exception):
    """Base of every error accord raises."""

    def __init__(self, message: str, *, result: Result[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


class ConfigError(AccordError, ValueError):
    """A policy or argument that cannot work, caught before any model call."""


class UnsupportedSchema(AccordError, TypeError):
    """``schema=`` is not something accord can validate (or, for a backend, constrain)."""


class ModelNotInstalled(AccordError):
    """A backend's model or package is missing; the message names the command that installs it."""


class BackendError(AccordError):
    """A model call failed.

    ``retryable`` is True for transient faults (timeouts, 429, 5xx, dropped connections), which the
    run loop retries with exponential backoff; ``retry_after`` is the server's hint in seconds.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        result: Result[Any] | None = None,
    ) -> None:
        super().__init__(message, result=result)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class LedgerError(AccordError):
    """The decision ledger cannot be read or written (corrupt file, lock timeout, full disk)."""


class OutputError(AccordError):
    """The run ended without a stable value. ``.result`` holds every ballot and the tally."""

    result: Result[Any]


class InvalidOutput(OutputError):
    """No ballot produced a value that passed validation."""


class NoConsensus(OutputError):
    """Some ballots were valid, but no answer could still reach the quorum."""


class BudgetExceeded(OutputError):
    """The budget (seconds, calls, tokens or cost) ran out before the vote was decided.

    ``cause``: what most of the run's failed calls failed with (``"TimeoutError"``, ``"invalid
    output (validation)"``, ...), named in the message too; None when no call failed (the
    ballots disagreed, or were still running). ``causes``: each cause with its count of calls.
    """

    def __init__(
        self, message: str, *, cause: str | None = None, causes: dict[str, int] | None = None, result: Result[Any] | None = None
    ) -> None:
        super().__init__(message, result=result)
        self.cause = cause
        self.causes = dict(causes or {})
