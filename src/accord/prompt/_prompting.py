"""How the prompt is made: ``Stabilizer(..., prompting=accord.Prompting(system=..., examples=...))``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import _check
from .._errors import ConfigError
from ._examples import check_system


@dataclass(frozen=True)
class Prompting:
    """What a run puts around the user's prompt.

    ``system``: a system prompt. ``examples``: ``(input, output)`` pairs shown before the prompt
    as worked turns, each output validated against the schema when the Stabilizer is made
    (``_examples``). ``schema_in_prompt``: add a short rendering of the schema to the prompt (its
    fields, their descriptions, the choices of each), on every backend, whether it constrains its
    output or not (on by default): a model forced into keys it was never told answers worse
    (docs/prompting.md). The system prompt and the examples belong to the ledger key; a
    Prompting() with neither adds nothing to the prompt but the schema.
    """

    system: str | None = None
    examples: Iterable[tuple[str, Any]] = ()
    schema_in_prompt: bool = True

    def __post_init__(self) -> None:
        check_system(self.system)
        examples: Any = self.examples
        if isinstance(examples, (str, bytes)) or not isinstance(examples, Iterable):
            raise ConfigError("examples= takes a list of (input, output) pairs (Prompting(examples=...))")
        object.__setattr__(self, "examples", tuple(examples))  # frozen, and read twice at most
        _check.boolean("Prompting", "schema_in_prompt", self.schema_in_prompt)
