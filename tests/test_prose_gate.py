"""The margin gate reads a ballot's decisive steps only: on the real embedded model and a real vLLM.

For a ticket-triage schema with a free-text summary last, one real completion is split at the end
of its last decisive value (``vote/_prefix``, through the text of each step): the decisive steps and
the summary's. With a floor between the smallest margin of the two (the summary's lower), the gate
accepts the ballot alone, and with a floor just above the decisive steps' smallest margin it does
not (it then votes; locally, with no perturbation, the same computation predicts the rest):
which steps the gate reads is what decides, on real margins and real token texts.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

import accord
from accord import MarginGate, Perturb, Request, Schema, Settings, Stabilizer, Vote, models
from accord.backends.openai._caps import Capabilities
from accord.prompt._prompt import build_input
from accord.read._read import Reading, read
from accord.vote._decisive import Decisions
from accord.vote._prefix import prefix


class Ticket(BaseModel):
    category: Literal["billing", "bug", "account", "other"]
    priority: int = Field(ge=1, le=5)
    needs_human: bool
    summary: str


TICKETS = [
    "I was charged twice for my May subscription. Please refund one of the charges as soon as possible.",
    "The app crashes every time I try to export a report as PDF on my Android phone.",
    "I forgot my password and the reset email never arrives. I have checked the spam folder.",
    "Your delivery driver left my parcel in the rain and the box is soaked. What can you do?",
]
PROMPT = "Triage this support ticket. Write a one-sentence summary.\nTicket: {}"


def split(completion: accord.Completion, prompt: str) -> tuple[float, float, int] | None:
    """The smallest margin of the decisive steps and of the rest, and how many steps are decisive;
    None when the completion is not a valid ticket."""
    assert completion.margins is not None and completion.pieces is not None
    assert len(completion.pieces) == len(completion.margins)  # one text per step
    assert completion.text in "".join(completion.pieces)  # the steps spell the text
    schema = Schema.of(Ticket)
    reading = read(completion.text, schema)
    if not isinstance(reading, Reading):
        return None
    n = prefix(completion.text, completion.pieces, len(completion.margins), Decisions(schema.roles(), prompt), reading.form)
    assert 0 < n < len(completion.margins)  # the summary's steps are left out
    return min(completion.margins[:n]), min(completion.margins[n:]), n


def shown(prompt: str) -> Any:
    """The prompt as a run sends it: the schema shown after it (``prompt/_prompt.build_input``)."""
    return build_input(prompt, Schema.of(Ticket), hint=True, feedback=None)


def demonstrate(backend_at: Any, generate: Any) -> None:
    """Find a ticket whose summary has a step below its decisions' smallest margin, then run the
    gate with floors on either side of that margin."""
    for ticket in TICKETS:
        prompt = PROMPT.format(ticket)
        completion = generate(prompt)
        found = split(completion, prompt)
        if found is None:
            continue
        decisive, rest, n = found
        if not rest < decisive:
            continue
        floor = (rest + decisive) / 2
        accepted = Stabilizer(backend_at(floor), Ticket, vote=Vote(k=5, gate=MarginGate(floor), perturb=Perturb(()))).run(prompt)
        assert accepted.stopped_because == "gate" and accepted.calls == 1, accepted
        assert accepted.ballots[0].text == completion.text and accepted.ballots[0].meta["decisive_steps"] == n
        assert accepted.carried == {"summary": 1} and accepted.fragile is False
        above = decisive * 1.01 + 1e-6
        voted = Stabilizer(backend_at(above), Ticket, vote=Vote(k=3, gate=MarginGate(above), perturb=Perturb(()))).run(prompt)
        assert voted.stopped_because != "gate" and voted.ballots[0].fragile_steps  # a decisive step below the floor
        return
    pytest.fail("no ticket's summary had a step below the smallest margin of its decisions")


@pytest.mark.model
def test_the_local_gate_reads_the_decisive_steps_of_a_ticket(local_model: Any) -> None:
    schema = Schema.of(Ticket)

    def generate(prompt: str) -> accord.Completion:
        completion: accord.Completion = local_model.generate(Request(prompt, shown(prompt), schema, Settings(max_tokens=160)))
        return completion

    demonstrate(lambda floor: local_model, generate)


@pytest.mark.vllm
def test_the_gate_over_http_reads_the_decisive_steps_through_the_token_offsets(vllm_server: Any) -> None:
    def backend(floor: float | None = None) -> Any:
        return models.openai(base_url=vllm_server.url, model=vllm_server.model, capabilities=Capabilities(), max_tokens=160,
                             margins=models.Margins(noise_floor=floor))

    probe = backend(1.0)
    schema = Schema.of(Ticket)

    def generate(prompt: str) -> accord.Completion:
        completion: accord.Completion = probe.generate(Request(prompt, shown(prompt), schema, Settings(max_tokens=160)))
        return completion

    demonstrate(backend, generate)
