"""Every schema in bounded size and time (issue #28): the real-world JSON Schemas of
../shared/jsonschemabench and the recursive models of tests/recursive.py.

For each: construction, the first prompt (the hint rendered, its cache cleared) and one reading of
a valid instance. Sizes are bounded exactly (the prompt's schema hint within the schema's compact
JSON plus 2,000 characters, the feedback skeleton within its limit); times with a margin that a
loaded two-core machine keeps (a second each, where the figures of benchmarks/schemas.py are
milliseconds).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import accord
from accord import Budget, Schema, Stabilizer, Vote
from accord._types import Feedback
from accord.prompt import _signature as signature
from accord.prompt._prompt import SKELETON_CHARS, build_input, render_feedback, skeleton
from accord.read._read import Reading, read

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recursive import SCHEMAS, SELF, Node

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschemabench"
FILES = sorted(BENCH.glob("*.json"))
SECONDS = 1.0  # per step and schema; measured: p99 under 30 ms, max under 0.1 s (benchmarks/schemas.py)


def corpus() -> list[tuple[str, Any, str | None]]:
    out: list[tuple[str, Any, str | None]] = []
    for path in FILES:
        case = json.loads(path.read_text())
        valid = next((t["data"] for t in case.get("tests", ()) if t.get("valid")), None)
        out.append((path.name, case["schema"], None if valid is None else json.dumps(valid)))
    return out


def measure(source: Any, text: str | None) -> dict[str, Any]:
    signature._CACHE.clear()  # the first prompt of this schema, not a cached one
    start = time.perf_counter()
    schema: Schema[Any] = Schema(source)
    built = time.perf_counter()
    prompt = build_input("q", schema, hint=True, feedback=None)
    prompted = time.perf_counter()
    reading = read(text, schema) if text is not None else None
    done = time.perf_counter()
    assert isinstance(prompt, str)
    return {"schema": schema, "prompt": prompt, "reading": reading, "build": built - start, "prompt_s": prompted - built,
            "read": done - prompted}


def check(name: str, source: Any, text: str | None) -> None:
    seen = measure(source, text)
    schema, hint = seen["schema"], seen["schema"]._hint
    schema_chars = len(signature.compact(schema.json_schema))
    assert len(hint.text) <= schema_chars + signature.SLACK, f"{name}: {len(hint.text)} chars for a schema of {schema_chars}"
    assert hint.schema_chars == schema_chars
    for step in ("build", "prompt_s", "read"):
        assert seen[step] <= SECONDS, f"{name}: {step} took {seen[step]:.2f} s"
    if text is not None:
        assert isinstance(seen["reading"], Reading), f"{name}: {seen['reading']}"
    shape = skeleton(schema.json_schema)
    assert len(shape) <= SKELETON_CHARS + 200, f"{name}: a skeleton of {len(shape)} chars"
    feedback = render_feedback(Feedback("extract", [{"loc": (), "msg": "echo", "type": "schema_echo"}]), schema)
    assert len(feedback) <= SKELETON_CHARS + 400


@pytest.mark.skipif(not FILES, reason=f"no jsonschemabench data at {BENCH}")
def test_every_corpus_schema_is_bounded() -> None:
    Schema({"type": "object"})  # jsonschema's first import (seconds: its format checkers) is not a schema's cost
    cases = corpus()
    assert len(cases) == len(FILES) >= 900
    forms: dict[str, int] = {}
    for name, source, text in cases:
        check(name, source, text)
        form = Schema(source)._hint.form
        forms[form] = forms.get(form, 0) + 1
    assert forms.get("signature", 0) >= 0.9 * len(cases), forms  # the inline signature where it fits, as before


@pytest.mark.parametrize("name,source,text", SCHEMAS, ids=[s[0] for s in SCHEMAS])
def test_recursive_and_deep_schemas_are_bounded(name: str, source: Any, text: str) -> None:
    Schema({"type": "object"})
    check(name, source, text)


def test_the_tree_is_written_once_by_name() -> None:
    prompt = Schema(Node).render()
    assert prompt == (
        "Answer in JSON using this schema:\n"
        "Node {\n"
        '  "name": string,\n'
        '  "kind": "file" | "dir", // optional\n'
        '  "children": Node[], // optional\n'
        '  "left": Node or null, // optional\n'
        '  "right": Node or null, // optional\n'
        '  "alt": Node or int or string or null, // optional\n'
        "}"
    )
    assert len(prompt) < 1_000 and Schema(Node)._hint.form == "named"
    assert Schema(SELF).render().endswith('Tree {\n  "v": int,\n  "kids": Tree[], // optional\n}')  # "#": the root by name, once


def test_definitions_used_once_are_inlined_and_shared_ones_named() -> None:
    shared = {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}, "required": ["street", "city"]}
    once = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    schema = {
        "type": "object", "required": ["home", "work", "id"],
        "properties": {"home": {"$ref": "#/$defs/Address"}, "work": {"$ref": "#/$defs/Address"}, "id": {"$ref": "#/$defs/Id"},
                       "kind": {"$ref": "#/$defs/Kind"}, "again": {"$ref": "#/$defs/Kind"}},
        "$defs": {"Address": shared, "Id": once, "Kind": {"enum": ["a", "b"]}},
    }
    made = signature._make(schema, signature.compact(schema))
    assert made.form == "signature"  # not recursive and short: inlined, as before
    named = signature._Render(schema, 10_000, names=signature._names(schema)).body()
    assert '"home": Address,' in named and '"work": Address,' in named and "\n\nAddress {\n" in named
    assert '"id": {\n    "n": int,\n  },' in named  # used once: inlined
    assert '"kind": "a" | "b", // optional' in named  # small: inlined wherever used


def test_a_hint_is_rendered_once_per_schema_in_a_bounded_cache() -> None:
    first = signature.hint({"type": "object", "properties": {"a": {"type": "string"}}})
    assert signature.hint({"type": "object", "properties": {"a": {"type": "string"}}}) is first  # equal schemas share it
    for i in range(signature._CACHE_SIZE + 10):
        signature.hint({"type": "object", "properties": {f"p{i}": {"type": "string"}}})
    assert len(signature._CACHE) == signature._CACHE_SIZE


def test_a_long_signature_falls_back_to_a_shorter_form_and_says_so() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3_000)}}  # "// optional" tips it over
    made = signature.hint(wide)
    assert made.form == "named, without comments" and "//" not in made.text
    assert len(made.text) <= len(signature.compact(wide)) + signature.SLACK
    result = Stabilizer(lambda p: '{"p1": 1}', wide, vote=Vote(k=1), budget=Budget(max_seconds=5)).run("q")
    assert result.meta["schema_hint"] == {"form": "named, without comments", "chars": len(made.text),
                                          "schema_chars": len(signature.compact(wide)), "shortened": []}
    plain = Stabilizer(lambda p: '{"name": "a"}', Node, vote=Vote(k=1)).run("q")
    assert "schema_hint" not in plain.meta  # a full signature: nothing to say


def test_the_json_schema_is_the_last_form() -> None:
    sparse = {"type": "object", "properties": {f"p{i}": {} for i in range(2_000)}}  # 8 chars each; a field line takes 12
    made = signature.hint(sparse)
    assert made.form == "json schema" and made.text == signature.JSON_HEADER + signature.compact(sparse)
    assert made.note() is not None and made.note()["form"] == "json schema"  # type: ignore[index]


def test_the_recursive_tree_runs_in_milliseconds() -> None:
    Stabilizer(lambda p: '{"name": "a"}', Node, vote=Vote(k=3)).run("warm")  # the first run's imports
    start = time.perf_counter()
    result = Stabilizer(lambda p: '{"name": "a"}', Node, vote=Vote(k=3)).run("x")
    assert result.value == Node(name="a") and time.perf_counter() - start < SECONDS  # 8 s before; benchmarks/schemas.py measures it
    assert isinstance(accord.Schema(Node).render(), str)
