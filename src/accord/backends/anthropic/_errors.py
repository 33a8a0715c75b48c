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

from collections.abc import Iterable

from ..._errors import BackendError
from ..openai._errors import sdk_error

#: The anthropic SDK's loggers (request URLs at DEBUG and INFO), guarded like httpx's.
LOGGERS = ("anthropic", "anthropic._base_client")
_HINTS = {
    401: "authentication failed: check api_key or ANTHROPIC_API_KEY",
    403: "permission denied: check api_key and the model's access",
    404: "not found: check model, and base_url (the SDK appends /v1/messages to it)",
    413: "the request is too large for the server",
    529: "the API is overloaded: retried after a wait",
}


def to_backend_error(exc: BaseException, *, server: str, secrets: Iterable[str] = ()) -> BackendError:
    """Map one exception from the anthropic client (or the transport under it) to a BackendError:
    the openai backend's mapping (the two SDKs raise the same shapes), with this API's hints."""
    import anthropic

    return sdk_error(exc, sdk=anthropic, base=anthropic.AnthropicError, hints=_HINTS, server=server, secrets=secrets)
