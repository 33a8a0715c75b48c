"""The probe: one question asked of a server, the first time it is seen with a schema that
``response_format`` can carry: does it honour ``response_format`` (strict JSON Schema)?

:func:`probe_params` builds the question, :func:`probe_verdict` reads the answer; the exchange
(:mod:`._exchange`) asks it once per (server, model) and remembers the verdict in :mod:`._caps`.

:func:`free_whitespace` reads how the server writes strict JSON, from its answers (the probe's
and every answer sent with ``response_format``): whether its grammar lets the model put
whitespace between JSON tokens (vLLM's default) or writes compact JSON (vLLM with
``disable_any_whitespace``). A reference deployment decodes with the same freedom
(:mod:`._referee`): another grammar is another computation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
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


_PROBE_TOP = 5  # alternatives per token: a whitespace token the grammar allows shows the format even in a compact answer


def probe_params(model: str, known: Known) -> dict[str, Any] | None:
    """The probe's chat completion for what the server is known to accept (None: it rejects
    ``response_format``, nothing to ask)."""
    if known.response_format == "rejected":
        return None
    params: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "response_format": _PROBE_FORMAT}
    params["max_tokens" if known.accepts("max_tokens") else "max_completion_tokens"] = _PROBE_TOKENS
    if known.accepts("temperature"):
        params["temperature"] = 0.0
    if known.logprobs not in ("rejected", "ignored"):
        params.update(logprobs=True, top_logprobs=_PROBE_TOP)
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


def free_whitespace(text: str, steps: Sequence[tuple[str, Mapping[str, float]]] = ()) -> bool:
    """Whether one strict JSON answer shows a grammar that allows whitespace between JSON tokens.

    Yes when the text has whitespace outside strings, or when a token made of whitespace only is
    listed as an allowed alternative (``steps``: per generated token, the token and its
    alternatives the grammar allowed, as :func:`._calibrate.steps_of` reads them) at a point
    between two JSON tokens. Compact JSON never has either, so one such answer settles it. No
    is not proof: a model may choose compact JSON where whitespace is allowed; the caller keeps
    "compact" only until an answer says otherwise (:meth:`._caps.Capabilities.saw_json`).

    One space right after a comma does not count: xgrammar 0.2.8 (vLLM 0.32's) writes ``", "``
    between the items of an untyped array or object even in compact mode.
    """
    between = _between(text)
    if any(ch.isspace() and between[i] and not (ch == " " and text[i - 1] == ",") for i, ch in enumerate(text)):
        return True
    offset = 0
    for token, alternatives in steps:
        if offset < len(between) and between[offset]:
            comma = text[offset - 1:offset] == ","
            if any(alt and not alt.strip() and not (comma and alt == " ") for alt in alternatives):
                return True
        offset += len(token)
    return False


def _between(text: str) -> list[bool]:
    """Per offset of a JSON text (and one past its end): whether it is outside every string and
    inside the root value, where a free grammar allows whitespace and a compact one does not."""
    found = []
    inside = escaped = False
    depth = 0
    for ch in text:
        found.append(not inside and depth > 0)
        if inside:
            escaped, inside = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            inside = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    found.append(not inside and depth > 0)
    return found
