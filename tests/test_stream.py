"""``stab.stream(prompt)`` / ``astream``: the first ballot's partial values as it is written, then
the Result, the last event saying when the gate or the vote changed the answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import pytest

import accord
from accord import Completion, Decided, Partial, Request, Retry, Stabilizer, Usage, Vote, models
from accord.run._partial import Partials
from reviews import GOOD, OTHER, Review


class Typing(accord.models.Backend):
    """Writes each scripted text a few characters at a time (``stream``), or at once (``generate``).

    ``streamed`` / ``generated`` record which ballot slots came through which method.
    """

    fingerprint = "typing"  # the model's name, so a ledger can key its answers

    def __init__(self, texts: list[str], step: int = 4, blocking: bool = False) -> None:
        self.texts = list(texts)
        self.step = step
        self.blocking = blocking
        self.streamed: list[int] = []
        self.generated: list[int] = []
        self._lock = threading.Lock()

    def _next(self) -> str:
        with self._lock:
            return self.texts.pop(0)

    def generate(self, request: Request) -> Completion:
        self.generated.append(request.ballot)
        return Completion(self._next(), usage=Usage(10, 5))

    def stream(self, request: Request) -> Iterator[str | Completion]:
        self.streamed.append(request.ballot)
        text = self._next()
        for i in range(0, len(text), self.step):
            yield text[i : i + self.step]
        yield Completion(text, usage=Usage(10, 5))

    async def astream(self, request: Request) -> AsyncIterator[str | Completion]:
        for item in self.stream(request):
            await asyncio.sleep(0)
            yield item


def events(stab: Stabilizer[Any], prompt: str = "q") -> tuple[list[Partial[Any]], Decided[Any]]:
    found = list(stab.stream(prompt))
    *partials, last = found
    assert isinstance(last, Decided) and all(isinstance(p, Partial) for p in partials)
    return partials, last  # type: ignore[return-value]


def aevents(stab: Stabilizer[Any], prompt: str = "q") -> tuple[list[Partial[Any]], Decided[Any]]:
    async def collect() -> list[Any]:
        return [event async for event in stab.astream(prompt)]

    *partials, last = asyncio.run(collect())
    assert isinstance(last, Decided)
    return partials, last


@pytest.mark.parametrize("collect", [events, aevents], ids=["stream", "astream"])
@pytest.mark.parametrize("blocking", [False, True], ids=["in place", "threads"])
def test_the_first_ballot_streams_as_partial_values_then_the_result(collect: Any, blocking: bool) -> None:
    model = Typing([GOOD, GOOD, GOOD], blocking=blocking)
    partials, decided = collect(Stabilizer(model, schema=Review, vote=Vote(k=3, gate=None)))
    assert "".join(p.text for p in partials[-1:]) == GOOD and [p.text for p in partials] == [GOOD[: i + 4] for i in range(0, len(GOOD), 4)]
    assert partials[0].data is None or partials[0].data == {}
    assert any(p.data == {"stars": 4} and p.value is None for p in partials)  # a field in, the rest to come
    assert partials[-1].value == Review(stars=4, sentiment="positive")
    assert decided.result.value == partials[-1].value and decided.changed is False and decided.value == decided.result.value
    assert model.streamed == [0] and sorted(model.generated) == [1]  # only the first ballot streams


def test_unfinished_strings_grow_and_unfinished_numbers_wait() -> None:
    reader = Partials(accord.Schema.of(Review))
    assert reader.feed(0, 1, '{"stars": 4').data == {}  # 4 may be the start of 42
    assert reader.feed(0, 1, '2, "sentiment": "posi').data == {"stars": 42, "sentiment": "posi"}
    last = reader.feed(0, 1, 'tive"}')
    assert last.data == {"stars": 42, "sentiment": "positive"} and last.value is None  # 42 stars never validates
    assert reader.feed(0, 2, '{"stars": 4, "sentiment": "neg').value is None  # a retry starts afresh; "neg" is no sentiment yet
    assert reader.feed(0, 2, 'ative"').value == Review(stars=4, sentiment="negative")  # whole, though the object is still open


def test_the_last_event_says_when_the_vote_changed_the_answer() -> None:
    model = Typing([OTHER, GOOD, GOOD])  # the first ballot says 2 stars; the vote says 4
    partials, decided = events(Stabilizer(model, schema=Review, vote=Vote(k=3, gate=None)))
    assert partials[-1].value is not None and partials[-1].value.stars == 2
    assert decided.result.value is not None and decided.result.value.stars == 4 and decided.changed is True


def test_a_retry_of_the_first_ballot_streams_again_from_the_start() -> None:
    model = Typing(['{"stars": 9, "sentiment": "positive"}', GOOD])
    partials, decided = events(Stabilizer(model, schema=Review, vote=Vote(k=1, gate=None)))
    attempts = [p.attempt for p in partials]
    assert attempts == sorted(attempts) and set(attempts) == {1, 2}
    retried = [p for p in partials if p.attempt == 2]
    assert retried[0].text == GOOD[:4] and retried[-1].text == GOOD
    assert all(p.value is None for p in partials if p.attempt == 1)  # 9 stars never validates
    assert decided.changed is False and decided.result.value == Review(stars=4, sentiment="positive")


def test_a_failed_run_ends_the_stream_with_its_error_not_an_exception() -> None:
    stab = Stabilizer(Typing(["nope"] * 4), schema=Review, vote=Vote(k=1, gate=None), retry=Retry(attempts=2))
    partials, decided = events(stab)
    assert [p.text for p in partials] == ["nope", "nope"]
    assert isinstance(decided.result.error, accord.InvalidOutput) and decided.changed is True and decided.value is None


def test_a_backend_that_cannot_stream_gives_its_whole_text_once() -> None:
    partials, decided = events(Stabilizer(models.scripted([GOOD] * 3), schema=Review, vote=Vote(k=3, gate=None)))
    assert [p.text for p in partials] == [GOOD] and partials[0].value == decided.value


def test_a_choice_has_a_value_once_the_word_is_whole() -> None:
    model = Typing(["positive"] * 3, step=3)
    partials, decided = events(Stabilizer(model, schema=Literal["positive", "negative"], vote=Vote(k=3, gate=None)))
    assert [(p.text, p.value) for p in partials] == [("pos", None), ("positi", None), ("positive", "positive")]
    assert decided.value == "positive"


def test_a_ledger_replay_streams_only_the_decision(tmp_path: Any) -> None:
    with accord.Ledger(tmp_path / "l.sqlite3") as ledger:
        stab = Stabilizer(Typing([GOOD] * 6), schema=Review, vote=Vote(k=3, gate=None), ledger=ledger)
        first, _ = events(stab)
        partials, decided = events(stab)
    assert first and partials == [] and decided.result.replayed


def test_stream_and_run_decide_the_same() -> None:
    texts = [OTHER, GOOD, OTHER, GOOD, GOOD]
    ran = Stabilizer(Typing(texts), schema=Review, vote=Vote(k=5, gate=None)).run("q")
    _, streamed = events(Stabilizer(Typing(texts), schema=Review, vote=Vote(k=5, gate=None)))
    assert (streamed.result.value, streamed.result.votes, streamed.result.calls) == (ran.value, ran.votes, ran.calls)


def test_a_reader_that_stops_early_abandons_the_run_quietly() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stab = Stabilizer(Typing([GOOD] * 6), schema=Review, vote=Vote(k=3, gate=None), telemetry=accord.Telemetry(tracer_provider=provider))
    stream = stab.stream("q")
    assert isinstance(next(stream), Partial)
    stream.close()
    [run] = [s for s in exporter.get_finished_spans() if s.name == "accord.run"]
    assert (run.attributes or {})["accord.outcome"] == "abandoned"
    exporter.clear()
    list(stab.stream("again"))
    spans = exporter.get_finished_spans()
    calls = [dict(s.attributes or {}) for s in spans if s.name != "accord.run"]
    [first] = [a for a in calls if a["accord.ballot.slot"] == 0]
    waited = first["gen_ai.response.time_to_first_chunk"]
    assert first["gen_ai.request.stream"] is True and isinstance(waited, float) and waited >= 0
    assert len(calls) == 2 and all("gen_ai.request.stream" not in a for a in calls if a["accord.ballot.slot"] != 0)


@pytest.mark.model
@pytest.mark.parametrize("collect", [events, aevents], ids=["stream", "astream"])
def test_the_local_model_streams_its_first_ballot(local_model: Any, collect: Any) -> None:
    from pydantic import BaseModel

    class Who(BaseModel):
        name: str
        age: int

    stab = Stabilizer(local_model, schema=Who, vote=Vote(k=3, gate=None))
    partials, decided = collect(stab, "Extract the person: Alice is 30 years old.")
    first = next(b for b in decided.result.ballots if b.slot == 0)
    assert len(partials) > 3 and partials[-1].text == first.text
    assert all(first.text.startswith(p.text) for p in partials)  # each Partial is a prefix of what the ballot wrote
    assert partials[-1].value == first.value and decided.value == stab.run("Extract the person: Alice is 30 years old.").value


@pytest.mark.server
@pytest.mark.parametrize("collect", [events, aevents], ids=["stream", "astream"])
def test_the_server_streams_its_first_ballot(openai_server: str, collect: Any) -> None:
    from accord.backends.openai._caps import Capabilities

    model = models.openai(base_url=openai_server, capabilities=Capabilities(), max_tokens=24)
    stab = Stabilizer(model, schema=int, vote=Vote(k=1, gate=None))
    partials, decided = collect(stab, "What is 2 + 2? Answer with the number only.")
    [ballot] = decided.result.ballots
    assert len(partials) >= 1 and partials[-1].text == ballot.text and all(ballot.text.startswith(p.text) for p in partials)
    assert ballot.usage.prompt_tokens and ballot.usage.completion_tokens  # the usage chunk came at the end
    assert ballot.finish_reason in ("stop", "length")


def test_the_local_streamer_reads_row_0_stops_at_the_end_and_waits_for_whole_characters() -> None:
    torch = pytest.importorskip("torch")
    from accord.backends.local._deltas import TextDeltas

    class Bytes:
        """Token i is byte i; a cut multi-byte character decodes to U+FFFD, as a byte-level BPE does."""

        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return bytes(ids).decode("utf-8", errors="replace")

    got: list[str] = []
    streamer = TextDeltas(Bytes(), ends=0, hand=got.append)
    streamer.put(torch.tensor([[1, 2, 3], [4, 5, 6]]))  # the prompt, in a batch with a neighbour: skipped
    for ours, neighbour in [(ord("h"), 70), (ord("i"), 71), (0xC3, 72), (0xA9, 73), (0, 74), (ord("x"), 75)]:
        streamer.put(torch.tensor([ours, neighbour]))  # one step: a token per row
    streamer.end()
    assert got == ["h", "i", "é"]  # "é" waits for its second byte; nothing after the end token
