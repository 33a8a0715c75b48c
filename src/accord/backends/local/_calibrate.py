"""Noise floors: how far each perturbation moves the logits a local model decides by.

For a few calibration prompts, the model's greedy continuation is scored token by token (teacher
forcing) unperturbed and under each perturbation. At each position the change that matters for
an argmax flip is the change of the gap between the leader and a close competitor:

    delta(t) = max over v in the top 10 at t of |(l_a - l_v) - (l'_a - l'_v)|,  a = argmax l

The noise floor of a perturbation (for the deployment's dtype) is the largest delta seen:
precision against the float32 reference (float32 deployments: against bfloat16), the other kinds
in the deployment's own dtype. A
decoding step whose margin is below the floor can flip under that noise: it is *fragile*.

    accord calibrate                      # measures the embedded model, writes the user's floors
    accord calibrate --out src/accord/data/noise_floors.json   # regenerates the shipped floors
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ...vote._perturb import KINDS, Perturbation
from ._perturbed import Local, perturbed

log = logging.getLogger("accord")

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "noise_floors.json"
STEPS = 24
TOP = 10
PROMPTS = (
    "Classify the sentiment of this text as positive, negative or neutral.\nText: The service was slow but the food was good.",
    "Answer yes or no. Is the Atlantic Ocean larger than the Indian Ocean?",
    "Answer with a number. How many minutes are in two hours?",
    "Extract the person's name, age and home city as JSON.\nText: Lena Berg is 44 and lives in Oslo, Norway.",
    "The workshop is on 9 October 2023. On what date is the workshop? Answer in ISO 8601.",
    "Give one word that describes the sea.",
    "What is the capital of Australia?",
    "Reply with JSON: {\"color\": ...} naming the color of the sky on a clear day.",
)


class Calibrated(Local, Protocol):
    """What calibration reads of a local backend: a perturbable model and its identity."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def dtype(self) -> str: ...


def measure(backend: Local, kinds: Sequence[str] = KINDS, prompts: Sequence[str] = PROMPTS, steps: int = STEPS) -> dict[str, float]:
    """``{perturbation kind: floor}`` for this backend's model and dtype (largest delta seen)."""
    import torch

    floors = dict.fromkeys(kinds, 0.0)
    model = backend.model
    with torch.inference_mode():
        for prompt in prompts:
            inputs = backend.encode(prompt)
            start = int(inputs["input_ids"].shape[1])
            config = copy_config(backend, steps)
            sequence = model.generate(**inputs, generation_config=config)
            full = {"input_ids": sequence, "attention_mask": torch.ones_like(sequence)}
            end = int(sequence.shape[1])
            if end <= start:
                continue
            reference = model(**full).logits[0, start - 1 : end - 1].float()
            for kind in kinds:
                # precision: against the float32 reference a perturbed ballot runs on; the other
                # kinds in the deployment's own dtype (the noise a busy deployment itself sees).
                around = "float32" if kind == "precision" else None
                with perturbed(backend, Perturbation(kind, reference=around), full) as prepared:
                    logits = prepared.model(**prepared.inputs).logits[0].float()
                    shift = prepared.width - end  # left padding added for batch neighbours
                    moved = logits[shift + start - 1 : shift + end - 1]
                floors[kind] = max(floors[kind], gap_change(reference, moved))
    return floors


def gap_change(reference: Any, moved: Any) -> float:
    """max over positions and close competitors of the change in the gap to the leader."""
    import torch

    top = torch.topk(reference, min(TOP, reference.shape[-1]), dim=-1).indices
    leader = top[:, :1]
    ref_gap = reference.gather(1, leader) - reference.gather(1, top)
    new_gap = moved.gather(1, leader) - moved.gather(1, top)
    return float((ref_gap - new_gap).abs().max()) if ref_gap.numel() else 0.0


def copy_config(backend: Local, steps: int) -> Any:
    """The backend's generation config, greedy, for ``steps`` new tokens."""
    config = copy.deepcopy(backend.base_config)
    config.max_new_tokens = steps
    config.do_sample = False
    return config


def calibrated_file() -> Path:
    """Where ``accord calibrate`` writes by default: ``noise_floors.json`` in the user data dir
    (``$ACCORD_DATA_DIR`` or ``platformdirs.user_data_dir("accord")``), never inside the package."""
    import platformdirs

    return Path(os.environ.get("ACCORD_DATA_DIR") or platformdirs.user_data_dir("accord")) / "noise_floors.json"


def shipped(fingerprint: str, dtype: str) -> dict[str, float] | None:
    """The floors for this model fingerprint and dtype that ``accord calibrate`` wrote for this
    user (:func:`calibrated_file`), else those shipped with accord; None when neither has them."""
    for table_file in (calibrated_file(), SHIPPED):
        try:
            table = json.loads(table_file.read_text())
            entry = table.get("models", {}).get(fingerprint, {}).get(dtype)
        except (OSError, ValueError, AttributeError):
            continue
        if entry:
            return {k: float(v) for k, v in entry["floors"].items()}
    return None


def calibrate(backends: Sequence[Calibrated], out: Path | None = None) -> dict[str, Any]:
    """Measure every backend's floors and write them to ``out`` (default :func:`calibrated_file`),
    merged by fingerprint and dtype."""
    out = out if out is not None else calibrated_file()
    table: dict[str, Any]
    try:
        table = json.loads(out.read_text())
    except (OSError, ValueError):
        table = {}
    table.setdefault("models", {})
    table["how"] = "accord calibrate: " + __doc__.split("\n\n")[1].replace("\n", " ")
    for backend in backends:
        start = time.perf_counter()
        floors = measure(backend)
        table["models"].setdefault(backend.fingerprint, {})[backend.dtype] = {
            "floors": {k: round(v, 6) for k, v in floors.items()},
            "prompts": len(PROMPTS),
            "steps": STEPS,
            "seconds": round(time.perf_counter() - start, 1),
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")
    return table


FIRST_USE_PROMPTS = 3


def known_floors(fingerprint: str, dtype: str) -> dict[str, float] | None:
    """The floors shipped, else cached from an earlier measure; None when neither (no measuring)."""
    found = shipped(fingerprint, dtype)
    if found is not None:
        return found
    try:
        return {k: float(v) for k, v in json.loads(_cache_file(fingerprint, dtype).read_text())["floors"].items()}
    except (OSError, ValueError, KeyError):
        return None


def noise_floors(backend: Calibrated) -> dict[str, float]:
    """The floors for this backend: shipped, else cached from an earlier measure, else measured now."""
    fingerprint, dtype = backend.fingerprint, backend.dtype
    found = known_floors(fingerprint, dtype)
    if found is not None:
        return found
    cache = _cache_file(fingerprint, dtype)
    start = time.perf_counter()
    floors = measure(backend, prompts=PROMPTS[:FIRST_USE_PROMPTS])
    log.info("accord: measured the noise floors of %s (%s) in %.1f s: %s", fingerprint, dtype, time.perf_counter() - start, floors)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "dtype": dtype, "floors": floors}))
        os.replace(tmp, cache)
    except OSError as exc:
        log.warning("accord: cannot cache the noise floors (%s)", exc)
    return floors


def _cache_file(fingerprint: str, dtype: str) -> Path:
    import platformdirs

    root = Path(os.environ.get("ACCORD_CACHE_DIR") or platformdirs.user_cache_dir("accord"))
    name = hashlib.sha256(f"{fingerprint}|{dtype}".encode()).hexdigest()[:24]
    return root / "noise_floors" / f"{name}.json"
