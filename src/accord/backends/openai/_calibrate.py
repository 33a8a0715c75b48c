"""Noise floors of an HTTP deployment: how far a server's logprobs move under concurrent load.

    accord calibrate --model openai:http://127.0.0.1:8000/v1 [--model-name M] [--dtype bfloat16]

A serving engine batches concurrent requests together, and the batch a request shares changes the
kernels and the reduction order its logits are computed with. For each calibration prompt, the
same greedy request (``logprobs`` with ``top_logprobs`` alternatives per token) is sent alone,
then ``repeats`` times among ``load`` concurrent requests of other lengths (:mod:`._spread`'s
neighbours). Along the tokens the alone answer and a loaded answer share, up to and including the
first token where they part, the change that matters for an argmax flip is the change of the gap
between the alone answer's token and each competitor both answers list:

    delta(t) = max over v listed in both at t of |(l_a - l_v) - (l'_a - l'_v)|,  a = the alone token

(a gap between two log-probabilities is the gap between their logits). The floor is the largest
delta seen. It is stored per (server, model, dtype) in ``http_noise_floors.json`` in the user
cache (``$ACCORD_CACHE_DIR``, else ``platformdirs.user_cache_dir("accord")``), where
:meth:`OpenAIBackend.noise` finds it; the dtype is the one given (an OpenAI-compatible server does
not report it). accord ships no floor for any server: for a server nobody measured, the gate
stands aside.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..._errors import AccordError, BackendError, ConfigError
from ._clients import servers_from
from ._errors import to_backend_error
from ._spread import neighbour_messages

FILE = "http_noise_floors.json"
UNSPECIFIED = "unspecified"  # the dtype key when none was given
PROMPTS = (
    "Classify the sentiment of this text as positive, negative or neutral.\nText: The service was slow but the food was good.",
    "Answer yes or no. Is the Atlantic Ocean larger than the Indian Ocean?",
    "Answer with a number. How many minutes are in two hours?",
    "Extract the person's name, age and home city as JSON.\nText: Lena Berg is 44 and lives in Oslo, Norway.",
    "The workshop is on 9 October 2023. On what date is the workshop? Answer in ISO 8601.",
    "Give one word that describes the sea, then explain it in a sentence.",
)
STEPS = 32  # tokens per calibration answer
REPEATS = 3  # loaded sends per prompt
TOP = 8  # alternatives per token
MASKED = -9000.0  # vLLM reports a token its grammar or sampler masked at -9999: not a competitor


def cache_file() -> Path:
    import platformdirs

    return Path(os.environ.get("ACCORD_CACHE_DIR") or platformdirs.user_cache_dir("accord")) / FILE


_loaded: dict[Path, tuple[float, dict[str, Any]]] = {}
_lock = threading.Lock()


def table(path: Path | None = None) -> dict[str, Any]:
    """The stored floors (re-read when the file changes; empty when there is none)."""
    path = path or cache_file()
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    with _lock:
        cached = _loaded.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    data = data if isinstance(data, dict) else {}
    with _lock:
        _loaded[path] = (mtime, data)
    return data


def stored_floor(server: str, model: str, dtype: str | None) -> float | None:
    """The measured floor of (server, model, dtype); with no dtype, the largest stored for the
    server and model (the most cautious). None when nobody measured it."""
    entries = table().get("servers", {}).get(server, {}).get(model, {})
    if not isinstance(entries, dict) or not entries:
        return None
    chosen = [entries.get(dtype)] if dtype is not None else list(entries.values())
    floors = [float(e["floor"]) for e in chosen if isinstance(e, dict) and isinstance(e.get("floor"), (int, float))]
    return max(floors) if floors else None


def store(server: str, model: str, dtype: str | None, entry: dict[str, Any], path: Path | None = None) -> Path:
    path = path or cache_file()
    current = dict(table(path))
    servers = current.setdefault("servers", {})
    servers.setdefault(server, {}).setdefault(model, {})[dtype or UNSPECIFIED] = entry
    current["how"] = __doc__.split("\n\n")[2].replace("\n", " ") if __doc__ else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True))
    os.replace(tmp, path)
    return path


# -- measuring --------------------------------------------------------------------------------------


def steps_of(choice: Any) -> list[tuple[str, dict[str, float]]]:
    """``[(token, {alternative: logprob})]`` of one answer (empty when it carries no logprobs)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    found = []
    for token in content:
        tops = {str(t.token): float(t.logprob) for t in getattr(token, "top_logprobs", None) or () if t.logprob > MASKED}
        found.append((str(token.token), tops))
    return found


def _compared(alone: list[tuple[str, dict[str, float]]], loaded: list[tuple[str, dict[str, float]]]) -> Iterator[list[float]]:
    """Per token both answers list (up to and including the first that differs): the gap changes
    against each competitor both list, the finite ones."""
    for (token, tops), (other, others) in zip(alone, loaded, strict=False):
        if token in tops and token in others:
            a, b = tops[token], others[token]
            changes = (abs((a - tops[v]) - (b - others[v])) for v in tops.keys() & others.keys() - {token})
            yield [c for c in changes if math.isfinite(c)]
        if token != other:
            break


def gap_changes(alone: list[tuple[str, dict[str, float]]], loaded: list[tuple[str, dict[str, float]]]) -> list[float]:
    """delta(t) at each token both answers share, up to and including the first that differs (a
    step where no competitor is listed in both is not a sample)."""
    return [max(changes) for changes in _compared(alone, loaded) if changes]


def gap_change(alone: list[tuple[str, dict[str, float]]], loaded: list[tuple[str, dict[str, float]]]) -> tuple[float, int]:
    """The largest delta(t) along the shared tokens (and the first token that differs); the steps compared."""
    steps = list(_compared(alone, loaded))
    return max((c for changes in steps for c in changes), default=0.0), len(steps)


async def _measure(
    client: Any, model: str, *, prompts: Sequence[str], load: int, repeats: int, steps: int
) -> dict[str, Any]:
    def ask(messages: list[dict[str, str]], max_tokens: int, logprobs: bool) -> Any:
        extra = {"logprobs": True, "top_logprobs": TOP} if logprobs else {}
        return client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, temperature=0, **extra)

    floor, compared, forks, fingerprint = 0.0, 0, 0, None
    turn = 0
    for prompt in prompts:
        messages = [{"role": "user", "content": prompt}]
        alone_answer = await ask(messages, steps, True)
        fingerprint = fingerprint or getattr(alone_answer, "system_fingerprint", None)
        alone = steps_of(alone_answer.choices[0])
        if not alone:
            raise BackendError("the server returned no logprobs: its noise cannot be measured this way")
        for _ in range(repeats):
            others = []
            for _ in range(load):
                turn += 1
                others.append(asyncio.ensure_future(ask(neighbour_messages(turn), steps + turn % 4 * 8, False)))
            await asyncio.sleep(0.05)  # the neighbours are in the server's batch first
            loaded_answer = await ask(messages, steps, True)
            await asyncio.gather(*others)
            loaded = steps_of(loaded_answer.choices[0])
            change, n = gap_change(alone, loaded)
            floor, compared = max(floor, change), compared + n
            forks += [t for t, _ in alone] != [t for t, _ in loaded]
    return {"floor": round(floor, 6), "steps": compared, "forks": forks, "system_fingerprint": fingerprint}


def calibrate(
    base_url: str,
    model: str | None = None,
    dtype: str | None = None,
    *,
    api_key: str | None = None,
    prompts: Sequence[str] | None = None,
    load: int = 8,
    repeats: int | None = None,
    steps: int = STEPS,
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Measure one server's floor and store it; returns the stored entry (with ``server``, ``model``, ``path``).

    ``prompts`` (default :data:`PROMPTS`), each sent alone once and ``repeats`` times (default
    :data:`REPEATS`) among ``load`` concurrent requests of other lengths, ``steps`` tokens each.
    """
    prompts = PROMPTS if prompts is None else prompts
    repeats = REPEATS if repeats is None else repeats
    if load < 1 or repeats < 1 or not prompts:
        raise ConfigError("calibrate needs prompts, load >= 1 and repeats >= 1")
    (server,), secrets = servers_from(None, base_url, api_key, timeout, {})
    start = time.perf_counter()

    async def go() -> tuple[str, dict[str, Any]]:
        client = server.async_client()
        try:
            name = model
            if name is None:
                names = [m.id for m in (await client.models.list()).data]
                if len(names) != 1:
                    raise ConfigError(f"{server.shown} serves {len(names)} models; pass the model name")
                name = names[0]
            return name, await _measure(client, name, prompts=prompts, load=load, repeats=repeats, steps=steps)
        finally:
            await client.close()

    try:
        name, entry = asyncio.run(go())
    except (BackendError, ConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - the openai client's errors, mapped at this boundary
        raise to_backend_error(exc, server=server.shown, secrets=secrets) from None
    entry.update(prompts=len(prompts), repeats=repeats, load=load, seconds=round(time.perf_counter() - start, 1),
                 measured=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    path = store(server.shown, name, dtype, entry)
    return {**entry, "server": server.shown, "model": name, "dtype": dtype or UNSPECIFIED, "path": str(path)}


def calibrate_command(base_url: str, model: str | None, dtype: str | None, load: int, echo: Any) -> int:
    """``accord calibrate --model openai:URL``: measure, store, say what was found; the exit code."""
    try:
        entry = calibrate(base_url, model, dtype, load=load)
    except AccordError as exc:
        echo(f"accord calibrate: {exc}", err=True)
        return 2
    echo(f"{entry['server']} {entry['model']} ({entry['dtype']}): floor {entry['floor']:.3g} "
         f"({entry['steps']} steps compared; {entry['forks']} of {entry['prompts'] * entry['repeats']} loaded answers "
         f"forked from the answer alone; {entry['seconds']} s)")
    echo(f"written to {entry['path']}")
    return 0
