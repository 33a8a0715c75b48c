"""What each request leaves behind: an OpenTelemetry server span around it (``accord.run`` and
its ``chat`` spans inside, when the run is traced), and one log line.

The span follows the HTTP semantic conventions (``http.request.method``, ``http.route``,
``url.path``, ``http.response.status_code``) and joins the caller's trace when the request
carries ``traceparent``. It is recorded where the process has a tracer provider: the one the
app was given, else the global one (``opentelemetry-instrument accord serve ...`` sets it);
without one, nothing is built (and the global one is looked for again every few seconds).

The log line (logger ``accord.serve``, INFO) says the method, path, status, time, mode, model,
calls, agreement, stable and why the vote stopped, with the same as ``accord_serve_*`` fields
for structured handlers. It never holds content or a key.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._errors import redact

log = logging.getLogger("accord.serve")
LOOK_AGAIN = 5.0  # seconds between looks for a tracer provider, while none is configured


@dataclass
class Line:
    """What the log line of one request will say; filled in as the request is handled."""

    method: str
    path: str
    request_id: str
    status: int = 0
    mode: str = "other"
    model: str | None = None
    calls: int | None = None
    agreement: float | None = None
    stable: bool | None = None
    stopped_because: str | None = None
    error: str | None = None

    def emit(self, seconds: float, level: int = logging.INFO) -> None:
        if not log.isEnabledFor(level):
            return
        parts = [f"{self.method} {self.path} {self.status} {seconds * 1000:.1f}ms mode={self.mode}"]
        if self.model is not None:
            parts.append(f"model={self.model}")
        if self.calls is not None:
            parts.append(f"calls={self.calls} agreement={self.agreement or 0.0:.2f} stable={str(self.stable).lower()} stopped={self.stopped_because!r}")
        if self.error is not None:
            parts.append(f"error={self.error}")
        parts.append(f"request_id={self.request_id}")
        fields = {f"accord_serve_{k}": v for k, v in vars(self).items()}
        fields["accord_serve_seconds"] = round(seconds, 6)
        log.log(level, redact(" ".join(parts)), extra=fields)


class _Redacting(logging.Filter):
    """Keeps the upstream key out of this logger's records, tracebacks included."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.args:
            record.msg, record.args = redact(record.getMessage()), None
        return True


log.addFilter(_Redacting())


class Tracing:
    """The server spans of one app (see the module docstring)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self.provider = tracer_provider
        self._tracer: Any = None
        self._trace: Any = None
        self._look_again = 0.0  # when to look for a configured tracer provider again

    def tracer(self) -> Any:
        if self._tracer is not None:
            return self._tracer
        now = time.monotonic()
        if now < self._look_again:
            return None
        self._look_again = now + LOOK_AGAIN
        try:
            from opentelemetry import trace
        except ImportError:
            self._look_again = float("inf")
            return None
        provider = self.provider or trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None  # nothing configured yet: looked at again a little later
        from .._version import __version__

        self._trace = trace
        self._tracer = provider.get_tracer("accord.serve", __version__)
        return self._tracer

    @contextlib.contextmanager
    def span(self, line: Line, route: str, headers: Any) -> Iterator[Any]:
        """The server span of a request, current while it is handled (None when untraced)."""
        tracer = self.tracer()
        if tracer is None:
            yield None
            return
        from opentelemetry import propagate

        parent = propagate.extract(dict(headers))
        attributes = {"http.request.method": line.method, "http.route": route, "url.path": line.path, "accord.request_id": line.request_id}
        with tracer.start_as_current_span(f"{line.method} {route}", context=parent, kind=self._trace.SpanKind.SERVER,
                                          attributes=attributes, record_exception=False, set_status_on_exception=False) as span:  # fmt: skip
            yield span
            span.set_attribute("http.response.status_code", line.status)
            if line.mode != "other":
                span.set_attribute("accord.mode", line.mode)
            if line.error is not None:
                span.set_attribute("error.type", line.error)
            if line.status >= 500:
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR))
