"""The JSON-Schema path on 948 real-world schemas (../shared/jsonschemabench), with counts.

Validation uses jsonschema with every format checker it knows, whatever the schema's draft (the
format extras come from ``jsonschema[format-nongpl]``). Baseline: plain jsonschema with its
draft's own format checker.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from accord import Schema
from accord._read import Reading, read
from accord._schema import ValidationFailure

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschemabench"
FILES = sorted(BENCH.glob("*.json"))

pytestmark = pytest.mark.skipif(not FILES, reason=f"no jsonschemabench data at {BENCH}")


def same_meaning(a: Any, b: Any) -> bool:
    """Equal, up to trimmed/NFC strings and equal datetime instants written differently."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_meaning(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_meaning, a, b))
    if isinstance(a, str) and isinstance(b, str):
        if unicodedata.normalize("NFC", a).strip() == b:
            return True
        try:
            return datetime.fromisoformat(a.replace("Z", "+00:00")) == datetime.fromisoformat(b.replace("Z", "+00:00"))
        except ValueError:
            return False
    return a == b and type(a) is type(b)


def test_jsonschemabench(capsys: pytest.CaptureFixture[str]) -> None:
    counts = dict.fromkeys(("schemas", "valid", "invalid", "valid_accepted", "valid_unchanged", "stage_rejects",
                            "baseline_rejects", "pipeline_rejects"), 0)
    repaired: list[str] = []
    wrongly_accepted: list[str] = []
    for path in FILES:
        case = json.loads(path.read_text())
        schema: Schema[Any] = Schema(case["schema"])
        baseline_cls = jsonschema.validators.validator_for(case["schema"])
        baseline = baseline_cls(case["schema"], format_checker=baseline_cls.FORMAT_CHECKER)
        counts["schemas"] += 1
        for test in case["tests"]:
            data = test["data"]
            reading = read(json.dumps(data), schema)
            try:
                schema.validate(data)
                stage_ok = True
            except ValidationFailure:
                stage_ok = False
            if test["valid"]:
                counts["valid"] += 1
                assert stage_ok, f"{path.name}: a valid instance was rejected by validation"
                assert isinstance(reading, Reading), f"{path.name}: {reading}"
                counts["valid_accepted"] += 1
                assert same_meaning(data, reading.data), f"{path.name}: {data!r} became {reading.data!r}"
                counts["valid_unchanged"] += 1
            else:
                counts["invalid"] += 1
                counts["stage_rejects"] += not stage_ok
                counts["baseline_rejects"] += not baseline.is_valid(data)
                counts["pipeline_rejects"] += not isinstance(reading, Reading)
                if stage_ok:
                    wrongly_accepted.append(f"{path.name}: {json.dumps(data)[:120]}")
                elif isinstance(reading, Reading):
                    # Normalization repaired it (e.g. "8080" to 8080 for an integer field): what is
                    # returned is a different, valid value, never the invalid instance itself.
                    assert reading.data != data
                    assert not list(baseline.iter_errors(reading.data))
                    repaired.append(path.name)
    lines = [
        f"jsonschemabench: {counts['schemas']} schemas, {counts['valid']} valid and {counts['invalid']} invalid instances",
        f"  valid accepted: {counts['valid_accepted']}/{counts['valid']}, unchanged in meaning: {counts['valid_unchanged']}",
        f"  invalid rejected by validation: {counts['stage_rejects']}/{counts['invalid']} "
        f"(plain jsonschema {version('jsonschema')} "
        f"with its draft's format checker: {counts['baseline_rejects']})",
        f"  invalid repaired into a valid value by normalization: {len(repaired)}; still accepted wrongly: {len(wrongly_accepted)}",
        *[f"    {line}" for line in wrongly_accepted],
    ]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert counts["valid_accepted"] == counts["valid"] == 1334
    assert counts["invalid"] == 2206
    assert counts["stage_rejects"] >= counts["baseline_rejects"]
