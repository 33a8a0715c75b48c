"""A server's noise, learned from its own ballots: the margin gate with no reference and no calibration.

The ballots accord draws for one prompt are spread into different batches (:mod:`._spread`), so
two of them are two samples of the deployment's numeric noise. Along the tokens two ballots of one
prompt share (up to and including the first that differs), each step's gap change (``delta``,
:func:`._calibrate.gap_changes`: the measure ``accord calibrate`` and the reference learner use)
is a sample. :class:`NoiseLearner` pairs every ballot with the earlier ballots of its prompt on the
same server and keeps the samples:

- **keyed by the deployment**: the server's URL and model, with the ``system_fingerprint`` the
  server last gave (another fingerprint is another deployment: its samples start again);
- **by load**: each sample records the requests the server had in flight while the two ballots ran
  (accord's own ballots and neighbours on that server; the server's own count where its
  ``/metrics`` says, as vLLM, SGLang and llama.cpp do), in bins (:data:`BINS`). At a load, the
  gate reads the samples taken at that load's bin or above (more load, more noise); where no bin
  that high has :data:`~accord.vote._risk.MIN_STEPS` samples, the gate does not accept and the
  ballots drawn there are learned from;
- **persisted** in ``learned_noise.json`` in the user cache (``$ACCORD_NOISE_FILE`` names another
  file), merged under a file lock, so the processes of a machine and ``accord serve`` share it;
- **it keeps learning once trusted**: one accepted answer in :data:`CHECK` is still checked by a
  second ballot (``vote/_gate``); one the vote contradicts is counted here (``contradicted``), and
  the two ballots' samples (the fork among them) move the tail.

What the gate reads of the samples is :class:`~accord.vote._risk.NoiseTail`: an upper bound on the
chance that the noise flips any decisive step of a ballot, compared with ``MarginGate.risk``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
from collections import OrderedDict
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..._locks import file_lock
from ..._types import Completion
from ...vote._risk import NoiseTail
from ._calibrate import gap_changes
from ._load import ServerLoad

log = logging.getLogger("accord.openai")

FILE = "learned_noise.json"
BINS = (1, 4, 16, 64, 256)  # load bins by their upper bound; past the last, one more bin
CHECK = 8  # one accepted answer in this many is checked by a second ballot
PROMPTS = 256  # prompts whose ballots' tokens are kept for pairing
PER_PROMPT = 4  # ballots kept per prompt
GRID = 1000  # samples are kept rounded up to 1/GRID logit (bfloat16 moves in steps of 1/16)


def store_path() -> Path:
    import platformdirs

    named = os.environ.get("ACCORD_NOISE_FILE")
    if named:
        return Path(named)
    return Path(os.environ.get("ACCORD_CACHE_DIR") or platformdirs.user_cache_dir("accord")) / FILE


def bin_of(load: int | None) -> int:
    """The index of the load bin ``load`` falls in (None, an unknown load: the first)."""
    load = max(1, load or 1)
    for index, top in enumerate(BINS):
        if load <= top:
            return index
    return len(BINS)


def bin_name(index: int) -> str:
    return f"<={BINS[index]}" if index < len(BINS) else f">{BINS[-1]}"


# -- the samples, persisted -----------------------------------------------------------------------


class NoiseStore:
    """The learned samples of every deployment, in one JSON file shared by the machine's processes."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._cache: tuple[float, dict[str, Any]] | None = None

    def file(self) -> Path:
        return self.path or store_path()

    def read(self) -> dict[str, Any]:
        path = self.file()
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        with self._lock:
            if self._cache is not None and self._cache[0] == mtime:
                return self._cache[1]
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        data = data if isinstance(data, dict) else {}
        with self._lock:
            self._cache = (mtime, data)
        return data

    def entry(self, key: str) -> dict[str, Any]:
        found = self.read().get("deployments", {}).get(key)
        return found if isinstance(found, dict) else {}

    def add(self, key: str, fingerprint: str | None, load_bin: int, deltas: list[float], *,
            contradicted: int = 0, checks: int = 0) -> None:
        """Merge samples (and check counts) into the file, under a lock other processes respect."""
        path = self.file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(path.with_suffix(".lock")):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                data = {}
            data = data if isinstance(data, dict) else {}
            deployments = data.setdefault("deployments", {})
            entry = deployments.get(key) if isinstance(deployments.get(key), dict) else None
            if entry is None or (fingerprint and entry.get("fingerprint") and entry["fingerprint"] != fingerprint):
                entry = {"fingerprint": fingerprint, "bins": {}, "checks": 0, "contradicted": 0}  # a new deployment
            entry["fingerprint"] = fingerprint or entry.get("fingerprint")
            if deltas:
                held = entry["bins"].setdefault(bin_name(load_bin), {"hist": {}, "pairs": 0})
                for delta in deltas:
                    cell = f"{math.ceil(delta * GRID - 1e-9) / GRID:.3f}"
                    held["hist"][cell] = held["hist"].get(cell, 0) + 1
                held["pairs"] += 1
            entry["checks"] = int(entry.get("checks", 0)) + checks
            entry["contradicted"] = int(entry.get("contradicted", 0)) + contradicted
            entry["updated"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            deployments[key] = entry
            data["how"] = "gap changes between ballots of one prompt, by load bin (accord.backends.openai._noise)"
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(data, sort_keys=True))
            os.replace(tmp, path)


def _tails(entry: dict[str, Any]) -> dict[int, tuple[list[float], int]]:
    """A stored entry's samples per bin index, and its pair count."""
    found: dict[int, tuple[list[float], int]] = {}
    names = {bin_name(i): i for i in range(len(BINS) + 1)}
    for name, held in (entry.get("bins") or {}).items():
        if name not in names or not isinstance(held, dict):
            continue
        deltas: list[float] = []
        for cell, count in (held.get("hist") or {}).items():
            with contextlib.suppress(TypeError, ValueError):
                deltas.extend([float(cell)] * int(count))
        found[names[name]] = (deltas, int(held.get("pairs", 0)))
    return found


# -- the learner ------------------------------------------------------------------------------------


class NoiseLearner:
    """One backend's learner: pairs its ballots per prompt and server, stores the samples, and
    gives the gate the tail at a load (see the module docstring)."""

    def __init__(self, store: NoiseStore | None = None) -> None:
        self.store = store or NoiseStore()
        self.loads = ServerLoad()
        self._lock = threading.Lock()
        self._ballots: OrderedDict[tuple[str, str], list[tuple[list[tuple[str, dict[str, float]]], int]]] = OrderedDict()
        self._fingerprints: dict[str, str] = {}
        self._accepted = 0
        self._tails: dict[tuple[str, int], tuple[tuple[int, Any], NoiseTail]] = {}

    @staticmethod
    def key(server: str, model: str) -> str:
        return f"{model} @ {server}"

    def heard(self, server: str, model: str, fingerprint: str | None, prompt: str, *,
              steps: list[tuple[str, dict[str, float]]], load: int) -> int:
        """One ballot's tokens: paired with the earlier ballots of its prompt on this server; the
        samples stored. Returns how many samples it gave."""
        if not steps:
            return 0
        key = self.key(server, model)
        if fingerprint:
            with self._lock:
                self._fingerprints[key] = fingerprint
        with self._lock:
            earlier = self._ballots.pop((key, prompt), [])
            self._ballots[(key, prompt)] = ([*earlier, (steps, load)])[-PER_PROMPT:]
            while len(self._ballots) > PROMPTS:
                self._ballots.popitem(last=False)
        given = 0
        for other, other_load in earlier:
            if max(load, other_load) <= 1:
                continue  # both ran alone: one computation twice, not a draw of the noise between loads
            deltas = gap_changes(other, steps)
            if deltas:
                self.store.add(key, fingerprint, bin_of(max(load, other_load)), deltas)
                given += len(deltas)
        return given

    def ballot(self, server: str, model: str | None, prompt: str, completion: Completion, own: int) -> Completion:
        """One ballot's Completion with its load (``own``: this backend's requests on the server,
        its neighbours counted; the server's own count where ``/metrics`` gives one), its tokens
        learned from and taken off."""
        reported = self.loads.read(server, own)
        load = max(own, reported or 0)
        if model and completion.steps is not None:
            try:
                self.heard(server, model, completion.system_fingerprint, prompt, steps=completion.steps.steps, load=load)
            except Exception:
                log.exception("learning the server's noise failed")
        return replace(completion, steps=None, load=load, server=server, meta={**completion.meta, "load": load})

    def summaries(self, deployments: list[tuple[str, str | None]]) -> dict[str, Any]:
        """``describe()["noise"]``: the learned noise of each server whose model is known."""
        from ...vote._gate import RISK

        return {server: self.summary(server, model, RISK) for server, model in deployments if model}

    def contradicted(self, server: str, model: str) -> None:
        """A checked answer the vote did not keep (counted; its ballots' samples are stored already)."""
        key = self.key(server, model)
        self.store.add(key, self._fingerprints.get(key), 0, [], contradicted=1, checks=1)

    def confirmed(self, server: str, model: str) -> None:
        key = self.key(server, model)
        self.store.add(key, self._fingerprints.get(key), 0, [], checks=1)

    def check_due(self) -> bool:
        with self._lock:
            self._accepted += 1
            return self._accepted % CHECK == 0

    def tail(self, server: str, model: str, load: int | None) -> NoiseTail | None:
        """The samples of the bins at and above ``load``'s (None: too few there to say)."""
        key = self.key(server, model)
        entry = self.store.entry(key)
        wanted = bin_of(load)
        stamp = (id(entry), entry.get("updated"))  # the store re-reads the file (a new dict) when it changes
        with self._lock:
            cached = self._tails.get((key, wanted))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        deltas = [d for index, (found, _) in _tails(entry).items() if index >= wanted for d in found]
        tail = NoiseTail.of(deltas)
        result = tail if tail.risk(()) is not None else None
        if result is not None:
            with self._lock:
                self._tails[(key, wanted)] = (stamp, result)
        return result

    def summary(self, server: str, model: str, risk: float) -> dict[str, Any]:
        """What ``describe()`` says of the learned noise of one server."""
        entry = self.store.entry(self.key(server, model))
        bins = _tails(entry)
        every = NoiseTail.of([d for found, _ in bins.values() for d in found])
        loads = {bin_name(i): {"steps": len(found), "pairs": pairs} for i, (found, pairs) in sorted(bins.items())}
        trusted = [bin_name(i) for i in sorted(bins) if self.tail(server, model, BINS[i] if i < len(BINS) else BINS[-1] + 1)]
        clears = every.clears(risk / 4)
        return {
            "source": "learned from this server's own ballots (no reference)",
            "fingerprint": entry.get("fingerprint"),
            "steps": every.n, "pairs": sum(p for _, p in bins.values()), "loads": loads,
            "trusted_up_to": trusted[-1] if trusted else None,
            "quantiles": {k: round(v, 4) for k, v in every.quantiles().items()},
            "clearing_margin": None if clears is None else (None if math.isinf(clears) else round(clears, 4)),
            "checks": int(entry.get("checks", 0)), "contradicted": int(entry.get("contradicted", 0)),
        }


def neighbours_said(spread: bool, sent: bool) -> str:
    """``describe()["neighbours"]``: whether batch neighbours go, and what they cost."""
    if not spread:
        return "off (spread=False)"
    if not sent:
        return ("off: a hosted API bills them and batches as it will (ballots still go one at a time, "
                "so each shares its batches with other traffic)")
    return ("on: each ballot after the first goes with 1 to 7 filler requests of other lengths, up to as many "
            "tokens as the ballot may write, fewer when the server is busy; counted in Usage.neighbour_requests "
            "and neighbour_tokens")


class LearnedView:
    """What the gate reads (``vote/_gate.Learned``) for one backend: its servers' learned tails,
    the most cautious at a load (the one whose bound is largest at a small margin)."""

    def __init__(self, learner: NoiseLearner, deployments: list[tuple[str, str | None]]) -> None:
        self.learner, self.deployments = learner, deployments

    def tail_at(self, load: int | None) -> NoiseTail | None:
        tails = [self.learner.tail(server, model, load) if model else None for server, model in self.deployments]
        if not tails or any(t is None for t in tails):
            return None
        found = [t for t in tails if t is not None]
        return max(found, key=lambda t: (t.past(0.25), t.n))

    def check_due(self) -> bool:
        return self.learner.check_due()

    def checked(self, agreed: bool, server: str | None) -> None:
        """A checked answer's vote: it kept the accepted answer (``agreed``) or not."""
        for shown, model in self.deployments:
            if model and (server is None or shown == server):
                (self.learner.confirmed if agreed else self.learner.contradicted)(shown, model)
                return
