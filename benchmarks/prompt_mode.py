"""Prompt mode on the shipped task set: the schema goes in the prompt, nothing constrains the output.

    python benchmarks/prompt_mode.py [--backend served|local] [--limit N] [--dump PATH]

What a user gets from a server that ignores ``response_format`` (``transformers serve``) or from a
plain model call: ``Stabilizer(model, schema, vote=Vote(k=1, gate=None), retry=Retry(attempts=3))`` over the
task set (benchmarks/tasks.py), with the schema rendered in the prompt by ``Schema.render()`` and
every output read by accord's extract stage. ``--backend served`` (the default) runs the embedded
SmolLM2-135M-Instruct under ``transformers serve`` (float32, tests/servers.py) through
``accord.models.openai(..., structured=False)``; ``--backend local`` runs the same model in
process, unconstrained greedy (``accord.models.local().unconstrained``).

Per run: validity (share of items with a valid answer), accuracy against gold, validity of the
first call alone (no retry), calls per item, and the failures by kind. Every generation is cached
in ``.bench-cache/prompt_mode.json`` by (backend, request as sent, settings), so a rerun with the
same renderings costs nothing and a changed rendering or feedback only runs what changed.
``--dump PATH`` writes every call's text (JSON lines: item, attempt, prompt, text, finish reason),
the raw material of tests/data/malformed/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))  # servers.py: the test servers

import accord  # noqa: E402
import tasks  # noqa: E402
from accord._types import Completion, Request  # noqa: E402
from accord.backends._base import Backend  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from generations import Cache, Deployment, _pack, _unpack  # noqa: E402

CACHE = ROOT / ".bench-cache" / "prompt_mode.json"
MAX_TOKENS = 48  # as benchmarks/stability.py


class Served(Backend):
    """The embedded model behind ``transformers serve``, started on the first cache miss."""

    fingerprint = "SmolLM2-135M-Instruct [transformers serve, float32]"

    def __init__(self, cache: Cache, stack: contextlib.ExitStack) -> None:
        self.cache, self.stack = cache, stack
        self.inner: Any = None

    def generate(self, request: Request) -> Completion:
        key = Cache.digest("served", request.messages, asdict(request.settings))
        entry = self.cache.get(key)
        if entry is None:
            if self.inner is None:
                from servers import model_folder, serve

                server = self.stack.enter_context(serve(model_folder(), extra_args=("--dtype", "float32")))
                self.inner = accord.models.openai(base_url=server.url, model=server.model, structured=False, timeout=600)
            start = time.perf_counter()
            completion = self.inner.generate(request)
            entry = _pack(completion, time.perf_counter() - start)
            self.cache.put(key, entry)
        return _unpack(entry)


class Local(Backend):
    """The embedded model in process, unconstrained greedy (the raw text a model writes)."""

    fingerprint = "SmolLM2-135M-Instruct [local, unconstrained]"

    def __init__(self, cache: Cache) -> None:
        self.deployment = Deployment("float32", {"dtype": "float32"}, cache)

    def generate(self, request: Request) -> Completion:
        return self.deployment.unconstrained(request.input, request.settings)


def gold_key(item: dict[str, Any]) -> str:
    schema = accord.Schema(getattr(tasks, item["schema"].split(":")[1]))
    return canonical_key(canonical_form(schema.dump(schema.validate(item["gold"])), schema.json_schema))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("served", "local"), default="served")
    parser.add_argument("--limit", type=int, default=None, help="only N items, evenly spread over the list (so over the kinds)")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--dump", type=Path, default=None, help="write every call's text here (JSON lines)")
    args = parser.parse_args(argv)
    items = tasks.items()
    if args.limit:
        items = [items[i * len(items) // args.limit] for i in range(min(args.limit, len(items)))]
    cache = Cache(args.cache)
    start = time.perf_counter()
    rows, failures, dumped = [], {}, []
    with contextlib.ExitStack() as stack:
        backend: Backend = Served(cache, stack) if args.backend == "served" else Local(cache)
        for n, item in enumerate(items, 1):
            schema = getattr(tasks, item["schema"].split(":")[1])
            stab = accord.Stabilizer(backend, schema, vote=accord.Vote(k=1, gate=None), retry=accord.Retry(attempts=3), max_tokens=MAX_TOKENS)
            try:
                result = stab.run(item["prompt"])
            except accord.OutputError as error:
                result = error.result
            first = result.ballots[0] if result.ballots else None
            rows.append({"id": item["id"], "kind": item["kind"], "valid": result.key is not None,
                         "right": result.key == gold_key(item), "calls": result.calls,
                         "first_valid": first is not None and first.status == "valid"})
            for ballot in result.ballots:
                if ballot.status == "invalid":
                    kind = (ballot.error or {}).get("errors", [{}])[0].get("type", "?")
                    failures[kind] = failures.get(kind, 0) + 1
                dumped.append({"id": item["id"], "schema": item["schema"], "attempt": ballot.attempt, "text": ballot.text,
                               "finish_reason": ballot.finish_reason, "status": ballot.status, "backend": args.backend})
            if n % 5 == 0 or n == len(items):
                cache.save()
                print(f"  {n}/{len(items)} items ({time.perf_counter() - start:.0f} s)", flush=True)
    cache.save()
    if args.dump is not None:
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        args.dump.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in dumped))
    n = len(rows)
    print(f"\nprompt mode, {args.backend}: {n} items of benchmarks/tasks.py, Vote(k=1, gate=None), Retry(attempts=3), max_tokens={MAX_TOKENS}; "
          f"generations cached: {cache.hits} reused, {cache.misses} new")
    print(f"validity {sum(r['valid'] for r in rows) / n:.1%}  accuracy {sum(r['right'] for r in rows) / n:.1%}  "
          f"first call valid {sum(r['first_valid'] for r in rows) / n:.1%}  calls per item {sum(r['calls'] for r in rows) / n:.2f}")
    for kind in sorted({r["kind"] for r in rows}):
        some = [r for r in rows if r["kind"] == kind]
        print(f"  {kind}: valid {sum(r['valid'] for r in some)}/{len(some)}, right {sum(r['right'] for r in some)}/{len(some)}")
    if failures:
        print("invalid calls by error type: " + ", ".join(f"{k} x{v}" for k, v in sorted(failures.items())))
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
