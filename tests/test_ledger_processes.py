"""The decision ledger across processes: sticky answers, SIGKILL and resume, concurrent writers."""

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

def model(prompt, request=None):
    with open(cfg["calls"], "a") as log:
        log.write(json.dumps(request.prompt) + "\n")
    slow = request.ballot == 1 and "second_delay" in cfg  # a run with one ballot made, one in flight
    time.sleep(cfg["second_delay"] if slow else cfg.get("delay", 0.0))
    return f'{cfg["label"]}:{request.prompt}'

ledger = Ledger(cfg["ledger"])
stab = Stabilizer(models.function(model, fingerprint=cfg.get("fingerprint", "worker-model")), str,
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


class Workers:
    """Starts worker processes in ``folder`` (one shared ledger), collects their output and model calls."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.script = folder / "worker.py"
        self.script.write_text(WORKER)
        self.ledger = folder / "ledger.sqlite3"

    def __call__(self, label: str, prompts: list[str], **cfg: Any) -> subprocess.Popen[str]:
        cfg = {"label": label, "prompts": prompts, "ledger": str(self.ledger),
               "calls": str(self.folder / f"calls-{label}.jsonl"), "out": str(self.folder / f"out-{label}.json"), **cfg}
        return subprocess.Popen([sys.executable, str(self.script), json.dumps(cfg)], stderr=subprocess.PIPE, text=True)

    def finish(self, proc: subprocess.Popen[str], label: str) -> list[dict[str, Any]]:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        return json.loads((self.folder / f"out-{label}.json").read_text())  # type: ignore[no-any-return]  # the worker wrote a list

    def calls(self, label: str) -> list[str]:
        path = self.folder / f"calls-{label}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def worker(tmp_path: Path) -> Workers:
    return Workers(tmp_path)


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


def test_four_processes_writing_at_once_agree_and_lose_nothing(worker: Workers, tmp_path: Path) -> None:
    prompts = [f"q{i}" for i in range(30)]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    labels = ["w0", "w1", "w2", "w3"]
    procs = [worker(label, prompts, barrier=str(barrier), parties=4, delay=0.002, concurrency=2) for label in labels]
    outs = {label: worker.finish(proc, label) for label, proc in zip(labels, procs, strict=True)}

    for out in outs.values():
        assert all(r["error"] is None and r["ledger_error"] is None for r in out)
    values = [[r["value"] for r in outs[label]] for label in labels]
    assert values[0] == values[1] == values[2] == values[3], "every process returns the first writer's answer"

    with Ledger(worker.ledger) as ledger:
        runs = list(ledger.export())
    current = {run["request"]: run["value"] for run in runs if run["current"]}
    assert current == dict(zip(prompts, values[0], strict=True))
    decided_by = {label: set(worker.calls(label)) for label in labels}
    assert len(runs) == sum(len(d) for d in decided_by.values()), "one stored run per process that decided a prompt"
    assert sum(len(run["ballots"]) for run in runs) == sum(len(worker.calls(label)) for label in labels)
    assert len({r["request"] for r in runs}) == len(prompts)
    assert sum(len(d) for d in decided_by.values()) > len(prompts), "writers did race on the same keys"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_ledger_opened_before_a_fork_works_in_parent_and_child(tmp_path: Path) -> None:
    from accord import Stabilizer, models
    from accord.ledger._sqlite import SQLiteStore

    ledger = Ledger(tmp_path / "ledger.sqlite3")
    assert isinstance(ledger._store, SQLiteStore)
    stab = Stabilizer(models.function(lambda p: "yes", fingerprint="m"), str, ledger=ledger)
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
