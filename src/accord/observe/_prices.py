"""What a model call costs: ``accord.Prices({model: (input, output)})``, per million tokens.

The run loop prices every call that reports its tokens (``Usage.cost``); the Result's usage sums
the ballots, their retries and the calls a backend makes on their behalf (the OpenAI backend's
``response_format`` probe is counted in the ballot that made it), and ``Budget(max_cost=...)``
ends a run once the sum reaches it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .._errors import ConfigError

DEFAULT = "*"


class Prices:
    """Prices per model: ``Prices({"gpt-4o-mini": (0.15, 0.60), "*": (0, 0)})``.

    A price is ``(input, output)`` or ``{"input": ..., "output": ...}``, in any currency, per
    ``per_tokens`` tokens (a million by default: the unit providers publish). A call is priced
    by the model it asked for, else the model that answered (``Completion.model``), else
    the ``"*"`` entry; a model with no entry, or a call that reports no tokens, costs None
    (unknown), and a Result's cost sums what is known.
    """

    def __init__(self, table: Mapping[str, Any], *, per_tokens: int = 1_000_000) -> None:
        if not isinstance(table, Mapping):
            raise ConfigError(f"Prices takes a mapping {{model: (input, output)}}, got {type(table).__name__}")
        if isinstance(per_tokens, bool) or not isinstance(per_tokens, int) or per_tokens < 1:
            raise ConfigError(f"Prices(per_tokens=...) must be a positive int, got {per_tokens!r}")
        self.per_tokens = per_tokens
        self.table: dict[str, tuple[float, float]] = {str(model): _price(model, price) for model, price in table.items()}

    def of(self, *models: str | None) -> tuple[float, float] | None:
        """The (input, output) price of the first of ``models`` with an entry, else the default."""
        for model in models:
            if model is not None and model in self.table:
                return self.table[model]
        return self.table.get(DEFAULT)

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, *models: str | None) -> float | None:
        """What a call with these token counts costs under the first priced model; None if unknown."""
        if prompt_tokens is None and completion_tokens is None:
            return None
        price = self.of(*models)
        if price is None:
            return None
        return ((prompt_tokens or 0) * price[0] + (completion_tokens or 0) * price[1]) / self.per_tokens

    def describe(self) -> dict[str, Any]:
        return {"per_tokens": self.per_tokens, "table": {k: list(v) for k, v in sorted(self.table.items())}}

    def __repr__(self) -> str:
        return f"Prices({self.table!r}, per_tokens={self.per_tokens})"


def _price(model: Any, price: Any) -> tuple[float, float]:
    if isinstance(price, Mapping):
        unknown = set(price) - {"input", "output"}
        if unknown:
            raise ConfigError(f"Prices[{model!r}]: unknown keys {sorted(unknown)} (use 'input' and 'output')")
        pair: Any = (price.get("input", 0.0), price.get("output", 0.0))
    else:
        pair = price
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise ConfigError(f"Prices[{model!r}] must be a pair (input, output), got {price!r}")
    for value in pair:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"Prices[{model!r}]: a price is a finite number >= 0, got {value!r}")
    return float(pair[0]), float(pair[1])
