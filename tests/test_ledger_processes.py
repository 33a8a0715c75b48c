"""The decision ledger across processes: sticky answers, SIGKILL and resume, many workers on one batch.

Every test runs on both stores: an SQLite file the processes share, and a database of the
session's real PostgreSQL server (``postgres_server`` in conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from accord import Ledger

# A worker: decides prompts with Stabilizer.map on a function backend that logs every model call
# (one JSON line: the prompt) and answers "<label>:<prompt>".
WORKER = r'''
import json, sys, time
from pathlib import Path
from accord import Ledger, Stabilizer, Vote, models

cfg = json.loads(sys.argv[1])
if "host" in cfg:  # as if on a host of its own: no other worker can see that it died, only that its lease ran out
    import accord.ledger._batch
    accord.ledger._batch._HERE = cfg["host"]

def model(prompt, request=None):
    with open(cfg["calls"], "a") as log:
        log.write(json.dumps(request.prompt) + "\n")
    slow = request.ballot == 1 and "second_delay" in cfg  # a run with one ballot made, one in flight
    time.sleep(cfg["second_delay"] if slow else cfg.get("delay", 0.0))
    return f'{cfg["label"]}:{request.prompt}'

ledger = Ledger(cfg["ledger"], lease=cfg.get("lease", 30.0), timeout=cfg.get("timeout", 5.0))
stab = Stabilizer(models.function(model, name=cfg.get("fingerprint", "worker-model")), str,
                  vote=Vote(k=3), ledger=ledger)
if "barrier" in cfg:  # start together: every worker waits until all have written their ready file
    Path(cfg["barrier"], cfg["label"]).touch()
    while len(list(Path(cfg["barrier"]).iterdir())) < cfg["parties"]:
        time.sleep(0.005)
results = stab.map(cfg["prompts"], concurrency=cfg.get("concurrency", 4), progress=False)
Path(cfg["out"]).write_text(json.dumps([
    {"value": r.value, "replayed": r.replayed, "error": None if r.error is None else repr(r.error),
     "ledger_error": r.meta.get("ledger_error")}
    for r in results]))
'''


CALLS = 2  # model calls per decision: Vote(k=3) stops once 2 ballots agree


class Workers:
    """Starts worker processes in ``folder`` on one shared ledger, collects their output and model calls."""

    def __init__(self, folder: Path, ledger: str) -> None:
        self.folder = folder
        self.script = folder / "worker.py"
        self.script.write_text(WORKER)
        self.ledger = ledger  # a file, or a DSN

    def __call__(self, label: str, prompts: list[str], **cfg: Any) -> subprocess.Popen[bytes]:
        cfg = {"label": label, "prompts": prompts, "ledger": str(self.ledger),
               "calls": str(self.folder / f"calls-{label}.jsonl"), "out": str(self.folder / f"out-{label}.json"), **cfg}
        with open(self.folder / f"err-{label}.txt", "wb") as err:  # a file, not a pipe: warnings never block a worker
            return subprocess.Popen([sys.executable, str(self.script), json.dumps(cfg)], stderr=err)

    def finish(self, proc: subprocess.Popen[bytes], label: str) -> list[dict[str, Any]]:
        proc.wait(timeout=180)
        assert proc.returncode == 0, self.errors(label)[-3000:]
        return json.loads((self.folder / f"out-{label}.json").read_text())  # type: ignore[no-any-return]  # the worker wrote a list

    def errors(self, label: str) -> str:
        return (self.folder / f"err-{label}.txt").read_text(errors="replace")

    def calls(self, label: str) -> list[str]:
        path = self.folder / f"calls-{label}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(params=["sqlite", "postgres"])
def worker(request: pytest.FixtureRequest, tmp_path: Path) -> Workers:
    if request.param == "sqlite":
        return Workers(tmp_path, str(tmp_path / "ledger.sqlite3"))
    return Workers(tmp_path, request.getfixturevalue("postgres_server").create_database())


def test_answers_are_sticky_across_processes(worker: Workers) -> None:
    prompts = ["is the sky blue?", "is water wet?"]
    first = worker.finish(worker("alpha", prompts), "alpha")
    assert [r["value"] for r in first] == [f"alpha:{p}" for p in prompts]
    second = worker.finish(worker("beta", prompts), "beta")
    assert [r["value"] for r in second] == [f"alpha:{p}" for p in prompts], "another process gets the same answers"
    assert all(r["replayed"] for r in second) and worker.calls("beta") == []
    other = worker.finish(worker("gamma", prompts, fingerprint="another-model"), "gamma")
    assert [r["value"] for r in other] == [f"gamma:{p}" for p in prompts], "another model is another key"


def test_sigkill_mid_batch_then_resume_decides_every_prompt_exactly_once(worker: Workers) -> None:
    prompts = [f"prompt {i:02d}" for i in range(50)]
    proc = worker("run1", prompts, delay=0.02, second_delay=0.2, concurrency=4)
    deadline = time.monotonic() + 60
    while len(worker.calls("run1")) < 40:  # 2 calls per prompt: about 20 prompts in
        assert proc.poll() is None, "the batch ended before the kill"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    with Ledger(worker.ledger) as ledger:
        before = {run["run"]: run for run in ledger.export()}
    decided = {run["request"] for run in before.values() if run["outcome"] == "accepted"}
    assert 0 < len(decided) < len(prompts), "the kill landed mid-run"
    # Runs in flight at the kill stay as history, with every ballot they had made.
    interrupted = [run for run in before.values() if run["outcome"] == "interrupted"]
    assert any(run["ballots"] for run in interrupted)
    stored = sum(len(run["ballots"]) for run in before.values())
    made = len(worker.calls("run1"))
    in_flight = 4 * 2  # map(concurrency=4), each run opening its quorum of 2 ballots at once
    assert made - in_flight <= stored <= made, "at most the calls in flight are lost"

    results = worker.finish(worker("run2", prompts, delay=0.0), "run2")
    assert [r["value"] for r in results] == [f"run1:{p}" if p in decided else f"run2:{p}" for p in prompts]
    assert all(r["error"] is None and r["ledger_error"] is None for r in results)
    assert [r["replayed"] for r in results] == [p in decided for p in prompts]
    rerun = Counter(worker.calls("run2"))
    assert not decided & set(rerun), "no accepted prompt is decided again"
    assert all(rerun[p] == 2 for p in prompts if p not in decided)

    with Ledger(worker.ledger) as ledger:
        after = {run["run"]: run for run in ledger.export()}
        assert sum(r["current"] for r in ledger.runs(limit=None)) == len(prompts)
    accepted = Counter(run["request"] for run in after.values() if run["outcome"] == "accepted")
    assert accepted == Counter(prompts), "every prompt decided exactly once"
    for run_id, run in before.items():
        assert after[run_id]["ballots"] == run["ballots"], "stored ballots survive the kill and the resume"


def start_together(worker: Workers, tmp_path: Path, labels: list[str], prompts: list[str], **cfg: Any) -> dict[str, subprocess.Popen[bytes]]:
    """Workers that begin their batch at the same moment (each waits until all have started)."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    return {label: worker(label, prompts, barrier=str(barrier), parties=len(labels), **cfg) for label in labels}


def test_four_processes_on_one_batch_decide_each_prompt_once_and_agree(worker: Workers, tmp_path: Path) -> None:
    prompts = [f"q{i}" for i in range(30)]
    labels = ["w0", "w1", "w2", "w3"]
    procs = start_together(worker, tmp_path, labels, prompts, delay=0.002, concurrency=2)
    outs = {label: worker.finish(proc, label) for label, proc in procs.items()}

    for out in outs.values():
        assert all(r["error"] is None and r["ledger_error"] is None for r in out)
    values = [[r["value"] for r in outs[label]] for label in labels]
    assert values[0] == values[1] == values[2] == values[3], "every process returns the same answers"

    with Ledger(worker.ledger) as ledger:
        runs = list(ledger.export())
    current = {run["request"]: run["value"] for run in runs if run["current"]}
    assert current == dict(zip(prompts, values[0], strict=True))
    calls = Counter(call for label in labels for call in worker.calls(label))
    assert calls == Counter(dict.fromkeys(prompts, CALLS)), "each prompt decided once, by one of the processes"
    assert len(runs) == len(prompts) and sum(len(run["ballots"]) for run in runs) == CALLS * len(prompts)
    for label in labels:
        mine = set(worker.calls(label))
        assert [r["replayed"] for r in outs[label]] == [p not in mine for p in prompts]


@pytest.mark.slow
def test_four_workers_over_200_prompts_decide_each_exactly_once_and_return_the_whole_batch(worker: Workers, tmp_path: Path) -> None:
    prompts = [f"prompt {i:03d}" for i in range(200)]
    labels = ["w0", "w1", "w2", "w3"]
    procs = start_together(worker, tmp_path, labels, prompts, delay=0.005, concurrency=4)
    outs = {label: worker.finish(proc, label) for label, proc in procs.items()}

    values = {label: [r["value"] for r in out] for label, out in outs.items()}
    assert all(r["error"] is None and r["ledger_error"] is None for out in outs.values() for r in out)
    assert values["w0"] == values["w1"] == values["w2"] == values["w3"], "any worker's output is the whole batch"
    decider = {p: value.split(":", 1)[0] for p, value in zip(prompts, values["w0"], strict=True)}
    assert all(value == f"{decider[p]}:{p}" for p, value in zip(prompts, values["w0"], strict=True)), "in input order"
    calls = Counter(call for label in labels for call in worker.calls(label))
    assert calls == Counter(dict.fromkeys(prompts, CALLS)), "every prompt decided exactly once"
    for label in labels:
        assert set(worker.calls(label)) == {p for p in prompts if decider[p] == label}
        assert [r["replayed"] for r in outs[label]] == [decider[p] != label for p in prompts]
    assert len(set(decider.values())) >= 2, "the workers shared the batch"
    with Ledger(worker.ledger) as ledger:
        runs = list(ledger.export())
    assert Counter(run["request"] for run in runs) == Counter(prompts) and all(run["current"] for run in runs)


@pytest.mark.slow
def test_a_worker_killed_mid_batch_leaves_its_claims_to_the_others_and_nothing_decided_is_lost(
    worker: Workers, tmp_path: Path
) -> None:
    prompts = [f"prompt {i:03d}" for i in range(200)]
    labels = ["w0", "w1", "w2", "w3"]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = {label: worker(label, prompts, barrier=str(barrier), parties=4, host=f"host-{label}", delay=0.02, second_delay=0.3,
                           concurrency=4, lease=2.0) for label in labels}  # fmt: skip
    deadline = time.monotonic() + 120
    while len(worker.calls("w0")) < 24:  # a dozen prompts in, with a few runs in flight
        assert procs["w0"].poll() is None, "w0 ended before the kill"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(procs["w0"].pid, signal.SIGKILL)
    procs["w0"].wait(timeout=10)
    killed_at = time.monotonic()
    outs = {label: worker.finish(procs[label], label) for label in labels[1:]}
    assert time.monotonic() - killed_at < 60

    values = {label: [r["value"] for r in out] for label, out in outs.items()}
    assert values["w1"] == values["w2"] == values["w3"], "the survivors return the same whole batch"
    assert all(r["error"] is None and r["ledger_error"] is None for out in outs.values() for r in out)
    with Ledger(worker.ledger) as ledger:
        runs = list(ledger.export())
    accepted = [run for run in runs if run["outcome"] == "accepted"]
    assert Counter(run["request"] for run in accepted) == Counter(prompts), "every prompt decided exactly once"
    assert all(run["current"] for run in accepted)
    by_w0 = {run["request"] for run in accepted if run["value"].startswith("w0:")}
    assert by_w0, "the killed worker had decided some prompts"
    assert all(value == f"w0:{p}" for p, value in zip(prompts, values["w1"], strict=True) if p in by_w0), "none of them lost"
    interrupted = [run for run in runs if run["outcome"] == "interrupted"]
    assert interrupted and any(run["ballots"] for run in interrupted), "its runs in flight stay as history, with their ballots"
    taken_over = {run["request"] for run in interrupted}
    assert not taken_over & by_w0 and all(values["w1"][prompts.index(p)].split(":")[0] != "w0" for p in taken_over)
    calls = Counter(call for label in labels[1:] for call in worker.calls(label))
    assert all(calls[p] == CALLS for p in prompts if p not in by_w0), "the others decided the rest, each once"
    assert not by_w0 & set(calls), "no prompt the killed worker decided is decided again"


@pytest.mark.slow
def test_the_postgres_server_restarted_mid_batch_gives_typed_errors_then_the_batch_resumes(tmp_path: Path, postgres_server: Any) -> None:
    server = postgres_server
    worker = Workers(tmp_path, server.create_database())
    prompts = [f"prompt {i:03d}" for i in range(150)]
    labels = ["w0", "w1", "w2"]
    procs = start_together(worker, tmp_path, labels, prompts, delay=0.02, concurrency=4, lease=3.0, timeout=1.0)
    deadline = time.monotonic() + 120
    while sum(len(worker.calls(label)) for label in labels) < 120:  # about a quarter of the batch
        assert all(proc.poll() is None for proc in procs.values()), "a worker ended before the restart"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    server.stop()
    time.sleep(1.0)  # down for a while: every worker's next ledger call fails
    server.start()
    outs = {label: worker.finish(proc, label) for label, proc in procs.items()}

    results = [r for out in outs.values() for r in out]
    assert all(r["error"] is None and r["value"] for r in results), "the outage never costs an answer"
    reported = [r["ledger_error"] for r in results if r["ledger_error"] is not None]
    assert reported and all(e["type"] == "LedgerError" for e in reported), "the failed writes are reported, typed"
    assert any("LedgerError" in worker.errors(label) for label in labels), "and logged"
    clean = [i for i in range(len(prompts)) if all(outs[label][i]["ledger_error"] is None for label in labels)]
    assert all(len({outs[label][i]["value"] for label in labels}) == 1 for i in clean), "untouched prompts agree"

    resumed = worker.finish(worker("after", prompts, delay=0.0, lease=3.0), "after")  # the batch again, once it is up
    assert all(r["error"] is None and r["ledger_error"] is None for r in resumed)
    decided_now = set(worker.calls("after"))
    assert [r["replayed"] for r in resumed] == [p not in decided_now for p in prompts]
    # what was stored before the outage is replayed, not decided again: every prompt no worker saw a failed write for
    # (how many that is depends on when the outage came: about half the batch, so not a fixed share)
    assert clean and not {prompts[i] for i in clean} & decided_now and len(decided_now) < len(prompts), sorted(decided_now)
    with Ledger(worker.ledger) as ledger:
        current = {run["request"]: run["value"] for run in ledger.export() if run["current"]}
    assert current == {p: r["value"] for p, r in zip(prompts, resumed, strict=True)}, "one current answer per prompt"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_ledger_opened_before_a_fork_works_in_parent_and_child(tmp_path: Path) -> None:
    from accord import Stabilizer, models
    from accord.ledger._sqlite import SQLiteStore

    ledger = Ledger(tmp_path / "ledger.sqlite3")
    assert isinstance(ledger._store, SQLiteStore)
    stab = Stabilizer(models.function(lambda p: "yes", name="m"), str, ledger=ledger)
    stab.run("before")
    inherited = ledger._store._conn
    pid = os.fork()
    if pid == 0:  # the child opens its own connection: SQLite connections must not cross a fork
        ok = stab.run("before").replayed and "ledger" in stab.run("in child").meta and ledger._store._conn is not inherited
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ledger._store._conn is inherited
    assert stab.run("in child").replayed and "ledger" in stab.run("after").meta
    assert len(ledger.runs()) == 3
    ledger.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_postgres_ledger_opened_before_a_fork_works_in_parent_and_child(postgres_server: Any) -> None:
    from accord import Stabilizer, models

    ledger = Ledger(postgres_server.create_database())
    stab = Stabilizer(models.function(lambda p: "yes", name="m"), str, ledger=ledger)
    stab.run("before")
    pid = os.fork()  # the connection is closed before the fork: parent and child each open their own
    if pid == 0:
        ok = stab.run("before").replayed and "ledger" in stab.run("in child").meta
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert stab.run("in child").replayed and "ledger" in stab.run("after").meta
    assert len(ledger.runs()) == 3
    ledger.close()
