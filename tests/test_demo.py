"""``accord demo``: on the real embedded model, a column per perturbation, then the stable value;
``accord demo --scripted``: the same tasks on a scripted backend."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from accord import Stabilizer, Vote, models
from accord.cli._app import app
from accord.cli._demo import TASKS, demo, scripted_demo


@pytest.mark.model
def test_the_demo_shows_the_raw_text_under_each_perturbation_and_the_stable_value(local_model: Any) -> None:
    console = Console(record=True, width=400, color_system=None)
    demo(console, model=local_model)
    out = console.export_text()
    for run in ("as deployed", "perturbed: precision", "perturbed: batch", "perturbed: attention", "perturbed: threads",
                "accord ("):
        assert out.count(run) == len(TASKS)
    for task in TASKS:
        assert task.name in out
    assert "done in" in out


def test_each_task_has_one_answer_written_many_ways_and_one_dissent() -> None:
    for task in TASKS:
        texts = list(task.texts)
        result = Stabilizer(models.scripted(texts), task.schema, vote=Vote(k=len(texts), early_stop=False, gate=None)).run(task.prompt)
        answers = [json.dumps(b.data, sort_keys=True) for b in result.ballots]
        assert result.stable and all(b.status == "valid" for b in result.ballots), task.name
        assert len(set(texts)) == len(texts) and answers.count(answers[0]) >= len(texts) - 1, task.name


def test_the_scripted_demo_prints_every_task_and_its_stable_value() -> None:
    console = Console(record=True, width=400, color_system=None)
    scripted_demo(console)
    out = console.export_text()
    assert "scripted backend" in out and "done in" in out
    for task in TASKS:
        assert task.name in out and repr(task.texts[0]) in out
    for value in ("'neutral'", "Person(name='Sofia Rossi', age=30", "False", "1969"):
        assert value in out


def test_accord_demo_scripted_runs_without_a_model() -> None:
    result = CliRunner().invoke(app, ["demo", "--scripted"])
    assert result.exit_code == 0, result.output
    assert all(task.name in result.output for task in TASKS) and "k reached" in result.output
