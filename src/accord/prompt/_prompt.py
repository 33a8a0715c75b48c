"""Stage 1, prompt: what the model is sent.

The user's prompt, plus (for backends that cannot constrain their output) a short rendering of the
schema, plus (on a retry) one feedback block. Feedback is kept as data on the Request and rendered
to text only here; the context never grows with attempts.
"""

from __future__ import annotations

import json
from typing import Any

from .._types import Feedback, Message, Prompt
from ..schema._schema import Schema
from ._signature import DEPTH

_MAX_FEEDBACK_ERRORS = 8
SKELETON_CHARS = 1_000  # about the most a skeleton writes


def render_feedback(feedback: Feedback, schema: Schema[Any] | None = None) -> str:
    """One short block naming the failing fields and why.

    An answer that repeated the schema gets told so, with the shape to fill in (field names and
    ``...`` where values go), so the retry does not see the prompt that made it echo.
    """
    if any(error.get("type") == "schema_echo" for error in feedback.errors):
        lines = ["Your previous answer repeated the schema instead of answering the question."]
        if schema is not None and schema.json_schema and schema.kind in {"object", "type", "json"}:
            lines.append(f"Answer with the values themselves, in this shape: {skeleton(schema.json_schema)}")
        lines.append("Replace each ... with the value from the question.")
        return "\n".join(lines)
    if feedback.kind == "loop":
        return _looped(feedback)
    if feedback.kind == "extract":
        head = "Your previous answer could not be read"
    elif feedback.kind == "truncated":
        head = "Your previous answer was cut off"
    else:
        head = "Your previous answer was invalid"
    lines = [f"{head}:"]
    for error in feedback.errors[:_MAX_FEEDBACK_ERRORS]:
        loc = ".".join(str(p) for p in error.get("loc", ())) or "answer"
        got = f" (got {json.dumps(error['input'], ensure_ascii=False)})" if "input" in error else ""
        shape = _shape(schema, error) if schema is not None else None
        lines.append(f"- {loc}: {error.get('msg', 'invalid')}{got}{f'; write it as {shape}' if shape else ''}")
    if len(feedback.errors) > _MAX_FEEDBACK_ERRORS:
        lines.append(f"- and {len(feedback.errors) - _MAX_FEEDBACK_ERRORS} more")
    lines.append("Answer again, correcting these errors.")
    return "\n".join(lines)


def _looped(feedback: Feedback) -> str:
    """A loop's block: what was repeated, in which field, and a short value asked for."""
    error = feedback.errors[0] if feedback.errors else {}
    field = ".".join(str(p) for p in error.get("loc", ()))
    if error.get("type") == "runaway":  # a list whose items kept coming (read/_runaway)
        return "\n".join([
            "Your previous answer kept adding items to a list:",
            f"- {field or 'answer'}: {error.get('msg', 'more items than the input has')}",
            f"Answer again; in {field or 'the list'}, list each item the input has once, and no others.",
        ])
    return "\n".join([
        "Your previous answer repeated itself:",
        f"- {field or 'answer'}: {error.get('msg', 'the same text over and over')}",
        f"Answer again; write {field} short, saying each thing once." if field else "Answer again, short, saying each thing once.",
    ])


_SHAPE_ERRORS = {"model_type", "model_attributes_type", "dict_type", "list_type", "type"}


def _shape(schema: Schema[Any], error: dict[str, Any]) -> str | None:
    """For an object or list written as something else, the shape it takes (``{"city": ...}``)."""
    if error.get("type") not in _SHAPE_ERRORS or not schema.json_schema:
        return None
    shape = skeleton(schema.json_schema, tuple(error.get("loc", ())))
    return shape if shape != "..." else None


def shows_schema(asked: bool, schema: Schema[Any], backend: Any) -> bool:
    """Whether the prompt carries the schema: as asked (``Prompting(schema_in_prompt=)``), but for a
    choice that a server's grammar takes wrapped, ``{"answer": ...}`` (``backend.wraps``): listed
    there, the choices pulled answers toward the first one listed, even where the prompt did not
    name them (benchmarks/told.py --tasks choices, docs/prompting.md). So the same prompt goes
    before the server's format probe as after, unless the probe finds the format refused: then
    the model has nothing else to read the choices from, and is shown them."""
    return asked and not (schema.kind == "choice" and backend.wraps(schema))


def build_input(prompt: Prompt, schema: Schema[Any], *, hint: bool, feedback: Feedback | None) -> Prompt:
    """The prompt as sent: the user's prompt, the schema hint if asked, the feedback if any."""
    extras = []
    if hint:
        extras.append(schema.render())
    if feedback is not None:
        extras.append(render_feedback(feedback, schema))
    if not extras:
        return prompt
    if isinstance(prompt, str):
        return "\n\n".join([prompt, *extras])
    messages: list[Message] = [dict(m) for m in prompt]
    if hint:
        # The schema belongs with the question: append it to the last user message.
        for message in reversed(messages):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                message["content"] = f"{message['content']}\n\n{extras.pop(0)}"
                break
    if extras:
        messages.append({"role": "user", "content": "\n\n".join(extras)})
    return messages


def skeleton(schema: dict[str, Any], at: tuple[Any, ...] = ()) -> str:
    """The value's shape on one line, ``...`` where each value goes: ``{"name": ..., "tags": [...]}``.

    ``at``: the path of a part of the value (an error's ``loc``): that part's shape. Not JSON on
    purpose: a model that copies it back gives no value. At most about ``SKELETON_CHARS``
    characters (the rest of a large shape is ``...``), ``DEPTH`` levels deep.
    """
    from ..read._plan import resolve

    node: Any = schema
    for step in at:
        node = resolve(node, schema)
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        if isinstance(step, str) and step in props:
            node = props[step]
        elif isinstance(step, int) and isinstance(node.get("items"), dict):
            node = node["items"]
        else:
            return "..."
    return _Skeleton(schema).shape(node, 0)


class _Skeleton:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.left = SKELETON_CHARS

    def shape(self, node: Any, depth: int) -> str:
        from ..read._plan import resolve

        node = resolve(node, self.root)
        self.left -= 3
        if not isinstance(node, dict) or depth > DEPTH or self.left <= 0:
            return "..."
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and node[key]:
                return self.shape(node[key][0], depth + 1)
        props = node.get("properties")
        if isinstance(props, dict) and props:
            parts = []
            for k, v in props.items():
                if self.left <= 0:
                    parts.append("...")
                    break
                label = json.dumps(k, ensure_ascii=False)
                self.left -= len(label) + 4
                parts.append(f"{label}: {self.shape(v, depth + 1)}")
            return "{" + ", ".join(parts) + "}"
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            self.left -= 7
            return f"[{self.shape(node['items'], depth + 1)}, ...]"
        return "..."
