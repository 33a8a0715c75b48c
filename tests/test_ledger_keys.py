"""The ledger's key material alone: what a key hashes, how policies are described, the context cache."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from types import SimpleNamespace
from typing import Any, Literal

import pytest

import accord
from accord import LedgerError, Retry, Stabilizer, Vote, models
from accord.ledger._keys import (
    KEY_VERSION,
    LEGACY_VERSION,
    Keys,
    describe,
    describe_policy,
    describe_schema,
    key_prefix,
    qualname,
)
from accord.read._canonical import canonical_key

Sentiment = Literal["positive", "negative"]


def stab(fingerprint: str = "m", schema: Any = Sentiment, **options: Any) -> Stabilizer[Any]:
    return Stabilizer(models.function(lambda p: "positive", name=fingerprint), schema, **options)


def test_an_entry_hashes_the_canonical_material_and_stores_the_context_apart() -> None:
    s = stab()
    entry = Keys().entry(s, [{"role": "user", "content": "hi"}])
    # a function backend does not constrain: its prompt always carried the schema, its key is version 1's
    material = {"ledger": LEGACY_VERSION, "model": "m", "policy": describe_policy(s.policy), "schema": describe_schema(s.schema)}
    assert KEY_VERSION == 2 and LEGACY_VERSION == 1 and entry.legacy is None
    assert entry.request == canonical_key([{"role": "user", "content": "hi"}])
    assert entry.key == hashlib.sha256(canonical_key({**material, "request": json.loads(entry.request)}).encode()).hexdigest()
    assert json.loads(entry.material) == json.loads(canonical_key(material)) and entry.material == canonical_key(material)
    assert entry.context == hashlib.sha256(entry.material.encode()).hexdigest()
    assert Keys().entry(s, "another prompt").context == entry.context, "one context per stabilizer, whatever the prompt"


class _Grammar:
    fingerprint, constrains = "g", True

    def generate(self, request: Any) -> Any:
        return "positive"


def test_a_backend_that_enforces_the_schema_keys_under_version_2_and_names_its_version_1_key() -> None:
    s = Stabilizer(_Grammar(), Sentiment)
    entry = Keys().entry(s, "hi")
    material = {"model": "g", "policy": describe_policy(s.policy), "request": "hi", "schema": describe_schema(s.schema)}
    assert entry.key == hashlib.sha256(canonical_key({**material, "ledger": 2}).encode()).hexdigest()
    assert entry.legacy == hashlib.sha256(canonical_key({**material, "ledger": 1}).encode()).hexdigest()


def test_the_context_is_cached_per_stabilizer_and_recomputed_when_it_changes() -> None:
    keys, s = Keys(), stab()
    first = keys.context(s)
    assert keys.context(s) is first
    s.policy = dataclasses.replace(s.policy, vote=Vote(k=3))
    changed = keys.context(s)
    assert changed is not first and changed.id != first.id
    s.model.fingerprint = "another-model"
    assert keys.context(s).id not in {first.id, changed.id}
    assert keys.context(stab()).id == first.id, "an equal stabilizer has an equal context"


def test_a_function_backend_without_a_name_goes_by_its_function_never_by_its_type() -> None:
    s = stab()
    s.model.fingerprint = ""  # no name: the lambda's own identity, derived from its code
    model = json.loads(Keys().context(s).material)["model"]
    assert model.startswith(f"{__name__}:stab.<locals>.<lambda>#") and model == s.model.identity()


def test_a_backend_that_names_no_model_has_no_key() -> None:
    s = stab()
    s.model = accord.models.scripted([])
    s.model.fingerprint = "unknown"
    with pytest.raises(accord.ConfigError, match="names no model"):
        Keys().context(s)


def test_the_policy_leaves_out_what_never_chooses_the_answer() -> None:
    plain = describe_policy(stab().policy)
    busy = describe_policy(stab(budget=accord.Budget(max_calls=9), hooks=accord.Hooks(after_ballot=print),
                                vote=accord.Vote(on_no_consensus="plurality"), retry=Retry(transport_attempts=7)).policy)
    assert busy == plain
    assert {"budget", "on_ballot", "plurality"}.isdisjoint(plain)
    assert {"wait", "transport_attempts", "transport_stop"}.isdisjoint(plain["retry"])
    assert plain["vote"]["quorum"] == 3 and plain["vote"]["k"] == 5
    assert plain["vote"]["early_stop"] == "stop_when_unanimous | stop_when_unbeatable | stop_when_confident(0.95)"
    assert describe_policy(stab(retry=Retry(attempts=5)).policy)["retry"]["attempts"] == 5
    assert describe_policy(stab(extract=accord.Extract(normalize=[accord.casefold])).policy)["normalizers"] == ["accord._normalize:casefold"]


def test_the_schema_is_its_json_schema_or_its_grammar() -> None:
    assert describe_schema(stab().schema) == {"kind": "choice", "json_schema": {"enum": ["positive", "negative"], "type": "string"}}
    grammar = accord.Grammar('start: "yes" | "no"')
    assert describe_schema(stab(schema=grammar).schema) == {"kind": "grammar", "lark": 'start: "yes" | "no"'}


def _twice(x: int, factor: int = 2) -> int:
    return x * factor


@dataclasses.dataclass(frozen=True)
class Rule:
    threshold: float
    names: tuple[str, ...] = ("a",)


class Described:
    def describe(self) -> dict[str, Any]:
        return {"rule": "mine", "level": 3}


class Plain:
    def __init__(self) -> None:
        self.level = 2
        self.inner = Rule(0.5)
        self._private = "hidden"


class Shown:
    def __repr__(self) -> str:
        return "Shown(1)"


def test_describe_never_uses_an_address() -> None:
    assert describe(None) is None and describe(3) == 3 and describe("x") == "x" and describe(True) is True
    assert describe((1, [2, {"a": 3}])) == [1, [2, {"a": 3}]]
    assert describe({1: "one"}) == {"1": "one"}
    assert describe(_twice) == f"{__name__}:_twice"
    assert describe(Rule) == f"{__name__}:Rule"
    assert describe(functools.partial(_twice, factor=3)) == {"partial": f"{__name__}:_twice", "args": [], "keywords": {"factor": 3}}
    assert describe(Rule(0.9)) == {"type": f"{__name__}:Rule", "threshold": 0.9, "names": ["a"]}
    assert describe(Described()) == {"rule": "mine", "level": 3}
    assert describe(Shown()) == "Shown(1)"
    plain = describe(Plain())  # the default repr holds an address: public attributes instead
    assert plain == {"type": f"{__name__}:Plain", "inner": {"type": f"{__name__}:Rule", "threshold": 0.5, "names": ["a"]},
                     "level": 2}
    deep: Any = [[[[[[Rule(1.0)]]]]]]
    assert describe(deep) == [[[[["builtins:list"]]]]], "past depth 4 only the type"
    assert " at 0x" not in json.dumps(describe(stab().policy))


def test_qualname() -> None:
    assert qualname(_twice) == f"{__name__}:_twice"
    assert qualname(Stabilizer) == "accord._stabilizer:Stabilizer"


def test_a_key_prefix_is_lower_case_hex() -> None:
    assert key_prefix(" ABcd01 ") == "abcd01"
    for bad in ("", "  ", "xyz", "12-34", "0x12"):
        with pytest.raises(LedgerError, match="hexadecimal"):
            key_prefix(bad)


def test_the_key_material_is_a_subject_not_a_stabilizer() -> None:
    """The ledger reads only a subject's model, schema and policy: any object with the three keys alike."""
    s = stab()
    subject = SimpleNamespace(model=s.model, schema=s.schema, policy=s.policy)
    keys = Keys()
    assert keys.entry(subject, "q") == keys.entry(s, "q")
    assert keys.context(subject) is keys.context(s), "one context per policy object, whoever holds it"
