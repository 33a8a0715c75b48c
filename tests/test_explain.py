"""``print(result)``: a Result in plain words (accord._explain), and the glossary in docs/result.md
that says the same words."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord import Completion, Ledger, StopReason, Usage, Vote, models
from accord._explain import GATES, STOPS, gate_words, stop_words

DOC = Path(__file__).resolve().parents[1] / "docs" / "result.md"


class Ticket(BaseModel):
    category: Literal["billing", "bug", "other"]
    summary: str
    tags: list[str] = Field(max_length=3)


def said(category: str, summary: str) -> Completion:
    return Completion(f'{{"category": "{category}", "summary": "{summary}", "tags": ["x"]}}', "stop", Usage(100, 10))


def test_print_says_what_was_voted_what_was_carried_and_why_it_stopped() -> None:
    backend = models.scripted([said("bug", "crash"), said("billing", "a charge"), said("bug", "it crashes")])
    result = accord.Stabilizer(backend, schema=Ticket, vote=Vote(k=3)).run("q")
    text = str(result)
    assert text == result.explain() and text.splitlines()[0] == result.verdict()
    assert result.verdict().startswith("Decided after 3 calls: the leader had more votes than the ballots left could overturn")
    assert "voted:    category, tags[] (2 of 3 valid ballots agreed on them)" in text
    assert "carried:  summary (3 versions)" in text  # every valid ballot's wording is counted
    assert "3 run of up to k=3 (quorum 2); 3 valid, 0 invalid, 0 retries" in text
    assert "usage:    3 calls, 300 in, 30 out" in text


def test_a_failed_run_says_it_was_not_decided_and_names_the_error() -> None:
    with pytest.raises(accord.InvalidOutput) as caught:
        accord.Stabilizer(models.scripted(["no json here"] * 6), schema=Ticket, vote=Vote(k=3)).run("q")
    text = str(caught.value.result)
    assert text.startswith("Not decided after ") and "no ballot gave a valid answer (InvalidOutput)" in text
    assert "voted:" not in text and "error:    InvalidOutput: no valid output" in text


def test_a_replayed_answer_says_no_call_was_made(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite3")
    first = accord.Stabilizer(models.scripted([said("bug", "crash")] * 3), schema=Ticket, vote=Vote(k=3), ledger=ledger).run("q")
    again = accord.Stabilizer(models.scripted([]), schema=Ticket, vote=Vote(k=3), ledger=ledger).run("q")
    assert again.replayed and again.verdict().startswith("Replayed from the ledger (no call now): decided earlier after 2 calls")
    assert first.verdict().startswith("Decided after 2 calls")


def test_every_stop_reason_and_gate_has_words_and_the_docs_glossary_says_them() -> None:
    assert set(STOPS) == {r.value for r in StopReason}
    page = DOC.read_text()
    for reason, words in STOPS.items():
        stable = "yes" if StopReason(reason).accepted else "no"
        assert f"| `{reason}` | {words} | {stable} |" in page, reason
    for gate, words in GATES.items():
        assert f"| `{gate}` | {words} |" in page, gate
    assert stop_words("two ahead") == "your stop rule said 'two ahead'"
    assert gate_words("stood aside: no floor") == "stood aside: no floor" and gate_words(None) is None
    assert re.match(r"certified: ", gate_words("certified") or "")
