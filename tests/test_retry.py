"""Per-ballot retries end to end: invalid output with feedback, truncation, loops, backend faults."""

from __future__ import annotations

import time

import pytest

import accord
from accord import Completion, Retry, Stabilizer, Vote, models
from reviews import GOOD, Review


def test_invalid_then_valid_is_retried_with_the_error_in_the_next_prompt() -> None:
    model = models.scripted(['{"stars": 34, "sentiment": "positive"}', GOOD])
    result = Stabilizer(model, schema=Review, vote=Vote(k=1)).run("review this")
    assert result.value is not None and result.value.stars == 4
    assert [b.status for b in result.ballots] == ["invalid", "valid"]
    first, second = model.requests
    assert isinstance(first.input, str) and isinstance(second.input, str)
    assert first.input.startswith("review this") and first.feedback is None
    assert second.feedback is not None and second.attempt == 2
    assert "stars" in second.input and "less than or equal to 5" in second.input and "34" in second.input
    # context never grows: one feedback block, not the history
    assert second.input.count("previous answer") == 1


def test_feedback_does_not_accumulate_over_attempts() -> None:
    model = models.scripted(['{"stars": 34, "sentiment": "positive"}', '{"stars": 9, "sentiment": "positive"}', GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1), retry=Retry(attempts=3)).run("q")
    third = model.requests[2].input
    assert isinstance(third, str)
    assert third.count("previous answer") == 1 and "9" in third and "34" not in third


def test_feedback_for_message_prompts_is_one_appended_user_message() -> None:
    model = models.scripted(["nope", GOOD])
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "review"}]
    Stabilizer(model, schema=Review, vote=Vote(k=1), prompting=accord.Prompting(schema_in_prompt=False)).run(messages)
    retry = model.requests[1].input
    assert isinstance(retry, list)
    assert retry[:2] == messages and len(retry) == 3 and retry[2]["role"] == "user"


def test_missing_fields_feedback_names_the_field_without_the_parent() -> None:
    model = models.scripted(['{"stars": 4}', GOOD])
    Stabilizer(model, schema=Review, vote=Vote(k=1)).run("q")
    retry = model.requests[1].input
    assert isinstance(retry, str)
    assert "- sentiment: Field required\n" in retry


def test_all_invalid_raises_invalid_output_with_every_ballot() -> None:
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(models.scripted(["no"] * 20), schema=Review, vote=Vote(k=3), retry=Retry(attempts=2)).run("q")
    result = info.value.result
    # "no" holds no value at all: slot 0 retries for both (2 calls), slot 1's one output waits on
    # it and is not asked again; then no answer can reach the quorum of 2 with one slot left.
    assert result.calls == 3 and all(b.status == "invalid" for b in result.ballots)
    assert [(b.slot, b.attempt) for b in result.ballots] == [(0, 1), (1, 1), (0, 2)]
    assert result.ballots[0].error is not None
    assert result.ballots[0].error["stage"] == "extract"


def test_near_valid_outputs_are_each_retried_as_before() -> None:
    """A validation error on one field is readable: every slot retries it (2 slots x 2 attempts)."""
    near = '{"stars": 9, "sentiment": "positive"}'
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(models.scripted([near] * 20), schema=Review, vote=Vote(k=3), retry=Retry(attempts=2)).run("q")
    assert info.value.result.calls == 4 and "not asked again" not in str(info.value)


# -- outputs with nothing to read (run/_unreadable) ---------------------------------------------


def test_garbage_under_the_default_policy_costs_5_calls_not_9() -> None:
    """k=5, quorum 3, 3 attempts: the 3 first ballots, then slot 0's two retries with feedback.
    Slots 1 and 2 would be asked the same prompt: they are not asked again."""
    seen: list[accord.Request] = []

    def noise(prompt: str, request: accord.Request) -> str:
        seen.append(request)
        return "I'm sorry, as a language model I cannot rate this ~~~ %%%"

    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(noise, Review).run("Rate: 'Great pen.'")
    result = info.value.result
    assert len(seen) == result.calls == len(result.ballots) == 5
    assert [(b.slot, b.attempt) for b in result.ballots] == [(0, 1), (1, 1), (2, 1), (0, 2), (0, 3)]
    assert all(b.status == "invalid" and b.error is not None and b.error["stage"] == "extract" for b in result.ballots)
    assert result.stopped_because == "no valid ballot"
    assert "not asked again" in str(info.value) and "no JSON value found" in str(info.value)
    assert [r.feedback is not None for r in seen] == [False, False, False, True, True]  # the lead's retries carry feedback

    model = models.scripted(["garbage"] * 20)  # the same with the scripted model, for an int
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(model, int).run("How many?")
    assert info.value.result.calls == len(model.requests) == 5


@pytest.mark.parametrize(("vote", "calls"), [
    (Vote(), 5),  # 3 first ballots + 2 retries of the first (was 3 x 3 = 9)
    (Vote(k=5, quorum=2), 4),  # 2 + 2; no third ballot is opened (was 4 ballots x 3 = 12)
    (Vote(k=5, early_stop=False), 7),  # 5 + 2 (was 5 x 3 = 15)
    (Vote(k=1), 3),  # one ballot: as before
], ids=["default", "quorum 2", "no early stop", "k=1"])
def test_garbage_costs_the_first_ballots_and_one_ballots_retries(vote: Vote, calls: int) -> None:
    model = models.scripted(["garbage"] * 40)
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(model, int, vote=vote).run("How many?")
    assert info.value.result.calls == len(model.requests) == calls
    assert info.value.result.stopped_because == "no valid ballot"
    assert ("not asked again" in str(info.value)) == (vote.k > 1)


def test_near_valid_outputs_under_the_default_policy_still_cost_9_calls() -> None:
    model = models.scripted(['{"stars": "many", "sentiment": "positive"}'] * 20)
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(model, Review).run("Rate: 'Great pen.'")
    assert info.value.result.calls == len(model.requests) == 9


def test_the_first_readable_output_asks_the_waiting_ballots_again() -> None:
    """Slot 0's retry reads: slots 1 and 2, waiting, are asked again with their own feedback."""
    model = models.scripted(["garbage", "junk", "noise", GOOD, GOOD, GOOD])
    result = Stabilizer(model, Review).run("Rate: 'Great pen.'")
    assert result.stable and result.value.stars == 4 and result.calls == 6
    assert [(b.slot, b.attempt, b.status) for b in result.ballots] == [
        (0, 1, "invalid"), (1, 1, "invalid"), (2, 1, "invalid"), (0, 2, "valid"), (1, 2, "valid"), (2, 2, "valid")]
    assert [r.feedback.excerpt if r.feedback else None for r in model.requests[3:]] == ["garbage", "junk", "noise"]


def test_a_lead_that_faults_hands_the_retries_to_the_next_ballot() -> None:
    def model(prompt: str, request: accord.Request) -> str:
        if request.ballot == 0 and request.attempt == 2:
            raise ValueError("the model crashed")  # not retryable: slot 0 ends
        return "garbage"

    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(model, Review).run("q")
    result = info.value.result
    # 3 first ballots, slot 0's retry faults, slot 1 leads: its 2 retries; slot 2 is not asked again
    assert [(b.slot, b.attempt, b.status) for b in result.ballots] == [
        (0, 1, "invalid"), (1, 1, "invalid"), (2, 1, "invalid"), (0, 2, "error"), (1, 2, "invalid"), (1, 3, "invalid")]


def test_usage_is_counted_on_failure_too() -> None:
    texts = [Completion("nope", usage=accord.Usage(prompt_tokens=3, completion_tokens=2))] * 2
    with pytest.raises(accord.InvalidOutput) as info:
        Stabilizer(models.scripted(texts), schema=int, vote=Vote(k=1), retry=Retry(attempts=2)).run("q")
    assert info.value.result.usage.total_tokens == 10


def test_truncated_output_is_retried_with_more_tokens_not_reasked() -> None:
    model = models.scripted([Completion('{"stars": 4, "sent', "length"), GOOD])
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), settings=accord.Settings(max_tokens=100)).run("q")
    assert result.value is not None and result.value.stars == 4
    first, second = model.requests
    assert second.settings.max_tokens == 200 and second.feedback is None and second.input == first.input


def test_a_truncated_scalar_is_retried_even_if_it_looks_valid() -> None:
    model = models.scripted([Completion("12", "length"), Completion("123", "stop")])
    result = Stabilizer(model, schema=int, vote=Vote(k=1), settings=accord.Settings(max_tokens=2)).run("q")
    assert result.value == 123 and [b.status for b in result.ballots] == ["invalid", "valid"]
    assert model.requests[1].settings.max_tokens == 4


def test_looping_finds_a_stretch_repeated_back_to_back() -> None:
    from accord._retry import looping

    cycle = "  #MariaLopez is 34, lives in Madrid, Spain."
    assert looping('{"name": "Maria", "home": {"city": "Madrid, Spain}}}' + cycle * 3 + "  #Maria")
    assert not looping('{"name": "Maria", "home": {"city": "Madrid, Spain}}}' + cycle + "  #Maria")
    assert looping('{"answer": 3' + "0" * 40) and not looping('{"answer": 3' + "0" * 20)
    assert looping(" " * 40) and not looping("")
    assert not looping('{"items": ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "yuzu"')


def test_a_truncated_loop_is_asked_again_with_feedback_not_grown() -> None:
    loop = Completion('{"stars": 5, "sentiment": "' + "so good " * 8, finish_reason="length")
    model = models.scripted([loop, GOOD])
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), settings=accord.Settings(max_tokens=64)).run("q")
    assert result.value is not None and result.value.stars == 4
    first, second = result.ballots
    assert second.status == "valid" and first.error is not None and first.error["stage"] == "loop" and first.error["loop"]["path"] == "sentiment"
    assert first.error["loop"]["stopped"] == "at max_tokens" and first.finish_reason == "length"
    again = model.requests[1]
    assert again.settings.max_tokens == 64, "a loop is never given more tokens"
    assert again.feedback is not None and again.feedback.kind == "loop"
    assert isinstance(again.input, str) and "repeated itself" in again.input and "sentiment" in again.input


def test_grow_loops_is_deprecated_and_still_grows_a_loop_cut_at_max_tokens() -> None:
    loop = Completion('{"stars": 5, "sentiment": "' + "so good " * 8, finish_reason="length")
    grown = models.scripted([loop, GOOD])
    with pytest.warns(DeprecationWarning, match="grow_loops"):
        retry = Retry(grow_loops=True)
    result = Stabilizer(grown, schema=Review, vote=Vote(k=1), settings=accord.Settings(max_tokens=64), retry=retry).run("q")
    assert result.value is not None
    assert result.value.stars == 4 and [r.settings.max_tokens for r in grown.requests] == [64, 128]
    assert grown.requests[1].feedback is None


def test_grow_loops_must_be_a_bool() -> None:
    with pytest.raises(accord.ConfigError):
        Retry(grow_loops="yes")  # type: ignore[arg-type]  # a wrong type on purpose: it must be refused


def test_transport_errors_back_off_and_retry() -> None:
    model = models.scripted([accord.BackendError("429", retryable=True, status=429, retry_after=0.05), GOOD])
    retry = Retry(wait=lambda state: 0.0)
    start = time.perf_counter()
    result = Stabilizer(model, schema=Review, vote=Vote(k=1), retry=retry).run("q")
    assert result.value is not None
    assert result.value.stars == 4 and time.perf_counter() - start >= 0.05  # the driver really waits
    assert [b.status for b in result.ballots] == ["error", "valid"]


def test_non_retryable_backend_errors_end_in_a_backend_error() -> None:
    def broken(prompt: str) -> str:
        raise ValueError("bad key")

    with pytest.raises(accord.BackendError) as info:
        Stabilizer(models.function(broken), schema=Review, vote=Vote(k=3)).run("q")
    assert info.value.result is not None
    assert info.value.result.calls == 2  # two slots fail; no answer can reach the quorum


class _Margined(accord.models.ScriptedBackend):
    gives_margins = True


def test_a_slot_that_retraces_a_spent_slot_s_failure_byte_for_byte_is_not_asked_again() -> None:
    """The gate ran slot 0 alone and it spent its three attempts on failing answers; slots 1 and 2
    write slot 0's first answer at their first attempt: their retries would be the requests slot 0
    already made (the same feedback on the same prompt), so they end there. A slot that writes
    anything else is asked again as before."""
    bad = Completion('{"stars": 9, "sentiment": "positive"}', margins=(5.0,))
    worse = Completion('{"stars": 0, "sentiment": "positive"}', margins=(5.0,))
    vote = Vote(k=3, gate=accord.MarginGate(floor=1.0))
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(_Margined([bad, worse, worse, bad, bad]), schema=Review, vote=vote, retry=Retry(attempts=3)).run("q")
    ballots = caught.value.result.ballots
    assert [(b.slot, b.attempt, b.status) for b in ballots] == [(0, 1, "invalid"), (0, 2, "invalid"), (0, 3, "invalid"),
                                                                (1, 1, "invalid")], ballots  # then no quorum is left to reach
    # Five slots (quorum 3): a quorum is still in reach after slot 1, but slot 1's first request,
    # which slot 0 also sent, retraced it: every slot not yet opened would send it too.
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(_Margined([bad, worse, worse, bad, bad, bad]), schema=Review, vote=Vote(k=5, gate=accord.MarginGate(floor=1.0)),
                   retry=Retry(attempts=3)).run("q")
    assert [(b.slot, b.attempt) for b in caught.value.result.ballots] == [(0, 1), (0, 2), (0, 3), (1, 1)]
    assert caught.value.result.stopped_because == "no valid ballot"
    assert "repeated, byte for byte, the first ballot's" in str(caught.value)
    # A retrace at a later attempt says nothing of a first request: the next slot is opened.
    first = Completion('{"stars": 8, "sentiment": "positive"}', margins=(5.0,))
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(_Margined([bad, worse, worse, first, worse, bad, bad, bad, bad]), schema=Review,
                   vote=Vote(k=5, gate=accord.MarginGate(floor=1.0)), retry=Retry(attempts=3)).run("q")
    assert [(b.slot, b.attempt) for b in caught.value.result.ballots][:6] == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (2, 1)]
    # Slot 1 writes another failing answer: asked again, and its valid retry counts.
    other = Completion('{"stars": 7, "sentiment": "positive"}', margins=(5.0,))
    good = Completion(GOOD, margins=(5.0,))
    result = Stabilizer(_Margined([bad, bad, bad, other, good, good]), schema=Review, vote=vote, retry=Retry(attempts=3)).run("q")
    assert result.value == Review.model_validate_json(GOOD)
    assert [(b.slot, b.attempt, b.status) for b in result.ballots][3:] == [(1, 1, "invalid"), (1, 2, "valid"), (2, 1, "valid")]
