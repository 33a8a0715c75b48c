"""accord audit: the metrics on scripted conditions with known answers, the report, the CLI."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Literal

import pytest

from accord import Completion, models
from accord._errors import ConfigError, UnsupportedSchema
from accord._types import Settings
from accord.cli._audit import Condition, raw_phase, stabilized_phase, summarize
from accord.cli._audit_input import Item, load_items
from accord.cli._audit_report import verdict, write_reports
from accord.cli._metrics import MISSING
from accord.schema._schema import Schema

Colour = Literal["red", "green", "blue"]


def items(*golds: str | None) -> list[Item]:
    schema = Schema.of(Colour)
    return [Item(f"p{i}", f"Name colour {i}.", schema, "Colour", g, None if g is None else json.dumps(g)) for i, g in enumerate(golds)]


def scripted_conditions(*columns: list[str]) -> list[Condition]:
    return [Condition(f"c{j}", models.scripted(texts)) for j, texts in enumerate(columns)]


def test_raw_metrics_on_scripted_conditions() -> None:
    # p0: identical text everywhere; p1: same answer, different text; p2: different answers; p3: unreadable once.
    conditions = scripted_conditions(
        ["red", "green", "blue", "red"],
        ["red", "Green.", "red", "nonsense here"],
        ["red", "green", "blue", "red"],
    )
    its = items("red", "green", "blue", None)
    audit = summarize(its, raw_phase(its, conditions, Settings(max_tokens=4)))
    raw = audit["raw"]
    assert raw["TARr"] == 1 / 4  # only p0 is the same text in all three
    assert raw["TARa"] == 2 / 4  # p0 and p1 agree on the answer
    rows = {p["id"]: p for p in audit["prompts"]}
    assert [rows[p]["distinct_answers"] for p in ("p0", "p1", "p2", "p3")] == [1, 1, 2, 2]
    assert rows["p3"]["raw"]["c1"]["answer"] == MISSING
    # characters (no tokenizer): "green" vs "Green." split at 0; "blue" vs "red" at 0; p0 never
    assert rows["p0"]["first_divergence"] is None
    assert rows["p1"]["first_divergence"] == 0
    assert raw["diverged_prompts"] == 3
    assert raw["accuracy_by_condition"] == {"c0": 1.0, "c1": 2 / 3, "c2": 1.0}
    assert raw["accuracy"] == {"min": 2 / 3, "mean": pytest.approx(8 / 9), "max": 1.0}


def test_first_divergence_uses_tokens_and_margins() -> None:
    a = models.scripted([Completion("the red one", margins=(3.0, 0.2, float("inf")))])
    b = models.scripted([Completion("the blue one", margins=(3.0, 0.1, 1.0))])
    its = items("red")
    audit = summarize(its, raw_phase(its, [Condition("a", a), Condition("b", b)], Settings()))
    row = audit["prompts"][0]
    assert row["first_divergence"] == 4  # characters over HTTP-like backends
    assert row["min_margin"] == 0.1
    assert audit["raw"]["min_margin"] == 0.1


class Words:
    """A tokenizer by words: all the audit asks of a backend's ``tokenizer``."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[str]:
        return text.split()


def test_divergence_is_counted_in_the_declared_tokenizer_s_tokens() -> None:
    # The Backend surface the CLI reads: dtype, tokenizer, conversion_seconds, None where unknown.
    a, b = models.scripted(["the red one"]), models.scripted(["the blue one"])
    assert (a.dtype, a.tokenizer, a.conversion_seconds) == (None, None, None)
    a.tokenizer = b.tokenizer = Words()
    its = items("red")
    audit = summarize(its, raw_phase(its, [Condition("a", a), Condition("b", b)], Settings()))
    assert audit["prompts"][0]["first_divergence"] == 1  # the second word, not the fifth character


def test_stabilized_phase_reaches_agreement_and_counts_calls() -> None:
    its = items("red")
    raw = raw_phase(its, scripted_conditions(["red"], ["blue"]), Settings())
    stable = stabilized_phase(its, scripted_conditions(["red", "red", "red"], ["blue", "red", "red", "red"]), None)
    audit = summarize(its, raw, stable)
    assert audit["raw"]["TARa"] == 0.0
    assert audit["stabilized"]["TARa"] == 1.0
    assert audit["prompts"][0]["agreement_before"] == 0.5
    assert audit["prompts"][0]["agreement_after"] == 1.0
    assert audit["stabilized"]["calls_per_answer"] == (3 + 4) / 2


def test_html_report_is_self_contained_and_names_every_prompt(tmp_path: Path) -> None:
    its = items("red", "green")
    conditions = scripted_conditions(["red", "green"], ["red", "blue"])
    stable = stabilized_phase(its, scripted_conditions(["red"] * 3 + ["green"] * 3, ["red"] * 3 + ["green"] * 3), None)
    audit = summarize(its, raw_phase(its, conditions, Settings()), stable, {"float32": {"batch": 0.01}})
    js, page = write_reports(audit, tmp_path)
    text = page.read_text()
    assert json.loads(js.read_text())["raw"]["TARa"] == 0.5
    said = verdict(audit)  # the page opens with a verdict in plain words
    assert said.startswith("The model alone gave the same answer on 1 of 2 prompts across 2 conditions (it changed on 1)")
    assert html.escape(said) in text and text.index(html.escape(said)) < text.index("<table")
    assert "data:image/png;base64," in text
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", text)
    for item in its:
        assert item.id in text and item.text in text


def test_bad_input_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_items(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{not json\n')
    with pytest.raises(ConfigError, match=":2"):
        load_items(bad)
    bad.write_text('{"prompt": "ok", "schema": "no_such_module_x:Thing"}\n')
    with pytest.raises(UnsupportedSchema):
        load_items(bad)


def test_schema_resolves_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "audit_tasks_x.py").write_text("from typing import Literal\nAnswer = Literal['yes', 'no']\n")
    (tmp_path / "p.jsonl").write_text('{"prompt": "a", "schema": "audit_tasks_x:Answer", "gold": "yes"}\n{"prompt": "b"}\n')
    monkeypatch.chdir(tmp_path)
    first, second = load_items("p.jsonl", "int")
    assert first.schema_name == "audit_tasks_x:Answer" and first.gold_key == '"yes"'
    assert second.schema_name == "int"


def test_cli_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from accord.cli._app import app

    result = CliRunner().invoke(app, ["audit", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "no such file" in result.output



def scripted_target(monkeypatch: pytest.MonkeyPatch, answers: int = 40) -> list[str]:
    """``--model local`` opens two scripted conditions instead of the model (the CLI's options and
    output are under test here; the model end to end below); the models opened are logged."""
    from accord.cli import _audit

    opened: list[str] = []

    def open_target(model: str, model_name: str | None = None, *, quick: bool = False) -> _audit.Target:
        opened.append(model)
        conditions = (Condition("a", models.scripted(["red"] * answers)), Condition("b", models.scripted(["red"] * answers)))
        return _audit.Target("scripted", conditions)

    monkeypatch.setattr(_audit, "open_target", open_target)
    monkeypatch.setattr(_audit, "measured_floors", lambda conditions: {})
    return opened


def prompts_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Name colour {i}."}) + "\n" for i in range(n)))
    return path


def test_cli_shows_progress_on_stderr_when_piped_and_limit_audits_the_first_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from accord.cli._app import app

    scripted_target(monkeypatch)
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["audit", str(prompts_file(tmp_path, 5)), "--limit", "3", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [p["id"] for p in json.loads((out / "report.json").read_text())["prompts"]] == ["p0", "p1", "p2"]
    progress = result.stderr
    assert "opening local" in progress, "the model load is announced before it starts"
    assert "raw: every condition 1/6" in progress and "raw: every condition 6/6" in progress, progress
    assert "stabilized 6/6" in progress and "TARa" not in progress, "progress on stderr, the report on stdout"


def test_cli_checks_options_only_where_they_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from accord.cli._app import app

    opened = scripted_target(monkeypatch)
    prompts = str(prompts_file(tmp_path, 1))
    local = CliRunner().invoke(app, ["audit", prompts, "--runs", "1", "--quick"])
    assert local.exit_code == 0, local.output
    assert "--runs applies over HTTP only" in local.stderr
    http = CliRunner().invoke(app, ["audit", prompts, "--model", "openai:http://127.0.0.1:9/v1", "--runs", "1"])
    assert http.exit_code == 2 and "--runs must be at least 2" in http.output and opened == ["local"], "refused before opening"
    for unused in (["--model-name", "x"], ["--concurrency", "2"]):
        done = CliRunner().invoke(app, ["audit", prompts, "--quick", *unused])
        assert done.exit_code == 0 and f"{unused[0]} applies over HTTP only" in done.stderr, (unused, done.output)
    for bad in (["--limit", "0"], ["--model", "openai:http://127.0.0.1:9/v1", "--concurrency", "-1"]):
        done = CliRunner().invoke(app, ["audit", prompts, *bad])
        assert done.exit_code == 2 and "Traceback" not in done.output, (bad, done.output)
    assert opened == ["local"] * 3, "a bad option is refused before the model is opened"


@pytest.mark.model
def test_cli_end_to_end_on_the_embedded_model(tmp_path: Path, local_model: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from accord.cli._app import app

    (tmp_path / "audit_colours.py").write_text(
        "from typing import Literal\nColour = Literal['blue', 'green', 'white', 'red', 'black', 'yellow']\n")
    monkeypatch.chdir(tmp_path)
    prompts = tmp_path / "prompts.jsonl"
    rows = [
        {"id": "sky", "prompt": "What colour is the sky on a clear day? One word.", "gold": "blue"},
        {"id": "grass", "prompt": "What colour is grass? One word."},
        {"id": "snow", "prompt": "What colour is snow? One word."},
    ]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["audit", str(prompts), "--model", "local", "--schema", "audit_colours:Colour",
                                      "--runs", "2", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "TARa@3" in result.output
    audit = json.loads((out / "report.json").read_text())
    assert audit["conditions"] == ["float32", "bfloat16", "float32+batch"]
    assert set(audit["noise_floors"]) == {"float32", "bfloat16"}
    assert 0.0 <= audit["raw"]["TARa"] <= 1.0 and audit["stabilized"]["calls_per_answer"] >= 1
    assert audit["stabilized"]["TARa"] == 1.0  # the same answer under every deployment condition
    page = (out / "report.html").read_text()
    assert all(r["id"] in page and r["prompt"] in page for r in rows)


@pytest.mark.server
def test_cli_over_http_sends_concurrent_repeated_requests(tmp_path: Path, openai_server: str) -> None:
    from typer.testing import CliRunner

    from accord.cli._app import app

    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": "sky", "prompt": "What colour is the sky on a clear day? One word.", "gold": "blue"},
            {"id": "dog", "prompt": "Can a dog drive a car?", "schema": "bool"}]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["audit", str(prompts), "--model", f"openai:{openai_server}", "--runs", "2",
                                      "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "TARr@2" in result.output and "TARa@2" in result.output
    audit = json.loads((out / "report.json").read_text())
    assert audit["conditions"] == ["request 1", "request 2"]
    assert [p["id"] for p in audit["prompts"]] == ["sky", "dog"]
    assert all(p["raw"]["request 1"]["text"] for p in audit["prompts"])
    assert audit["stabilized"]["calls_per_answer"] >= 1 and not audit.get("noise_floors")  # none measured over HTTP
