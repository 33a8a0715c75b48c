"""The error boundary of the OpenAI-compatible backend: every openai/httpx failure becomes a
:class:`~accord.BackendError`, and no credential survives into a message.

    openai.APITimeoutError (connect or read)      retryable
    openai.APIConnectionError (refused, reset)    retryable
    openai.APIStatusError 408/409/425/429, 5xx    retryable, ``retry_after`` from Retry-After
    openai.APIStatusError other 4xx               not retryable (401/403: credentials; 404: model)
    a body that is not JSON / has no choices      retryable (``Malformed``)
    httpx/httpx2 transport errors raised raw      retryable

Messages name the server by its redacted URL and never carry the API key: :func:`scrub` removes
the known secrets and anything shaped like a key or a bearer token.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import re
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..._errors import BackendError

_RETRYABLE = {408, 409, 425, 429}
_DETAIL = 300
_KEYLIKE = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*]{6,}|\bBearer\s+\S+", re.I)
_HINTS = {
    401: "authentication failed: check api_key or OPENAI_API_KEY",
    403: "permission denied: check api_key and the model's access",
    404: "not found: check base_url (it usually ends in /v1) and model",
    413: "the request is too large for the server",
}


_GUARDED = ("httpx", "httpx2", "openai", "openai._base_client")
_secrets: set[str] = set()
_guard_lock = threading.Lock()


class _ScrubSecrets(logging.Filter):
    """Rewrites a record of the HTTP stack that would print a credential accord was given.

    httpx logs every request URL at INFO, user:password and query included; openai logs request
    options at DEBUG. Installed once on those loggers by the first OpenAI-compatible backend.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is left to logging
            return True
        if any(secret in text for secret in _secrets):
            record.msg, record.args = scrub(text, _secrets), None
        return True


_FILTER = _ScrubSecrets()


def guard_logs(secrets: Iterable[str], loggers: Iterable[str] = ()) -> None:
    """Keep these secrets out of the log lines of httpx and openai, and of ``loggers`` (another
    SDK's: the anthropic backend names its own)."""
    with _guard_lock:
        _secrets.update(s for s in secrets if s and len(s) >= 4)
        for name in (*_GUARDED, *loggers):
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)


class Malformed(Exception):
    """The server answered 2xx with a body accord cannot use (not JSON, no choices)."""


def redact_url(url: Any) -> str:
    """The URL with any user:password and every query value replaced by ``***``."""
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<unparseable url>"
    if parts.username or parts.password:
        host = f"***@{host}"
    query = "&".join(f"{name}=***" for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, host, parts.path, query, ""))


def url_secrets(url: Any) -> list[str]:
    """The secrets a URL carries (password, query values), to scrub from messages."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    found = [parts.password or ""]
    found += [value for _, value in parse_qsl(parts.query)]
    return [s for s in found if len(s) >= 4]


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the given secrets and without anything shaped like a key or token."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def to_backend_error(exc: BaseException, *, server: str, secrets: Iterable[str] = ()) -> BackendError:
    """Map one exception from the openai client (or the transport under it) to a BackendError."""
    import openai

    return sdk_error(exc, sdk=openai, base=openai.OpenAIError, hints=_HINTS, server=server, secrets=secrets)


def sdk_error(exc: BaseException, *, sdk: Any, base: type[BaseException], hints: dict[int, str], server: str,
              secrets: Iterable[str] = ()) -> BackendError:
    """The mapping for a provider SDK of the openai shape (``APIStatusError``, ``APITimeoutError``,
    ``APIConnectionError`` under ``base``; the anthropic SDK has the same): the openai backend's and
    the anthropic backend's (``backends/anthropic/_errors``), each with its own ``hints`` per status."""
    secrets = list(secrets)

    def said(text: Any) -> str:
        return _short(scrub(str(text), secrets))

    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE or status >= 500
        detail = said(getattr(exc, "api_message", None) or _body_message(exc.body) or exc.message)
        hint = hints.get(status)
        text = f"{server}: HTTP {status} {type(exc).__name__}: {detail}" + (f" ({hint})" if hint else "")
        retry_after = parse_retry_after(getattr(exc.response, "headers", None))
        return BackendError(text, retryable=retryable, status=status, retry_after=retry_after)
    if isinstance(exc, sdk.APITimeoutError):
        kind = type(exc.__cause__).__name__ if exc.__cause__ is not None else "timeout"
        return BackendError(f"{server}: timed out ({kind})", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        why = f"{type(cause).__name__}: {said(cause)}" if cause is not None else said(exc)
        return BackendError(f"{server}: connection failed ({why})", retryable=True)
    if isinstance(exc, Malformed):
        return BackendError(f"{server}: unusable response ({said(exc)})", retryable=True)
    if isinstance(exc, json.JSONDecodeError):  # the client could not decode the body
        return BackendError(f"{server}: the response body is not JSON ({type(exc).__name__}: {said(exc)})", retryable=True)
    if isinstance(exc, _transport_errors()):
        return BackendError(f"{server}: transport error ({type(exc).__name__}: {said(exc)})", retryable=True)
    if isinstance(exc, base):
        return BackendError(f"{server}: {type(exc).__name__}: {said(exc)}")
    return BackendError(f"{server}: unexpected {type(exc).__name__}: {said(exc)}")


def _transport_errors() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is not None:  # (a module another thread is still importing lacks its names: skipped)
            found += [c for c in (getattr(module, n, None) for n in ("TransportError", "StreamError", "DecodingError")) if isinstance(c, type)]
    return tuple(found)


def _body_message(body: Any) -> str | None:
    """The human message of an error body: ``{"error": {"message"}}``, ``{"message"}``, ``{"detail"}``."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for name in ("message", "detail"):
                if inner.get(name):
                    return str(inner[name])
        elif inner:
            return str(inner)
        if body.get("detail"):
            return str(body["detail"])
    return str(body) if isinstance(body, str) and body else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL else text[: _DETAIL - 1] + "…"
