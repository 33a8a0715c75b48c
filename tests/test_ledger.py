"""The decision ledger in one process: keys, replay, history, failures, bad state, threads.

Every test that takes ``where`` or ``ledger`` runs on both stores: an SQLite file and a database
of the session's real PostgreSQL server (``postgres_server`` in conftest.py). Bad state that
only one store can be in (a corrupt file, a full disk, a PostgreSQL role without rights) is
tested on that store; tests/test_ledger_postgres.py holds the rest of the PostgreSQL ones.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import accord
from accord import Ballot, Ledger, LedgerError, Retry, Stabilizer, Vote, models
from accord.ledger._keys import describe_policy, describe_schema
from accord.ledger._postgres import PostgresStore
from accord.ledger._sqlite import SQLiteStore
from accord.read._canonical import canonical_key


class Review(BaseModel):
    stars: int
    sentiment: Literal["positive", "negative"]


class Counter:
    """A function backend that answers ``answer`` and counts its calls per prompt."""

    def __init__(self, answer: Any = "positive") -> None:
        self.answer = answer
        self.calls: list[object] = []
        self.lock = threading.Lock()

    def __call__(self, prompt: Any, request: Any = None) -> str:
        with self.lock:
            self.calls.append(request.prompt)
        return str(self.answer() if callable(self.answer) else self.answer)


def stab(fn: Any, schema: Any = Literal["positive", "negative"], ledger: Ledger | None = None, fingerprint: str = "model-a",
         **options: Any) -> Stabilizer[Any]:
    return Stabilizer(models.function(fn, name=fingerprint), schema, ledger=ledger, **options)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a new ledger goes: a file, or an empty database of the session's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite3")
    return str(request.getfixturevalue("postgres_server").create_database())


@pytest.fixture
def ledger(where: str) -> Iterator[Ledger]:
    with Ledger(where) as opened:
        yield opened


def raw(ledger: Ledger, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` on the ledger's tables behind accord's back (on PostgreSQL, in the schema ``accord``)."""
    if ledger.path is not None:
        conn = sqlite3.connect(ledger.path, isolation_level=None)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    import psycopg

    assert isinstance(ledger._store, PostgresStore)
    with psycopg.connect(ledger._store._dsn, autocommit=True, options="-c search_path=accord") as pg:
        cursor = pg.execute(sql)
        return cursor.fetchall() if cursor.description else []


# -- replay -----------------------------------------------------------------------------------


def test_an_accepted_answer_is_replayed_without_a_model_call(ledger: Ledger) -> None:
    model = Counter('{"stars": 4, "sentiment": "positive"}')
    s = stab(model, Review, ledger)
    first = s.run("review this")
    assert not first.replayed and len(model.calls) == 3
    second = s.run("review this")
    assert len(model.calls) == 3, "a hit must not call the model"
    assert second.replayed and second.value == first.value and isinstance(second.value, Review)
    assert (second.stable, second.agreement, second.votes, second.stopped_because) == (
        first.stable, first.agreement, first.votes, first.stopped_because)
    assert all(isinstance(b, Ballot) for b in second.ballots) and len(second.ballots) == 3
    assert [b.value for b in second.ballots] == [b.value for b in first.ballots]
    assert isinstance(second.ballots[0].value, Review)
    assert [b.to_dict() for b in second.ballots] == [b.to_dict() for b in first.ballots]
    key = ledger.key(s, "review this")
    assert first.meta["ledger"] == {"key": key, "run": 1}
    assert second.meta["ledger"]["key"] == key and second.meta["ledger"]["run"] == 1
    assert s.run("another review").replayed is False and len(model.calls) == 6


def test_arun_and_map_replay(ledger: Ledger) -> None:
    model = Counter()
    s = stab(model, ledger=ledger)
    first = s.map(["a", "b", "c"], progress=False)
    assert [r.replayed for r in first] == [False] * 3 and len(model.calls) == 9
    again = s.map(["c", "a", "b", "d"], progress=False)
    assert [r.replayed for r in again] == [True, True, True, False]
    assert asyncio.run(s.arun("d")).replayed
    assert len(model.calls) == 12


def test_refresh_decides_again_supersedes_and_keeps_history(ledger: Ledger) -> None:
    model = Counter("positive")
    s = stab(model, ledger=ledger)
    old = s.run("q")
    model.answer = "negative"
    assert s.run("q").value == "positive"  # sticky: the model changed its mind, the ledger did not
    new = s.run("q", refresh=True)
    assert new.value == "negative" and not new.replayed
    assert s.run("q").value == "negative" and s.run("q").replayed
    shown = ledger.show(ledger.key(s, "q"))
    assert [r["run"] for r in shown["runs"]] == [old.meta["ledger"]["run"], new.meta["ledger"]["run"]]
    first, second = shown["runs"]
    assert first["value"] == "positive" and first["superseded_by"] == second["run"] and not first["current"]
    assert second["value"] == "negative" and second["refresh"] and second["current"]
    assert shown["current"] == second["run"] and len(first["ballots"]) == 3


def test_map_refresh_decides_every_prompt_again(ledger: Ledger) -> None:
    model = Counter()
    s = stab(model, ledger=ledger)
    s.map(["a", "b"], progress=False)
    results = s.map(["a", "b"], progress=False, refresh=True)
    assert [r.replayed for r in results] == [False, False] and len(model.calls) == 12
    assert sum(r["current"] for r in ledger.runs()) == 2 and len(ledger.runs()) == 4


def test_failed_runs_are_stored_with_their_ballots_but_never_replayed(ledger: Ledger) -> None:
    model = Counter("I cannot say")
    s = stab(model, int, ledger, vote=Vote(k=1), retry=Retry(attempts=2))
    for _ in range(2):
        with pytest.raises(accord.InvalidOutput) as raised:
            s.run("how many?")
        assert raised.value.result.meta["ledger"]["run"] >= 1  # the raised error carries the stored Result
    assert len(model.calls) == 4, "a failed run is decided again every time"
    shown = ledger.show(ledger.key(s, "how many?"))
    assert shown["current"] is None
    assert [(r["outcome"], r["error"]) for r in shown["runs"]] == [("failed", "InvalidOutput")] * 2
    ballot = shown["runs"][0]["ballots"][1]
    assert ballot["text"] == "I cannot say" and ballot["status"] == "invalid" and ballot["error"]["stage"]
    assert shown["runs"][0]["result"]["error"]["type"] == "InvalidOutput"


def test_no_consensus_is_stored_not_replayed_and_plurality_is_not_replayed_either(ledger: Ledger) -> None:
    answers = iter(["positive", "negative", "positive", "negative"] * 4)
    model = Counter(lambda: next(answers))
    s = stab(model, ledger=ledger, vote=Vote(k=2, quorum=2))
    with pytest.raises(accord.NoConsensus):
        s.run("q")
    plural = stab(model, ledger=ledger, vote=Vote(k=2, quorum=2, on_no_consensus="plurality"))
    assert ledger.key(plural, "q") == ledger.key(s, "q"), "on_no_consensus is not part of the key"
    first = plural.run("q")
    assert first.error is None and not first.stable
    assert not plural.run("q").replayed
    outcomes = [r["outcome"] for r in ledger.runs()]
    assert outcomes == ["unstable", "unstable", "failed"] and len(model.calls) == 6


def test_the_first_writer_wins_and_the_second_gets_its_answer(ledger: Ledger) -> None:
    a, b = stab(Counter("positive")), stab(Counter("negative"))  # no ledger: decide only
    ra, rb = a.run("q"), b.run("q")
    kept = ledger.remember(a, "q", ra)
    assert kept.value == "positive" and not kept.replayed
    second = ledger.remember(b, "q", rb)
    assert second.value == "positive" and second.replayed, "the second writer returns the first's answer"
    runs = ledger.show(ledger.key(a, "q"))["runs"]
    assert [r["value"] for r in runs] == ["positive", "negative"]
    assert runs[1]["superseded_by"] == runs[0]["run"] and runs[0]["current"] and len(runs[1]["ballots"]) == 3


def test_threads_deciding_the_same_key_at_once_agree_on_the_first(where: str) -> None:
    path = where
    answers = ["positive", "negative", "positive", "negative", "positive", "negative"]
    barrier = threading.Barrier(len(answers))
    finals: list[Any] = [None] * len(answers)

    def worker(i: int) -> None:
        s = stab(Counter(answers[i]))
        decided = s.run("same question")
        with Ledger(path) as own:  # one Ledger object per thread: a separate connection
            barrier.wait(timeout=30)
            finals[i] = own.remember(s, "same question", decided)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(answers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert None not in finals, "a writer failed (see the thread's traceback)"
    assert len({r.value for r in finals}) == 1
    assert sum(not r.replayed for r in finals) == 1, "exactly one writer decided the key"
    with Ledger(path) as check:
        runs = check.runs()
    assert len(runs) == len(answers) and sum(r["current"] for r in runs) == 1


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_many_writers_creating_the_same_new_ledger_at_once(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    errors = []

    def open_and_close(path: str) -> None:
        try:
            Ledger(path).close()
        except Exception as exc:  # collected for the assertion
            errors.append(repr(exc))

    server = request.getfixturevalue("postgres_server") if store == "postgres" else None
    for trial in range(30 if server is None else 8):  # each PostgreSQL trial: a new database, 6 schema creators
        path = str(tmp_path / f"new-{trial}.sqlite3") if server is None else server.create_database()
        threads = [threading.Thread(target=open_and_close, args=(path,)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert errors == []
    if server is not None:
        assert server.execute("SELECT version FROM accord.version", path.rsplit("/", 1)[1]) == [(2,)]


def test_threads_sharing_one_ledger_lose_nothing(ledger: Ledger) -> None:
    model = Counter()
    s = stab(model, ledger=ledger)
    errors = []

    def worker(i: int) -> None:
        for j in range(15):
            result = s.run(f"t{i}-{j}")
            if "ledger_error" in result.meta:
                errors.append(result.meta["ledger_error"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    runs = ledger.runs(limit=None)
    assert len(runs) == 90 and all(r["current"] for r in runs)
    assert sum(len(run["ballots"]) for run in ledger.export()) == len(model.calls) == 270


# -- many workers: claims (across processes: tests/test_ledger_processes.py) ---------------------


def claim_elsewhere(ledger: Ledger, s: Stabilizer[Any], prompt: str, lease: float) -> str:
    """Claim ``prompt`` for a worker on another host, which never renews it; its owner id."""
    owner = "another-host:1:4242:cafe"
    assert ledger._store.claim(ledger._keys.entry(s, prompt), owner, lease=lease, ttl=None, refresh=False).state == "mine"
    return owner


def test_map_claims_each_prompt_and_lets_go_naming_the_answer(ledger: Ledger) -> None:
    s = stab(Counter(), ledger=ledger)
    results = s.map(["a", "b", "a"], progress=False)
    assert [r.replayed for r in results] == [False, False, True], "the same prompt twice in a batch is decided once"
    keys = [ledger.key(s, p) for p in ("a", "b")]
    holders = ledger._store.holders(keys)
    assert {k: (h.live, h.run) for k, h in holders.items()} == {keys[0]: (False, 1), keys[1]: (False, 2)}


def test_a_claim_opens_the_run_and_storing_it_lets_go_naming_the_answer(ledger: Ledger) -> None:
    s, store = stab(Counter(), ledger=ledger), ledger._store
    entry, owner = ledger._keys.entry(s, "a"), "another-host:1:4242:cafe"
    claim = store.claim(entry, owner, lease=30.0, ttl=None, refresh=False, begin=True)
    assert claim.state == "mine" and claim.run is not None
    assert [(r["run"], r["outcome"]) for r in ledger.runs()] == [(claim.run, "interrupted")], "opened with the claim"
    assert store.claim(entry, "someone-else", lease=30.0, ttl=None, refresh=False, begin=True).state == "taken"
    assert len(ledger.runs()) == 1, "a claim that is taken opens nothing"
    from accord.ledger import _codec

    decided = stab(Counter()).run("a")  # decided without the ledger: the claim's owner stores it
    run_id, winner = store.store_run(entry, _codec.encode(decided, s.schema), refresh=False, ttl=None,
                                     opened=claim.run, release=owner)  # fmt: skip
    assert (run_id, winner) == (claim.run, None)
    holder = store.holders([entry.key])[entry.key]
    assert (holder.owner, holder.live, holder.run) == (owner, False, run_id), "let go in the same transaction, naming the answer"
    assert holder.answer is not None and holder.answer.run == run_id and holder.answer.ballots == store.replay(run_id).ballots
    store.renew(owner, [entry.key], lease=30.0)  # the owner's renewing thread, late: it read the key before the release
    assert not store.holders([entry.key])[entry.key].live, "a claim let go is never renewed"
    again = store.claim(entry, "someone-else", lease=30.0, ttl=None, refresh=False, begin=True)
    assert again.state == "answered" and again.answer is not None and again.answer.run == run_id and again.run is None
    assert len(ledger.runs()) == 1, "an answered key opens no run"


def test_look_reads_several_keys_at_once(ledger: Ledger) -> None:
    s, store = stab(Counter(), ledger=ledger), ledger._store
    ledger.remember(s, "decided", stab(Counter()).run("decided"))  # decided without a claim (run() would claim it)
    keys = [ledger.key(s, p) for p in ("decided", "held", "never")]
    owner = claim_elsewhere(ledger, s, "held", lease=30.0)
    found = store.look(keys)
    assert set(found) == set(keys[:2]), "a key with neither an answer nor a claim is absent"
    answer, holder = found[keys[0]]
    assert answer is not None and holder is None and answer.run == ledger.runs()[-1]["run"]
    answer, holder = found[keys[1]]
    assert answer is None and holder is not None and (holder.owner, holder.live) == (owner, True)


def test_a_worker_that_fails_to_store_its_run_still_lets_go_of_the_claim(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Ledger(where) as ledger:
        s = stab(Counter(), ledger=ledger)

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise LedgerError("injected: the final write fails")

        monkeypatch.setattr(ledger._store, "store_run", broken)
        results = s.map(["a"], progress=False)
        monkeypatch.undo()
        assert results[0].value == "positive" and "ledger_error" in results[0].meta, "the answer is kept, the failure reported"
        holder = ledger._store.holders([ledger.key(s, "a")])[ledger.key(s, "a")]
        assert not holder.live and holder.run is None, "let go without naming a run: another worker decides it again"


def test_map_waits_out_the_lease_of_a_claim_nobody_renews_then_decides_it(where: str) -> None:
    with Ledger(where, lease=1.0) as ledger:
        model = Counter()
        s = stab(model, ledger=ledger)
        claim_elsewhere(ledger, s, "held", lease=1.0)
        start = time.monotonic()
        results = s.map(["free", "held", "other"], progress=False)
        waited = time.monotonic() - start
    assert [r.value for r in results] == ["positive"] * 3 and not any(r.replayed for r in results)
    assert 0.8 <= waited < 10, "the held prompt is decided once its lease ran out"
    assert model.calls.count("held") == 3 and model.calls[-3:] == ["held"] * 3, "after the others"


def decided_elsewhere_soon(where: str, ledger: Ledger, s: Any, prompt: str, answer: str) -> threading.Thread:
    """Another worker holds ``prompt`` now, decides it as ``answer`` half a second later and lets go,
    naming its run: the started thread (join it)."""
    owner = claim_elsewhere(ledger, s, prompt, lease=30.0)
    other = stab(Counter(answer))

    def finish_elsewhere() -> None:
        time.sleep(0.5)
        with Ledger(where) as theirs:
            done = theirs.remember(other, prompt, other.run(prompt))
            theirs._store.release(theirs.key(other, prompt), owner, done.meta["ledger"]["run"])

    thread = threading.Thread(target=finish_elsewhere)
    thread.start()
    return thread


def test_map_replays_the_answer_another_worker_stores_while_it_waits(where: str) -> None:
    with Ledger(where, lease=30.0) as ledger:
        model = Counter("positive")
        s = stab(model, ledger=ledger)
        thread = decided_elsewhere_soon(where, ledger, s, "held", "negative")
        start = time.monotonic()
        results = s.map(["free", "held"], progress=False)
        waited = time.monotonic() - start
        thread.join()
    assert [(r.value, r.replayed) for r in results] == [("positive", False), ("negative", True)]
    assert "held" not in model.calls and 0.4 <= waited < 10, "waited for the other worker's answer, well before its lease"


def test_map_refresh_with_claims_decides_again_and_a_waiter_takes_the_refreshed_answer(where: str) -> None:
    with Ledger(where) as ledger:
        model = Counter("positive")
        s = stab(model, ledger=ledger)
        s.map(["a", "b"], progress=False)
        model.answer = "negative"
        again = s.map(["a", "b", "a"], progress=False, refresh=True)
        assert [(r.value, r.replayed) for r in again] == [("negative", False), ("negative", False), ("negative", True)]
        assert len(model.calls) == 12 and sum(r["current"] for r in ledger.runs()) == 2



class Slow(Counter):
    """A Counter whose calls take a while, so that threads deciding one prompt overlap."""

    def __call__(self, prompt: Any, request: Any = None) -> str:
        time.sleep(0.05)
        return super().__call__(prompt, request)


async def _last(events: Any) -> Any:
    async for event in events:
        last = event
    return last


@pytest.mark.parametrize("driver", ["run", "arun", "stream", "astream"])
def test_threads_running_one_prompt_at_once_decide_it_once(where: str, driver: str) -> None:
    model = Slow()
    with Ledger(where) as ledger:
        s = stab(model, ledger=ledger)
        barrier = threading.Barrier(8)
        results: list[Any] = [None] * 8
        ways = {"run": lambda: s.run("same"), "arun": lambda: asyncio.run(s.arun("same")),
                "stream": lambda: list(s.stream("same"))[-1].result, "astream": lambda: asyncio.run(_last(s.astream("same"))).result}

        def worker(i: int) -> None:
            barrier.wait(timeout=30)
            results[i] = ways[driver]()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert None not in results, "a thread failed (see its traceback)"
        assert len(model.calls) == 3, f"decided {len(model.calls) // 3} times"
        assert sum(not r.replayed for r in results) == 1 and {r.value for r in results} == {"positive"}
        assert len(ledger.runs()) == 1


def test_a_run_waits_for_a_prompt_another_worker_holds_and_replays_its_answer(where: str) -> None:
    with Ledger(where, lease=30.0) as ledger:
        model = Counter("positive")
        s = stab(model, ledger=ledger)
        thread = decided_elsewhere_soon(where, ledger, s, "held", "negative")
        start = time.monotonic()
        result = s.run("held")
        waited = time.monotonic() - start
        thread.join()
    assert (result.value, result.replayed) == ("negative", True) and model.calls == []
    assert 0.4 <= waited < 10


def test_a_replay_made_no_call_and_names_the_calls_of_the_decision(ledger: Ledger) -> None:
    s = stab(Counter(), ledger=ledger)
    first = s.run("q")
    assert (first.calls, first.usage.calls, first.original_calls, first.original_usage) == (3, 3, 3, first.usage)
    again = s.run("q")
    assert again.replayed and again.calls == 0 and again.usage.calls == 0 and again.usage.seconds == 0
    assert again.original_calls == 3 and len(again.ballots) == 3
    assert again.original_usage is not None and again.original_usage.to_dict() == first.usage.to_dict()
    assert again.to_dict()["calls"] == 0 and again.to_dict()["original_calls"] == 3
    assert [r.calls for r in s.map(["q", "q2"], progress=False)] == [0, 3]


def test_the_result_names_the_ledger_key_that_show_takes(ledger: Ledger) -> None:
    s = stab(Counter(), ledger=ledger)
    first, again = s.run("q"), s.run("q")
    assert first.ledger_key == again.ledger_key == ledger.key(s, "q")
    assert first.key == '"positive"', "Result.key stays the winning canonical form"
    assert ledger.show(first.ledger_key)["key"] == first.ledger_key
    assert stab(Counter()).run("q").ledger_key is None, "no ledger, no ledger key"


# -- the key ----------------------------------------------------------------------------------


def test_the_key_is_the_hash_of_canonical_json_of_request_schema_policy_and_model(ledger: Ledger) -> None:
    s = stab(Counter(), Review, ledger)
    messages = [{"role": "user", "content": "hi", "name": "x"}]
    material: dict[str, Any] = {
        "ledger": 1,
        "model": "model-a",
        "policy": describe_policy(s.policy),
        "request": messages,
        "schema": describe_schema(s.schema),
    }
    assert ledger.key(s, messages) == hashlib.sha256(canonical_key(material).encode()).hexdigest()
    assert material["schema"]["json_schema"] == Review.model_json_schema()
    assert ledger.key(s, [{"name": "x", "content": "hi", "role": "user"}]) == ledger.key(s, messages)
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert ledger.key(s, two) != ledger.key(s, two[::-1])


def _other_normalizer(text: str) -> str:
    return text.strip()


@pytest.mark.parametrize(
    "change",
    [
        {"schema": Literal["positive", "negative", "neutral"]},
        {"fingerprint": "model-b"},
        {"vote": Vote(k=3)},
        {"vote": Vote(k=5, quorum=4)},
        {"vote": Vote(k=5, early_stop=False)},
        {"retry": Retry(attempts=5)},
        {"extract": accord.Extract(normalize=[accord.casefold])},
        {"extract": accord.Extract(normalize=[_other_normalizer])},
        {"settings": accord.Settings(temperature=0.7)},
        {"settings": accord.Settings(max_tokens=64)},
        {"settings": accord.Settings(seed=7)},
        {"prompting": accord.Prompting(schema_in_prompt=False)},
    ],
    ids=["schema", "fingerprint", "vote-k", "vote-quorum", "vote-early_stop", "retry", "normalize-casefold", "normalize-other",
         "temperature", "max_tokens", "seed", "schema_in_prompt"],
)
def test_a_changed_schema_model_or_policy_misses(ledger: Ledger, change: dict[str, Any]) -> None:
    model = Counter()
    base: dict[str, Any] = {"schema": Literal["positive", "negative"], "fingerprint": "model-a"}
    stab(model, ledger=ledger, **base).run("q")
    changed = stab(model, ledger=ledger, **{**base, **change})
    result = changed.run("q")
    assert not result.replayed and len(model.calls) > 3


def test_what_cannot_change_the_answer_is_not_in_the_key(ledger: Ledger) -> None:
    first = Counter()
    stab(first, ledger=ledger).run("q")
    other_function = Counter()  # another function, same logical fingerprint: the same model elsewhere
    same = stab(other_function, ledger=ledger, budget=accord.Budget(max_calls=50),
                retry=Retry(transport_attempts=9), hooks=accord.Hooks(after_ballot=lambda b: None))
    assert same.run("q").replayed and other_function.calls == []


def test_ttl_expires_an_answer(where: str) -> None:
    model = Counter("positive")
    with Ledger(where, ttl=0.3) as ledger:
        s = stab(model, ledger=ledger)
        s.run("q")
        assert s.run("q").replayed
        time.sleep(0.4)
        model.answer = "negative"
        again = s.run("q")
        assert again.value == "negative" and not again.replayed
        assert s.run("q").value == "negative"
        runs = ledger.show(ledger.key(s, "q"))["runs"]
        assert runs[0]["superseded_by"] == runs[1]["run"] and runs[1]["current"]


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(accord.ConfigError):
        Ledger(tmp_path / "l", ttl=0)
    with pytest.raises(accord.ConfigError):
        Ledger(tmp_path / "l", timeout=-1)
    with pytest.raises(accord.ConfigError, match="lease"):
        Ledger(tmp_path / "l", lease=0)
    assert list(tmp_path.iterdir()) == [], "a bad argument opens nothing"


# -- storage ----------------------------------------------------------------------------------


def test_every_ballot_is_json_with_text_data_error_usage_timing(ledger: Ledger) -> None:
    model = Counter()
    outputs = iter(['{"stars": 9}', '{"stars": 4, "sentiment": "positive"}'])
    model.answer = lambda: next(outputs)
    stab(model, Review, ledger, vote=Vote(k=1)).run("q")
    bodies = [json.loads(b) for (b,) in raw(ledger, "SELECT body FROM ballots ORDER BY seq")]
    assert [b["status"] for b in bodies] == ["invalid", "valid"]
    assert bodies[0]["text"] == '{"stars": 9}' and bodies[0]["error"]["stage"] == "validate"
    assert bodies[1]["data"] == {"stars": 4, "sentiment": "positive"}
    for body in bodies:
        assert {"usage", "started", "seconds", "meta", "slot", "attempt", "finish_reason"} <= set(body)
        assert body["usage"]["calls"] == 1


def test_a_stored_answer_that_no_longer_validates_is_not_replayed(ledger: Ledger, caplog: pytest.LogCaptureFixture) -> None:
    model = Counter()
    s = stab(model, ledger=ledger)
    s.run("q")
    raw(ledger, "UPDATE runs SET value = '\"maybe\"'")
    with caplog.at_level(logging.WARNING, logger="accord"):
        assert ledger.recall(s, "q") is None
    assert "recall failed" in caplog.text


def test_stabilize_arguments_are_part_of_the_key(ledger: Ledger) -> None:
    @accord.stabilize(schema=str, vote=accord.Vote(k=1), ledger=ledger, prompting=accord.Prompting(schema_in_prompt=False))
    def ask(prompt: str, style: str = "plain") -> str:
        return f"{style}:{prompt}"

    assert ask("hi") == "plain:hi"
    assert ask("hi", style="shout") == "shout:hi"  # not the replayed "plain:hi"
    assert ask.run("hi", style="shout").replayed


def test_show_needs_a_unique_prefix(ledger: Ledger) -> None:
    s = stab(Counter(), ledger=ledger)
    keys = {ledger.key(s, f"p{i}") for i in range(40)}
    for i in range(40):
        s.run(f"p{i}")
    shared = next(k[0] for k in keys if sum(other[0] == k[0] for other in keys) > 1)  # 40 keys, 16 first digits
    with pytest.raises(LedgerError, match=f"the key prefix '{shared.upper()}' is ambiguous"):
        ledger.show(shared.upper())
    one = sorted(keys)[0]
    assert ledger.show(one.upper())["key"] == one
    assert [r["key"] for r in ledger.runs(key=one[:10].upper())] == [one]
    with pytest.raises(LedgerError, match="no key starts with 'ABC0000'"):
        ledger.show("ABC0000")


# -- bad state of an SQLite file (PostgreSQL's: tests/test_ledger_postgres.py) --------------------


def test_a_corrupt_file_raises_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite3"
    path.write_bytes(b"this is not a database at all" * 300)
    with pytest.raises(LedgerError, match="corrupt or not an SQLite file"):
        Ledger(path)


def test_a_foreign_database_raises_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE users (name TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(LedgerError, match="not an accord ledger"):
        Ledger(path)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete", "a foreign file is left untouched"
    raw.close()


def test_a_ledger_from_a_newer_accord_raises_ledger_error(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    Ledger(path).close()
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(LedgerError, match="newer accord"):
        Ledger(path)


def test_corrupt_pages_raise_on_open_and_mid_session_the_answer_is_still_returned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "l.sqlite3"
    model = Counter()
    with Ledger(path) as ledger:
        stab(model, ledger=ledger).map([f"p{i}" for i in range(40)], progress=False)
    already_open = Ledger(path)
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    data[4096:] = b"\xff" * (len(data) - 4096)  # keep the header page, wreck the rest
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerError, match="corrupt"):
        Ledger(path)
    with pytest.raises(LedgerError, match="corrupt"):
        already_open.runs()
    with caplog.at_level(logging.WARNING, logger="accord"):
        result = stab(model, ledger=already_open).run("p1")
    assert result.value == "positive" and not result.replayed
    assert result.meta["ledger_error"]["type"] == "LedgerError" and "corrupt" in result.meta["ledger_error"]["message"]
    assert "recall failed" in caplog.text and "not recorded" in caplog.text


def test_a_full_disk_returns_the_answer_and_reports_the_failed_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    model = Counter()
    s = stab(model, ledger=ledger)
    s.run("small")
    assert isinstance(ledger._store, SQLiteStore)
    conn = ledger._store._connection()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    secret = "sk-SECRET-" + "x" * 20_000  # a big request needs new pages; it must never be logged
    with caplog.at_level(logging.WARNING, logger="accord"):
        result = s.run(secret)
    assert result.value == "positive" and result.stable and not result.replayed
    error = result.meta["ledger_error"]
    assert error["type"] == "LedgerError" and "full" in error["message"]
    assert "not recorded" in caplog.text and "sk-SECRET" not in caplog.text
    assert len(ledger.runs()) == 1, "a failed write leaves nothing half-written"
    with pytest.raises(accord.InvalidOutput) as raised:
        stab(Counter("nonsense"), ledger=ledger, vote=Vote(k=1), retry=Retry(attempts=1)).run(secret)
    assert "full" in raised.value.result.meta["ledger_error"]["message"]
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert s.run(secret).meta.get("ledger") and len(ledger.runs()) == 2
    ledger.close()


def test_a_lock_held_past_the_timeout_is_reported_and_the_answer_returned(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite3"
    ledger = Ledger(path, timeout=0.3)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        result = stab(Counter(), ledger=ledger).run("q")
        waited = time.monotonic() - start
        assert result.value == "positive"
        assert "locked" in result.meta["ledger_error"]["message"]
        assert 0.3 <= waited < 3
        assert ledger.runs() == [], "readers are not blocked by a writer (WAL)"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert stab(Counter(), ledger=ledger).run("q").meta["ledger"]["run"] == 1
    ledger.close()


def test_opening_a_ledger_locked_past_the_timeout_raises(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a rollback-journal exclusive lock blocks even readers
    try:
        start = time.monotonic()
        with pytest.raises(LedgerError, match="locked"):
            Ledger(path, timeout=0.3)
        assert time.monotonic() - start < 3
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    Ledger(path).close()


# -- operations: the retention SQL of docs/ledger.md, as written there ------------------------------


def docs_sql(marker: str) -> str:
    """The SQL block of docs/ledger.md that holds ``marker``."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "ledger.md").read_text(encoding="utf-8")
    found: list[str] = [block for block in re.findall(r"```sql\n(.*?)```", text, flags=re.S) if marker in block]
    assert len(found) == 1, f"docs/ledger.md has {len(found)} SQL blocks with {marker!r}"
    return found[0]


def test_the_retention_sql_of_the_docs_forgets_old_history_and_keeps_every_current_answer(ledger: Ledger) -> None:
    model = Counter("positive")
    s = stab(model, ledger=ledger)
    s.run("kept")
    s.run("refreshed")
    model.answer = "negative"
    s.run("refreshed", refresh=True)  # the first run of "refreshed" is now history
    with pytest.raises(accord.InvalidOutput):
        stab(Counter("?"), int, ledger, vote=Vote(k=1), retry=Retry(attempts=1)).run("failed")
    time.sleep(0.05)
    cutoff = time.time()
    time.sleep(0.05)
    s.run("after the cutoff")
    before = {run["run"]: run for run in ledger.export()}
    script = docs_sql("-- retention").replace(":cutoff", repr(cutoff))
    if ledger.path is not None:
        conn = sqlite3.connect(ledger.path, isolation_level=None)
        conn.executescript(script.replace("accord.", ""))
        conn.close()
    else:
        import psycopg

        assert isinstance(ledger._store, PostgresStore)
        with psycopg.connect(ledger._store._dsn, autocommit=True) as pg:
            pg.execute(script)  # several statements, no parameters: one simple query
    after = {run["run"]: run for run in ledger.export()}
    assert sorted(r["request"] for r in after.values()) == ["after the cutoff", "kept", "refreshed"]
    assert all(r["current"] and r["ballots"] == before[i]["ballots"] and r["superseded_by"] is None for i, r in after.items())
    assert ledger.show(ledger.key(s, "refreshed"))["runs"][0]["value"] == "negative"
    silent = stab(Counter("other"), ledger=ledger)
    assert [silent.run(p).value for p in ("kept", "refreshed", "after the cutoff")] == ["positive", "negative", "negative"]
    assert ledger.runs(key=ledger.key(s, "failed")) == [] and len(ledger.runs(limit=None)) == 3
