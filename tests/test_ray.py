"""accord on Ray Data (accord.integrations.ray).

The callable class alone, on pyarrow tables (no cluster: fast); then on the session's real local
Ray cluster (``ray_cluster``, ``ray.init(num_cpus=2)``): 200 rows through a function backend
with latency, an actor killed mid-run with the ledger on the session's real PostgreSQL, two
datasets over overlapping prompts, and the real vLLM. Model calls are counted where they are
made (tests/ray_parts.py logs each one), never taken from accord's own figures.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections import Counter
from typing import Literal

import pytest

pa = pytest.importorskip("pyarrow")

import accord  # noqa: E402
from accord import Ledger, Vote, models  # noqa: E402
from accord.integrations.ray import COLUMNS, Recipe, Stabilize, stabilize_dataset  # noqa: E402
from ray_parts import Registry, Row, calls, counted, vllm, word  # noqa: E402

VOTE = Vote(k=3, gate=None)  # a backend that always agrees: 2 calls a row (unanimous after 2 of 3)
MOST_CALLS = VOTE.k * accord.Retry().attempts  # what the policy lets one prompt's decision make


def rows_of(table) -> dict[int, dict]:
    return {json.loads(r["value"])["id"]: r for r in table.to_pylist() if r["value"] is not None}


# -- the callable class on its own ------------------------------------------------------------


def test_a_batch_comes_back_with_its_answers_and_a_failed_row_never_fails_it(tmp_path):
    log = tmp_path / "calls"
    batch = pa.table({"prompt": ["row 1", "no number here", None, "row 2"], "doc": ["a", "b", "c", "d"]})
    with Stabilize(Recipe(counted(0.0, log), Row, vote=VOTE), concurrency=2) as stab:
        out = stab(batch)
    assert out.column_names == ["prompt", "doc", *(name for name, _ in COLUMNS)]
    assert [out.schema.field(name).type for name, _ in COLUMNS] == [kind for _, kind in COLUMNS]
    got = out.to_pylist()
    assert [r["doc"] for r in got] == ["a", "b", "c", "d"]  # the batch's order and columns kept
    assert json.loads(got[0]["value"]) == {"id": 1, "word": word(1)} and got[0]["stable"] and got[0]["calls"] == 2
    assert got[0]["error_type"] is None and got[0]["stopped_because"] == "unanimous" and got[0]["agreement"] == 1.0
    assert got[1]["value"] is None and got[1]["error_type"] == "InvalidOutput" and "no valid output" in got[1]["error_message"]
    assert got[2]["error_type"] == "ConfigError" and got[2]["calls"] == 0  # no prompt at all: refused, never sent
    assert calls(log) == Counter({1: 2, 2: 2, -1: got[1]["calls"]})


def test_fail_on_error_fails_the_batch_and_bad_columns_are_named(tmp_path):
    recipe = Recipe(counted(0.0, tmp_path / "calls"), Row, vote=Vote(k=1, gate=None))
    with Stabilize(recipe, fail_on_error=True) as stab, pytest.raises(accord.AccordError, match=r"row 1 of the batch failed \(InvalidOutput\)"):
        stab(pa.table({"prompt": ["row 1", "nothing"]}))
    with Stabilize(recipe, column="text") as stab:
        with pytest.raises(accord.ConfigError, match="no column 'text'"):
            stab(pa.table({"prompt": ["row 1"]}))
        with pytest.raises(accord.ConfigError, match=r"named like accord's output \['stable'\]"):
            stab(pa.table({"text": ["row 1"], "stable": [1]}))
    with Stabilize(recipe, prefix="accord_") as stab:  # a pandas frame or a dict of columns is read as a table
        assert stab({"prompt": ["row 3"], "stable": [1]}).column("accord_value").to_pylist() == ['{"id": 3, "word": "delta"}']


def test_a_recipe_checks_its_options_and_never_shows_a_password():
    with pytest.raises(accord.ConfigError, match=r"unknown options \['votes'\]"):
        Recipe(lambda: models.scripted(["x"]), str, votes=Vote(k=1, gate=None))
    with pytest.raises(accord.ConfigError, match=r"must be a DSN or a file path"):
        Recipe(lambda: models.scripted(["x"]), str, ledger=Ledger)
    with pytest.raises(accord.ConfigError, match="must be a function that returns a backend"):
        Recipe(models.scripted(["x"]), str)
    with pytest.raises(accord.ConfigError, match=r"does not pickle \(TypeError: cannot pickle '_thread.lock'"):
        stabilize_dataset(None, Recipe(functools.partial(models.scripted, threading.Lock()), str))  # checked before Ray sees it
    text = repr(Recipe(lambda: models.scripted(["x"]), str, ledger="postgresql://accord:s3cret@127.0.0.1:5432/db"))
    assert "s3cret" not in text and "127.0.0.1" in text


def test_an_async_backend_runs_concurrently_within_the_bound():
    in_flight, most = 0, 0

    async def model(prompt: str) -> str:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return "yes"

    recipe = Recipe(lambda: models.function(model, name="async-yes"), Literal["yes", "no"], vote=Vote(k=1, gate=None))
    with Stabilize(recipe, concurrency=3) as stab:
        out = stab(pa.table({"prompt": [f"q{i}" for i in range(12)]}))
    assert out.column("value").to_pylist() == ['"yes"'] * 12
    assert most == 3  # three calls at once, never more


# -- on a real Ray cluster ----------------------------------------------------------------------


def test_200_rows_through_a_function_backend_with_latency(ray_cluster, tmp_path):
    import ray.data

    log = tmp_path / "calls"
    prompts = [f"Extract row {n}." for n in range(200)] + ["no row at all"]
    ds = ray.data.from_items([{"prompt": p, "n": i} for i, p in enumerate(prompts)])
    out = stabilize_dataset(ds, Recipe(counted(0.02, log), Row, vote=VOTE), actors=2, batch_size=25, concurrency=8, num_cpus=0.5)
    table = pa.concat_tables([pa.Table.from_pylist(out.take_all())])
    decided = rows_of(table)
    assert sorted(decided) == list(range(200)) and table.num_rows == 201
    assert all(json.loads(r["value"])["word"] == word(n) and r["stable"] and r["calls"] == 2 for n, r in decided.items())
    failed = [r for r in table.to_pylist() if r["value"] is None]
    assert len(failed) == 1 and failed[0]["error_type"] == "InvalidOutput"  # the batch it was in came back whole
    counted_calls = calls(log)
    assert all(counted_calls[n] == 2 for n in range(200))


def _kill_one_when(log, registry, at_calls: int, killed: list[int]) -> None:
    import ray

    deadline = time.monotonic() + 60
    while sum(calls(log).values()) < at_calls and time.monotonic() < deadline:
        time.sleep(0.01)
    handle, pid = ray.get(registry.all.remote())[0]
    ray.kill(handle, no_restart=False)  # Ray restarts it and runs its batches again
    killed.append(pid)


def test_an_actor_killed_mid_run_loses_no_row_and_no_prompt_is_decided_twice(ray_cluster, postgres_server, tmp_path):
    import ray
    import ray.data

    dsn, log = postgres_server.create_database(), tmp_path / "calls"
    name = f"registry-{time.time_ns()}"
    registry = ray.remote(Registry).options(name=name, num_cpus=0).remote()
    recipe = Recipe(counted(0.05, log, register=name), Row, vote=VOTE, ledger=dsn)
    first = ray.data.from_items([{"prompt": f"Extract row {n}."} for n in range(160)])
    killed: list[int] = []
    killer = threading.Thread(target=_kill_one_when, args=(log, registry, 60, killed))
    killer.start()
    table = pa.Table.from_pylist(stabilize_dataset(first, recipe, actors=2, batch_size=10, concurrency=4, num_cpus=0.5).take_all())
    killer.join()
    pids = [pid for _, pid in ray.get(registry.all.remote())]
    assert killed and len(pids) >= 3 and killed[0] in pids[:2]  # killed mid-run, and restarted
    assert table.num_rows == 160 and sorted(rows_of(table)) == list(range(160))  # every row, once
    assert all(json.loads(r["value"])["word"] == word(n) for n, r in rows_of(table).items())
    made = calls(log)
    assert max(made.values()) <= MOST_CALLS, made.most_common(3)  # no prompt past its policy's calls
    with Ledger(dsn) as ledger:
        runs = ledger.runs(limit=None)
    accepted = Counter(r["key"] for r in runs if r["outcome"] == "accepted")
    assert len(accepted) == 160 and set(accepted.values()) == {1}  # each prompt decided once
    # Ray ran the dead actor's batches again: their decided rows replayed. Only the prompts it had
    # in flight (at most its concurrency, 4) were called again, each cut-short run left in the ledger.
    again = [n for n, c in made.items() if c > 2]
    cut_short = [r for r in runs if r["outcome"] != "accepted"]
    assert len(again) <= 4 and len(again) <= len(cut_short), (again, len(cut_short))

    # A second dataset over overlapping prompts (100..199): the 60 shared ones replay, never call.
    second = ray.data.from_items([{"prompt": f"Extract row {n}."} for n in range(100, 200)])
    table = pa.Table.from_pylist(stabilize_dataset(second, recipe, actors=2, batch_size=10, concurrency=4, num_cpus=0.5).take_all())
    again = rows_of(table)
    assert sorted(again) == list(range(100, 200))
    assert all(again[n]["replayed"] and again[n]["calls"] == 0 for n in range(100, 160))
    assert all(not again[n]["replayed"] and again[n]["calls"] == 2 for n in range(160, 200))
    after = calls(log)
    assert all(after[n] == made[n] for n in range(100, 160)) and all(after[n] == 2 for n in range(160, 200))


@pytest.mark.vllm
def test_the_real_vllm_behind_ray(ray_cluster, vllm_server):
    import ray.data

    model = functools.partial(vllm, vllm_server.url, vllm_server.model)
    questions = ["Is Paris the capital of France?", "Is the sun cold?"]  # two rows: a 135M model on a shared CPU
    ds = ray.data.from_items([{"prompt": f"Answer yes or no. {q}"} for q in questions])
    out = pa.Table.from_pylist(stabilize_dataset(ds, Recipe(model, Literal["yes", "no"], vote=Vote(k=1, gate=None)), actors=1, num_cpus=0.5).take_all())
    got = out.to_pylist()
    assert len(got) == 2 and all(r["error_type"] is None for r in got), [(r["error_type"], r["error_message"]) for r in got]
    assert all(json.loads(r["value"]) in ("yes", "no") and r["calls"] >= 1 and r["prompt_tokens"] > 0 for r in got)
