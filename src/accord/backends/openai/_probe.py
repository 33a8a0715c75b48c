"""The probe: one question asked of a server, the first time it is seen with a schema that
``response_format`` can carry: does it honour ``response_format`` (strict JSON Schema)?

:func:`probe_params` builds the question, :func:`probe_verdict` reads the answer; the exchange
(:mod:`._exchange`) asks it once per (server, model) and remembers the verdict in :mod:`._caps`.
"""

from __future__ import annotations

import re
from typing import Any

from ._caps import Known

_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"probe": {"type": "integer"}},
    "required": ["probe"],
    "additionalProperties": False,
}
_PROBE_FORMAT = {"type": "json_schema", "json_schema": {"name": "accord_probe", "schema": _PROBE_SCHEMA, "strict": True}}
_PROBE_TOKENS = 48  # a constrained model may write whitespace between the tokens (vLLM's default grammar allows it)
_PROBE_PREFIX = '{"probe":'
_PROBE_ANSWER = re.compile(r'\{"probe":-?\d+\}')


def probe_params(model: str, known: Known) -> dict[str, Any] | None:
    """The probe's chat completion for what the server is known to accept (None: it rejects
    ``response_format``, nothing to ask)."""
    if known.response_format == "rejected":
        return None
    params: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "response_format": _PROBE_FORMAT}
    params["max_tokens" if known.accepts("max_tokens") else "max_completion_tokens"] = _PROBE_TOKENS
    if known.accepts("temperature"):
        params["temperature"] = 0.0
    return params


def probe_verdict(text: str, finish_reason: str | None) -> str:
    """"honoured" when the probe's answer is ``{"probe": <integer>}`` (whitespace aside), or was
    cut off inside that shape; else "ignored" (a server that ignores the format says hello).

    A model constrained by a grammar that allows whitespace between tokens (vLLM's default) may
    spend the whole budget on it: ``{\n    "probe"\n\n:\n\n-1\n\n`` at 16 tokens is honoured.
    """
    compact = "".join(text.split())  # no whitespace inside the probe's only key or its integer
    if _PROBE_ANSWER.fullmatch(compact):
        return "honoured"
    cut_inside = _PROBE_PREFIX.startswith(compact) or re.fullmatch(r'\{"probe":-?\d*', compact) is not None
    return "honoured" if finish_reason == "length" and compact.startswith("{") and cut_inside else "ignored"
