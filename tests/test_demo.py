"""``accord demo`` on the real embedded model: a column per perturbation, then the stable value."""

from __future__ import annotations

import pytest
from rich.console import Console

from accord.cli._demo import TASKS, demo

pytestmark = pytest.mark.model


def test_the_demo_shows_the_raw_text_under_each_perturbation_and_the_stable_value(local_model):
    console = Console(record=True, width=400, color_system=None)
    demo(console, model=local_model)
    out = console.export_text()
    for run in ("as deployed", "perturbed: precision", "perturbed: batch", "perturbed: attention", "perturbed: threads",
                "accord ("):
        assert out.count(run) == len(TASKS)
    for task in TASKS:
        assert task.name in out
    assert "done in" in out
