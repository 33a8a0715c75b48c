"""A system prompt and worked examples before the user's prompt: ``Stabilizer(prompting=accord.Prompting(system=, examples=))``.

Each example is ``(input, output)``: the output is validated against the schema when the
Stabilizer is made (a bad one is a :class:`~accord.ConfigError` there, never a surprise at run
time) and rendered once, as the model should write it: JSON for objects and lists, the bare text
for a choice, a scalar or a string. A run then asks with chat messages::

    system     the system prompt
    user       example input 1
    assistant  example output 1
    ...
    user       the prompt (a message list: its own messages, in order)

so a string prompt becomes a message list, for every backend: chat templates and servers see
roles, and a function model receives the list. Both belong to the ledger key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .._errors import ConfigError
from .._types import Message, Prompt
from ..schema._schema import Schema, ValidationFailure

Example = tuple[str, str]  # (input, output as the model should write it)


def render_examples(schema: Schema[Any], examples: Iterable[Any]) -> tuple[Example, ...]:
    """The examples (a list, as :class:`~accord.Prompting` checked), each output validated
    against ``schema`` and rendered as text."""
    rendered = []
    for index, example in enumerate(examples):
        if not isinstance(example, (tuple, list)) or len(example) != 2:
            raise ConfigError(f"examples[{index}] must be an (input, output) pair, got {example!r}")
        given, output = example
        if not isinstance(given, str) or not given:
            raise ConfigError(f"examples[{index}]: the input must be a non-empty string, got {given!r}")
        try:
            value = schema.validate(output)
        except ValidationFailure as failure:
            raise ConfigError(f"examples[{index}]: the output does not match the schema {schema.name}: {failure}") from None
        data = schema.dump(value)
        rendered.append((given, data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)))
    return tuple(rendered)


def check_system(system: Any) -> str | None:
    if system is not None and (not isinstance(system, str) or not system.strip()):
        raise ConfigError(f"system= must be a non-empty string or None, got {system!r}")
    return system


def with_preamble(prompt: Prompt, system: str | None, examples: tuple[Example, ...]) -> Prompt:
    """``prompt`` after the system message and the examples (unchanged when there are none)."""
    if system is None and not examples:
        return prompt
    messages: list[Message] = [{"role": "system", "content": system}] if system is not None else []
    for given, output in examples:
        messages += [{"role": "user", "content": given}, {"role": "assistant", "content": output}]
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    else:
        messages += [dict(m) for m in prompt]
    return messages
