"""Typed records: why a run ended is a StopReason, and no meta dict carries data between accord's layers."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import accord
from accord import StopReason

SRC = Path(__file__).resolve().parents[1] / "src" / "accord"


def test_a_stop_reason_is_the_string_it_was() -> None:
    assert StopReason.UNANIMOUS == "unanimous" and StopReason.K_REACHED == "k reached"
    assert StopReason("no valid ballot") is StopReason.NO_VALID_BALLOT
    assert {StopReason.GATE: 1}["gate"] == 1 and f"{StopReason.K_REACHED}" == str(StopReason.K_REACHED) == "k reached"
    assert json.dumps({"why": StopReason.BUDGET}) == '{"why": "budget"}' and repr(StopReason.GATE) == "'gate'"


def test_accepted_is_every_reason_but_the_failed_ones() -> None:
    failed = {"uncontested", "no quorum", "no valid ballot", "budget", "error"}
    assert {r.value for r in StopReason if not r.accepted} == failed
    assert StopReason("two ahead").accepted and StopReason("two ahead") is StopReason("two ahead")  # a stop rule's own


def test_a_result_holds_a_stop_reason_whose_accepted_is_stable() -> None:
    result = accord.Result("x", True, 1.0, {'"x"': 1}, (), "unanimous", accord.Usage())
    assert result.stopped_because is StopReason.UNANIMOUS and result.stopped_because.accepted == result.stable
    assert result.to_dict()["stopped_because"] == "unanimous" and "stopped_because='unanimous'" in repr(result)


# Where a `meta[...]`, `meta.get(...)` or `... in meta` read is allowed in src/accord: the ledger's
# codec, the one place that rebuilds typed records from what older versions stored; and a
# Completion built by a model function, whose documented spelling named the model in its meta;
# and print(result), which reads the record a user sees (k, quorum, predicted) as the user would.
ALLOWED_READS = {
    "_explain.py": "the Result's record (k, quorum, predicted) in words, for a person; nothing is carried back",
    "ledger/_codec.py": "typed records from the meta a stored run holds",
    "_types.py": "a user's Completion(meta={'model': ...}), read once where it is built",
}


def _is_meta(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "meta") or (isinstance(node, ast.Attribute) and node.attr == "meta")


def _reads_meta(node: ast.AST) -> bool:
    """A subscript load, ``.get``/``.pop``, or a membership test of a dict named ``meta`` (or ``x.meta``)."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.ctx, ast.Load) and _is_meta(node.value)
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop") and _is_meta(node.func.value)
    if isinstance(node, ast.Compare):
        return any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(map(_is_meta, node.comparators))
    return False


def _meta_reads(tree: ast.AST) -> list[int]:
    return sorted(node.lineno for node in ast.walk(tree) if _reads_meta(node))


def test_no_meta_dict_carries_data_between_accords_layers() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name in ALLOWED_READS or name == "schema/_metaschema.py":  # JSON Schema's "meta", not ours
            continue
        found += [f"{name}:{line}" for line in _meta_reads(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, f"meta reads between accord's layers (use a typed field): {found}"


def test_the_read_finder_finds_reads() -> None:
    code = "a = b.meta['x']\nc = meta.get('y')\nd = 'z' in ballot.meta\nmeta['w'] = 1\ne = dict(meta)\n"
    assert _meta_reads(ast.parse(code)) == [1, 2, 3]
