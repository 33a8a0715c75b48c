"""Every error the proxy answers, in OpenAI's shape (Anthropic's on ``/v1/messages``), and how a
failed run becomes one.

    {"error": {"message": "...", "type": "...", "param": null, "code": "..."}}           OpenAI's
    {"type": "error", "error": {"type": "...", "message": "..."}, "request_id": "..."}   Anthropic's

    400  invalid_request_error    malformed JSON, a bad ``accord`` field or cap, ``n > 1`` with a schema
    401  invalid_request_error    no or a wrong client key (code ``invalid_api_key``)
    404  invalid_request_error    no such route, a model this server does not route (``model_not_found``),
                                  or the upstream's 4xx for a model it lacks, passed on
    413  invalid_request_error    a body over ``--max-body``
    422  accord_invalid_output    no ballot gave a valid value           ``x-should-retry: false``
    422  accord_no_consensus      valid ballots, no quorum               ``x-should-retry: false``
    429  rate_limit_error         the upstream's 429 (its ``retry-after`` passed on), or the queue is full
    502  upstream_error           the upstream is unreachable, failed (5xx) or refused the proxy's key
    503  server_error             shutting down (SIGTERM), or not ready
    504  accord_budget_exceeded   the time budget ran out before a decision  ``x-should-retry: false``

The official clients retry 408/409/429/5xx twice by default: a failed vote must not be re-run
silently at k times the cost, so every decision that was really made carries
``x-should-retry: false``. The messages never carry the upstream's key (:func:`redact`).

In Anthropic's shape (:meth:`ApiError.anthropic`) the ``type`` is the one Anthropic gives that
status (``invalid_request_error``, ``authentication_error``, ``not_found_error``,
``request_too_large``, ``rate_limit_error``, ``api_error``, ``overloaded_error``), accord's own
(``accord_no_consensus``, ...) kept; the ``param`` leads the message, which is all that shape has.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

from .. import AccordError, BackendError, BudgetExceeded, InvalidOutput, NoConsensus

_KEY_ENVS = {"OPENAI_API_KEY"}  # where the upstream keys are read (a routed model may name its own)


def watch_key(env: str) -> None:
    """Scrub the key in environment variable ``env`` from every message too."""
    _KEY_ENVS.add(env)


def redact(text: str) -> str:
    """``text`` without the upstream keys (the backend scrubs its messages already; this is the edge)."""
    for env in _KEY_ENVS:
        key = os.environ.get(env)
        if key and len(key) >= 4 and key in text:
            text = text.replace(key, "***")
    return text


class ApiError(Exception):
    """One error answer: its status, OpenAI's four fields, extra headers and extra body fields."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def body(self) -> dict[str, Any]:
        error = {"message": redact(self.message), "type": self.type, "param": self.param, "code": self.code}
        return {"error": error, **self.extra}

    def encoded(self) -> bytes:
        return json.dumps(self.body(), ensure_ascii=False, separators=(",", ":")).encode()

    def anthropic(self, request_id: str | None = None) -> bytes:
        """The body in Anthropic's shape (see the module docstring)."""
        kind = self.type if self.type.startswith("accord_") else _ANTHROPIC_TYPES.get(self.status)
        if kind is None:
            kind = "api_error" if self.status >= 500 else "invalid_request_error"
        message = redact(self.message)
        if self.param and not message.startswith(self.param):
            message = f"{self.param}: {message}"
        body = {"type": "error", "error": {"type": kind, "message": message}, **self.extra}
        if request_id is not None:
            body["request_id"] = request_id
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


# the error type Anthropic's API gives each status
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
                    405: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                    502: "api_error", 503: "overloaded_error", 529: "overloaded_error"}  # fmt: skip


def unknown_model(model: str, names: list[str]) -> ApiError:
    """The 404 for a ``model`` that no configured route names, as OpenAI says it."""
    return ApiError(404, f"The model `{model}` does not exist on this accord serve (it serves: {', '.join(names)})",
                    param="model", code="model_not_found")  # fmt: skip


def no_retry(headers: dict[str, str] | None = None) -> dict[str, str]:
    return {**(headers or {}), "x-should-retry": "false"}


def from_run(error: AccordError, summary: dict[str, Any], retry_after: float | None) -> ApiError:
    """The answer for a run that ended in ``error`` (``summary``: the ``accord`` object)."""
    extra = {"accord": summary}
    if isinstance(error, InvalidOutput):
        return ApiError(422, str(error), type="accord_invalid_output", code="invalid_output", headers=no_retry(), extra=extra)
    if isinstance(error, NoConsensus):
        return ApiError(422, str(error), type="accord_no_consensus", code="no_consensus", headers=no_retry(), extra=extra)
    if isinstance(error, BudgetExceeded):
        return ApiError(504, str(error), type="accord_budget_exceeded", code="budget_exceeded", headers=no_retry(), extra=extra)
    if isinstance(error, BackendError):
        return upstream(error, retry_after, extra)
    return ApiError(500, f"accord failed: {error}", type="server_error", code="internal_error", extra=extra)


def upstream(error: BackendError, retry_after: float | None, extra: dict[str, Any] | None = None) -> ApiError:
    """An upstream failure: its 429 passed on (with ``retry-after``), its other 4xx passed on, the
    rest (unreachable, 5xx, a refused proxy key, an unusable answer) a 502."""
    status = error.status
    wait = retry_after if retry_after is not None else error.retry_after
    if status == 429:
        headers = {"retry-after": str(max(1, math.ceil(wait)))} if wait is not None else {}
        return ApiError(429, f"the upstream is rate limiting: {error}", type="rate_limit_error", code="rate_limit_exceeded",
                        headers=headers, extra=extra)  # fmt: skip
    if status in (401, 403):
        return ApiError(502, "the upstream refused the proxy's credentials (check OPENAI_API_KEY where accord serve runs)",
                        type="upstream_error", code="upstream_auth", extra=extra)  # fmt: skip
    if status is not None and 400 <= status < 500:
        return ApiError(status, f"the upstream refused the request: {error}", type="invalid_request_error", code="upstream_refused",
                        headers=no_retry(), extra=extra)  # fmt: skip
    code = "upstream_unreachable" if status is None else "upstream_failed"
    return ApiError(502, f"the upstream failed: {error}", type="upstream_error", code=code, extra=extra)


def refused(status: int, content: bytes, headers: Mapping[str, str]) -> ApiError:
    """The error answer of an upstream that refused a request passed through to it translated (to
    chat completions): its status, its message and its ``retry-after`` kept."""
    message = content.decode("utf-8", errors="replace")[:1000]
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        said = error.get("message") if isinstance(error, dict) else data.get("message")  # OpenAI's shape, or vLLM's
        message = str(said) if said else message
    kept = {k: v for k, v in headers.items() if k.lower() in ("retry-after", "retry-after-ms")}
    kind = "rate_limit_error" if status == 429 else "upstream_error" if status >= 500 else "invalid_request_error"
    return ApiError(status, f"the upstream refused the request: {message}", type=kind, code="upstream_refused", headers=kept)
