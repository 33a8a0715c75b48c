"""The ``accord`` request field: how one request wants its vote, within the server's caps.

    {"k": 5, "quorum": 3, "fieldwise": true, "retry": 3, "max_seconds": 30}

Every name is optional; what a request leaves out comes from the server's default policy (the
library's defaults, or the config file's ``[policy]``). A client may ask for less than a cap
(``--max-k``, ``--max-seconds``), never more; a name this module does not know, or a value of
the wrong kind, is a 400 that names it (:class:`~._errors.ApiError`), never a silent default.

    k            ballots at most (1 .. --max-k)
    quorum       votes the winner needs: an int, or a fraction of k in (0, 1]
    fieldwise    vote each field of an object apart
    retry        calls per ballot for an invalid output, the first included (1 .. 10)
    max_seconds  the run's time budget (at most --max-seconds, which is also the default)
    early_stop   stop once the vote is settled (default true)
    gate         let the margin gate accept one ballot alone where the upstream's noise is known (default true)
    plurality    no quorum: answer with the plurality, ``stable: false``, instead of a 422
    normalize    for free text: extra normalizers by name (casefold, nfkc, collapse_whitespace)
    refresh      with a ledger: decide again instead of replaying the stored answer
    schema_in_prompt  show the model the request's schema in its prompt, beside the upstream's
                 ``response_format`` (default true; false: the messages go as the client wrote them)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import Budget, ConfigError, MarginGate, Retry, Vote, casefold, collapse_whitespace, nfkc
from ._errors import ApiError

NAMES = ("k", "quorum", "fieldwise", "retry", "max_seconds", "early_stop", "gate", "plurality", "normalize", "refresh",
         "schema_in_prompt")
NORMALIZERS = {"casefold": casefold, "nfkc": nfkc, "collapse_whitespace": collapse_whitespace}
DEFAULT_K = 5


@dataclass(frozen=True)
class Ask:
    """One request's policy, checked and complete."""

    k: int = DEFAULT_K
    quorum: int | float | None = None
    fieldwise: bool = False
    retry: int = 3
    max_seconds: float = 120.0
    early_stop: bool = True
    gate: bool = True
    plurality: bool = False
    normalize: tuple[str, ...] = ()
    refresh: bool = False
    schema_in_prompt: bool = True

    def vote(self) -> Vote:
        return Vote(k=self.k, quorum=self.quorum, early_stop=self.early_stop, fieldwise=self.fieldwise,
                    gate=MarginGate() if self.gate else None)  # fmt: skip

    def retry_policy(self, transport_attempts: int) -> Retry:
        return Retry(attempts=self.retry, transport_attempts=transport_attempts, max_wait=min(5.0, self.max_seconds))

    def budget(self) -> Budget:
        return Budget(max_seconds=self.max_seconds)

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "quorum": self.quorum, "fieldwise": self.fieldwise, "retry": self.retry, "max_seconds": self.max_seconds}


def _bad(name: str, why: str) -> ApiError:
    return ApiError(400, f"accord.{name} {why}", param=f"accord.{name}", code="invalid_accord_field")


def read(given: Any, base: Ask, *, max_k: int, max_seconds: float, source: str = "accord") -> Ask:
    """``base`` with the names ``given`` sets (a JSON object), each checked against the caps."""
    if given is None:
        return base
    if not isinstance(given, Mapping):
        raise ApiError(400, f"{source} must be a JSON object, e.g. {{\"k\": 5}}", param=source, code="invalid_accord_field")
    unknown = sorted(set(given) - set(NAMES))
    if unknown:
        raise ApiError(400, f"{source} has unknown names {unknown}; it takes: {', '.join(NAMES)}", param=f"{source}.{unknown[0]}",
                       code="invalid_accord_field")  # fmt: skip
    values = {name: getattr(base, name) for name in NAMES}
    for name, value in given.items():
        values[name] = _check(name, value, max_k, max_seconds)
    quorum = values["quorum"]
    if quorum is not None and not (isinstance(quorum, float) and quorum <= 1) and quorum > values["k"]:
        raise _bad("quorum", f"must be at most k={values['k']}, got {quorum!r}")
    try:
        ask = Ask(**values)
        ask.vote()  # the library's own checks, as a 400
    except ConfigError as exc:
        raise ApiError(400, f"{source}: {exc}", param=source, code="invalid_accord_field") from None
    return ask


def _check(name: str, value: Any, max_k: int, max_seconds: float) -> Any:
    return _CHECKS[name](name, value, max_k, max_seconds)


def _flag(name: str, value: Any, max_k: int, max_seconds: float) -> bool:
    if not isinstance(value, bool):
        raise _bad(name, f"must be true or false, got {value!r}")
    return value


def _k(name: str, value: Any, max_k: int, max_seconds: float) -> Any:
    if not _int(value) or not 1 <= value <= max_k:
        raise _bad(name, f"must be an integer from 1 to {max_k} (this server's --max-k), got {value!r}")
    return value


def _retry(name: str, value: Any, max_k: int, max_seconds: float) -> Any:
    if not _int(value) or not 1 <= value <= 10:
        raise _bad(name, f"must be an integer from 1 to 10, got {value!r}")
    return value


def _quorum(name: str, value: Any, max_k: int, max_seconds: float) -> Any:
    if value is None or (_int(value) and value >= 1) or (isinstance(value, float) and 0 < value <= 1):
        return value
    raise _bad(name, f"must be an integer >= 1 or a fraction in (0, 1], got {value!r}")


def _seconds(name: str, value: Any, max_k: int, max_seconds: float) -> float:
    if not _number(value) or not 0 < value <= max_seconds:
        raise _bad(name, f"must be a number of seconds > 0 and at most {max_seconds:g} (this server's --max-seconds), got {value!r}")
    return float(value)


def _normalizers(name: str, value: Any, max_k: int, max_seconds: float) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v in NORMALIZERS for v in value):
        raise _bad(name, f"must be a list of names among {', '.join(NORMALIZERS)}, got {value!r}")
    return tuple(dict.fromkeys(value))


# each name of the field: the check that reads its value (a 400 naming it when the value is wrong)
_CHECKS: dict[str, Callable[[str, Any, int, float], Any]] = {
    "k": _k,
    "quorum": _quorum,
    "fieldwise": _flag,
    "retry": _retry,
    "max_seconds": _seconds,
    "early_stop": _flag,
    "gate": _flag,
    "plurality": _flag,
    "normalize": _normalizers,
    "refresh": _flag,
    "schema_in_prompt": _flag,
}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def server_default(policy: Mapping[str, Any], *, max_k: int, max_seconds: float) -> Ask:
    """The server's default Ask: the library's defaults (k at most the cap, the time budget the
    cap), then the config file's ``[policy]``; a bad value is a ConfigError at start-up."""
    base = Ask(k=min(DEFAULT_K, max_k), max_seconds=max_seconds)
    try:
        return read(dict(policy), base, max_k=max_k, max_seconds=max_seconds, source="[policy]")
    except ApiError as exc:
        raise ConfigError(exc.message) from None
