"""OpenTelemetry spans of a run, with the optional ``otel`` extra (``opentelemetry-api``).

    accord.run                    one per run, ledger replays included; a child of the span that is
    │                             current where ``run``/``arun``/``map``/``stream`` was called
    ├── chat {model}              one per model call (kind CLIENT), in the GenAI semantic conventions
    ├── chat {model}              (``gen_ai.*``), plus accord's own ``accord.ballot.*``; current
    └── ...                       while the backend works, so an HTTP client's spans nest under it

The run span starts with ``accord.schema`` and ``accord.policy`` (one compact string, see
:func:`describe_policy`) and ends with the outcome, why it stopped, the agreement, the calls, the
ledger hit and the usage; a call span carries the GenAI attributes accord knows and its own
(``accord.ballot.slot``, ``.attempt`` on a retry only, ``.status``, ``.perturbation``,
``.min_margin``, ``.coercions``...). The SDK checks and copies every attribute one by one (a list
costs most): nothing a child span already says, nothing the span itself says (its duration), a
list only where the conventions say one (``gen_ai.response.finish_reasons``).

Retries are ``accord.retry`` events on the run span (slot, attempt, reason, the wait before it).
A failed call sets its span's status to ERROR with an ``exception`` event; a failed run sets the
run span's, with the error's type.

No cost when OpenTelemetry is not installed, or installed with no tracer provider configured
(the API's default proxy): the run creates nothing, and the check is one lookup per run. A run
span the sampler drops makes no call span and builds no attribute (``run/_watch``).
Prompts, outputs and values may hold personal data: they are recorded only with
``Telemetry(content=True)`` (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``accord.value``).
"""

from __future__ import annotations

import functools
import json
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._version import __version__

if TYPE_CHECKING:
    from .._result import Ballot, Result
    from .._types import Request

Attributes = dict[str, Any]


@dataclass(frozen=True)
class Telemetry:
    """How runs are traced. ``tracer_provider``: where the spans go (default: the global one the
    application configured; none configured, no span). ``content``: also record prompts, outputs
    and values (off by default: they may hold personal data)."""

    tracer_provider: Any = None
    content: bool = False


_tracers: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, tracer)
_lock = threading.Lock()


# What a traced call uses each time, bound once by ``api()`` when it finds the API.
attach: Any = None  # opentelemetry.context.attach
detach: Any = None  # opentelemetry.context.detach
in_context: Any = None  # opentelemetry.trace.set_span_in_context
CLIENT: Any = None  # opentelemetry.trace.SpanKind.CLIENT


@functools.cache
def api() -> Any:
    """``opentelemetry.trace``, or None when the API is not installed (looked up once)."""
    global attach, detach, in_context, CLIENT  # bound once, read on every traced call
    try:
        from opentelemetry import context, trace
    except ImportError:
        return None
    attach, detach, in_context, CLIENT = context.attach, context.detach, trace.set_span_in_context, trace.SpanKind.CLIENT
    return trace


def tracer(telemetry: Telemetry | None) -> Any:
    """The tracer a run uses now, or None when no span would be recorded anywhere."""
    trace = api()
    if trace is None:
        return None
    provider = telemetry.tracer_provider if telemetry is not None and telemetry.tracer_provider is not None else None
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            return None  # the application configured no provider: nothing would be recorded
    cached = _tracers.get(id(provider))
    if cached is not None and cached[0] is provider:
        return cached[1]
    with _lock:
        made = provider.get_tracer("accord", __version__)
        _tracers[id(provider)] = (provider, made)
    return made


# -- attributes -----------------------------------------------------------------------------------


def run_start(schema: str, policy: Any, prompt: Any, content: bool) -> Attributes:
    """What the run span starts with (the sampler sees it): the schema and the policy."""
    attrs: Attributes = {"accord.schema": schema, "accord.policy": describe_policy(policy)}
    if content:
        attrs["accord.prompt"] = _json(prompt)
    return attrs


def describe_policy(policy: Any) -> str:
    """The run's policy in one compact string: ``k=5 quorum=3 early_stop gate retry=3`` (the
    words only when on: ``early_stop``, ``gate``, ``fieldwise``, ``plurality``)."""
    vote = policy.vote
    words = [f"k={vote.k} quorum={vote.needed}"]
    if vote.stop_rule is not None:
        words.append("early_stop")
    if vote.gate is not None:
        words.append("gate")
    if vote.fieldwise:
        words.append("fieldwise")
    if policy.plurality:
        words.append("plurality")
    words.append(f"retry={policy.retry.attempts}")
    return " ".join(words)


def run_end(result: Result[Any], content: bool) -> Attributes:
    usage = result.usage
    outcome = "failed" if result.error is not None else "stable" if result.stable else "unstable"
    attrs: Attributes = {
        "accord.outcome": outcome,
        "accord.stopped_because": result.stopped_because.value,
        "accord.agreement": result.agreement,
        "accord.calls": result.calls,
        "accord.ledger.hit": result.replayed,
        "accord.usage.input_tokens": usage.prompt_tokens,
        "accord.usage.output_tokens": usage.completion_tokens,
        "accord.usage.cost": usage.cost,
    }
    if result.error is not None:
        attrs["error.type"] = type(result.error).__name__
    if content and result.data is not None:
        attrs["accord.value"] = _json(result.data)
    return _kept(attrs)


def call_static(model: Attributes, shape: str) -> Attributes:
    """What every call of a run shares: the operation, the backend's ``telemetry()``, the output type."""
    return {"gen_ai.operation.name": "chat", **model, "gen_ai.output.type": "json" if shape == "json" else "text"}


def call_start(request: Request, static: Attributes, *, max_tokens: int, streamed: bool, content: bool) -> Attributes:
    """The GenAI request attributes of one model call (``static``: :func:`call_static`)."""
    settings = request.settings
    attrs = dict(static)
    attrs["gen_ai.request.max_tokens"] = settings.max_tokens or max_tokens
    attrs["gen_ai.request.temperature"] = settings.temperature
    if settings.seed is not None:
        attrs["gen_ai.request.seed"] = settings.seed
    if settings.top_p is not None:
        attrs["gen_ai.request.top_p"] = settings.top_p
    if settings.top_k is not None:
        attrs["gen_ai.request.top_k"] = settings.top_k
    if settings.stop:
        attrs["gen_ai.request.stop_sequences"] = list(settings.stop)
    if streamed:
        attrs["gen_ai.request.stream"] = True
    attrs["accord.ballot.slot"] = request.ballot
    if request.attempt > 1:  # a retry of the slot (absent: its first call)
        attrs["accord.ballot.attempt"] = request.attempt
    if request.perturbation is not None:
        attrs["accord.ballot.perturbation"] = _describe(request.perturbation)
    if request.feedback is not None:
        attrs["accord.ballot.feedback"] = request.feedback.kind
    if content:
        attrs["gen_ai.input.messages"] = _json([_message(m) for m in request.messages])
    return attrs


def call_end(ballot: Ballot, content: bool) -> Attributes:
    """What came back: the GenAI response attributes and accord's reading of the ballot."""
    attrs: Attributes = {"accord.ballot.status": ballot.status}
    if ballot.finish_reason:
        attrs["gen_ai.response.finish_reasons"] = [ballot.finish_reason]
    if ballot.model is not None:
        attrs["gen_ai.response.model"] = ballot.model
    attrs.update(_spent(ballot))
    if ballot.coercions:  # what reading the text took: how many repairs, and of which kinds
        attrs["accord.ballot.coercions"] = len(ballot.coercions)
        attrs["accord.ballot.coercion_kinds"] = ", ".join(sorted({str(c.get("fix", "")) for c in ballot.coercions}))
    error = ballot.error
    if error is not None and ballot.status == "invalid":
        attrs["accord.ballot.invalid"] = str(error.get("stage", "validate"))
        attrs["accord.ballot.error_types"] = ", ".join(sorted({str(e.get("type", "")) for e in error.get("errors", ())}))
    elif error is not None and ballot.status == "error":
        attrs["error.type"] = str(error.get("type", "BackendError"))
    if content:
        attrs.update(_content(ballot))
    return attrs


def _spent(ballot: Ballot) -> Attributes:
    """The tokens and cost of a call, and the margins its decoding had, where known."""
    usage = ballot.usage
    attrs: Attributes = {}
    if usage.prompt_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = usage.prompt_tokens
    if usage.completion_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = usage.completion_tokens
    if usage.cost is not None:
        attrs["accord.usage.cost"] = usage.cost
    if ballot.min_margin is not None and math.isfinite(ballot.min_margin):
        attrs["accord.ballot.min_margin"] = ballot.min_margin
    if ballot.fragile_steps is not None:
        attrs["accord.ballot.fragile_steps"] = ballot.fragile_steps
    return attrs


def _content(ballot: Ballot) -> Attributes:
    """The text, key and error message of a call (only when content is recorded)."""
    attrs: Attributes = {}
    if ballot.text is not None:
        output = {"role": "assistant", "parts": [{"type": "text", "content": ballot.text}], "finish_reason": ballot.finish_reason}
        attrs["gen_ai.output.messages"] = _json([output])
    if ballot.key is not None:
        attrs["accord.ballot.key"] = ballot.key
    if ballot.error is not None and ballot.status == "invalid":
        attrs["accord.ballot.error"] = str(ballot.error.get("message", ""))
    return attrs


def retry_event(event: Any) -> Attributes:
    return {"accord.slot": event.slot, "accord.attempt": event.attempt, "accord.reason": event.reason, "accord.wait": event.wait}


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message in the GenAI conventions' shape: a role and its parts."""
    content = message.get("content")
    parts = [{"type": "text", "content": content}] if isinstance(content, str) else [{"type": "text", "content": _json(content)}]
    return {"role": str(message.get("role", "user")), "parts": parts}


def _describe(value: Any) -> str | None:
    if value is None:
        return None
    describe = getattr(value, "describe", None)  # a Perturbation (or a user's perturbation object)
    return str(describe() if callable(describe) else value)


def _json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=repr)


def _kept(attrs: Attributes) -> Attributes:
    """Attributes without the unknown (OpenTelemetry takes no None)."""
    return {k: v for k, v in attrs.items() if v is not None}
