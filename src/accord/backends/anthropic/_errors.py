"""The error boundary of the Claude backend: every anthropic/httpx failure becomes a
:class:`~accord.BackendError`, and no credential survives into a message.

    anthropic.APITimeoutError (connect or read)      retryable
    anthropic.APIConnectionError (refused, reset)    retryable
    anthropic.APIStatusError 408/409/425/429, 5xx    retryable (529: overloaded), ``retry_after``
                                                     from ``retry-after-ms`` or ``Retry-After``
    anthropic.APIStatusError other 4xx               not retryable (400: the request; 401/403:
                                                     credentials; 404: the model or base_url)
    a body that is not a Message                     retryable (``Malformed``)
    httpx/httpx2 transport errors raised raw         retryable
    anthropic.AnthropicError (no credentials, ...)   not retryable

The scrubbing is the OpenAI backend's (:mod:`accord.backends.openai._errors`): the known secrets,
and anything shaped like a key or a bearer token, become ``***``; the same log filter keeps
them out of the ``anthropic`` and ``httpx2`` loggers (:data:`LOGGERS`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from ..._errors import BackendError
from ..openai._errors import Malformed, parse_retry_after, scrub

#: The anthropic SDK's loggers (request URLs at DEBUG and INFO), guarded like httpx's.
LOGGERS = ("anthropic", "anthropic._base_client")
_RETRYABLE = {408, 409, 425, 429}
_DETAIL = 300
_HINTS = {
    401: "authentication failed: check api_key or ANTHROPIC_API_KEY",
    403: "permission denied: check api_key and the model's access",
    404: "not found: check model, and base_url (the SDK appends /v1/messages to it)",
    413: "the request is too large for the server",
    529: "the API is overloaded: retried after a wait",
}


def to_backend_error(exc: BaseException, *, server: str, secrets: Iterable[str] = ()) -> BackendError:
    """Map one exception from the anthropic client (or the transport under it) to a BackendError."""
    import anthropic

    secrets = list(secrets)

    def said(text: Any) -> str:
        return _short(scrub(str(text), secrets))

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        retryable = status in _RETRYABLE or status >= 500
        detail = said(getattr(exc, "api_message", None) or _body_message(exc.body) or exc.message)
        hint = _HINTS.get(status)
        text = f"{server}: HTTP {status} {type(exc).__name__}: {detail}" + (f" ({hint})" if hint else "")
        retry_after = parse_retry_after(getattr(exc.response, "headers", None))
        return BackendError(text, retryable=retryable, status=status, retry_after=retry_after)
    if isinstance(exc, anthropic.APITimeoutError):
        kind = type(exc.__cause__).__name__ if exc.__cause__ is not None else "timeout"
        return BackendError(f"{server}: timed out ({kind})", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        why = f"{type(cause).__name__}: {said(cause)}" if cause is not None else said(exc)
        return BackendError(f"{server}: connection failed ({why})", retryable=True)
    if isinstance(exc, Malformed):
        return BackendError(f"{server}: unusable response ({said(exc)})", retryable=True)
    if isinstance(exc, json.JSONDecodeError):
        return BackendError(f"{server}: the response body is not JSON ({type(exc).__name__}: {said(exc)})", retryable=True)
    if isinstance(exc, _transport_errors()):
        return BackendError(f"{server}: transport error ({type(exc).__name__}: {said(exc)})", retryable=True)
    if isinstance(exc, anthropic.AnthropicError):
        return BackendError(f"{server}: {type(exc).__name__}: {said(exc)}")
    return BackendError(f"{server}: unexpected {type(exc).__name__}: {said(exc)}")


def _transport_errors() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        if module is not None:
            found += [module.TransportError, module.StreamError, module.DecodingError]
    return tuple(found)


def _body_message(body: Any) -> str | None:
    """The human message of an error body: Anthropic's ``{"type": "error", "error": {"message"}}``,
    or a bare ``{"message"}`` / ``{"detail"}`` (a proxy's, a compatible server's)."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for name in ("message", "detail"):
                if inner.get(name):
                    return str(inner[name])
        elif inner:
            return str(inner)
    return str(body) if isinstance(body, str) and body else None


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL else text[: _DETAIL - 1] + "…"
