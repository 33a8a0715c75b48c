"""Every benchmark's --quick mode runs in the suite: it must exit 0 and print its figures."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted(p for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py") if 'add_argument("--quick"' in p.read_text())  # scripts with a --quick mode, not their helper modules


@pytest.mark.parametrize("script", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_quick_mode(script: Path) -> None:
    done = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "a benchmark prints its figures"
