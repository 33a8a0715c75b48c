"""benchmarks/parsing.py, imported for the tests that read its malformed corpus (tests/data/malformed).

Its folders go on ``sys.path`` last, never first: the corpus imports benchmarks/tasks.py as it
reads, and benchmarks/ first on the path would shadow installed packages for every later test
(benchmarks/ray.py is not ray). tests/data/malformed comes before benchmarks/: its ``schemas``,
not benchmarks/schemas.py.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (str(ROOT / "tests" / "data" / "malformed"), str(ROOT / "benchmarks"))


def parsing() -> ModuleType:
    """The benchmark module (it puts its own folders first while it imports: undone here)."""
    saved = list(sys.path)
    sys.path[:0] = FOLDERS
    try:
        return importlib.import_module("parsing")
    finally:
        sys.path[:] = saved + [p for p in FOLDERS if p not in saved]
