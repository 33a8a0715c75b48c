"""Prose is bounded: a loop ends a ballot early, as a typed ``loop`` failure retried with
feedback (never with more tokens); a cut or a loop is named in the error; a run has a time bound.
On the local backend a loop in a prose string closes that string instead, within the call (the
decision around it is what the ballot is for), and so does a loop among a list of labels.

The detector (``accord.read._loops``) on the loops the embedded model really writes and on values
that repeat for a reason; the run loop on scripted completions; the HTTP backend against
tests/fake_upstream.py streaming a loop forever; the embedded model stopped in a real loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import accord
from accord import Budget, Completion, Retry, Schema, Settings, Stabilizer, Vote, models
from accord._retry import DEFAULT_MAX_SECONDS
from accord._types import Request
from accord.backends.openai._caps import Capabilities
from accord.ledger._keys import describe_policy
from accord.prompt._prompt import build_input
from accord.read._loops import LOOP, find_loop, path_at
from accord.run._loop import Policy, decide


class Ticket(BaseModel):
    category: Literal["billing", "technical", "account", "other"]
    priority: int = Field(ge=1, le=5)
    needs_human: bool
    tags: list[str]
    summary: str


# A loop in a decisive field is asked again with feedback; one in prose is closed (test below).
DECISIVE_SUMMARY = Vote(k=1, gate=None, roles={"summary": "decisive"})
GOOD = '{"category": "billing", "priority": 2, "needs_human": true, "tags": ["refund"], "summary": "Charged twice."}'
HEAD = '{"category": "billing", "priority": 2, "needs_human": true, "tags": ["refund"], "summary": "'
SENTENCE = "I'm disputing with my bank now. "


# -- the detector: loops the embedded model wrote --------------------------------------------------


def test_a_sentence_repeated_in_a_string_is_a_loop_at_its_third_time() -> None:
    assert find_loop(HEAD + SENTENCE * 2, early=True) is None
    loop = find_loop(HEAD + SENTENCE * 3, early=True)
    assert loop is not None and loop.path == "summary" and loop.period == len(SENTENCE) and loop.repeats == 3
    assert loop.stretch == SENTENCE and loop.start == len(HEAD)
    assert loop.message() == "the output looped in `summary`: \"I'm disputing with my bank now.\" repeated 3 times"


def test_the_same_list_item_over_and_over_is_a_loop_from_eight_times() -> None:
    head = '{"category": "technical", "priority": 1, "needs_human": true, "tags": ['
    assert find_loop(head + '"tutorial", ' * 7, early=True) is None
    loop = find_loop(head + '"tutorial", ' * 8, early=True)
    assert loop is not None and loop.path == "tags[]" and loop.stretch == '"tutorial", ' and loop.repeats == 8
    assert not loop.counting


def test_a_counting_run_is_a_loop() -> None:
    counted = '{"summary": "Ticket: ' + " ".join(f"{i}." for i in [*range(1, 29), *range(30, 42)]) + " 4"  # skips 29, cut in 42
    loop = find_loop(counted, early=True)
    assert loop is not None and loop.counting and loop.path == "summary" and loop.repeats >= 8
    assert "growing number" in loop.message()
    near = '{"notes": "' + "".join(f"Step {i}: call the bank again. " for i in range(1, 10))
    loop = find_loop(near, early=True)
    assert loop is not None and loop.counting and loop.path == "notes"


@pytest.mark.parametrize("text", [
    '{"summary": "' + "ticket_" * 12,
    '{"summary": "Blorp, featuring ' + "including a variety of Japanese-style sweets, " * 3,
    '{"a": 1,' + " " * 80,
    "Sure! " + "The answer is yes. " * 4,  # plain text, outside any JSON value
])
def test_other_loops_are_found_while_written(text: str) -> None:
    assert find_loop(text, early=True) is not None


# -- the detector: values that repeat for a reason are not cut while written ------------------------


@pytest.mark.parametrize("text", [
    '{"readings": [' + "0, " * 100,  # equal numbers: data
    '{"flags": [' + "true, " * 40,
    '{"sha256": "' + "0" * 64 + '", "rule": "' + "-" * 70,  # a null hash, a rule line
    '{"a": {"b": {"c": {"d": [\n' + " " * 60 + "1",  # deep indentation
    '{"note": "| id | item | qty |\\n|---|---|---|\\n' + "".join(f"| {i} | {w} | {i * 3} |\\n" for i, w in enumerate(["pen", "ink", "pad", "cap", "nib", "box", "tin", "jar"])),
    '{"items": [' + ", ".join(f'{{"sku": "A{i}", "qty": 1, "unit": "pcs"}}' for i in range(20)),  # similar items
    '{"items": [' + ", ".join('{"sku": "A1", "qty": 1}' for _ in range(5)),  # a few equal items
    '{"tags": ["bank", "bank", "refund", "refund", "card", "card", "card"',
    '{"summary": "Thank you. Thank you. Thank you. The card was charged twice.',
    '{"steps": "1. Call the bank. 2. Send the form. 3. Wait for the refund. 4. Close the case.',
    '{"numbers": [' + ", ".join(str(i) for i in range(1, 60)),  # counting numbers in a list: data
])
def test_values_that_repeat_for_a_reason_are_not_cut_while_written(text: str) -> None:
    assert find_loop(text, early=True) is None


def test_a_number_whose_digits_run_on_is_a_loop_while_written() -> None:
    runs = '{"vendor": "Brightline", "line_items": [{"description": "Chair", "quantity": 2, "unit_price": 1' + "1" * 60
    loop = find_loop(runs, early=True)
    assert loop is not None and loop.stretch == "1" and loop.path == "line_items[].unit_price"
    assert find_loop('{"total": 0.' + "3" * 47, early=True) is None  # under EARLY_NUMBER's span
    assert find_loop('{"total": 0.' + "3" * 48, early=True) is not None
    assert find_loop('{"total": 0.' + "12" * 30, early=True) is not None  # any stretch of digits
    pi = '{"pi": 3.14159265358979323846264338327950288419716939937510582097494459'
    assert find_loop(pi, early=True) is None  # long, but no stretch repeats
    assert find_loop('{"code": "' + "1" * 60, early=True) is None  # digits in a string are text, not a number


def test_a_text_cut_at_max_tokens_is_judged_on_less_evidence() -> None:
    zeros = '{"answer": 3' + "0" * 40
    assert find_loop(zeros, early=True) is None
    loop = find_loop(zeros)
    assert loop is not None and loop.stretch == "0" and loop.path == "answer"
    assert find_loop('{"readings": [' + "0, " * 30) is not None
    assert find_loop('{"answer": 3' + "0" * 20) is None
    assert find_loop('{"items": ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "yuzu"') is None


def test_path_at_names_the_open_value() -> None:
    assert path_at('{"a": {"b": "xy', 15) == ("a.b", True)
    assert path_at('{"tags": ["x", ', 15) == ("tags[]", False)
    assert path_at('{"items": [{"task": "call', 25) == ("items[].task", True)
    assert path_at('{"a": 1, "b', 11) == (None, False)  # inside a key: the object itself
    assert path_at('{"a": "say \\"hi\\" and', 22) == ("a", True)
    assert path_at("hello", 3) == (None, True)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="abcdefghij klmnop,.", min_size=12, max_size=50).filter(lambda s: len(set(s) - {" "}) >= 4))
def test_any_stretch_repeated_in_a_string_is_found(stretch: str) -> None:
    repeats = max(3, -(-64 // len(stretch)))
    loop = find_loop('{"note": "' + stretch * repeats, early=True)
    assert loop is not None and loop.path == "note" and len(stretch) % loop.period == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghijklmnop", min_size=3, max_size=10), min_size=1, max_size=40, unique=True))
def test_a_list_of_distinct_strings_is_never_cut_while_written(words: list[str]) -> None:
    text = '{"tags": [' + ", ".join(f'"{w}"' for w in words)
    assert find_loop(text, early=True) is None


# -- the run loop: a loop is a typed failure, asked again with feedback ----------------------------


def looped(text: str = HEAD + SENTENCE * 3, tokens: int = 40) -> Completion:
    return Completion(text, LOOP, usage=accord.Usage(prompt_tokens=50, completion_tokens=tokens))


def test_a_loop_is_recorded_and_asked_again_with_feedback_never_more_tokens() -> None:
    model = models.scripted([looped(), GOOD])
    result = Stabilizer(model, Ticket, vote=DECISIVE_SUMMARY, settings=Settings(max_tokens=256)).run("Ticket: charged twice.")
    assert result.value is not None and result.value.summary == "Charged twice."
    first = result.ballots[0]
    assert first.status == "invalid" and first.finish_reason == "loop"
    assert first.error is not None and first.error["stage"] == "loop" and first.error["type"] == "loop"
    assert first.error["loop"] == {"stretch": SENTENCE, "period": len(SENTENCE), "repeats": 3, "start": len(HEAD),
                                   "path": "summary", "counting": False, "stopped": "early", "tokens": 40}
    assert first.error["message"] == "the output looped in `summary`: \"I'm disputing with my bank now.\" repeated 3 times"
    again = model.requests[1]
    assert again.settings.max_tokens == 256 and again.feedback is not None and again.feedback.kind == "loop"
    assert isinstance(again.input, str)
    block = again.input.split("\n\n")[-1]
    assert block == ("Your previous answer repeated itself:\n"
                     "- summary: \"I'm disputing with my bank now.\" repeated 3 times\n"
                     "Answer again; write summary short, saying each thing once.")


def test_when_every_attempt_loops_the_error_says_so() -> None:
    model = models.scripted([looped()] * 3)
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, Ticket, vote=DECISIVE_SUMMARY).run("Ticket: charged twice.")
    message = str(caught.value)
    assert message.startswith("no valid output in 3 calls (3 looped); last: the output looped in `summary`")
    assert "Field required" not in message
    assert [r.settings.max_tokens for r in model.requests] == [None, None, None]  # never grown


def test_a_cut_off_without_a_loop_names_the_cut_and_the_field_and_is_grown() -> None:
    cut = Completion(HEAD + "The customer was charged twice for one order and", "length")
    model = models.scripted([cut, cut, cut])
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, Ticket, vote=DECISIVE_SUMMARY, settings=Settings(max_tokens=64)).run("Ticket: charged twice.")
    message = str(caught.value)
    assert message == ("no valid output in 3 calls (3 cut off at max_tokens); "
                       "last: the output was cut off at max_tokens=256 inside `summary`")
    assert [r.settings.max_tokens for r in model.requests] == [64, 128, 256]
    first = caught.value.result.ballots[0]
    assert first.error is not None and first.error["errors"] == [{"loc": ("summary",), "msg": "cut off at max_tokens=64", "type": "truncated"}]


def test_a_budget_that_runs_out_on_loops_names_them() -> None:
    model = models.scripted([looped()] * 9)
    with pytest.raises(accord.BudgetExceeded) as caught:
        Stabilizer(model, Ticket, vote=Vote(k=3, gate=None, roles={"summary": "decisive"}), budget=Budget(max_calls=4)).run(
            "Ticket: charged twice."
        )
    assert caught.value.cause == "invalid output (loop)"
    assert "4 of 4 failed calls: looped (last: the output looped in `summary`" in str(caught.value)


def test_a_loop_in_prose_is_closed_where_it_began_in_one_call() -> None:
    model = models.scripted([looped(HEAD + "Charged twice. " + SENTENCE * 3), GOOD])
    result = Stabilizer(model, Ticket, vote=Vote(k=1, gate=None)).run("Ticket: charged twice.")
    (ballot,) = result.ballots
    assert ballot.status == "valid" and ballot.finish_reason == LOOP  # as the backend said; the text closed after it
    summary = result.value.summary  # up to the end of a sentence in the loop's first stretch
    assert summary in ("Charged twice.", "Charged twice. I'm disputing with my bank now."), summary
    assert result.value.category == "billing" and result.value.tags == ["refund"]
    (closed,) = ballot.meta["closed_loops"]
    assert closed["path"] == "summary" and closed["closed"] == "read" and "disputing with my bank" in closed["stretch"]


def test_a_cut_inside_prose_is_closed_where_it_was_cut_and_a_cut_before_a_required_field_is_not() -> None:
    model = models.scripted([Completion(HEAD + "Charged twi", "length"), GOOD])
    result = Stabilizer(model, Ticket, vote=Vote(k=1, gate=None)).run("Ticket: charged twice.")
    assert result.calls == 1 and result.value is not None and result.value.summary == "Charged twi"

    class Note(BaseModel):
        summary: str
        priority: int

    cut = '{"summary": "Charged twi'
    model = models.scripted([Completion(cut, "length"), '{"summary": "Charged twice.", "priority": 2}'])
    result = Stabilizer(model, Note, vote=Vote(k=1, gate=None)).run("Ticket: charged twice.")
    assert result.calls == 2 and result.value.priority == 2, "the closed text lacks `priority`: asked again"
    model = models.scripted([Completion(HEAD + "Charged twi", "length"), GOOD])
    result = Stabilizer(model, Ticket, vote=Vote(k=1, gate=None), retry=Retry(close_prose=False)).run("Ticket: charged twice.")
    assert result.calls == 2 and result.value.summary == "Charged twice.", "close_prose=False: asked again"


def test_a_value_that_closed_before_the_loop_is_kept() -> None:
    model = models.scripted([Completion(GOOD + " " * 80, LOOP)])
    result = Stabilizer(model, Ticket, vote=Vote(k=1, gate=None)).run("Ticket: charged twice.")
    assert result.value is not None and result.ballots[0].status == "valid" and result.ballots[0].finish_reason == "loop"


# -- a run has a time bound by default ------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_hung_backend_ends_at_the_default_bound_and_none_lifts_it() -> None:
    assert Budget().max_seconds == DEFAULT_MAX_SECONDS
    clock = Clock()
    flow = decide("q", Schema.of(Ticket), models.scripted([]), Policy(vote=Vote(k=1, gate=None)), clock)
    step = next(flow)
    assert step.timeout == DEFAULT_MAX_SECONDS  # the driver wakes the loop at the bound, the call still hanging
    clock.now += DEFAULT_MAX_SECONDS
    with pytest.raises(StopIteration) as stop:
        flow.send([])
    result = stop.value.value
    assert isinstance(result.error, accord.BudgetExceeded) and result.stopped_because == "budget"
    assert [b.status for b in result.ballots] == ["cancelled"] and result.ballots[0].seconds == DEFAULT_MAX_SECONDS
    lifted = decide("q", Schema.of(Ticket), models.scripted([]), Policy(vote=Vote(k=1, gate=None), budget=Budget(max_seconds=None)), clock)
    step = next(lifted)
    assert step.timeout is None
    clock.now += 100 * DEFAULT_MAX_SECONDS
    step = lifted.send([])  # a day later, still waiting for its call: only the user's own bound ends it
    assert step.start == () and step.timeout is None


def test_a_hung_function_ends_at_a_short_bound_in_real_time() -> None:
    def hanging(prompt: str) -> str:
        time.sleep(30)
        return GOOD

    start = time.perf_counter()
    with pytest.raises(accord.BudgetExceeded):
        Stabilizer(hanging, Ticket, vote=Vote(k=1, gate=None), budget=Budget(max_seconds=0.3)).run("q")
    assert time.perf_counter() - start < 3


def test_the_budget_stays_out_of_the_ledger_key() -> None:
    keys = {str(describe_policy(Policy(budget=budget))) for budget in (Budget(), Budget(max_seconds=None), Budget(max_seconds=5))}
    assert len(keys) == 1


# -- over HTTP: a streamed loop is cut and its connection closed -----------------------------------

DIRECTIVE = 'FAKE:{"loop": "I\'m disputing with my bank now. ", "prefix": "{\\"category\\": \\"billing\\", \\"summary\\": \\""}'


def http(fake: Any, **options: Any) -> Any:
    """The OpenAI backend on the session's fake upstream, with the key the proxy's tests expect it to see."""
    from serving import UPSTREAM_KEY

    return models.openai(base_url=fake.url, api_key=UPSTREAM_KEY, model="fake-model", structured=False, margins=models.Margins(logprobs=False),
                         capabilities=Capabilities(), **options)  # fmt: skip


def test_a_streamed_loop_is_cut_and_the_stream_closed(fake_upstream: Any) -> None:
    prompt = f"Ticket 1: a bank dispute. {DIRECTIVE}"
    model = http(fake_upstream, streamed=True, max_tokens=256)
    start = time.perf_counter()
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, Ticket, vote=Vote(k=1, gate=None), prompting=accord.Prompting(schema_in_prompt=False)).run(prompt)
    assert time.perf_counter() - start < 20  # the fake streams for 60 s unless the stream is closed
    ballots = caught.value.result.ballots
    assert [(b.status, b.finish_reason) for b in ballots] == [("invalid", "loop")] * 3
    assert all(b.error is not None and b.error["loop"]["path"] == "summary" and b.error["loop"]["stopped"] == "early" for b in ballots)
    assert "(3 looped); last: the output looped in `summary`" in str(caught.value)
    deadline = time.monotonic() + 5
    while len(fake_upstream.stats()["loops_closed"].get(prompt, [])) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # the fake notes a closed stream once its next write fails
    closed = fake_upstream.stats()["loops_closed"][prompt]
    assert len(closed) == 3 and all(c["chunks"] < 20 and c["seconds"] < 10 for c in closed), closed


def test_the_stream_method_and_the_async_driver_cut_a_loop_too(fake_upstream: Any) -> None:
    model = http(fake_upstream, streamed=True)
    schema = Schema.of(Ticket)
    prompt = f"Ticket 2: a bank dispute. {DIRECTIVE}"
    request = Request(prompt, build_input(prompt, schema, hint=False, feedback=None), schema, Settings())
    parts = list(model.stream(request))
    done = parts[-1]
    assert isinstance(done, Completion) and done.finish_reason == "loop" and done.text.endswith(SENTENCE)
    assert "".join(p for p in parts[:-1] if isinstance(p, str)) == done.text
    answered = asyncio.run(model.agenerate(request))
    assert answered.finish_reason == "loop" and find_loop(answered.text, early=True) is not None


def test_a_whole_answer_that_loops_to_max_tokens_is_a_loop_found_after_the_fact(fake_upstream: Any) -> None:
    prompt = f"Ticket 3: a bank dispute. {DIRECTIVE}"
    model = http(fake_upstream, max_tokens=64)  # not streamed: the server runs to max_tokens
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(model, Ticket, vote=Vote(k=1, gate=None), prompting=accord.Prompting(schema_in_prompt=False)).run(prompt)
    first = caught.value.result.ballots[0]
    assert first.finish_reason == "length" and first.error is not None and first.error["loop"]["stopped"] == "at max_tokens"
    assert all(b.error is not None and b.error["stage"] == "loop" for b in caught.value.result.ballots)
    last = fake_upstream.stats()["bodies"][prompt]
    assert last.get("max_tokens", last.get("max_completion_tokens")) == 64  # the last retry: never grown


# -- the embedded model, stopped in a real loop ---------------------------------------------------

# Shown the schema and writing its own layout, the model loops in the summary once the ticket says it five times.
BANK = "Summarize this support ticket. Ticket: I was charged twice." + " I'm disputing with my bank now." * 5


def test_the_embedded_model_looping_in_prose_closes_the_string_within_the_call(local_model: Any) -> None:
    result = Stabilizer(local_model, Ticket, vote=Vote(k=1, gate=None)).run(BANK)
    (ballot,) = result.ballots  # one call: the loop closed the summary, the ballot went on to a valid end
    assert ballot.status == "valid" and ballot.finish_reason == "stop"
    (closed,) = [c for c in ballot.meta["closed_loops"] if c["path"] == "summary"]  # its tags loop too, and are closed
    assert "disputing with my bank" in closed["stretch"] and closed["dropped_tokens"] > 0
    summary = result.value.summary
    assert summary.count(closed["stretch"].strip()) <= 1, "the repeats past the first stretch are dropped"
    assert ballot.usage.completion_tokens is not None and ballot.usage.completion_tokens < 128, "closed well before max_tokens=256"


def test_the_embedded_model_is_stopped_in_its_loop_and_asked_again_with_feedback(local_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Request] = []
    generate = local_model.generate

    def recording(request: Request, *args: Any, **kwargs: Any) -> Completion:
        seen.append(request)
        return generate(request, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(local_model, "generate", recording)
    try:
        ballots = Stabilizer(local_model, Ticket, vote=DECISIVE_SUMMARY, retry=Retry(attempts=2)).run(BANK).ballots
    except accord.InvalidOutput as error:
        ballots = error.result.ballots  # the retry may loop too: what is tested is how it was asked
    first = ballots[0]
    assert first.finish_reason == "loop" and first.status == "invalid"
    assert first.usage.completion_tokens is not None and first.usage.completion_tokens < 128, "stopped well before max_tokens=256"
    assert first.error is not None and first.error["loop"]["path"] == "summary" and "disputing with my bank" in first.error["loop"]["stretch"]
    assert len(seen) == 2 and seen[1].feedback is not None and seen[1].feedback.kind == "loop"
    assert seen[1].settings.max_tokens == seen[0].settings.max_tokens  # feedback, never more tokens
    assert isinstance(seen[1].input, str) and "repeated itself" in seen[1].input
    bound = (seen[1].schema.json_schema or {})["properties"]["summary"]["maxLength"]  # the retry's grammar: schema._bounds
    assert len("disputing with my bank") < bound <= first.error["loop"]["start"] + first.error["loop"]["period"]


def test_the_embedded_model_looping_on_every_attempt_ends_in_an_error_that_says_so(local_model: Any) -> None:
    with pytest.raises(accord.InvalidOutput) as caught:
        Stabilizer(local_model, Ticket, vote=DECISIVE_SUMMARY, retry=Retry(attempts=1)).run(BANK)
    assert str(caught.value).startswith("no valid output in 1 calls (1 looped); last: the output looped in `summary`: ")
    assert "Field required" not in str(caught.value)


@pytest.mark.parametrize("make", [lambda: models.openai(model="m", base_url="http://127.0.0.1:9/v1", streamed="yes"),
                                  lambda: models.local(stop_loops=1)], ids=["streamed", "stop_loops"])  # fmt: skip
def test_a_loop_switch_that_is_not_a_bool_is_a_config_error(make: Any) -> None:
    with pytest.raises(accord.ConfigError, match="must be True or False"):
        make()


# -- the local backend closes a loop in prose or among labels (backends/local/_loops) ------------

from accord.backends.local._loops import LoopStop, trimmed  # noqa: E402


def _stop(**options: Any) -> LoopStop:
    return LoopStop(None, 0, None, **options)


def test_a_loop_in_a_prose_string_is_closed_with_a_quote_and_elsewhere_ends_the_call() -> None:
    text = HEAD + SENTENCE * 3
    loop = find_loop(text, early=True)
    assert loop is not None and loop.path == "summary"
    assert _stop(prose=frozenset({"summary"})).closer(loop, text) == '"'
    assert _stop().closer(loop, text) is None, "summary decisive (not in the run's prose): the call ends"
    assert _stop(prose=frozenset({"summary"})).closer(loop, text + "\\") is None, "after a backslash a quote is escaped"


def test_a_loop_among_labels_closes_the_list_and_is_found_on_three_stretches() -> None:
    inside = '{"tags": ["refund' + '", "card", "refund' * 3
    stop = _stop(labels=frozenset({"tags[]"}))
    assert find_loop(inside, early=True) is None, "the early rule for structure wants 8 stretches"
    loop = stop.repeated_labels(inside)
    assert loop is not None and loop.path == "tags[]"
    assert stop.closer(loop, inside) == '"]'
    after = inside + '"'
    assert stop.closer(find_loop(after) or loop, after) == "]"
    assert _stop().repeated_labels(inside) is None, "no labels: nothing closed sooner"
    mid = inside + '", "car'
    assert stop.closer(loop, mid) is None, "mid-item: a close would leave a cut label"
    assert stop.closer(loop, inside + '", ') is None, "after a comma: a new item must follow"


def test_a_long_prose_string_is_closed_at_its_bound_or_near_the_end_of_the_call() -> None:
    stop = _stop(prose=frozenset({"summary"}), prose_tokens=10, max_tokens=100)
    assert not stop.too_long(HEAD, 20)  # opened at token 20
    assert not stop.too_long(HEAD + "abc", 29)
    assert stop.too_long(HEAD + "abcd", 30), "ten tokens into the string"
    late = _stop(prose=frozenset({"summary"}), prose_tokens=1000, max_tokens=100)
    assert not late.too_long(HEAD, 50) and late.too_long(HEAD + "x", 80), "24 tokens of the call left"
    assert not _stop(prose=frozenset({"note"}), prose_tokens=1, max_tokens=10).too_long(HEAD + "x" * 50, 9), "not prose"


def test_the_trim_drops_the_repeats_up_to_the_closing_token() -> None:
    pieces = [HEAD, *(["I'm", " disputing", " with", " my", " bank", " now", ". "] * 3), '"}']
    text = "".join(pieces[:-1])
    loop = find_loop(text, early=True)
    assert loop is not None
    closer = len(pieces) - 1
    ((first, end),) = trimmed(list(range(len(pieces))), tuple(pieces), [(loop, closer, "summary", '"')])
    assert end == closer
    kept = json.loads("".join(pieces[:first] + pieces[end:]))
    assert kept["summary"].count("disputing") == 1 and kept["category"] == "billing"
    assert trimmed([0, 1], None, [(loop, 1, "summary", '"')]) == [], "pieces unknown: nothing dropped"
    assert trimmed([0, 1], ("a", "b"), [(None, 1, "summary", '"')]) == [], "closed at the bound: nothing dropped"


def test_the_trim_among_labels_keeps_whole_items() -> None:
    head = '{"tags": ["refund'
    pieces = [head, *(['",', ' "', "card", '",', ' "', "refund"] * 3)]
    text = "".join(pieces)
    loop = find_loop(text)
    assert loop is not None and loop.path == "tags[]"
    pieces.append('"]}')
    ((first, end),) = trimmed(list(range(len(pieces))), tuple(pieces), [(loop, len(pieces) - 1, "tags[]", '"]')])
    assert json.loads("".join(pieces[:first] + pieces[end:]))["tags"] in (["refund", "card", "refund"], ["refund", "card"])


def test_the_trimmed_steps_become_their_least_certain_one() -> None:
    import torch

    from accord.backends.local._steps import StepRecorder

    recorder = StepRecorder(sampling=False)
    recorder.tops = [torch.tensor([5.0, 1.0]), torch.tensor([3.0, 2.9]), torch.tensor([4.0, 2.0]), torch.tensor([9.0, 0.0])]
    recorder.logprobs, recorder.times = [-0.1] * 4, [0.0] * 4
    recorder.collapse(1, 3)
    assert [round(m, 3) for m in recorder.margins] == [4.0, 0.1, 9.0]


def test_a_closer_lets_the_models_own_layout_put_a_new_line_and_an_indent_before_a_bracket() -> None:
    from accord.backends.local._loops import consumed

    assert consumed('"', '"]') == ("]", True)
    assert consumed("\n  ", "]") == ("]", True), "an indented layout's gap before the bracket"
    assert consumed("\n  ],", "]") == ("", True)
    assert consumed('"\n  ]', '"]') == ("", True)
    assert consumed(" ", '"') == ('"', False), "inside a string a space is text, not layout"
    assert consumed("x", "]") == ("]", False)
