"""Cached generations for the benchmarks: one deployment of the embedded model, every call stored.

A greedy generation in one process is bit-identical when repeated, so the benchmarks store each
one by (deployment, request as sent, schema, settings, perturbation) in a JSON file and replay
it: arms or policies that send the same request share it, and a rerun costs little. The cache
is never shared across deployments (that would make them agree by construction).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import accord
from accord._types import Completion, Settings, Usage
from accord.backends._base import Backend

# -- the cache -------------------------------------------------------------------------------------


class Cache:
    """Generations and instructor answers by digest, in one JSON file (written atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, Any] = {}
        self.hits = self.misses = 0
        if path.is_file():
            try:
                self.entries = json.loads(path.read_text()).get("entries", {})
            except (OSError, ValueError):
                print(f"warning: unreadable cache {path}, starting afresh", file=sys.stderr)
        self._lock = threading.Lock()

    @staticmethod
    def digest(*parts: Any) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def get(self, key: str) -> Any:
        with self._lock:
            value = self.entries.get(key)
            self.hits += value is not None
            self.misses += value is None
            return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self.entries[key] = value

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            text = json.dumps({"version": 1, "entries": self.entries}, allow_nan=False)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".stability.", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, self.path)


def _pack(completion: Completion, seconds: float) -> dict[str, Any]:
    margins = None if completion.margins is None else [m if math.isfinite(m) else None for m in completion.margins]
    meta = json.loads(json.dumps(completion.meta, default=str, allow_nan=True).replace("Infinity", "null").replace("NaN", "null"))
    return {"text": completion.text, "finish_reason": completion.finish_reason, "margins": margins,
            "score": completion.score if completion.score is None or math.isfinite(completion.score) else None,
            "prompt_tokens": completion.usage.prompt_tokens, "completion_tokens": completion.usage.completion_tokens,
            "seconds": round(seconds, 4), "meta": meta}


def _unpack(entry: dict[str, Any]) -> Completion:
    margins = None if entry["margins"] is None else tuple(math.inf if m is None else m for m in entry["margins"])
    usage = Usage(entry["prompt_tokens"], entry["completion_tokens"], entry["seconds"], 1)
    return Completion(entry["text"], entry["finish_reason"], usage, margins, entry["score"], entry["meta"])


# -- one deployment condition, generations cached --------------------------------------------------


class Deployment(Backend):
    """The embedded model under one deployment condition; every generation goes through the cache.

    The model loads on the first cache miss. ``model_seconds`` adds up the measured generation
    time of every call (cached calls count the seconds they took when they first ran).
    """

    constrains = True
    gives_margins = True
    perturbable = True
    default_max_tokens = 256

    def __init__(self, name: str, options: dict[str, Any], cache: Cache) -> None:
        self.name, self.options, self.cache = name, options, cache
        self.fingerprint = f"SmolLM2-135M-Instruct [{name}]"
        self._model: Any = None
        self._lock = threading.Lock()  # one generation at a time: its seconds are its own
        self.model_seconds = 0.0
        self.calls = 0

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = accord.models.local(**self.options)
        return self._model

    @property
    def dtype(self) -> str:
        return str(self.options.get("dtype", "float32"))

    def noise_floor(self) -> float | None:
        floor = self._floor("noise_floor")
        return None if floor is None else float(floor)

    def noise_floors(self) -> dict[str, float]:
        return dict(self._floor("noise_floors") or {})

    def reference_floor(self) -> float | None:
        floor = self._floor("reference_floor")
        return None if floor is None else float(floor)

    def noise(self) -> accord.models.Noise:
        return accord.models.Noise.measured(self.dtype, self.noise_floors(), self.reference_floor())

    def _floor(self, name: str) -> Any:
        key = Cache.digest(name, self.name)
        floor = self.cache.get(key)
        if floor is None:
            floor = {"floor": getattr(self.model, name)()}
            self.cache.put(key, floor)
        return floor["floor"]

    def generate(self, request: accord.Request) -> Completion:
        perturbation = None
        if request.perturbation is not None:
            perturbation = request.perturbation.describe()
            if request.perturbation.reference != "float32":
                perturbation += f" around {request.perturbation.reference or 'the deployed dtype'}"
        key = Cache.digest("constrained", self.name, request.input, request.schema.json_schema, asdict(request.settings), perturbation)
        return self._cached(key, lambda: self.model.generate(request))

    def unconstrained(self, prompt: Any, settings: Settings) -> Completion:
        key = Cache.digest("raw", self.name, prompt, asdict(settings))
        return self._cached(key, lambda: self.model.unconstrained(prompt, settings))

    def _cached(self, key: str, make: Callable[[], Completion]) -> Completion:
        with self._lock:
            entry = self.cache.get(key)
            if entry is None:
                start = time.perf_counter()
                completion = make()
                entry = _pack(completion, time.perf_counter() - start)
                self.cache.put(key, entry)
            self.model_seconds += entry["seconds"]
            self.calls += 1
            return _unpack(entry)
