"""One local generate call under a perturbation (see ``accord.vote._perturb``).

``perturbed(backend, perturbation, inputs)`` yields the model and inputs to generate with, and
restores everything on exit:

    precision   a twin of the model in the other precision (float32 <-> bfloat16), made once
    attention   the other attention implementation (sdpa <-> eager) for this call
    threads     another intra-op thread count for this call
    batch       the prompt left-padded into a batch with long neighbour prompts (row 0 is ours)

With ``reference="float32"`` (the default) a deployment in another dtype runs its perturbed
ballots on the float32 reference: the model's files loaded again in float32 (a cast of the
deployed weights only when the files are unknown), made once and kept.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..._types import Prompt
from ...vote._perturb import Perturbation, compute_dtype

NEIGHBOUR = (
    "Write a detailed travel guide for a week in the mountains: where to stay, which trails to walk "
    "on each day, what to pack for rain and for sun, how to read a trail map, and which local dishes "
    "to try in the villages along the way. Include a short packing list at the end."
)
_TWINS_LOCK = threading.Lock()


class Local(Protocol):
    """What a perturbation reads of a local backend (a ``TransformersBackend``)."""

    model: Any
    base_config: Any  # the generation config accord keeps: token ids
    twins: dict[tuple[Any, bool], Any]  # (dtype, loaded from the files) -> the model in that dtype

    def encode(self, prompt: Prompt) -> dict[str, Any]: ...

    def load_copy(self, dtype: Any) -> Any: ...


@dataclass(frozen=True)
class Prepared:
    """What to call ``generate`` with: ``inputs[... , width:]`` of row 0 are the new tokens."""

    model: Any
    inputs: dict[str, Any]
    width: int


def twin(backend: Local, dtype: Any, source: bool = False) -> Any:
    """The backend's model in another dtype, made once and kept (``backend.twins``).

    ``source``: loaded again from the model's files in that dtype (what a deployment in that
    dtype runs) when the backend knows them; otherwise, and by default, a cast of the deployed
    weights.
    """
    with _TWINS_LOCK:
        key = (dtype, source)
        if key not in backend.twins:
            made = backend.load_copy(dtype) if source else None
            backend.twins[key] = (made if made is not None else copy.deepcopy(backend.model).to(dtype)).eval()
        return backend.twins[key]


def _torch_dtype(name: Any) -> Any:
    import torch

    return name if isinstance(name, torch.dtype) else getattr(torch, str(name))


def compute_model(backend: Local, perturbation: Perturbation) -> Any:
    """The model a perturbed ballot runs on (see the module docstring): the deployed one, or a
    twin in the dtype ``compute_dtype`` names, loaded from the files when it is the reference."""
    model = backend.model
    deployed = str(model.dtype).removeprefix("torch.")
    dtype = compute_dtype(deployed, perturbation)
    if perturbation.kind != "precision" and dtype == deployed:
        return model
    source = perturbation.value is None and dtype == perturbation.reference
    return twin(backend, _torch_dtype(dtype), source=source)


def with_neighbours(backend: Local, inputs: dict[str, Any], count: int = 1) -> dict[str, Any]:
    """The prompt as row 0 of a left-padded batch with ``count`` long neighbour prompts."""
    import torch

    neighbour = backend.encode(NEIGHBOUR)["input_ids"][0].to(inputs["input_ids"].device)
    rows = [inputs["input_ids"][0]] + [neighbour] * count
    width = max(len(r) for r in rows)
    pad = backend.base_config.pad_token_id
    pad = pad if pad is not None else 0
    ids = torch.full((len(rows), width), pad, dtype=rows[0].dtype, device=rows[0].device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=rows[0].device)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = row
        mask[i, width - len(row):] = 1
    return {"input_ids": ids, "attention_mask": mask}


@contextlib.contextmanager
def perturbed(backend: Local, perturbation: Perturbation | None, inputs: dict[str, Any]) -> Iterator[Prepared]:
    """The model and inputs one call generates with under ``perturbation`` (None: as deployed)."""
    import torch

    if perturbation is None:
        yield Prepared(backend.model, inputs, int(inputs["input_ids"].shape[1]))
        return
    model = compute_model(backend, perturbation)
    kind, value = perturbation.kind, perturbation.value
    if kind == "batch":
        inputs = with_neighbours(backend, inputs, int(value or 1))
    width = int(inputs["input_ids"].shape[1])
    if kind == "attention":
        current = model.config._attn_implementation
        model.set_attn_implementation(value or ("eager" if current != "eager" else "sdpa"))
        try:
            yield Prepared(model, inputs, width)
        finally:
            model.set_attn_implementation(current)
        return
    if kind == "threads":
        current = torch.get_num_threads()
        torch.set_num_threads(int(value or (current // 2 if current > 1 else 2)))
        try:
            yield Prepared(model, inputs, width)
        finally:
            torch.set_num_threads(current)
        return
    yield Prepared(model, inputs, width)
