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
from accord.read._read import Reading, read
from accord.schema._schema import ValidationFailure

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschemabench"
FILES = sorted(BENCH.glob("*.json"))

NO_DATA = pytest.mark.skipif(not FILES, reason=f"no jsonschemabench data at {BENCH}")


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


@NO_DATA
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


# Handwritten---notnames10 of JSONSchemaBench (guidance-ai/jsonschemabench, maskbench/data; not in the
# sample above): an object-valued ``const`` beside ``allOf`` with ``propertyNames``, ``not`` and
# ``pattern``. Accord used to read the schema as a choice (``const``) and unwrap the one-key object
# it was given, so the valid instance lost its outer key and failed; plain jsonschema accepts it.
_NPN = {"npn1": "a5b", "npn2": "(^[^5]*$)|7", "npn3": "(^[^7]*$)|9"}
NOTNAMES10 = {
    "type": "object",
    "const": {"0000a5b00079": {"0000a5b00078": {"a5b0": 123}}},
    "allOf": [{"$ref": "#/definitions/npn1"}, {"$ref": "#/definitions/npn2"}, {"$ref": "#/definitions/npn3"},
              {"$ref": "#/definitions/pp"}, {"propertyNames": {"pattern": "^(\\w\\w\\d)+$"}},
              {"propertyNames": {"pattern": "^(\\w\\d)+$"}}, {"maxProperties": 1}],
    "definitions": {
        **{name: {"not": {"propertyNames": {"not": {"pattern": pattern}}}} for name, pattern in _NPN.items()},
        "pp": {"patternProperties": {"7": {"$ref": "#/definitions/al7"}, "9": {"$ref": "#/definitions/al9"}}},
        "al7": {"allOf": [{"$ref": "#/definitions/npn1"}, {"$ref": "#/definitions/pp"}, {"propertyNames": {"pattern": "^(\\w\\d)+$"}},
                          {"maxProperties": 1}]},
        "al9": {"allOf": [{"$ref": "#/definitions/npn2"}, {"$ref": "#/definitions/pp"}, {"propertyNames": {"pattern": "^(\\w\\d)+$"}},
                          {"maxProperties": 1}]},
    },
}
NOTNAMES10_TESTS = [
    (True, {"0000a5b00079": {"0000a5b00078": {"a5b0": 123}}}),
    (False, {"0000a5b00079": {"ooo000a5b00078": {"a5b0": 123}}}),
    (False, {"0000a5b00079": {"0000a5b00078": {"a5b0a": 123}}}),
    (False, {"0000a5b00079": {"0000a5b00078": {"a5b0": 123, "a9": {"x": 1}}}}),
    (False, {"0000a5b00079": {"0000a5b00078": {"a5b0": 123}, "anotherProp": 456}}),
    (False, {"0000a5b00079": {"0000a5b00078": {"a5b0": 123, "abc": 456}}}),
]


@pytest.mark.parametrize("valid,data", NOTNAMES10_TESTS)
def test_notnames10_reads_as_plain_jsonschema_validates(valid: bool, data: Any) -> None:
    baseline = jsonschema.validators.validator_for(NOTNAMES10)(NOTNAMES10)
    assert baseline.is_valid(data) is valid
    reading = read(json.dumps(data), Schema(NOTNAMES10))
    assert isinstance(reading, Reading) is valid, reading
    if valid:
        assert isinstance(reading, Reading) and reading.data == data

