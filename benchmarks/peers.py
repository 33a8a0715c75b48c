"""The peers' own virtualenv, shared by the benchmarks that run instructor (stability, vllm).

instructor pins its own versions, so it runs in ``.bench-cache/instructor-venv``, made and filled
on first use.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

INSTRUCTOR_VENV = Path(__file__).resolve().parents[1] / ".bench-cache" / "instructor-venv"


def instructor_python() -> Path:
    """The venv's python, created and instructor installed on first use (raises with the reason)."""
    python = INSTRUCTOR_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(INSTRUCTOR_VENV)], check=True, capture_output=True)
    check = subprocess.run([str(python), "-c", "import instructor, openai"], check=False, capture_output=True, text=True)
    if check.returncode != 0:
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "instructor"], check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pip install instructor failed: {done.stderr.strip().splitlines()[-1:]}")
    return python
