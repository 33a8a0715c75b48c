"""Every script in examples/ runs to completion with the project's Python and prints what it shows.

All scripts are run, including those that need the embedded model (they may take longer; the
limit is 300 s each). Nothing is skipped: a script that cannot run is a failing test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
TIMEOUT = 300

# What each script must print (substrings of its stdout). A script not listed here must exit 0
# and print something.
EXPECTED = {
    "quickstart.py": [
        "value:           Review(stars=5, sentiment='positive')",
        "stopped because: unbeatable",
        "calls:           4 of at most 5",
    ],
    "decorator.py": [
        "classify(...)      -> 'positive'",
        "Answer with exactly one of: positive, negative, neutral.",
        "Prompting(schema_in_prompt=False) -> 'neutral'",
    ],
    "fieldwise.py": [
        "NoConsensus; votes:",
        "value:           Invoice(vendor='ACME GmbH', total=1250.0, currency='EUR', tags=['q3', 'tools'])",
        "how:             assembled",
        "value: Range(low=6, high=9) | fell back to the whole-object winner",
    ],
    "retry_feedback.py": [
        "Your previous answer was invalid:\n- stars: Input should be less than or equal to 5 (got 7)",
        "Your previous answer could not be read:",
        "HTTP 429",
        "attempt 2: max_tokens=128 feedback=None",
        "ballot 1: the output looped in `sentiment`: 'so good, so smooth' repeated 4 times",
        "Your previous answer repeated itself:\n- sentiment: 'so good, so smooth' repeated 4 times",
    ],
    "async_map.py": [
        "Review: 'smells of cheese pen'   -> InvalidOutput",
        "at most 4 in flight (concurrency=4)",
        "amap -> ['positive', 'neutral']",
    ],
    "ray_parquet.py": [
        "columns: review_id, prompt, value, stable, agreement, calls, stopped_because, replayed,",
        '1  "negative"   stable=True  calls=2  Broke after two days. Awful.',
        "first run: 6 rows out, 0 replayed from the ledger, 12 model calls",
        "second run: 6 rows out, 6 replayed from the ledger, 0 model calls",
    ],
    "budget.py": [
        "BudgetExceeded after",
        "stopped because: budget",
        "calls made: 3",
        "tokens used: 210 in 5 calls",
    ],
}


def test_the_documented_examples_are_present() -> None:
    names = {path.name for path in EXAMPLES}
    assert set(EXPECTED) <= names, f"missing from examples/: {sorted(set(EXPECTED) - names)}"


@pytest.mark.parametrize("script", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs(script: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        proc = subprocess.run(
            [PYTHON, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        so_far = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""  # bytes, even with text=True
        pytest.fail(f"examples/{script.name} did not finish within {TIMEOUT} s; output so far:\n{so_far}")
    report = f"examples/{script.name} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    assert proc.returncode == 0, report
    assert proc.stdout.strip(), report
    for expected in EXPECTED.get(script.name, []):
        assert expected in proc.stdout, f"expected {expected!r} in the output\n{report}"
