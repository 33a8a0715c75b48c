"""``accord ledger ls | show KEY | export --format jsonl | migrate --to DSN``, on an SQLite file and on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from accord import InvalidOutput, Ledger, Stabilizer, Vote, models
from accord.cli._app import app

runner = CliRunner()


@pytest.fixture(params=["sqlite", "postgres"])
def filled(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A ledger (a file, or a PostgreSQL database) with two accepted keys (one refreshed) and one failed run."""
    path = str(tmp_path / "ledger.sqlite3") if request.param == "sqlite" else request.getfixturevalue("postgres_server").create_database()
    return path, fill(path)


def fill(path: str) -> dict[str, str]:
    """Two accepted keys (one refreshed) and one failed run; the keys of the accepted ones."""
    with Ledger(path) as ledger:
        good = Stabilizer(models.function(lambda p: "positive", name="m"), str, ledger=ledger)
        good.run("first")
        good.run("second")
        good.run("second", refresh=True)
        bad = Stabilizer(models.function(lambda p: "???", name="m"), int, ledger=ledger, vote=Vote(k=1))
        with pytest.raises(InvalidOutput):
            bad.run("third")
        return {p: ledger.key(good, p) for p in ("first", "second")}


def cli(*args: Any, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(app, ["ledger", *map(str, args)], env=env)


def secret_of(path: str) -> str | None:
    """The password a DSN holds (None for a file)."""
    from urllib.parse import urlsplit

    return urlsplit(path).password if path.startswith("postgresql://") else None


def test_ls_lists_runs_newest_first_and_marks_current_answers(filled: tuple[str, dict[str, str]]) -> None:
    path, keys = filled
    out = cli("ls", "--path", path)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split()[:3] == ["RUN", "KEY", "DECIDED"]
    rows = lines[1:]
    assert [row.split()[0].rstrip("*") for row in rows] == ["4", "3", "2", "1"]
    assert "failed:InvalidOutput" in rows[0] and "*" not in rows[0].split()[0]
    assert rows[1].split()[0] == "3*" and keys["second"][:12] in rows[1] and '"positive"' in rows[1]
    assert rows[2].split()[0] == "2" and rows[3].split()[0] == "1*"
    only = cli("ls", "--path", path, "--key", keys["first"][:6], "-n", "5")
    assert only.exit_code == 0 and len(only.output.splitlines()) == 2
    assert cli("ls", env={"ACCORD_LEDGER": path}).output == out.output, "ACCORD_LEDGER is the default --path"


def test_show_prints_the_key_material_and_every_run_with_ballots(filled: tuple[str, dict[str, str]]) -> None:
    path, keys = filled
    out = cli("show", keys["second"][:10], "--path", path)
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert shown["key"] == keys["second"] and shown["material"]["request"] == "second"
    assert shown["material"]["model"] == "m" and "policy" in shown["material"] and "schema" in shown["material"]
    assert [r["current"] for r in shown["runs"]] == [False, True] and shown["current"] == shown["runs"][1]["run"]
    ballot = shown["runs"][0]["ballots"][0]
    assert ballot["text"] == "positive" and ballot["status"] == "valid" and "usage" in ballot


def test_export_writes_one_json_line_per_run(filled: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    path, _ = filled
    out = cli("export", "--format", "jsonl", "--path", path)
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.output.splitlines()]
    assert [r["run"] for r in lines] == [1, 2, 3, 4]
    assert [r["request"] for r in lines] == ["first", "second", "second", "third"]
    assert [r["outcome"] for r in lines] == ["accepted", "accepted", "accepted", "failed"]
    assert all(r["ballots"] and "result" in r for r in lines)
    target = tmp_path / "out.jsonl"
    done = cli("export", "--path", path, "-o", target)
    assert done.exit_code == 0 and "exported 4 runs" in done.output
    assert [json.loads(line) for line in target.read_text().splitlines()] == lines


def test_cli_errors_are_clear(filled: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    path, _ = filled
    assert cli("export", "--format", "csv", "--path", path).exit_code == 2
    missing = cli("show", "abcdef", "--path", path)
    assert missing.exit_code == 1 and "no key starts with 'abcdef'" in missing.output
    assert cli("show", "not-hex", "--path", path).exit_code == 1
    nowhere = cli("ls", "--path", tmp_path / "absent.sqlite3")
    assert nowhere.exit_code == 1 and "no ledger at" in nowhere.output
    assert not (tmp_path / "absent.sqlite3").exists(), "looking does not create a ledger"
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"junk" * 1000)
    broken = cli("ls", "--path", junk)
    assert broken.exit_code == 1 and "corrupt" in broken.output


def test_cli_errors_on_postgres_are_clear_and_never_show_the_password(postgres_server: Any) -> None:
    from servers import free_port

    empty = postgres_server.create_database()
    secret = secret_of(empty)
    assert secret
    nowhere = cli("ls", "--path", empty)
    assert nowhere.exit_code == 1 and "no ledger at postgresql://accord@127.0.0.1:" in nowhere.output
    assert cli("show", "abc", "--path", empty).exit_code == 1
    assert postgres_server.execute("SELECT to_regnamespace('accord') IS NULL", empty.rsplit("/", 1)[1]) == [(True,)], (
        "looking does not create a ledger"
    )
    down = cli("ls", "--path", f"postgresql://accord:{secret}@127.0.0.1:{free_port()}/nothing")
    assert down.exit_code == 1 and "cannot connect to the ledger at postgresql://accord@127.0.0.1:" in down.output
    for out in (nowhere, down):
        assert secret not in out.output


def test_migrate_copies_a_file_into_postgres_where_every_command_reads_the_same(postgres_server: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    keys = fill(path)
    target = postgres_server.create_database()
    done = cli("migrate", "--path", path, "--to", target)
    assert done.exit_code == 0, done.output
    assert "copied 3 keys, 4 runs, 12 ballots and 2 answers from" in done.output
    assert "postgresql://accord@127.0.0.1:" in done.output and str(secret_of(target)) not in done.output
    for command in (["ls"], ["show", keys["second"][:8]], ["export"]):
        assert cli(*command, "--path", target).output == cli(*command, "--path", path).output, command
    again = cli("migrate", "--path", path, "--to", target)
    assert again.exit_code == 1 and "holds runs already" in again.output
    assert cli("migrate", "--path", path, "--to", tmp_path / "x.sqlite3").exit_code == 1
