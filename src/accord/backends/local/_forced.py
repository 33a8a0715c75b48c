"""Teacher forcing: this model's logits along the tokens another deployment of it wrote.

A reference deployment (``models.openai(..., reference=models.local(dtype="float32"))``) learns
the serving deployment's noise floor from the two deployments' logits on the *same* tokens
(``accord.backends.openai._referee``): the serving deployment reports each generated token with
its ``top_logprobs`` alternatives, and one forward pass of the local model over the prompt and
those tokens gives the reference's logits for every token listed, at every step.

Tokens come over HTTP as text. They are mapped back to ids through this tokenizer (the same
files), each id by its own decoding; a text that several ids decode to is ambiguous and skipped as
an alternative, and the comparison stops at a chosen token that cannot be mapped.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

Steps = Sequence[tuple[str, Mapping[str, float]]]  # per step: the token, and {alternative: logprob}
_LOCK = threading.Lock()


class Forceable(Protocol):
    model: Any

    @property
    def tokenizer(self) -> Any: ...

    def encode(self, prompt: Any) -> dict[str, Any]: ...


def text_ids(tokenizer: Any, cache: dict[int, dict[str, int]]) -> dict[str, int]:
    """``{text: id}`` for every id whose decoding is its own (ambiguous texts left out), made once."""
    key = id(tokenizer)
    with _LOCK:
        if key not in cache:
            seen: dict[str, int] = {}
            ambiguous: set[str] = set()
            for index in range(len(tokenizer)):
                text = tokenizer.decode([index])
                if text in seen:
                    ambiguous.add(text)
                seen[text] = index
            cache[key] = {text: index for text, index in seen.items() if text not in ambiguous}
        return cache[key]


def forced_logits(backend: Forceable, prompt: Any, steps: Steps, ids: Mapping[str, int]) -> list[tuple[str, dict[str, float]]]:
    """Per step, as far as the chosen tokens map to ids: the chosen token and ``{text: logit}`` of
    it and each listed alternative, from one forward pass over the prompt and the chosen tokens."""
    import torch

    chosen: list[int] = []
    for token, _ in steps:
        if token not in ids:
            break
        chosen.append(ids[token])
    if not chosen:
        return []
    inputs = backend.encode(prompt)["input_ids"]
    width = int(inputs.shape[1])
    forced = torch.cat([inputs, torch.tensor([chosen], dtype=inputs.dtype, device=inputs.device)], dim=1)
    with torch.inference_mode():
        logits = backend.model(input_ids=forced).logits[0, width - 1: width - 1 + len(chosen)].float()
    found = []
    for (token, alternatives), row in zip(steps, logits, strict=False):
        listed = {text: float(row[ids[text]]) for text in {token, *alternatives} if text in ids}
        found.append((token, listed))
    return found
