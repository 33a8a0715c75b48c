"""What a model call costs: ``accord.Prices({model: (input, output)})``, per million tokens.

Input read from a provider's prompt cache, or written to it, has its own rates where the table
gives them (``(input, output, cached_input, cache_write)`` or a mapping with those keys); where it
does not, cached tokens cost the input rate (what a price list without cache rates says).

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

    A price is ``(input, output)``, ``(input, output, cached_input)``, ``(input, output,
    cached_input, cache_write)`` or a mapping with those keys, in any currency, per ``per_tokens``
    tokens (a million by default: the unit providers publish); ``cached_input`` prices the prompt
    tokens read from the provider's cache (``Usage.cached_tokens``), ``cache_write`` those written
    to it (``Usage.cache_write_tokens``), both the input rate when not given. Anthropic's table,
    for example: ``{"claude-sonnet-4-5": (3, 15, 0.30, 3.75)}``. A call is priced
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
        rates = {str(model): _price(model, price) for model, price in table.items()}
        self.table: dict[str, tuple[float, float]] = {model: (r[0], r[1]) for model, r in rates.items()}
        self.cache_rates: dict[str, tuple[float, float]] = {model: (r[2], r[3]) for model, r in rates.items()}

    def of(self, *models: str | None) -> tuple[float, float] | None:
        """The (input, output) price of the first of ``models`` with an entry, else the default."""
        for model in models:
            if model is not None and model in self.table:
                return self.table[model]
        return self.table.get(DEFAULT)

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, *models: str | None,
             cached: int | None = None, written: int | None = None) -> float | None:
        """What a call with these token counts costs under the first priced model; None if unknown.

        ``cached`` and ``written``: of the ``prompt_tokens``, those read from and written to the
        provider's prompt cache, priced at the model's cache rates."""
        if prompt_tokens is None and completion_tokens is None:
            return None
        model = next((m for m in models if m is not None and m in self.table), DEFAULT if DEFAULT in self.table else None)
        if model is None:
            return None
        (inputs, outputs), (reads, writes) = self.table[model], self.cache_rates[model]
        read, wrote = max(cached or 0, 0), max(written or 0, 0)
        plain = max((prompt_tokens or 0) - read - wrote, 0)
        return (plain * inputs + read * reads + wrote * writes + (completion_tokens or 0) * outputs) / self.per_tokens

    def describe(self) -> dict[str, Any]:
        table = {k: [*v, *self.cache_rates[k]] if self.cache_rates[k] != (v[0], v[0]) else list(v) for k, v in self.table.items()}
        return {"per_tokens": self.per_tokens, "table": dict(sorted(table.items()))}

    def __repr__(self) -> str:
        return f"Prices({self.table!r}, per_tokens={self.per_tokens})"


_KEYS = ("input", "output", "cached_input", "cache_write")


def _price(model: Any, price: Any) -> tuple[float, float, float, float]:
    """(input, output, cached_input, cache_write); the cache rates default to the input rate."""
    if isinstance(price, Mapping):
        unknown = set(price) - set(_KEYS)
        if unknown:
            raise ConfigError(f"Prices[{model!r}]: unknown keys {sorted(unknown)} (use {', '.join(map(repr, _KEYS))})")
        base = price.get("input", 0.0)
        rates: Any = (base, price.get("output", 0.0), price.get("cached_input", base), price.get("cache_write", base))
    else:
        rates = price
    if not isinstance(rates, (tuple, list)) or not 2 <= len(rates) <= 4:
        raise ConfigError(f"Prices[{model!r}] must be (input, output), optionally with cached_input and cache_write, got {price!r}")
    for value in rates:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"Prices[{model!r}]: a price is a finite number >= 0, got {value!r}")
    full = [float(v) for v in rates]
    full += [full[0]] * (4 - len(full))
    return full[0], full[1], full[2], full[3]
