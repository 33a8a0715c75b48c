from enum import Enum
from typing import Literal

from pydantic import BaseModel

from accord import Schema
from accord.read._normalize import normalize
from accord.read._read import Misreading, Reading, read


class Kind(str, Enum):
    BUG = "bug"
    FEATURE = "feature request"


class Inner(BaseModel):
    count: int
    ratio: float
    flag: bool


class Outer(BaseModel):
    name: str
    kind: Kind
    mood: Literal["happy", "sad"]
    inner: Inner
    tags: list[str]
    note: str | None = None


SCHEMA = Schema.of(Outer)


def test_strings_nfc_and_trimmed() -> None:
    assert normalize("  Cafe\u0301 ", {"type": "string"}) == "Café"


def test_enum_members_match_case_and_whitespace_insensitively() -> None:
    data = {"kind": "  Feature   REQUEST", "mood": "HAPPY"}
    out = normalize(data, SCHEMA.json_schema)
    assert out["kind"] == "feature request" and out["mood"] == "happy"


def test_numbers_and_booleans() -> None:
    data = {"inner": {"count": "3", "ratio": "0.5", "flag": "yes"}}
    assert normalize(data, SCHEMA.json_schema)["inner"] == {"count": 3, "ratio": 0.5, "flag": True}


def test_float_to_int_only_when_exact() -> None:
    assert normalize(3.0, {"type": "integer"}) == 3
    assert normalize(3.5, {"type": "integer"}) == 3.5


def test_bools_are_not_numbers() -> None:
    assert normalize(True, {"type": "integer"}) is True


def test_optional_branch() -> None:
    out = normalize({"note": "  hi "}, SCHEMA.json_schema)
    assert out["note"] == "hi"


def test_same_answer_written_differently_reads_to_one_key() -> None:
    texts = [
        '{"name": "Ann", "kind": "bug", "mood": "happy", "inner": {"count": 2, "ratio": 0.5, "flag": true}, "tags": ["a"]}',
        '```json\n{"tags": [" a"], "inner": {"flag": "yes", "ratio": "0.5", "count": "2"}, "mood": "Happy", "kind": "BUG", "name": " Ann"}\n```',
        'Result: {"name": "Ann ", "kind": "Bug", "mood": "happy", "inner": {"count": 2.0, "ratio": 0.50, "flag": "true"}, "tags": ["a"]}.',
    ]
    readings = [read(t, SCHEMA) for t in texts]
    assert all(isinstance(r, Reading) for r in readings)
    assert len({r.key for r in readings if isinstance(r, Reading)}) == 1


def test_misreading_carries_structured_errors() -> None:
    out = read('{"name": "Ann"}', SCHEMA)
    assert isinstance(out, Misreading) and out.stage == "validate"
    assert {e["loc"][0] for e in out.errors} >= {"kind", "mood", "inner", "tags"}


def test_valid_as_is_stays_valid() -> None:
    # A string field that happens to look like a number is left alone by the schema-typed walk.
    schema = Schema.of({"type": "object", "properties": {"code": {"type": "string", "pattern": "^ 7$"}}})
    out = read('{"code": " 7"}', schema)
    assert isinstance(out, Reading) and out.value == {"code": " 7"}
