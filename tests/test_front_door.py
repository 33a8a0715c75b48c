"""The front door (#35): twelve Stabilizer parameters, grouped options, the gate in Vote(), and the
old spellings, which still work for one release with a DeprecationWarning naming the new one."""

from __future__ import annotations

import inspect
import warnings
from dataclasses import replace
from typing import Any, Literal

import pytest

import accord
from accord import Budget, Extract, MarginGate, Perturb, Prompting, Settings, Stabilizer, Vote, models
from accord.ledger._keys import describe_policy

Sentiment = Literal["positive", "negative"]


def recorded(texts: list[str], **options: Any) -> tuple[Stabilizer[Any], Any]:
    model = models.scripted(texts)
    return Stabilizer(model, Sentiment, **options), model


def test_the_stabilizer_takes_at_most_twelve_named_parameters() -> None:
    params = inspect.signature(Stabilizer.__init__).parameters.values()
    named = [p.name for p in params if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 12, named
    assert named == ["model", "schema", "vote", "retry", "budget", "settings", "prompting", "extract", "ledger", "hooks",
                     "telemetry", "prices"]


def test_vote_includes_the_margin_gate_and_gate_none_turns_it_off() -> None:
    assert Vote().gate == MarginGate() and Vote(k=3).gate == MarginGate()
    assert Vote(gate=None).gate is None
    assert Stabilizer(models.scripted(["positive"]), Sentiment).policy.vote == Vote()


def test_grouped_options_reach_every_request() -> None:
    settings = Settings(max_tokens=32, temperature=0.0, seed=7, stop=("END",), top_p=0.9, top_k=5)
    prompting = Prompting(system="You classify.", examples=[("Review: 'Broke.'", "negative")], schema_in_prompt=False)
    stab, model = recorded(["Positive"], vote=Vote(k=1), settings=settings, prompting=prompting,
                           extract=Extract(normalize=[accord.casefold]))
    assert stab.run("Review: 'Great pen.'").value == "positive"
    request = model.requests[0]
    assert request.settings == settings  # top_p and top_k included: the backends honour them
    assert [m["role"] for m in request.messages] == ["system", "user", "assistant", "user"]
    assert request.input[-1]["content"] == "Review: 'Great pen.'"  # no schema rendering: schema_in_prompt=False
    assert stab.policy.normalizers == (accord.casefold,) and stab.policy.extract == Extract()


OLD_AND_NEW: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({"max_tokens": 16, "temperature": 0.5, "seed": 3, "stop": "END"},
     {"settings": Settings(max_tokens=16, temperature=0.5, seed=3, stop="END")}, "settings=accord.Settings("),
    ({"system": "Be brief.", "examples": [("q", "positive")], "schema_in_prompt": False},
     {"prompting": Prompting(system="Be brief.", examples=[("q", "positive")], schema_in_prompt=False)}, "prompting=accord.Prompting("),
    ({"normalize": [accord.casefold]}, {"extract": Extract(normalize=[accord.casefold])}, "extract=accord.Extract(normalize="),
    ({"on_no_consensus": "plurality", "perturb": Perturb(())},
     {"vote": Vote(on_no_consensus="plurality", perturb=Perturb(()))}, "vote=accord.Vote("),
]


@pytest.mark.parametrize("old,new,named", OLD_AND_NEW, ids=["settings", "prompting", "normalize", "vote"])
def test_an_old_spelling_warns_naming_the_new_and_makes_the_same_policy(old: dict[str, Any], new: dict[str, Any], named: str) -> None:
    with pytest.warns(DeprecationWarning, match=r"is deprecated: use ") as caught:
        before = Stabilizer(models.scripted(["positive"]), Sentiment, **old)
    assert all(named in str(w.message) for w in caught if issubclass(w.category, DeprecationWarning))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        after = Stabilizer(models.scripted(["positive"]), Sentiment, **new)
    assert replace(before.policy, retry=after.policy.retry) == after.policy  # (each Retry() has its own wait object)
    assert describe_policy(before.policy) == describe_policy(after.policy)  # the same ledger key


def test_on_ballot_and_telemetry_true_warn_and_still_work() -> None:
    seen: list[accord.Ballot] = []
    with pytest.warns(DeprecationWarning, match=r"hooks=accord.Hooks\(after_ballot=...\)"):
        stab = Stabilizer(models.scripted(["positive"]), Sentiment, vote=Vote(k=1), on_ballot=seen.append)
    stab.run("q")
    assert len(seen) == 1
    with pytest.warns(DeprecationWarning, match=r"telemetry=True"):
        stab = Stabilizer(models.scripted(["positive"]), Sentiment, telemetry=True)
    assert stab.telemetry == accord.Telemetry()


def test_an_unknown_option_is_a_config_error_naming_it() -> None:
    with pytest.raises(accord.ConfigError, match="bogus"):
        Stabilizer(models.scripted(["positive"]), Sentiment, bogus=1)  # type: ignore[call-arg]
    with pytest.raises(accord.ConfigError, match=r"settings= must be an accord.Settings"):
        Stabilizer(models.scripted(["positive"]), Sentiment, settings={"max_tokens": 5})  # type: ignore[arg-type]
    with pytest.raises(accord.ConfigError, match="on_no_consensus"):
        Vote(on_no_consensus="maybe")
    with pytest.raises(accord.ConfigError, match="examples= takes a list"):
        Prompting(examples=5)  # type: ignore[arg-type]


def test_the_total_token_budget_has_a_name_that_is_not_per_call() -> None:
    assert Budget(max_total_tokens=100).max_total_tokens == 100
    with pytest.warns(DeprecationWarning, match=r"max_total_tokens"):
        old = Budget(max_tokens=100)
    assert old == Budget(max_total_tokens=100)
    with pytest.raises(accord.ConfigError, match="not both"), pytest.warns(DeprecationWarning):
        Budget(max_tokens=1, max_total_tokens=2)
