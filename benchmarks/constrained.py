"""Constrained decoding on the embedded model, per grammar engine.

    python benchmarks/constrained.py [--quick] [--cap SECONDS] [--limit N] [--no-coverage]

Prints, per engine (llguidance, xgrammar, outlines_core):
  1. the one-time vocabulary index, and cold and warm compile time per schema (target: warm
     <= 10 ms); cold includes the child-process round trip for outlines_core and xgrammar;
  2. decode time per token, constrained vs unconstrained greedy (target: <= 15% overhead), as
     the median gap between decoding steps (prefill excluded), runs interleaved, every step asked
     of the model (forced text is not fed in here: docs/local.md);
  3. compile coverage on ../shared/jsonschemabench (each schema made strict as accord does, then
     compiled; capped at --cap seconds), per engine alone and for accord's fallback chain.
--quick runs a small slice (it is a smoke test in the suite, not the figures).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

import accord
from accord.backends.local._constrain import _CACHES, DEFAULT_ENGINES, Constrainer, Spec, strict
from accord.backends.local._embedded import local
from accord.backends.local._engines import CompileError

BENCH = Path(__file__).resolve().parents[2] / "shared" / "jsonschemabench"


class Address(BaseModel):
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int
    address: Address


class Story(BaseModel):
    title: str
    story: str


SCHEMAS: dict[str, Any] = {
    "choice": Literal["positive", "negative", "neutral"],
    "int": int,
    "regex": accord.Regex(r"[0-9]{3}-[0-9]{4}"),
    "nested": Person,
    "lark": accord.Grammar('start: NUMBER " + " NUMBER\nNUMBER: /[0-9]+/\n'),
}
DECODE = [  # (schema, prompt): outputs long enough to time many steps
    (Story, "Write a long story about a cat who learns to sail, as JSON with a title and the story."),
    (Person, "Extract the person: John Smith is 42 years old and lives in Paris, France."),
]


def decode_times(model: Any, tokens: int, rounds: int, prompts: list[tuple[Any, str]]) -> dict[str, list[float]]:
    """Median seconds per decoding step, per engine and for no grammar, runs interleaved. Every
    step is asked of the model (``ACCORD_JUMP_FORWARD=0``): this is the grammar's own cost per
    step; docs/local.md says what feeding forced text in saves."""
    os.environ["ACCORD_JUMP_FORWARD"] = "0"
    backends = {name: accord.models.transformers(model.model, model.tokenizer, engine=[name]) for name in DEFAULT_ENGINES}
    steps: dict[str, list[float]] = {"none": [], **{name: [] for name in DEFAULT_ENGINES}}
    for backend in backends.values():  # warm-up: indexes, compiles, first-call costs
        for schema, prompt in prompts:
            backend.generate(_request(prompt, schema, 2))
    for _ in range(rounds):
        for schema, prompt in prompts:
            steps["none"].append(model.unconstrained(prompt, accord.Settings(max_tokens=tokens)).meta["seconds_per_token"])
            for name, backend in backends.items():
                steps[name].append(backend.generate(_request(prompt, schema, tokens)).meta["seconds_per_token"])
    return steps


def _request(prompt: str, schema: Any, tokens: int) -> accord.Request:
    return accord.Request(prompt, prompt, accord.Schema.of(schema), accord.Settings(max_tokens=tokens))


def compile_times(tokenizer: Any, vocab: int) -> tuple[dict[str, tuple[float, float]], dict[str, dict[str, Any]]]:
    """({engine: (index seconds, child-process start seconds)}, {engine: {schema: (cold, warm) or why not}})."""
    start = time.perf_counter()
    import outlines.backends  # noqa: F401 - imported once per process, before any figure

    print(f"   (importing outlines: {time.perf_counter() - start:.2f} s, once per process)")
    index: dict[str, tuple[float, float]] = {}
    table: dict[str, dict[str, tuple[float, float] | str]] = {}
    for name in DEFAULT_ENGINES:
        constrainer = Constrainer(tokenizer, vocab, engine=[name])
        start = time.perf_counter()
        engine = constrainer.engine(name)
        indexed = time.perf_counter()
        if engine.isolated:  # start the child process outside the per-schema figures
            constrainer.compile(name, Spec("regex", "(warm|up)"))
        index[name] = (indexed - start, time.perf_counter() - indexed)
        table[name] = {}
        for label, source in SCHEMAS.items():
            schema = accord.Schema.of(source)
            try:
                start = time.perf_counter()
                constrainer.processor(schema)
                cold = time.perf_counter() - start
                warm = statistics.median(_timed(functools.partial(constrainer.processor, schema)) for _ in range(20))
                table[name][label] = (cold, warm)
            except accord.UnsupportedSchema:
                table[name][label] = "not supported"
    return index, table


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def coverage(tokenizer: Any, vocab: int, files: list[Path], cap: float) -> dict[str, list[tuple[bool, float, str]]]:
    """Per engine, per schema file: (compiled, seconds, error)."""
    results: dict[str, list[tuple[bool, float, str]]] = {name: [] for name in DEFAULT_ENGINES}
    constrainers = {name: Constrainer(tokenizer, vocab, engine=[name], compile_timeout=cap) for name in DEFAULT_ENGINES}
    for number, file in enumerate(files, 1):
        spec = Spec("json", json.dumps(strict(json.loads(file.read_text())["schema"]), ensure_ascii=False))
        for name, constrainer in constrainers.items():
            start = time.perf_counter()
            try:
                constrainer.compile(name, spec)
                ok, error = True, ""
            except CompileError as exc:
                ok, error = False, str(exc)
            seconds = time.perf_counter() - start
            if ok and seconds > cap:  # llguidance compiles in-process under its own limits
                ok, error = False, f"took {seconds:.1f} s, over the {cap:g} s cap"
            results[name].append((ok, seconds, error))
        _CACHES.compiled.clear()  # compiled grammars can be large; the figures need no reuse
        if number % 100 == 0:
            print(f"  ... {number}/{len(files)} schemas", file=sys.stderr, flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small slice, for the test suite")
    parser.add_argument("--cap", type=float, default=None, help="seconds per schema compile (default 10; quick 2)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N schema files")
    parser.add_argument("--no-coverage", action="store_true", help="skip the jsonschemabench coverage")
    args = parser.parse_args()
    cap = args.cap or (2.0 if args.quick else 10.0)
    started = time.perf_counter()
    print(f"accord constrained-decoding benchmark{' (--quick: a slice, not the figures)' if args.quick else ''}")
    try:
        model = local()  # accord.models.local(), typed as the TransformersBackend it is
    except accord.ModelNotInstalled as exc:
        print(f"skipped: {exc.message}")
        return 0
    vocab = model.constrainer.vocab_size
    print(f"model {model.model_id} ({model.dtype}, {model.device}, {model.describe().get('engines')})")

    print("\n1. compile time per schema: cold / warm (warm target <= 10 ms)")
    index, table = compile_times(model.tokenizer, vocab)
    print(f"   {'':14} {'index':>6} {'child':>6}  " + "  ".join(f"{label:>17}" for label in SCHEMAS))
    for name in DEFAULT_ENGINES:
        cells = []
        for label in SCHEMAS:
            cell = table[name][label]
            cells.append(f"{cell:>17}" if isinstance(cell, str) else f"{cell[0] * 1000:8.1f}/{cell[1] * 1000:6.2f}ms")
        print(f"   {name:14} {index[name][0]:5.2f}s {index[name][1]:5.2f}s  " + "  ".join(cells))
    print("   index: the engine's vocabulary index, once per tokenizer; child: starting the compile process")

    tokens, rounds, prompts = (8, 1, DECODE[1:]) if args.quick else (48, 3, DECODE)
    steps = decode_times(model, tokens, rounds, prompts)
    base = statistics.median(steps["none"])
    print(f"\n2. decode time per token, {tokens} tokens x {len(prompts)} prompts x {rounds} rounds (median step)")
    print(f"   {'no grammar':14} {base * 1000:8.1f} ms")
    for name in DEFAULT_ENGINES:
        value = statistics.median(steps[name])
        print(f"   {name:14} {value * 1000:8.1f} ms   overhead {100 * (value / base - 1):+6.1f}%   (target <= +15%)")

    if args.no_coverage:
        print(f"\ndone in {time.perf_counter() - started:.1f} s")
        return 0
    if not BENCH.is_dir():
        print(f"\n3. coverage skipped: {BENCH} not found (shared/ beside the repository)")
        return 0
    files = sorted(BENCH.glob("*.json"))
    if args.quick:
        files = files[:: max(1, len(files) // 8)][:8]
    if args.limit:
        files = files[: args.limit]
    results = coverage(model.tokenizer, vocab, files, cap)
    print(f"\n3. compile coverage on jsonschemabench: {len(files)} schemas, strict objects, cap {cap:g} s each")
    for name in DEFAULT_ENGINES:
        rows = results[name]
        ok = sum(r[0] for r in rows)
        times = [r[1] for r in rows if r[0]]
        timeouts = sum("compile-time limit" in r[2] or "cap" in r[2] for r in rows)
        p50 = statistics.median(times) * 1000 if times else float("nan")
        print(f"   {name:14} {ok:4}/{len(rows)} = {100 * ok / len(rows):5.1f}%   median compile {p50:7.1f} ms"
              f"   over the cap: {timeouts}")
    served = [next((n for n in DEFAULT_ENGINES if results[n][i][0]), None) for i in range(len(files))]
    covered = sum(s is not None for s in served)
    by = ", ".join(f"{n} {served.count(n)}" for n in DEFAULT_ENGINES)
    print(f"   {'chain':14} {covered:4}/{len(files)} = {100 * covered / len(files):5.1f}%   served by: {by}")
    print(f"\ndone in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
