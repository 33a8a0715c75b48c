"""Cost: ``accord.Prices`` per model, ``Usage.cost`` per call, summed on the Result across
ballots, retries and the calls a backend makes on a ballot's behalf; ``Budget(max_cost=...)``."""

from __future__ import annotations

from typing import Any

import pytest

import accord
from accord import Budget, Completion, ConfigError, Prices, Retry, Stabilizer, Usage, Vote, models
from reviews import GOOD, Review

PRICES = Prices({"scripted": (2.0, 8.0)})  # per million tokens


def said(text: str, prompt: int = 1000, completion: int = 100, **meta: Any) -> Completion:
    return Completion(text, "stop", Usage(prompt, completion), meta=meta)


def test_every_call_is_priced_and_the_result_sums_them() -> None:
    model = models.scripted([said('{"stars": 9, "sentiment": "positive"}'), said(GOOD), said(GOOD, 2000, 50)])
    result = Stabilizer(model, schema=Review, vote=Vote(k=2, gate=None), prices=PRICES).run("q")
    assert [b.status for b in result.ballots] == ["invalid", "valid", "valid"]
    costs = [b.usage.cost for b in result.ballots]
    assert costs == pytest.approx([0.0028, 0.0028, 0.0044])  # 1000 x 2 + 100 x 8 per million; the invalid call costs too
    assert result.usage.cost == pytest.approx(sum(c or 0.0 for c in costs)) and result.usage.to_dict()["cost"] == pytest.approx(0.01)


def test_a_price_is_found_by_the_model_asked_then_the_model_that_answered_then_the_default() -> None:
    prices = Prices({"gpt-x-2024": (1.0, 1.0), "*": (10.0, 10.0)})
    asked = Prices({"scripted": (3.0, 3.0), "gpt-x-2024": (1.0, 1.0)})
    one = said(GOOD, 1_000_000, 0, model="gpt-x-2024")
    assert Stabilizer(models.scripted([one]), schema=Review, vote=Vote(k=1, gate=None), prices=asked).run("q").usage.cost == 3.0
    assert Stabilizer(models.scripted([one]), schema=Review, vote=Vote(k=1, gate=None), prices=prices).run("q").usage.cost == 1.0
    other = said(GOOD, 1_000_000, 0, model="unlisted")
    assert Stabilizer(models.scripted([other]), schema=Review, vote=Vote(k=1, gate=None), prices=prices).run("q").usage.cost == 10.0
    unknown = Stabilizer(models.scripted([other]), schema=Review, vote=Vote(k=1, gate=None), prices=Prices({"x": (1, 1)})).run("q")
    assert unknown.usage.cost is None and "cost" not in unknown.usage.to_dict()


def test_a_cost_the_backend_reports_is_kept() -> None:
    reported = Completion(GOOD, "stop", Usage(10, 10, cost=0.5))
    result = Stabilizer(models.scripted([reported]), schema=Review, vote=Vote(k=1, gate=None), prices=PRICES).run("q")
    assert result.usage.cost == 0.5


def test_calls_without_token_counts_have_no_cost() -> None:
    result = Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None), prices=PRICES).run("q")
    assert result.usage.cost is None and all(b.usage.cost is None for b in result.ballots)


def test_usage_sums_known_costs() -> None:
    assert (Usage(cost=1.0) + Usage()).cost == 1.0 and (Usage() + Usage()).cost is None
    assert (Usage(cost=1.0) + Usage(cost=0.25)).cost == 1.25


def test_cached_and_written_input_are_priced_at_their_own_rates_and_summed() -> None:
    anthropic = Prices({"claude": (3.0, 15.0, 0.30, 3.75)})  # a write at 1.25x the input rate, a read at 0.1x
    write = Completion(GOOD, "stop", Usage(1500, 20, cache_write_tokens=1400), meta={"model": "claude"})
    read = Completion(GOOD, "stop", Usage(1500, 20, cached_tokens=1400), meta={"model": "claude"})
    result = Stabilizer(models.scripted([write, read]), schema=Review, vote=Vote(k=2, gate=None), prices=anthropic).run("q")
    assert [b.usage.cost for b in result.ballots] == pytest.approx([(100 * 3 + 1400 * 3.75 + 20 * 15) / 1e6,
                                                                   (100 * 3 + 1400 * 0.30 + 20 * 15) / 1e6])
    assert result.usage.cached_tokens == 1400 and result.usage.cache_write_tokens == 1400
    assert result.usage.to_dict()["cached_tokens"] == 1400
    plain = Prices({"claude": (3.0, 15.0)})  # no cache rates: cached input costs the input rate
    assert plain.cost(1500, 0, "claude", cached=1400) == pytest.approx(1500 * 3.0 / 1e6)
    assert Prices({"m": {"input": 1, "output": 2, "cached_input": 0.1}}).cost(100, 0, "m", cached=50, written=10) == pytest.approx(
        (40 * 1 + 50 * 0.1 + 10 * 1) / 1e6)
    with pytest.raises(ConfigError, match="cached_input"):
        Prices({"m": (1, 2, 3, 4, 5)})
    with pytest.raises(ConfigError, match="unknown keys"):
        Prices({"m": {"input": 1, "cache_read": 0.1}})


def test_usage_without_cache_fields_reads_and_writes_as_before() -> None:
    from accord.ledger._codec import decode_usage

    old = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "seconds": 0.5, "calls": 1}
    assert decode_usage(old).to_dict() == old and decode_usage(old).cached_tokens is None
    assert decode_usage(Usage(10, 2, cached_tokens=8).to_dict()).cached_tokens == 8


def test_max_cost_ends_the_run_once_it_is_spent() -> None:
    texts = [GOOD, GOOD.replace("4", "2"), GOOD, GOOD.replace("4", "3"), GOOD]
    model = models.scripted([said(t, 1_000_000, 0) for t in texts])  # 2.0 a call
    stab = Stabilizer(model, schema=Review, vote=Vote(k=5, gate=None), prices=PRICES, budget=Budget(max_cost=3.0))
    with pytest.raises(accord.BudgetExceeded) as raised:
        stab.run("q")
    result = raised.value.result
    assert result is not None and result.stopped_because == "budget"
    # the quorum's 3 calls started together (the budget is checked as calls finish); no call after
    assert result.calls == 3 and result.usage.cost == 6.0
    unbounded = Stabilizer(models.scripted([said(t, 1_000_000, 0) for t in texts]), schema=Review, vote=Vote(k=5, gate=None), prices=PRICES)
    assert unbounded.run("q").calls == 5


def test_max_cost_counts_retries_too() -> None:
    bad = said('{"stars": 9, "sentiment": "positive"}', 1_000_000, 0)
    stab = Stabilizer(models.scripted([bad] * 5), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=5), prices=PRICES,
                      budget=Budget(max_cost=4.0))
    with pytest.raises(accord.BudgetExceeded) as raised:
        stab.run("q")
    assert raised.value.result is not None and raised.value.result.calls == 2


def test_max_cost_needs_prices_and_prices_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs prices"):
        Stabilizer(models.scripted([GOOD]), schema=Review, budget=Budget(max_cost=1.0))
    Stabilizer(models.scripted([GOOD]), schema=Review, budget=Budget(max_cost=1.0), prices=Prices({}))  # the backend reports costs
    for bad in ({"m": (1.0,)}, {"m": (-1.0, 1.0)}, {"m": ("1", 1)}, {"m": {"input": 1, "cached": 2}}, {"m": (float("nan"), 0)}):
        with pytest.raises(ConfigError):
            Prices(bad)
    with pytest.raises(ConfigError):
        Prices([("m", (1, 1))])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Budget(max_cost=0)
    assert Prices({"m": {"input": 1, "output": 4}}, per_tokens=1000).cost(1000, 1000, "m") == 5.0


def test_prices_are_not_in_the_ledger_key_and_costs_are_replayed(tmp_path: Any) -> None:
    with accord.Ledger(tmp_path / "l.sqlite3") as ledger:
        def stab(prices: Prices | None) -> Stabilizer[Any]:
            return Stabilizer(models.scripted([said(GOOD)] * 3), schema=Review, vote=Vote(k=3, gate=None), ledger=ledger, prices=prices)

        assert ledger.key(stab(PRICES), "q") == ledger.key(stab(None), "q")
        first = stab(PRICES).run("q")
        replay = stab(PRICES).run("q")
    assert replay.replayed and replay.usage == Usage(), "a replay calls no model: it costs nothing"
    assert replay.original_usage is not None and replay.original_usage.cost == pytest.approx(first.usage.cost)
    assert [b.usage.cost for b in replay.ballots] == pytest.approx([b.usage.cost for b in first.ballots])


@pytest.mark.model
def test_the_local_model_is_priced_by_its_model_id(local_model: Any) -> None:
    prices = Prices({local_model.model_id: (1.0, 2.0)})
    result = Stabilizer(local_model, schema=int, vote=Vote(k=1, gate=None), prices=prices).run("What is 2 + 2?")
    usage = result.usage
    assert usage.prompt_tokens and usage.completion_tokens
    assert usage.cost == pytest.approx((usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6)


@pytest.mark.server
def test_the_servers_hidden_probe_is_counted_in_the_ballot_that_made_it(openai_server: str) -> None:
    from pydantic import BaseModel

    from accord.backends.openai._caps import Capabilities

    class Answer(BaseModel):
        value: int

    model = models.openai(base_url=openai_server, capabilities=Capabilities(), max_tokens=16)
    stab = Stabilizer(model, schema=Answer, vote=Vote(k=1, gate=None, on_no_consensus="plurality"), prices=Prices({"*": (1.0, 1.0)}),
                      retry=Retry(attempts=1))
    prompt = 'What is 2 + 2? Answer as JSON {"value": N}.'
    first = stab.map([prompt])[0]  # the first call probes response_format (map: a failed run is a Result too)
    again = stab.map([prompt])[0]  # the server is known now: no probe
    assert first.ballots[0].meta.get("probe") and "probe" not in again.ballots[0].meta
    probe_tokens = (first.usage.prompt_tokens or 0) - (again.usage.prompt_tokens or 0)
    assert probe_tokens > 0, "the probe's prompt tokens are in the first ballot's usage"
    assert first.usage.cost == pytest.approx(((first.usage.prompt_tokens or 0) + (first.usage.completion_tokens or 0)) / 1e6)
