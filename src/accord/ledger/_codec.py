"""A Result as the ledger stores it, and back: JSON text only, nothing pickled or evaluated.

:func:`encode` turns a finished Result into the columns of its run and its ballots;
:func:`decode` rebuilds an accepted Result from them, with the value and every ballot's value
validated again through the schema. :func:`summary` and :func:`full` turn stored rows into the
plain dicts ``Ledger.runs``, ``show`` and ``export`` return.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from .._records import Fieldwise, Fragility, LedgerRecord, Referral
from .._result import Ballot, Result
from .._types import Usage
from ..read._canonical import escape_surrogates
from ..schema._schema import Schema
from ._store import Answer, EncodedRun, RunRow


def encode(result: Result[Any], schema: Schema[Any]) -> EncodedRun:
    """The row of one run: its outcome, the value's data, the Result without value and ballots, the ballots."""
    accepted = result.error is None and result.stable
    outcome = "accepted" if accepted else ("failed" if result.error is not None else "unstable")
    has_value = result.value is not None or (accepted and result.key is not None)
    doc = result.to_dict()
    for derived in ("value", "ledger_key", "original_calls", "original_usage"):  # a fresh run's: its own, or not known yet
        doc.pop(derived)
    return EncodedRun(
        outcome=outcome,
        stopped_because=result.stopped_because.value,
        error=type(result.error).__name__ if result.error is not None else None,
        calls=result.original_calls,
        value=dumps(schema.dump(result.value)) if has_value else None,
        result=dumps({k: v for k, v in doc.items() if k != "ballots"}),
        ballots=[(b.status, ballot_body(b)) for b in result.ballots],
    )


MAX_TEXT = 16_384  # characters of a ballot's raw text kept in the ledger


def ballot_body(ballot: Ballot) -> str:
    """A ballot as stored: ``Ballot.to_dict()`` as JSON, its raw text capped at ``MAX_TEXT``
    characters: a longer text keeps its prefix, and ``meta["ledger_text"]`` its length and sha256."""
    body = ballot.to_dict()
    text = body["text"]
    if isinstance(text, str) and len(text) > MAX_TEXT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        body["text"] = text[:MAX_TEXT]
        body["meta"] = {**body["meta"], "ledger_text": {"length": len(text), "sha256": digest, "kept": MAX_TEXT}}
    return dumps(body)


def decode(answer: Answer, schema: Schema[Any]) -> Result[Any]:
    """Rebuild an accepted Result: values validated again through the schema, ballots as Ballots;
    ``replayed``, with no usage of its own (the stored decision's is ``original_usage``)."""
    doc, value = json.loads(answer.result), answer.value
    ballots = tuple(decode_ballot(json.loads(body), schema) for body in answer.ballots)
    meta = dict(doc.get("meta", {}))
    return Result(
        value=schema.validate(json.loads(value)) if value is not None else None,
        stable=doc["stable"],
        agreement=doc["agreement"],
        votes=dict(doc["votes"]),
        ballots=ballots,
        stopped_because=doc["stopped_because"],
        usage=Usage(),  # a replay calls no model: the decision's usage is the original's
        original_usage=decode_usage(doc["usage"]),
        schema=doc.get("schema", ""),
        fingerprint=doc.get("fingerprint", ""),
        key=doc.get("key"),
        field_agreement=doc.get("field_agreement"),
        min_margin=doc.get("min_margin"),
        fragile_steps=doc.get("fragile_steps"),
        fragile=doc.get("fragile"),
        voted=tuple(doc.get("voted", ())),  # absent from rows written before field roles
        carried=dict(doc.get("carried", {})),
        replayed=True,
        meta=meta,
        environment=doc.get("environment", {}),
        data=json.loads(value) if value is not None else None,  # parsed apart: value and data never share objects
        ledger=LedgerRecord(answer.key, answer.run, answer.created),
        **result_records(meta),
    )


# The one place that reads typed records back from a stored ``meta`` (rows of any version: a key
# an older accord did not write is absent, and its record None).


def result_records(meta: dict[str, Any]) -> dict[str, Any]:
    """A stored Result's typed records (``Result.engine``, ``gate``, ``fragility``, ``referral``,
    ``fieldwise``), from the ``meta`` they were written into."""
    fragile, fieldwise = meta.get("fragile"), meta.get("fieldwise")
    return {
        "engine": _text(meta.get("engine")),
        "gate": _text(meta.get("gate")),
        "fragility": Fragility(tuple(fragile.get("steps") or ()), fragile.get("fragile_steps"), fragile.get("min_margin"),
                               fragile.get("competing")) if isinstance(fragile, dict) else None,
        "referral": _referral(meta),
        "fieldwise": Fieldwise(fieldwise, tuple(meta.get("fieldwise_errors") or ())) if isinstance(fieldwise, str) else None,
    }


def _referral(meta: dict[str, Any]) -> Referral | None:
    reference, serving = meta.get("reference"), meta.get("serving")
    if not isinstance(reference, dict):
        return None
    calls, fingerprint = reference.get("calls", 0), str(reference.get("fingerprint", ""))
    if meta.get("decided_by") != "reference" or not isinstance(serving, dict):
        return Referral(False, calls, fingerprint, reference.get("stopped_because"))
    at = serving.get("fragile_at")
    return Referral(True, calls, fingerprint, serving_calls=serving.get("calls"), serving_answer=serving.get("answer"),
                    serving_min_margin=serving.get("min_margin"), serving_fragile_steps=serving.get("fragile_steps"),
                    serving_fragile_at=tuple(at) if at is not None else None)


def ballot_records(meta: dict[str, Any]) -> dict[str, Any]:
    """A stored ballot's typed fields, from the ``meta`` they were written into."""
    at = meta.get("fragile_at")
    return {
        "model": _text(meta.get("model")),
        "engine": _text(meta.get("engine")),
        "system_fingerprint": _text(meta.get("system_fingerprint")),
        "perturbation": meta.get("perturbation"),
        "fragile_at": tuple(at) if isinstance(at, list) else (),
        "decisive_steps": meta.get("decisive_steps"),
        "deployment": _text(meta.get("deployment")),
    }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_BALLOT_FIELDS = frozenset(f.name for f in dataclasses.fields(Ballot)) - {"usage", "value"}


def decode_ballot(d: dict[str, Any], schema: Schema[Any]) -> Ballot:
    """A stored ballot: its value validated again when it was valid."""
    value = schema.validate(d["data"]) if d["status"] == "valid" else None
    fields = {k: v for k, v in d.items() if k in _BALLOT_FIELDS}
    fields["coercions"] = tuple(dict(c) for c in d.get("coercions") or ())  # JSON lists back to the tuple a Ballot holds
    fields.update(ballot_records(fields.get("meta") or {}))
    return Ballot(value=value, usage=decode_usage(d.get("usage") or {}), **fields)


def decode_usage(d: dict[str, Any]) -> Usage:
    return Usage(d.get("prompt_tokens"), d.get("completion_tokens"), d.get("seconds", 0.0), d.get("calls", 0), d.get("cost"),
                 d.get("cached_tokens"), d.get("cache_write_tokens"), int(d.get("neighbour_requests", 0) or 0),
                 d.get("neighbour_tokens"))


def summary(row: RunRow) -> dict[str, Any]:
    """One run as ``Ledger.runs`` lists it (values and requests as JSON data)."""
    return {
        "run": row.run,
        "key": row.key,
        "created": row.created,
        "outcome": row.outcome,
        "stopped_because": row.stopped_because,
        "error": row.error,
        "calls": row.calls,
        "refresh": bool(row.refresh),
        "value": None if row.value is None else json.loads(row.value),
        "current": bool(row.current),
        "superseded_by": row.superseded_by,
        "request": json.loads(row.request) if row.request is not None else None,
    }


def full(row: RunRow, *, with_request: bool) -> dict[str, Any]:
    """A summary with the run's ``result`` and ``ballots`` (and its ``request`` when ``with_request``)."""
    out = summary(row)
    out["result"] = json.loads(row.result) if row.result is not None else None
    if not with_request:
        out.pop("request")
    out["ballots"] = [json.loads(body) for body in row.ballots or ()]
    return out


def dumps(data: Any) -> str:
    """Compact JSON, unicode kept; anything JSON cannot hold goes in as its repr, a lone surrogate
    as its escape (so every store can encode the text)."""
    return escape_surrogates(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=repr))
