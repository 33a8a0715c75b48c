"""The determinism toolkit: what can be pinned, pinned, and a report of what could not.

    accord.determinism.seed_everything(1234)      # random, numpy, torch (and CUDA when present)
    with accord.determinism.strict() as report:   # deterministic algorithms while inside
        ...
    report.unavailable                            # what this platform could not set, and why

None of this makes a model bit-exact across hardware, drivers, library versions or the batch
composition of a shared server; see docs/determinism.md. accord's answer to that is the vote.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["StrictReport", "environment", "seed_everything", "strict"]


def seed_everything(seed: int) -> dict[str, bool]:
    """Seed Python's ``random``, numpy and torch (CPU and CUDA). Returns what was seeded."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        from ._errors import ConfigError

        raise ConfigError(f"seed must be an int, got {seed!r}")
    done = {"random": True, "numpy": False, "torch": False, "cuda": False}
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # for subprocesses; this process's hashing is fixed
    if importlib.util.find_spec("numpy") is not None:
        import numpy

        numpy.random.seed(seed % 2**32)
        done["numpy"] = True
    if _torch_available():
        import torch

        torch.manual_seed(seed)
        done["torch"] = True
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
            done["cuda"] = True
    return done


@dataclass
class StrictReport:
    """What :func:`strict` set, and what it could not set on this platform (with the reason)."""

    applied: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def strict(warn_only: bool = False) -> Iterator[StrictReport]:
    """Deterministic algorithms while inside; everything is restored on exit.

    Sets ``torch.use_deterministic_algorithms(True)``, cuDNN deterministic (and benchmark off),
    and ``CUBLAS_WORKSPACE_CONFIG=:4096:8``. The cuBLAS variable only works when set before CUDA
    starts in the process: if CUDA is already initialized, the report says so.
    """
    report = StrictReport()
    saved_env = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    torch = None
    if _torch_available():
        import torch as _torch

        torch = _torch
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized() and saved_env is None:
        report.unavailable["CUBLAS_WORKSPACE_CONFIG"] = "CUDA was already initialized; set it before CUDA starts"
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        report.applied.append("CUBLAS_WORKSPACE_CONFIG=:4096:8")
    saved: dict[str, Any] = {}
    if torch is None:
        report.unavailable["torch"] = "torch is not installed"
    else:
        saved["algorithms"] = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        torch.use_deterministic_algorithms(True, warn_only=warn_only)
        report.applied.append("torch.use_deterministic_algorithms(True)")
        cudnn = torch.backends.cudnn
        saved["cudnn"] = (cudnn.deterministic, cudnn.benchmark)
        cudnn.deterministic, cudnn.benchmark = True, False
        report.applied.append("cudnn.deterministic=True, cudnn.benchmark=False")
        if not torch.cuda.is_available():
            report.unavailable["cuda"] = "no CUDA device: the CUDA settings have nothing to act on"
    try:
        yield report
    finally:
        if torch is not None:
            torch.use_deterministic_algorithms(saved["algorithms"][0], warn_only=saved["algorithms"][1])
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved["cudnn"]
        if saved_env is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved_env


_VERSIONS: dict[str, str | None] = {}


def environment() -> dict[str, Any]:
    """Versions of accord and the libraries that shape numerics (read without importing them)."""
    if not _VERSIONS:
        from importlib.metadata import PackageNotFoundError, version

        for name in ("accord", "torch", "transformers", "outlines", "outlines_core", "llguidance", "xgrammar", "openai", "pydantic"):
            try:
                _VERSIONS[name] = version(name)
            except PackageNotFoundError:
                _VERSIONS[name] = None
    return {"python": sys.version.split()[0], "platform": sys.platform, **{k: v for k, v in _VERSIONS.items() if v}}


def _torch_available() -> bool:
    return "torch" in sys.modules or importlib.util.find_spec("torch") is not None
