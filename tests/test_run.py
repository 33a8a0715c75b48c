"""End to end on scripted and function backends: the run loop's semantics."""

import asyncio
import math
import threading
import time
from typing import Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord import Budget, Completion, Retry, Stabilizer, Vote, models


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


GOOD = '{"stars": 4, "sentiment": "positive"}'


def test_same_answer_in_different_formats_is_one_stable_result():
    model = models.scripted([GOOD, '```json\n{"sentiment": "Positive", "stars": "4"}\n```', f"Here: {GOOD} ok"])
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("review this")
    assert result.value == Review(stars=4, sentiment="positive")
    assert result.stable and result.agreement == 1.0
    assert result.stopped_because == "unanimous"
    assert result.calls == 3 == len(result.ballots)
    assert list(result.votes.values()) == [3]


def test_invalid_then_valid_is_retried_with_the_error_in_the_next_prompt():
    model = models.scripted(['{"stars": 34, "sentiment": "positive"}', GOOD])
    result = Stabilizer(model, schema=Review, vote=Vote(k=1)).run("review this")
    assert result.value.stars == 4
    assert [b.status for b in result.ballots] == ["invalid", "valid"]
    first, second = model.requests
    assert first.input.startswith("review this") and first.feedback is None
    assert second.feedback is not None and second.attempt == 2
    assert "stars" in second.input and "less than or equal to 5" in second.input and "34" in second.input
    # context never grows: one feedback block, not the history
    assert second.input.count("previous answer") == 1


def test_feedback_does_not_accumulate_over_attempts():
    model = models.scripted(['{"stars": 34, "sentiment": "positive"}', '{"stars": 9, "sentiment": "positive"}', GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1), retry=Retry(attempts=3)).run("q")
    third = model.requests[2].input
    assert third.count("previous answer") == 1 and "9" in third and "34" not in third


def test_feedback_for_message_prompts_is_one_appended_user_message():
    model = models.scripted(["nope", GOOD])
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "review"}]
    Stabilizer(model, schema=Review, vote=Vote(k=1), schema_in_prompt=False).run(messages)
    retry = model.requests[1].input
    assert retry[:2] == messages and len(retry) == 3 and retry[2]["role"] == "user"


def test_split_vote_raises_no_consensus_with_the_tally():
    texts = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 2, "sentiment": "negative"}',
             '{"stars": 3, "sentiment": "neutral"}', '{"stars": 4, "sentiment": "positive"}']
    with pytest.raises(accord.NoConsensus) as info:
        Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5)).run("q")
    result = info.value.result
    assert not result.stable and result.value is None
    assert len(result.votes) == 4 and set(result.votes.values()) == {1}
    assert result.stopped_because == "no quorum"


def test_plurality_on_request():
    texts = ['{"stars": 1, "sentiment": "negative"}', '{"stars": 1, "sentiment": "negative"}',
             '{"stars": 3, "sentiment": "neutral"}', '{"stars": 4, "sentiment": "positive"}', '{"stars": 5, "sentiment": "positive"}']
    result = Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5), on_no_consensus="plurality").run("q")
    assert result.value.stars == 1 and not result.stable and result.error is None


def test_all_invalid_raises_invalid_output_with_every_ballot():
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(models.scripted(["no"] * 20), schema=Review, vote=Vote(k=3), retry=Retry(attempts=2)).run("q")
    result = info.value.result
    # 2 slots x 2 attempts fail; then no answer can reach the quorum of 2 with one slot left.
    assert result.calls == 4 and all(b.status == "invalid" for b in result.ballots)
    assert result.ballots[0].error["stage"] == "extract"


def test_identical_ballots_stop_early():
    model = models.scripted([GOOD] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("q")
    assert result.calls == 3 and result.stopped_because == "unanimous"


def test_dissent_runs_one_more_at_a_time():
    other = '{"stars": 2, "sentiment": "negative"}'
    model = models.scripted([GOOD, other, GOOD, GOOD, other])
    result = Stabilizer(model, schema=Review, vote=Vote(k=5)).run("q")
    assert result.calls == 4 and result.stopped_because == "unbeatable" and result.agreement == 0.75


def test_no_early_stop_runs_all_k():
    model = models.scripted([GOOD] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5, early_stop=False)).run("q")
    assert result.calls == 5 and result.stopped_because == "k reached"


def test_winner_value_is_the_earliest_ballot_of_its_form():
    texts = ['{"stars": 4, "sentiment": "positive"}', '{"sentiment": "positive", "stars": 4}', GOOD]
    result = Stabilizer(models.scripted(texts), schema=Review).run("q")
    assert result.value is result.ballots[0].value


def test_truncated_output_is_retried_with_more_tokens_not_reasked():
    model = models.scripted([Completion('{"stars": 4, "sent', "length"), GOOD])
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), max_tokens=100).run("q")
    assert result.value.stars == 4
    first, second = model.requests
    assert second.settings.max_tokens == 200 and second.feedback is None and second.input == first.input


def test_transport_errors_back_off_and_retry():
    model = models.scripted([accord.BackendError("429", retryable=True, status=429, retry_after=0.05), GOOD])
    retry = Retry(wait=lambda state: 0.0)
    start = time.perf_counter()
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), retry=retry).run("q")
    assert result.value.stars == 4 and time.perf_counter() - start >= 0.05
    assert [b.status for b in result.ballots] == ["error", "valid"]


def test_non_retryable_backend_errors_end_in_a_backend_error():
    def broken(prompt):
        raise ValueError("bad key")

    with pytest.raises(accord.BackendError) as info:
        Stabilizer(models.function(broken), schema=Review, vote=Vote(k=3)).run("q")
    assert info.value.result.calls == 2  # two slots fail; no answer can reach the quorum


def test_hanging_function_is_cut_by_the_budget():
    release = threading.Event()

    def hang(prompt):
        release.wait(30)
        return GOOD

    start = time.perf_counter()
    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(models.function(hang), schema=Review, budget=Budget(max_seconds=0.3)).run("q")
    assert time.perf_counter() - start < 2
    assert {b.status for b in info.value.result.ballots} == {"cancelled"}
    release.set()


def test_call_budget():
    other = '{"stars": 2, "sentiment": "negative"}'
    model = models.scripted([GOOD, other, GOOD, other, GOOD])
    with pytest.raises(accord.BudgetExceeded) as info:
        Stabilizer(model, schema=Review, budget=Budget(max_calls=3)).run("q")
    assert info.value.result.calls == 3


def test_async_ballots_run_concurrently():
    async def slow(prompt):
        await asyncio.sleep(0.2)
        return GOOD

    stab = Stabilizer(models.function(slow), schema=Review, vote=Vote(k=5, early_stop=False))
    start = time.perf_counter()
    result = asyncio.run(stab.arun("q"))
    assert result.calls == 5 and time.perf_counter() - start < 0.6


def test_sync_ballots_run_concurrently_too():
    def slow(prompt):
        time.sleep(0.2)
        return GOOD

    start = time.perf_counter()
    result = Stabilizer(models.function(slow), schema=Review, vote=Vote(k=3, early_stop=False)).run("q")
    assert result.calls == 3 and time.perf_counter() - start < 0.5


def _summary(result):
    return (result.value, result.stable, result.agreement, result.votes, result.stopped_because, result.calls,
            [(b.slot, b.attempt, b.status, b.key) for b in result.ballots])


def test_sync_and_async_runs_of_one_script_give_equal_results():
    texts = ['{"stars": 9, "sentiment": "positive"}', GOOD, GOOD, '{"stars": 2, "sentiment": "negative"}', GOOD]
    stab = lambda: Stabilizer(models.scripted(texts), schema=Review, vote=Vote(k=5))  # noqa: E731
    assert _summary(stab().run("q")) == _summary(asyncio.run(stab().arun("q")))


def test_run_works_inside_a_running_event_loop():
    async def notebook():
        stab = Stabilizer(models.scripted([GOOD] * 3), schema=Review)
        return stab.run("q"), stab.map(["q"])  # map in a loop too

    result, mapped = asyncio.run(notebook())
    assert result.stable and mapped[0].error is not None  # scripted texts ran out for the second prompt


def test_function_backend_receives_what_the_user_passed():
    seen = []

    def fn(prompt):
        seen.append(prompt)
        return "positive"

    Stabilizer(fn, schema=Literal["positive", "negative"], vote=Vote(k=1)).run("How was it?")
    assert seen[0].startswith("How was it?\n\n") and "positive, negative" in seen[0]
    seen.clear()
    Stabilizer(fn, schema=Literal["positive", "negative"], vote=Vote(k=1), schema_in_prompt=False).run("How was it?")
    assert seen == ["How was it?"]


def test_function_backend_may_take_the_request_and_return_a_completion():
    def fn(prompt, request=None):
        assert isinstance(request, accord.Request) and request.ballot == 0
        return Completion("yes", usage=accord.Usage(prompt_tokens=5, completion_tokens=1))

    result = Stabilizer(fn, schema=bool, vote=Vote(k=1)).run("ok?")
    assert result.value is True and result.usage.total_tokens == 6 and result.usage.calls == 1


def test_usage_is_counted_on_failure_too():
    texts = [Completion("nope", usage=accord.Usage(prompt_tokens=3, completion_tokens=2))] * 2
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(models.scripted(texts), schema=int, vote=Vote(k=1), retry=Retry(attempts=2)).run("q")
    assert info.value.result.usage.total_tokens == 10


def test_map_keeps_order_and_survives_a_failing_prompt():
    def fn(prompt):
        if prompt.startswith("bad"):
            return "no idea"
        return prompt.split()[0]

    stab = Stabilizer(fn, schema=int, vote=Vote(k=3), schema_in_prompt=False, retry=Retry(attempts=1))
    results = stab.map(["1 a", "bad", "3 c", "4 d"], concurrency=2)
    assert [r.value for r in results] == [1, None, 3, 4]
    assert isinstance(results[1].error, accord.InvalidOutput) and results[1].calls >= 1


def test_map_bounds_concurrency_across_prompts():
    active = 0
    peak = 0
    lock = threading.Lock()

    async def fn(prompt):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        await asyncio.sleep(0.02)
        with lock:
            active -= 1
        return "7"

    stab = Stabilizer(models.function(fn), schema=int, vote=Vote(k=3, early_stop=False))
    results = stab.map([f"p{i}" for i in range(6)], concurrency=4)
    assert all(r.value == 7 for r in results) and peak == 4


def test_on_ballot_hook_sees_every_call():
    seen = []
    result = Stabilizer(models.scripted(["x", GOOD, GOOD, GOOD]), schema=Review, on_ballot=seen.append).run("q")
    assert len(seen) == result.calls


def test_result_to_json_round_trips_through_json():
    import json

    result = Stabilizer(models.scripted([GOOD] * 3), schema=Review).run("q")
    data = json.loads(result.to_json())
    assert data["value"] == {"stars": 4, "sentiment": "positive"} and data["calls"] == 3
    assert len(data["ballots"]) == 3 and data["stopped_because"] == "unanimous"


def test_bad_prompt_and_policies_are_config_errors():
    stab = Stabilizer(models.scripted([]), schema=int)
    with pytest.raises(accord.ConfigError):
        stab.run(42)
    with pytest.raises(accord.ConfigError):
        Stabilizer(models.scripted([]), schema=int, vote=5)
    with pytest.raises(accord.UnsupportedSchema):
        Stabilizer(models.scripted([]), schema="not a schema")
    with pytest.raises(accord.ConfigError):
        accord.Budget(max_seconds=-1)


def test_stabilize_decorator_passes_other_arguments_through():
    calls = []

    @accord.stabilize(schema=Review, vote=Vote(k=3))
    def ask(prompt: str, temperature: float = 0.0) -> str:
        calls.append(temperature)
        return GOOD

    assert ask("review", temperature=0.5) == Review(stars=4, sentiment="positive")
    assert calls == [0.5] * 2  # quorum of 2 reached unanimously
    result = ask.run("review")
    assert isinstance(result, accord.Result) and result.fingerprint.endswith("ask")


def test_stabilize_async_function():
    @accord.stabilize(schema=int, vote=Vote(k=3))
    async def ask(prompt: str) -> str:
        return "7"

    assert asyncio.run(ask("n?")) == 7


def test_choice_schemas_and_json_schema_dicts():
    result = Stabilizer(models.scripted(["Positive", "positive.", "POSITIVE"]), schema=Literal["positive", "negative"]).run("q")
    assert result.value == "positive"
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}
    result = Stabilizer(models.scripted(['{"n": "3"}', '{"n": 3.0}', '{"n": 3}']), schema=schema).run("q")
    assert result.value == {"n": 3}


def test_a_custom_stop_rule_accepts_with_its_own_reason():
    class TwoAhead(accord.StopRule):
        def __call__(self, tally):
            return "two ahead" if tally.lead - tally.runner_up >= 2 else None

    result = Stabilizer(models.scripted([GOOD] * 5), schema=Review, vote=Vote(k=5, early_stop=TwoAhead())).run("q")
    assert result.stable and result.stopped_because == "two ahead" and result.calls == 3


def test_a_truncated_scalar_is_retried_even_if_it_looks_valid():
    model = models.scripted([Completion("12", "length"), Completion("123", "stop")])
    result = Stabilizer(model, schema=int, vote=Vote(k=1), max_tokens=2).run("q")
    assert result.value == 123 and [b.status for b in result.ballots] == ["invalid", "valid"]
    assert model.requests[1].settings.max_tokens == 4


def test_map_budget_clock_starts_with_the_prompts_turn():
    def fn(prompt):
        time.sleep(0.2)
        return "7"

    stab = Stabilizer(fn, schema=int, vote=Vote(k=2), budget=Budget(max_seconds=1.5), schema_in_prompt=False)
    results = stab.map([f"p{i}" for i in range(8)], concurrency=2)
    assert all(r.value == 7 for r in results), [r.stopped_because for r in results]


def test_fieldwise_result_serializes_its_assembled_value():
    import json

    class P(BaseModel):
        a: int
        b: int

    texts = ['{"a": 1, "b": 1}', '{"a": 1, "b": 2}', '{"a": 2, "b": 2}']
    result = Stabilizer(models.scripted(texts), schema=P, vote=Vote(k=3, fieldwise=True)).run("q")
    assert result.value == P(a=1, b=2) and json.loads(result.to_json())["value"] == {"a": 1, "b": 2}


def test_missing_fields_feedback_names_the_field_without_the_parent():
    model = models.scripted(['{"stars": 4}', GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1)).run("q")
    assert "- sentiment: Field required\n" in model.requests[1].input


def test_retry_after_is_capped_by_max_wait():
    model = models.scripted([accord.BackendError("429", retryable=True, status=429, retry_after=3600), GOOD])
    start = time.perf_counter()
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), retry=Retry(wait=lambda s: 0.0, max_wait=0.1)).run("q")
    assert result.value.stars == 4 and time.perf_counter() - start < 2


def test_requests_carry_the_time_the_budget_has_left():
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1), budget=Budget(max_seconds=30)).run("q")
    assert 29 < model.requests[0].deadline <= 30
    model = models.scripted([GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1)).run("q")
    assert model.requests[0].deadline is None


def test_the_gate_waits_for_slot_0_only_when_it_can_certify_it():
    class Margined(accord.models.ScriptedBackend):
        gives_margins = True

    texts = [Completion(GOOD, margins=(5.0, 0.1))] * 5
    no_floor = Stabilizer(Margined(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate()))
    assert no_floor.run("q").calls == 3  # no floor: plain voting, quorum started at once
    certified = Stabilizer(Margined([Completion(GOOD, margins=(5.0, 2.0))]), schema=Review,
                           vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert certified.calls == 1 and certified.stopped_because == "gate" and certified.fragile_steps == 0
    fragile = Stabilizer(Margined(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert fragile.calls == 3 and fragile.ballots[0].fragile_steps == 1 and fragile.stopped_because == "unanimous"


class Measured(accord.models.ScriptedBackend):
    """A local-like backend with measured floors: precision 0.4, the small perturbations 0.01."""

    gives_margins = True
    perturbable = True

    def __init__(self, items, dtype="float32"):
        super().__init__(items)
        self.dtype = dtype

    def noise(self):
        return accord.models.Noise.measured(self.dtype, {"precision": 0.4, "batch": 0.01, "attention": 0.01, "threads": 0.0}, 0.01)


def margined(margins, text=GOOD):
    return Completion(text, margins=margins)


OTHER = GOOD.replace('"stars": 4', '"stars": 2')


def test_a_fragile_first_ballot_settles_when_it_predicts_the_majority():
    # float32: ballots 2-4 run in float32 under the small perturbations (0.01 < 0.1): predicted.
    result = Stabilizer(Measured([margined((5.0, 0.1))]), schema=Review).run("q")
    assert result.calls == 1 and result.stopped_because == "settled" and result.stable
    assert result.fragile_steps == 1 and result.meta["predicted"] == {result.key: 3}
    # On a near tie even for the small perturbations, nothing is predicted: the ballots run.
    tied = [margined((5.0, 0.005)), margined((5.0, 0.3)), margined((5.0, 2.0))]
    voted = Stabilizer(Measured(tied), schema=Review).run("q")
    assert voted.calls == 3 and voted.stopped_because == "unanimous"


def test_a_bfloat16_deployment_settles_on_its_float32_ballot():
    # Ballot 0 (bfloat16) is within the precision floor of every float32 ballot: none predicted;
    # ballot 1 (the float32 reference) clears the small floor: it predicts ballots 2-4.
    split = [margined((5.0, 0.3)), margined((5.0, 0.1), OTHER)]
    result = Stabilizer(Measured(split, dtype="bfloat16"), schema=Review).run("q")
    assert result.calls == 2 and result.stopped_because == "settled" and result.value.stars == 2
    assert result.votes == {result.key: 1, result.ballots[0].key: 1} and result.meta["predicted"] == {result.key: 3}
    # Clear of the precision floor plus the small one: ballot 0 predicts all four.
    clear = Stabilizer(Measured([margined((5.0, 0.5))], dtype="bfloat16"), schema=Review).run("q")
    assert clear.calls == 1 and clear.stopped_because == "gate"


def test_an_invalid_first_ballot_predicts_the_same_failure():
    model = Measured([margined((5.0, 0.1), "not json at all")] * 5)
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, schema=Review, retry=Retry(attempts=1)).run("q")
    assert caught.value.result.calls == 1 and caught.value.result.stopped_because == "no valid ballot"


def test_a_user_floor_predicts_across_any_two_computations():
    texts = [margined((5.0, 0.1)), margined((5.0, 2.0), OTHER)]
    result = Stabilizer(Measured(texts), schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0))).run("q")
    assert result.calls == 2 and result.stopped_because == "settled" and result.value.stars == 2
    # An infinite floor predicts nothing: every ballot is voted on.
    infinite = Vote(k=5, gate=accord.MarginGate(floor=math.inf))
    voted = Stabilizer(Measured([margined((5.0, 2.0))] * 5), schema=Review, vote=infinite).run("q")
    assert voted.calls == 3 and voted.stopped_because == "unanimous"


def test_without_early_stopping_nothing_is_predicted():
    model = Measured([margined((5.0, 0.1))] * 5)
    result = Stabilizer(model, schema=Review, vote=Vote(k=5, early_stop=False, gate=accord.MarginGate())).run("q")
    assert result.calls == 5 and result.stopped_because == "k reached"


def test_looping_finds_a_stretch_repeated_back_to_back():
    from accord._retry import looping

    cycle = "  #MariaLopez is 34, lives in Madrid, Spain."
    assert looping('{"name": "Maria", "home": {"city": "Madrid, Spain}}}' + cycle * 3 + "  #Maria")
    assert not looping('{"name": "Maria", "home": {"city": "Madrid, Spain}}}' + cycle + "  #Maria")
    assert looping('{"answer": 3' + "0" * 40) and not looping('{"answer": 3' + "0" * 20)
    assert looping(" " * 40) and not looping("")
    assert not looping('{"items": ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "yuzu"')


def test_a_truncated_loop_is_not_grown():
    loop = Completion('{"stars": 5, "sentiment": "' + "so good " * 8, finish_reason="length")
    model = models.scripted([loop, GOOD])
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, schema=Review, vote=Vote(k=1), max_tokens=64).run("q")
    assert len(model.requests) == 1 and caught.value.result.ballots[0].error["loop"] is True
    grown = models.scripted([loop, GOOD])
    result = Stabilizer(grown, schema=Review, vote=Vote(k=1), max_tokens=64, retry=Retry(grow_loops=True)).run("q")
    assert result.value.stars == 4 and [r.settings.max_tokens for r in grown.requests] == [64, 128]


def test_grow_loops_must_be_a_bool():
    with pytest.raises(accord.ConfigError):
        Retry(grow_loops="yes")
