"""Reading malformed model output: accord against the parsers people use, on a labelled corpus.

    python benchmarks/parsing.py [--quick] [--peers-python PATH] [--repeat N] [--first N] [--instructions [--against REF]]

Two corpora. The recovery corpus is tests/data/malformed/ (cases.jsonl: real outputs of the
embedded SmolLM2-135M in prompt mode, in process and over ``transformers serve``;
handwritten.jsonl: each malformation class of issue 14 written from known values). Each case has a
schema and a label: the value the text means, or null when it does not say one (unrecoverable).
The refusal corpus is tests/data/refusals/ (issue 33: hedges, unknowns, negations, ordinals, bools
for numbers, lists spelled in strings, a draft, an example or a correction beside the answer,
Decimal forms), each case labelled "refuse" or with the exact value a stated rule reads.

Tools, each given the text and the schema:

  accord            ``accord.read._read.read`` (strict, then schema-aligned repairs), the whole stage
  accord strict     the same with ``accord.Extract(strict=True)``: no repair
  json.loads        ``json.loads(text)`` validated by pydantic
  json-repair       ``json_repair.loads(text)`` validated by pydantic
  parsantic         ``parsantic.parse(text, schema)`` (BAML-style SAP for pydantic)
  instructor        instructor's own parse (MD_JSON mode: ``extract_json_from_codeblock`` then
                    ``model_validate_json``)

parsantic needs Python 3.12 and instructor pins its own versions, so they run in their own venv
(``--peers-python``, default .bench-cache/peers-venv/bin/python; made with ``python3.12 -m venv``
and ``pip install parsantic instructor``), skipped with the reason when it is missing.

Per tool: recovered (the value equals the label, compared by accord's canonical key), wrong
(a value accepted that is not the label, or a value for an unrecoverable text), rejected, and
the median time per parse over texts under 2 KB (best of ``--repeat`` runs per case). A real
output cut off at ``max_tokens`` (``finish_reason`` "length") whose reading ran to the very end of
the text is rejected for accord, as the run loop rejects it; the peers get no such help. Targets for
accord: recovers >= 95% of the recoverable cases and more than every peer, 0 wrong, median parse
< 100 us. ``--quick`` (the test suite) runs the in-process tools only, one repeat.

Times move with the machine: the run prints its pace (a fixed Python loop's time in the same
process). ``--instructions`` also counts the machine instructions a read takes (valgrind), a figure
that does not move; ``--against REF`` counts them for another git revision too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "malformed"
REFUSALS = ROOT / "tests" / "data" / "refusals"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(CORPUS))
sys.path.insert(0, str(REFUSALS))

import accord  # noqa: E402
from accord.read._canonical import canonical_form, canonical_key  # noqa: E402
from accord.read._exact import exact_form  # noqa: E402
from accord.read._read import STRICT, Misreading, read  # noqa: E402

PEERS_PYTHON = ROOT / ".bench-cache" / "peers-venv" / "bin" / "python"
SMALL = 2048


def load() -> list[dict[str, Any]]:
    """The corpus, in file order; ``PARSING_FIRST=N`` in the environment (``--first N``): its first N
    cases only (305: the corpus before issue 29's classes, to compare revisions on the same texts)."""
    cases = []
    for name in ("cases.jsonl", "handwritten.jsonl"):
        path = CORPUS / name
        if path.is_file():
            cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    first = os.environ.get("PARSING_FIRST")
    return cases[: int(first)] if first else cases


def load_refusals() -> list[dict[str, Any]]:
    """The refusal corpus, its "refuse" labels as null (no value to take)."""
    path = REFUSALS / "cases.jsonl"
    if not path.is_file():
        return []
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [case | {"label": None if case["label"] == "refuse" else case["label"]} for case in cases]


def schema_source(ref: str) -> Any:
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)


_SCHEMAS: dict[str, accord.Schema[Any]] = {}


def schema_of(ref: str) -> accord.Schema[Any]:
    """One Schema per schema, as a Stabilizer holds one (its JSON Schema is built once)."""
    if ref not in _SCHEMAS:
        _SCHEMAS[ref] = accord.Schema(schema_source(ref))
        _ = _SCHEMAS[ref].json_schema
    return _SCHEMAS[ref]


def key_of(schema: accord.Schema[Any], data: Any) -> str | None:
    """The canonical key of JSON data under the schema; None when it is not valid."""
    try:
        value = schema.validate(data)
    except accord.ValidationFailure:
        return None
    return canonical_key(canonical_form(exact_form(schema, value, schema.dump(value)), schema.json_schema))


# -- the tools in this process ---------------------------------------------------------------------


def accord_tool(policy: accord.Extract) -> Callable[[str, accord.Schema[Any]], Any]:
    def parse(text: str, schema: accord.Schema[Any], finish_reason: str | None = None) -> Any:
        reading = read(text, schema, policy=policy)
        if isinstance(reading, Misreading):
            raise ValueError(reading.message)
        if finish_reason == "length" and reading.open_ended:
            raise ValueError("cut off at max_tokens")  # what the run loop does with such a reading
        return reading.data

    return parse


def json_loads(text: str, schema: accord.Schema[Any], finish_reason: str | None = None) -> Any:
    return schema.dump(schema.validate(json.loads(text)))


def json_repair_tool(text: str, schema: accord.Schema[Any], finish_reason: str | None = None) -> Any:
    import json_repair

    return schema.dump(schema.validate(json_repair.loads(text)))


# The classes of tests/data/malformed/handwritten.py's reading_cases (issue 29), each also "(field)", "(list item)"...
WORD_CLASSES = frozenset({"negated choice", "hedged choice", "choice written another way", "contradicting yes/no",
                          "yes/no written another way", "number form with one reading", "number form with two readings",
                          "null-like"})

LOCAL_TOOLS: dict[str, Callable[..., Any]] = {
    "accord": accord_tool(accord.Extract()),
    "accord strict": accord_tool(STRICT),
    "json.loads + pydantic": json_loads,
}


def machine_speed() -> float:
    """Milliseconds this process takes for a fixed pure-Python loop, best of 3: the pace of the
    machine while the figures were made. On a shared virtual machine it moves with the host's load
    (the same loop has taken from about 30 to 110 ms on this project's machines), and every time per parse with it."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i * i
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def run_local(name: str, tool: Callable[..., Any], cases: list[dict[str, Any]], repeat: int) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        schema = schema_of(case["schema"])
        best, data, error = float("inf"), None, None
        for _ in range(repeat):
            start = time.perf_counter()
            try:
                data, error = tool(case["text"], schema, case.get("finish_reason")), None
            except Exception as exc:  # every failure is a rejection, whatever the tool raises
                data, error = None, type(exc).__name__
            best = min(best, time.perf_counter() - start)
        out.append({"id": case["id"], "data": data, "error": error, "seconds": best})
    return out


# -- the tools in the peers' venv ------------------------------------------------------------------

CHILD = r'''
import importlib, json, sys, time
job = json.load(sys.stdin)
for path in job["paths"]:
    sys.path.insert(0, path)
from pydantic import TypeAdapter
tools = {}
try:
    import parsantic
    tools["parsantic"] = lambda text, adapter: parsantic.parse(text, adapter).value
except Exception as exc:
    print(json.dumps({"skip": "parsantic", "why": f"{type(exc).__name__}: {exc}"}), flush=True)
try:
    from instructor.v2.core.json import extract_json_from_codeblock
    tools["instructor (MD_JSON parse)"] = lambda text, adapter: adapter.validate_json(extract_json_from_codeblock(text))
except Exception as exc:
    print(json.dumps({"skip": "instructor (MD_JSON parse)", "why": f"{type(exc).__name__}: {exc}"}), flush=True)
adapters = {}
for name, tool in tools.items():
    for case in job["cases"]:
        ref = case["schema"]
        if ref not in adapters:
            module, attr = ref.split(":")
            adapters[ref] = TypeAdapter(getattr(importlib.import_module(module), attr))
        adapter = adapters[ref]
        best, data, error = float("inf"), None, None
        for _ in range(job["repeat"]):
            start = time.perf_counter()
            try:
                data, error = adapter.dump_python(tool(case["text"], adapter), mode="json"), None
            except Exception as exc:
                data, error = None, type(exc).__name__
            best = min(best, time.perf_counter() - start)
        print(json.dumps({"tool": name, "id": case["id"], "data": data, "error": error, "seconds": best}, default=str), flush=True)
'''


def run_peers(python: Path, cases: list[dict[str, Any]], repeat: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    if not python.exists():
        reason = f"no peers venv at {python} (python3.12 -m venv; pip install parsantic instructor)"
        return {}, {"parsantic": reason, "instructor (MD_JSON parse)": reason}
    job = {"paths": [str(ROOT / "benchmarks"), str(CORPUS), str(REFUSALS)], "repeat": repeat,
           "cases": [{"id": c["id"], "schema": c["schema"], "text": c["text"]} for c in cases]}
    done = subprocess.run([str(python), "-c", CHILD], input=json.dumps(job), capture_output=True, text=True, timeout=1800, check=False)
    rows: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "skip" in row:
            skipped[row["skip"]] = row["why"]
        else:
            rows.setdefault(row.pop("tool"), []).append(row)
    if not rows and not skipped:
        skipped["peers"] = f"the peers script failed: {done.stderr.strip()[-300:]}"
    return rows, skipped


# -- instructions -----------------------------------------------------------------------------------


def instructions(src: Path, passes: int = 2) -> float:
    """Machine instructions accord's reading takes per text under 2 KB, on average over the corpus
    (``src``: the accord source to import), counted by valgrind's callgrind: a fresh process that
    reads the corpus ``passes`` times after a warm-up pass, less one that only warms up. Unlike a
    time, the count does not move with the machine's load or state."""

    def count(n: int) -> int:
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(src)}
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, "--ir", str(n)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, timeout=3600)
        return int(next(line for line in done.stderr.splitlines() if "Collected" in line).split()[-1])

    small = sum(len(case["text"]) < SMALL for case in load())
    return (count(passes) - count(0)) / (passes * small)


def _ir_child(passes: int) -> None:
    """What :func:`instructions` counts: a warm-up pass over the texts under 2 KB, then ``passes``."""
    cases = [case for case in load() if len(case["text"]) < SMALL]
    schemas = [schema_of(case["schema"]) for case in cases]
    for _ in range(1 + passes):
        for case, schema in zip(cases, schemas, strict=True):
            read(case["text"], schema)


def print_instructions(against: str | None) -> None:
    from overhead import export_src  # the src folder of a git revision (benchmarks/ is on the path)

    if shutil.which("valgrind") is None:
        print("\ninstructions: skipped (valgrind is not installed)")
        return
    trees = {"this tree": ROOT / "src"}
    with tempfile.TemporaryDirectory() as scratch:
        if against:
            trees[against] = export_src(against, Path(scratch))
        print("\ninstructions a read, texts under 2 KB, mean over the corpus (valgrind callgrind; the same on an idle or a loaded machine):")
        for name, src in trees.items():
            print(f"  {name}: {instructions(src):,.0f}")


# -- figures ---------------------------------------------------------------------------------------


def score(cases: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_id = {row["id"]: row for row in rows}
    recovered = wrong = rejected = unrecoverable_rejected = 0
    wrong_ids, missed = [], []
    times = []
    for case in cases:
        schema = schema_of(case["schema"])
        row = by_id[case["id"]]
        if len(case["text"]) < SMALL:
            times.append(row["seconds"])
        got = None if row["data"] is None else key_of(schema, row["data"])
        label = None if case["label"] is None else key_of(schema, case["label"])
        if case["label"] is not None and label is None:
            raise SystemExit(f"corpus case {case['id']}: its label does not validate")
        if got is None:
            if label is None:
                unrecoverable_rejected += 1
            else:
                rejected += 1
                missed.append(case["id"])
        elif got == label:
            recovered += 1
        else:
            wrong += 1
            wrong_ids.append(case["id"])
    recoverable = sum(c["label"] is not None for c in cases)
    return {"recovered": recovered, "recoverable": recoverable, "wrong": wrong, "rejected": rejected,
            "unrecoverable_rejected": unrecoverable_rejected, "median_us": statistics.median(times) * 1e6 if times else 0.0,
            "p90_us": sorted(times)[int(0.9 * (len(times) - 1))] * 1e6 if times else 0.0, "wrong_ids": wrong_ids, "missed": missed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="in-process tools only, one repeat (for the test suite)")
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--show", action="store_true", help="list the cases each tool missed or got wrong")
    parser.add_argument("--instructions", action="store_true", help="also count the instructions a read takes (valgrind; a minute)")
    parser.add_argument("--against", metavar="REF", help="with --instructions: also count them for git revision REF")
    parser.add_argument("--first", type=int, help="only the first N cases of the corpus (305: the corpus before issue 29)")
    parser.add_argument("--ir", type=int, help=argparse.SUPPRESS)  # what --instructions runs under valgrind
    args = parser.parse_args(argv)
    if args.first:
        os.environ["PARSING_FIRST"] = str(args.first)  # for the processes --instructions starts too
    if args.ir is not None:
        _ir_child(args.ir)
        return 0
    repeat = 1 if args.quick else args.repeat
    cases = load()
    refusals = load_refusals()
    if not cases:
        print("no corpus at tests/data/malformed/", file=sys.stderr)
        return 1
    tools: dict[str, list[dict[str, Any]]] = {}
    local = dict(LOCAL_TOOLS)
    skipped: dict[str, str] = {}
    try:
        import json_repair  # noqa: F401

        local["json-repair + pydantic"] = json_repair_tool
    except ImportError:
        skipped["json-repair + pydantic"] = "json-repair is not installed (pip install json-repair)"
    pace = machine_speed()
    for name, tool in local.items():
        run_local(name, tool, cases[:20], 1)  # warm up: imports and pydantic's caches
        tools[name] = run_local(name, tool, cases + refusals, repeat)
    pace = min(pace, machine_speed())
    if args.quick:
        skipped["parsantic"] = skipped["instructor (MD_JSON parse)"] = "not in --quick (a venv of their own)"
    else:
        peers, why = run_peers(args.peers_python, cases + refusals, repeat)
        tools.update(peers)
        skipped.update(why)
    sources: dict[str, int] = {}
    for case in cases:
        sources[case["source"]] = sources.get(case["source"], 0) + 1
    recoverable = sum(c["label"] is not None for c in cases)
    print(f"{len(cases)} labelled cases ({', '.join(f'{n} {s}' for s, n in sorted(sources.items()))}); "
          f"{recoverable} recoverable, {len(cases) - recoverable} unrecoverable; best of {repeat} per parse; "
          f"machine pace: a fixed Python loop took {pace:.0f} ms in this process (see machine_speed)\n")
    print("| tool | recovered (of recoverable) | wrong value accepted | recoverable rejected | unrecoverable rejected | median parse (< 2 KB) | p90 |")
    print("|---|---|---|---|---|---|---|")
    figures = {}
    for name, rows in tools.items():
        f = figures[name] = score(cases, rows)
        print(f"| {name} | {f['recovered']}/{f['recoverable']} ({f['recovered'] / f['recoverable']:.1%}) | {f['wrong']} | "
              f"{f['rejected']} | {f['unrecoverable_rejected']}/{len(cases) - recoverable} | {f['median_us']:.0f} us | {f['p90_us']:.0f} us |")
    for name, why in skipped.items():
        print(f"| {name} | skipped: {why} | | | | | |")
    words = [c for c in cases if c["class"].split(" (")[0] in WORD_CLASSES]
    if words:
        print(f"\nthe word and number classes of issue 29 ({len(words)} cases: negations, hedges, number forms, null-likes; "
              "top-level and nested):\n")
        print("| tool | recovered (of recoverable) | wrong value accepted | unrecoverable rejected |")
        print("|---|---|---|---|")
        for name, rows in tools.items():
            f = figures[f"{name} (issue 29)"] = score(words, rows)
            print(f"| {name} | {f['recovered']}/{f['recoverable']} | {f['wrong']} | {f['unrecoverable_rejected']}/{len(words) - f['recoverable']} |")
    if refusals:
        said = sum(c["label"] is not None for c in refusals)
        print(f"\nthe refusal corpus (tests/data/refusals/, issue 33): {len(refusals)} cases, {len(refusals) - said} to refuse "
              f"(hedges, unknowns, negations, ordinals, bools for numbers, several values), {said} with the value a stated rule "
              "reads (a marked final answer, a list spelled in a string, a Decimal form, a case fold):\n")
        print("| tool | wrong value accepted | refused (of the refusals) | meant value read | meant value refused |")
        print("|---|---|---|---|---|")
        for name, rows in tools.items():
            f = figures[f"{name} (refusals)"] = score(refusals, rows)
            print(f"| {name} | {f['wrong']} | {f['unrecoverable_rejected']}/{len(refusals) - said} | {f['recovered']}/{said} | {f['rejected']} |")
        for name, why in skipped.items():
            print(f"| {name} | skipped: {why} | | | |")
    if args.show:
        for name, f in figures.items():
            print(f"\n{name}: wrong {f['wrong_ids']}\n  missed {f['missed']}")
    a = figures["accord"]
    peers = {n: f for n, f in figures.items() if not n.startswith("accord") and not n.endswith(("(issue 29)", "(refusals)"))}
    best_peer = max((f["recovered"] for f in peers.values()), default=0)
    verdict = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    print("\ntargets for accord:")
    print(f"- recovers >= 95% of the recoverable cases: {a['recovered'] / a['recoverable']:.1%}: {verdict(a['recovered'] >= 0.95 * a['recoverable'])}")
    print(f"- more than every peer ({', '.join(peers)}; best {best_peer}): {a['recovered']}: {verdict(a['recovered'] > best_peer)}")
    print(f"- 0 wrong values: {a['wrong']}: {verdict(a['wrong'] == 0)}")
    print(f"- median parse < 100 us for texts < 2 KB: {a['median_us']:.0f} us: {verdict(a['median_us'] < 100)}")
    if a["wrong"]:
        print(f"  wrong: {a['wrong_ids']}")
    if words:
        w = figures["accord (issue 29)"]
        print(f"- 0 wrong values on the word and number classes of issue 29: {w['wrong']}: {verdict(w['wrong'] == 0)}"
              + (f"  wrong: {w['wrong_ids']}" if w["wrong"] else ""))
    if refusals:
        r = figures["accord (refusals)"]
        print(f"- 0 wrong values on the refusal corpus: {r['wrong']}: {verdict(r['wrong'] == 0)}"
              + (f"  wrong: {r['wrong_ids']}" if r["wrong"] else ""))
    if args.instructions:
        print_instructions(args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
