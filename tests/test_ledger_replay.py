"""Answers stored before the schema was shown on constraining backends still replay (key version 2).

``tests/data/ledger_constrained_v1.sqlite3`` was written by accord as it stood before the change
(commit 70f318a: the schema went in the prompt only where the backend could not constrain), by
:func:`write_scenario` below, and ``ledger_constrained_v1.json`` holds the keys that code gave. A
backend that constrains now reads the schema in its prompt too, another computation: its runs are
keyed under key version 2, and a key of version 1 is still looked up when version 2 misses, so
every answer that file holds replays without a model call. Regenerate both only on purpose, with
the code of the release the file stands for: ``PYTHONPATH=src python tests/test_ledger_replay.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from accord import Completion, Ledger, Stabilizer, Vote, models

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "ledger_constrained_v1.sqlite3"
EXPECTED = DATA / "ledger_constrained_v1.json"


class Ticket(BaseModel):
    category: Literal["bug", "billing", "question"]
    priority: int


class Grammar:
    """A backend that says it constrains every schema (as the local backend and a server with
    ``response_format`` do) and answers from a script, recording what it was sent."""

    fingerprint = "pinned-constraining-model"
    constrains = True

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.sent: list[Any] = []

    def generate(self, request: Any) -> Completion:
        self.sent.append(request.input)
        text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return Completion(text=text)


TICKET = '{"category": "bug", "priority": 2}'
PROMPTS = [("ticket", "The app crashes on start."), ("label", "Refund me twice?"), ("ticket", "Where is my invoice?")]


def stabilizers(ledger: Ledger | None = None, **backends: Grammar) -> dict[str, Stabilizer[Any]]:
    model = {"ticket": Grammar(TICKET), "label": Grammar("billing"), **backends}
    return {
        "ticket": Stabilizer(model["ticket"], Ticket, ledger=ledger, vote=Vote(k=3, gate=None)),
        "label": Stabilizer(model["label"], Literal["bug", "billing", "question"], ledger=ledger),
    }


def write_scenario(path: Path) -> dict[str, Any]:
    with Ledger(path) as ledger:
        s = stabilizers(ledger, ticket=Grammar(TICKET, '{"category": "billing", "priority": 1}', TICKET))
        for name, prompt in PROMPTS:
            s[name].run(prompt)
        return {"keys": [ledger.key(s[name], prompt) for name, prompt in PROMPTS],
                "values": [s[name].run(prompt).value for name, prompt in PROMPTS[:2]]}


@pytest.fixture
def old(tmp_path: Path) -> Path:
    copy = tmp_path / "old.sqlite3"
    shutil.copyfile(FIXTURE, copy)  # opening a ledger may write (WAL): never the fixture itself
    return copy


def test_a_constraining_backend_now_reads_the_schema_in_its_prompt() -> None:
    backend = Grammar(TICKET)
    Stabilizer(backend, Ticket, vote=Vote(k=1, gate=None)).run("The app crashes on start.")
    assert "category" in backend.sent[0] and "priority" in backend.sent[0], backend.sent[0]


def test_its_runs_are_keyed_under_a_new_key_version(tmp_path: Path) -> None:
    expected = json.loads(EXPECTED.read_text(encoding="utf-8"))
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        s = stabilizers(ledger)
        keys = [ledger.key(s[name], prompt) for name, prompt in PROMPTS]
        assert not set(keys) & set(expected["keys"]), "another computation: another key"
        s["label"].run(PROMPTS[1][1])
        assert ledger.show(keys[1])["material"]["ledger"] == 2


def test_a_backend_that_does_not_constrain_keeps_the_key_it_had(tmp_path: Path) -> None:
    """Its prompt carried the schema before too: the same computation, the same key (version 1)."""
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        plain = Stabilizer(models.function(lambda prompt: "billing", name="plain"), Literal["bug", "billing"], ledger=ledger)
        plain.run("q")
        assert ledger.show(ledger.key(plain, "q"))["material"]["ledger"] == 1


def test_every_answer_a_ledger_of_the_previous_release_holds_replays_without_a_model_call(old: Path) -> None:
    silent = {"ticket": Grammar('{"category": "question", "priority": 3}'), "label": Grammar("question")}
    with Ledger(old) as ledger:
        s = stabilizers(ledger, **silent)
        first = s["ticket"].run(PROMPTS[0][1])
        assert first.replayed and first.value == Ticket(category="bug", priority=2)
        label = s["label"].run(PROMPTS[1][1])
        assert label.replayed and label.value == "billing"
        third = s["ticket"].run(PROMPTS[2][1])
        assert third.replayed and third.value == Ticket(category="bug", priority=2)
        assert [len(backend.sent) for backend in silent.values()] == [0, 0], "a replay never calls the model"
        fresh = s["label"].run("A new prompt")  # decided now, under the new key, and sticky there
        calls = len(silent["label"].sent)
        assert not fresh.replayed and fresh.value == "question" and calls >= 1
        assert s["label"].run("A new prompt").replayed and len(silent["label"].sent) == calls


def test_a_map_replays_them_too(old: Path) -> None:
    """``map`` looks answers up through its claims (``ledger/_batch``), not ``recall``: the same."""
    silent = Grammar("question")
    with Ledger(old) as ledger:
        label, fresh = stabilizers(ledger, label=silent)["label"].map([PROMPTS[1][1], "A new prompt"])
        assert label.replayed and label.value == "billing"
        assert not fresh.replayed and fresh.value == "question" and silent.sent


def test_a_stored_answer_under_the_new_key_wins_over_the_old_one(old: Path) -> None:
    with Ledger(old) as ledger:
        s = stabilizers(ledger, label=Grammar("question"))
        s["label"].run(PROMPTS[1][1], refresh=True)  # decided again: stored under version 2
        again = s["label"].run(PROMPTS[1][1])
        assert again.replayed and again.value == "question"


if __name__ == "__main__":  # regenerate the fixture (see the module docstring)
    DATA.mkdir(exist_ok=True)
    FIXTURE.unlink(missing_ok=True)
    written = write_scenario(FIXTURE)
    EXPECTED.write_text(json.dumps({"keys": written["keys"]}, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(written, default=str, indent=1), file=sys.stderr)
