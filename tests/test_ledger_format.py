"""The ledger's file format and keys are a contract: a file written by an older accord still replays.

``tests/data/ledger_v1.sqlite3`` was written by the ledger as it stood before the package split
(commit 6a6a4b2, one 655-line ``ledger/_ledger.py``), by :func:`write_scenario` below, and
``tests/data/ledger_v1.json`` holds what that code read back from it (keys, ``runs``, ``show``,
``export``). Regenerate both only when the format changes on purpose (then bump SCHEMA_VERSION
or KEY_VERSION): ``PYTHONPATH=src python tests/test_ledger_format.py``.

The pinned keys hash qualified names (``accord._types:Settings``, ``accord._normalize:casefold``):
moving those names changes every key, so old answers would miss; these tests say so first.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import accord
from accord import Ledger, Retry, Stabilizer, Vote, models
from accord.ledger import migrate
from accord.ledger._migrations import STEPS, Copied

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "ledger_v1.sqlite3"
EXPECTED = DATA / "ledger_v1.json"

REVIEW = '{"stars": 4, "sentiment": "positive"}'


class Review(BaseModel):
    stars: int
    sentiment: Literal["positive", "negative"]


class Says:
    """A model function that gives ``answers`` in turn (the last one again once they run out)."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, prompt: Any) -> str:
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def stabilizers(ledger: Ledger | None = None, **says: Says) -> dict[str, Stabilizer[Any]]:
    """The stabilizers of the scenario, by name; ``says`` replaces the model function of some."""
    fn = {"review": Says(REVIEW), "sentiment": Says("positive"), "count": Says("I cannot say"),
          "split": Says("positive", "negative"), "tuned": Says("Positive."), **says}

    def model(name: str, fingerprint: str = "pinned-model") -> Any:
        return models.function(fn[name], name=fingerprint)

    sentiment = Literal["positive", "negative"]
    return {
        "review": Stabilizer(model("review"), Review, ledger=ledger),
        "sentiment": Stabilizer(model("sentiment"), sentiment, ledger=ledger),
        "count": Stabilizer(model("count"), int, ledger=ledger, vote=Vote(k=1, gate=None), retry=Retry(attempts=2)),
        "split": Stabilizer(model("split"), sentiment, ledger=ledger, vote=Vote(k=2, quorum=2, gate=None, on_no_consensus="plurality")),
        "tuned": Stabilizer(model("tuned", "other-model"), sentiment, ledger=ledger,
                            vote=Vote(k=3, quorum=2, early_stop=False, gate=None), retry=Retry(attempts=4, grow_max_tokens=1.5),
                            extract=accord.Extract(normalize=[accord.casefold]),
                            settings=accord.Settings(temperature=0.7, max_tokens=16, seed=7)),
    }


# (stabilizer, prompt) of every key in the file
PROMPTS = [("review", "review this"), ("sentiment", "q"), ("count", "how many?"), ("split", "split"),
           ("tuned", [{"role": "user", "content": "tuned"}]), ("sentiment", "interrupted")]


def write_scenario(path: Path | str) -> None:
    """One ledger file with every kind of run: accepted, refreshed, failed, unstable, interrupted."""
    sentiment = Says("positive")
    with Ledger(path) as ledger:
        s = stabilizers(ledger, sentiment=sentiment)
        s["review"].run("review this")
        s["sentiment"].run("q")
        sentiment.answers = ["negative"]  # the model changed its mind
        s["sentiment"].run("q", refresh=True)
        with pytest.raises(accord.InvalidOutput):
            s["count"].run("how many?")
        s["split"].run("split")
        s["tuned"].run([{"role": "user", "content": "tuned"}])
        pending = ledger.begin(s["sentiment"], "interrupted")  # killed after its first ballot
        assert pending is not None
        pending.record(s["review"].run("review this").ballots[0])


def read_back(ledger: Ledger) -> dict[str, Any]:
    s = stabilizers()
    keys = [ledger.key(s[name], prompt) for name, prompt in PROMPTS]
    return {"keys": keys, "runs": ledger.runs(limit=None), "show": [ledger.show(key) for key in keys],
            "export": list(ledger.export())}


def schema_of(path: Path) -> dict[str, Any]:
    raw = sqlite3.connect(path)
    try:
        return {
            "application_id": raw.execute("PRAGMA application_id").fetchone()[0],
            "user_version": raw.execute("PRAGMA user_version").fetchone()[0],
            "journal_mode": raw.execute("PRAGMA journal_mode").fetchone()[0],
            "objects": raw.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
        }
    finally:
        raw.close()


@pytest.fixture
def old(tmp_path: Path) -> Path:
    copy = tmp_path / "old.sqlite3"
    shutil.copyfile(FIXTURE, copy)  # opening a ledger may write (WAL): never the fixture itself
    return copy


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_keys_of_fixed_stabilizers_are_pinned(tmp_path: Path, expected: dict[str, Any]) -> None:
    s = stabilizers()
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        assert ledger.key(s["review"], "review this") == "ce07afd8eff89dd926f13d93175d5d108e72a0679629df26615d2886ff339e15"
        tuned = ledger.key(s["tuned"], [{"role": "user", "content": "tuned"}])
        assert tuned == "4f5bfbb99d3eb55101d0bef918402a93fb901e83641e57aaa3e33adb8aad3cde"
        assert [ledger.key(s[name], prompt) for name, prompt in PROMPTS] == expected["keys"]


def test_a_ledger_written_before_the_split_reads_back_the_same(old: Path, expected: dict[str, Any]) -> None:
    with Ledger(old) as ledger:
        assert json.loads(json.dumps(read_back(ledger))) == expected


def test_a_ledger_written_before_the_split_replays_without_a_model_call(old: Path) -> None:
    replays_without_a_model_call(str(old))


def replays_without_a_model_call(where: str) -> None:
    """The scenario's answers replay from ``where`` as they did from the file accord 0.1 wrote."""
    silent = {name: Says("negative") for name in ("review", "sentiment", "tuned")}
    with Ledger(where) as ledger:
        s = stabilizers(ledger, **silent)
        review = s["review"].run("review this")
        assert review.replayed and review.value == Review(stars=4, sentiment="positive") and review.stable
        assert [b.value for b in review.ballots] == [Review(stars=4, sentiment="positive")] * 3
        assert review.meta["ledger"]["run"] == 1 and review.stopped_because == "unanimous"
        refreshed = s["sentiment"].run("q")
        assert refreshed.replayed and refreshed.value == "negative" and refreshed.meta["ledger"]["run"] == 3
        tuned = s["tuned"].run([{"role": "user", "content": "tuned"}])
        assert tuned.replayed and tuned.value == "positive" and len(tuned.ballots) == 3
        assert [fn.calls for fn in silent.values()] == [0, 0, 0], "a replay never calls the model"
        # failed, unstable and interrupted runs are history, never replayed
        assert ledger.recall(s["count"], "how many?") is None
        assert ledger.recall(s["split"], "split") is None
        assert ledger.recall(s["sentiment"], "interrupted") is None
        # and the old file takes new runs
        fresh = s["sentiment"].run("new prompt")
        assert fresh.value == "negative" and fresh.meta["ledger"]["run"] == 8 and silent["sentiment"].calls == 3
        assert s["sentiment"].run("new prompt").replayed


def test_an_old_file_is_upgraded_to_the_format_of_a_new_one(old: Path, tmp_path: Path) -> None:
    before = schema_of(old)
    assert before["user_version"] == 1 and "claims" not in {name for _, name, _, _ in before["objects"]}
    Ledger(old).close()
    Ledger(tmp_path / "new.sqlite3").close()
    after = schema_of(old)
    assert after == schema_of(tmp_path / "new.sqlite3"), "format 1 plus step 2 is exactly the format a new file gets"
    assert after["application_id"] == 0x41434344 and after["user_version"] == 2
    assert set(after["objects"]) - set(before["objects"]) == {
        ("table", "claims", "claims", STEPS[1].sqlite[0].replace(" IF NOT EXISTS", "")),  # as SQLite keeps it
        ("index", "sqlite_autoindex_claims_1", "claims", None),
    }, "the upgrade only adds"


_VOLATILE = {"created", "started", "seconds", "decided", "environment"}


def _steady(data: Any) -> Any:
    """``data`` without clock readings and the environment (versions): what a rerun reproduces."""
    if isinstance(data, dict):
        return {k: _steady(v) for k, v in data.items() if k not in _VOLATILE}
    if isinstance(data, list):
        return [_steady(v) for v in data]
    return data


# Fields a ballot or a Result gained since the fixture was written: new rows carry them, old rows
# lack them (and read back with their defaults). Everything else must match.
# A name alone is left out wherever it stands; ``parent.name`` only under a key ``parent`` (the
# policy's ``gate`` is as old as the fixture; a Result's ``meta.gate`` is not).
_ADDED_SINCE_V1 = frozenset({"coercions", "cause", "fragile", "meta.gate", "voted", "carried"})  # cause: of a backend fault, in a ballot's error


def _without(data: Any, names: frozenset[str], parent: str = "") -> Any:
    if isinstance(data, dict):
        return {k: _without(v, names, k) for k, v in data.items() if k not in names and f"{parent}.{k}" not in names}
    if isinstance(data, list):
        return [_without(v, names, parent) for v in data]
    return data


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_same_runs_written_now_give_the_same_rows(store: str, tmp_path: Path, expected: dict[str, Any],
                                                      request: pytest.FixtureRequest) -> None:  # fmt: skip
    where = str(tmp_path / "now.sqlite3") if store == "sqlite" else request.getfixturevalue("postgres_server").create_database()
    write_scenario(where)
    with Ledger(where) as ledger:
        now = json.loads(json.dumps(read_back(ledger)))
    assert _steady(_without(now, _ADDED_SINCE_V1)) == _steady(expected), "both stores keep the rows of accord 0.1's file"
    assert "coercions" in now["export"][0]["ballots"][0]  # the new field is written


# -- accord ledger migrate: the file into PostgreSQL ------------------------------------------------


def test_migrate_copies_the_old_file_into_postgres_where_it_reads_back_exactly_the_same(
    old: Path, expected: dict[str, Any], postgres_server: Any
) -> None:
    target = postgres_server.create_database()
    copied = migrate(old, target)
    assert copied == Copied(contexts=5, keys=6, runs=7, ballots=17, answers=3)
    with Ledger(old) as source:
        assert copied.runs == len(source.runs(limit=None))
        assert copied.ballots == sum(len(run["ballots"]) for run in source.export())
    with Ledger(target) as ledger:
        assert json.loads(json.dumps(read_back(ledger))) == expected, "times, ids, JSON text: all as they were"
    replays_without_a_model_call(target)  # and its new runs get ids after the copied ones
    with Ledger(old) as source:
        assert json.loads(json.dumps(read_back(source))) == expected, "the source is left as it was"


def test_migrate_refuses_a_target_that_holds_runs_and_changes_nothing(old: Path, postgres_server: Any) -> None:
    target = postgres_server.create_database()
    migrate(old, target)
    with Ledger(target) as ledger:
        before = list(ledger.export())
    with pytest.raises(accord.LedgerError, match="holds runs already"):
        migrate(old, target)
    with Ledger(target) as ledger:
        assert list(ledger.export()) == before
    with pytest.raises(accord.ConfigError, match="postgresql://"):
        migrate(old, str(old) + ".copy")
    with pytest.raises(accord.LedgerError, match="no ledger at"):
        migrate(old.parent / "absent.sqlite3", postgres_server.create_database())


if __name__ == "__main__":  # regenerate the fixture (see the module docstring)
    DATA.mkdir(exist_ok=True)
    FIXTURE.unlink(missing_ok=True)
    write_scenario(FIXTURE)
    with Ledger(FIXTURE) as written:
        EXPECTED.write_text(json.dumps(read_back(written), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes) and {EXPECTED}", file=sys.stderr)
