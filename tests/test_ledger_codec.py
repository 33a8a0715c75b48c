"""The ledger's codec alone: a Result to JSON rows and back, with no database."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import accord
from accord import Ballot, Result, Retry, Schema, Stabilizer, Usage, Vote, models
from accord.ledger._codec import ballot_body, decode, decode_ballot, dumps, encode, full, summary
from accord.ledger._store import Answer, EncodedRun, RunRow


class Review(BaseModel):
    stars: int
    sentiment: Literal["positive", "negative"]


REVIEW = '{"stars": 4, "sentiment": "positive"}'


def decided(schema: Any, *texts: str, **options: Any) -> Result[Any]:
    return Stabilizer(models.scripted(list(texts), name="m"), schema, **options).run("q")


def answer_of(run: EncodedRun, *, run_id: int = 7, created: float = 1700000000.5) -> Answer:
    """The Answer a store gives back for ``run``: its columns, as stored."""
    return Answer(run_id, created, "ab" * 32, created, run.value, run.result, [body for _, body in run.ballots])


def test_an_accepted_run_encodes_to_json_columns_and_ballots() -> None:
    result = decided(Review, REVIEW, REVIEW, REVIEW)
    run = encode(result, Schema.of(Review))
    assert (run.outcome, run.stopped_because, run.error, run.calls) == ("accepted", "unanimous", None, 3)
    assert json.loads(run.value or "") == {"stars": 4, "sentiment": "positive"}
    doc = json.loads(run.result)
    assert "value" not in doc and "ballots" not in doc
    assert doc["stable"] is True and doc["votes"] == result.votes and doc["usage"]["calls"] == 3
    assert [status for status, _ in run.ballots] == ["valid"] * 3
    assert [json.loads(body) for _, body in run.ballots] == [b.to_dict() for b in result.ballots]
    assert run.ballots[0][1] == ballot_body(result.ballots[0])


def test_unstable_and_failed_runs_encode_their_outcome() -> None:
    plural = decided(Literal["positive", "negative"], "positive", "negative",
                     vote=Vote(k=2, quorum=2, on_no_consensus="plurality"))
    run = encode(plural, Schema.of(Literal["positive", "negative"]))
    assert run.outcome == "unstable" and run.value == '"negative"' and run.error is None
    with pytest.raises(accord.InvalidOutput) as raised:
        decided(int, "no number here", vote=Vote(k=1), retry=Retry(attempts=1))
    failed = raised.value.result
    assert failed is not None
    run = encode(failed, Schema.of(int))
    assert (run.outcome, run.error, run.value) == ("failed", "InvalidOutput", None)
    assert json.loads(run.result)["error"]["type"] == "InvalidOutput"
    assert [status for status, _ in run.ballots] == ["invalid"]


def test_an_accepted_none_is_stored_as_null_not_as_no_value() -> None:
    result = decided(Review | None, "null", "null", "null")
    assert result.stable and result.value is None
    assert encode(result, Schema.of(Review | None)).value == "null"


def test_decode_rebuilds_the_result_with_values_validated_again() -> None:
    result = decided(Review, REVIEW, REVIEW, REVIEW)
    schema = Schema.of(Review)
    back = decode(answer_of(encode(result, schema)), schema)
    assert back.replayed and not result.replayed
    assert isinstance(back.value, Review) and back.value == result.value
    assert back.data == {"stars": 4, "sentiment": "positive"} == result.data
    assert (back.stable, back.agreement, back.votes, back.stopped_because, back.key, back.original_calls) == (
        result.stable, result.agreement, result.votes, result.stopped_because, result.key, result.calls)
    assert back.calls == 0 and back.usage == Usage(), "a replay calls no model"
    assert back.original_usage is not None and back.original_usage.to_dict() == result.usage.to_dict()
    assert back.fingerprint == result.fingerprint == "m"
    assert [b.to_dict() for b in back.ballots] == [b.to_dict() for b in result.ballots]
    assert all(isinstance(b.value, Review) for b in back.ballots)
    assert back.meta["ledger"] == {"key": "ab" * 32, "run": 7, "decided": 1700000000.5}
    assert {k: v for k, v in back.meta.items() if k != "ledger"} == json.loads(json.dumps(result.meta))


def test_value_and_data_of_a_replay_never_share_objects() -> None:
    schema = Schema.of(dict[str, list[int]])
    result = decided(dict[str, list[int]], '{"a": [1, 2]}', '{"a": [1, 2]}', '{"a": [1, 2]}')
    back = decode(answer_of(encode(result, schema)), schema)
    assert back.value == back.data == {"a": [1, 2]}
    back.value["a"].append(3)
    assert back.data == {"a": [1, 2]}


def test_a_stored_value_that_no_longer_validates_raises() -> None:
    run = encode(decided(Literal["positive", "negative"], "positive", "positive", "positive"),
                 Schema.of(Literal["positive", "negative"]))
    with pytest.raises(Exception, match="neutral"):
        decode(answer_of(run._replace(value='"maybe"')), Schema.of(Literal["neutral"]))


def test_a_ballot_decodes_its_value_only_when_valid_and_ignores_unknown_fields() -> None:
    schema = Schema.of(int)
    valid = Ballot(slot=1, attempt=1, status="valid", text="42", value=42, data=42, key="42",
                   usage=Usage(3, 1, 0.25, 1), started=1.5, seconds=0.25, meta={"perturbation": "precision"})
    body = json.loads(ballot_body(valid))
    assert decode_ballot({**body, "from_a_newer_accord": True}, schema) == valid
    invalid = Ballot(slot=2, attempt=1, status="invalid", text="forty-two",
                     error={"stage": "validate", "message": "not an int", "errors": []})
    back = decode_ballot(json.loads(ballot_body(invalid)), schema)
    assert back.value is None and back.error == invalid.error and back.usage == Usage()


def test_dumps_is_compact_keeps_unicode_and_reprs_what_json_cannot_hold() -> None:
    assert dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'
    assert dumps({"when": {1, 2}}) == '{"when":"{1, 2}"}'


def test_summary_and_full_rows() -> None:
    row = RunRow(run=3, key="cd" * 32, created=1.25, outcome="accepted", stopped_because="unanimous", error=None,
                 calls=3, refresh=True, value='{"x":1}', superseded_by=None, current=True, request='[{"role":"user"}]',
                 result='{"stable":true}', ballots=['{"slot":1}', '{"slot":2}'])
    short = summary(row)
    assert list(short) == ["run", "key", "created", "outcome", "stopped_because", "error", "calls", "refresh", "value",
                           "current", "superseded_by", "request"]
    assert short["value"] == {"x": 1} and short["request"] == [{"role": "user"}] and short["refresh"] is True
    assert summary(row._replace(value=None, request=None))["value"] is None
    exported = full(row, with_request=True)
    assert list(exported) == [*short, "result", "ballots"]
    assert exported["result"] == {"stable": True} and exported["ballots"] == [{"slot": 1}, {"slot": 2}]
    shown = full(row, with_request=False)
    assert "request" not in shown and list(shown)[-2:] == ["result", "ballots"]
