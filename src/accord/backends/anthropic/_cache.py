"""Prompt caching: the prefix the ballots of one prompt share, marked cacheable. No I/O.

Every ballot of a prompt sends the same prefix: the tool that carries the schema (tool mode), the
system prompt, the examples, the prompt and the schema's rendering. Anthropic bills a prefix
marked ``cache_control: {"type": "ephemeral"}`` at 1.25x the input price the first time (a cache
write) and at 0.1x each time it is read again within five minutes, so k ballots of a long
prompt cost about 1.25 + 0.1 (k - 1) prompts instead of k. With ``spread=True`` (the default)
the ballots of a prompt go one at a time, each after the previous one is answered, so every
ballot after the first finds the prefix written.

A prefix shorter than the model's minimum cacheable length is not cached even when marked (the
mark buys nothing), so :func:`mark` marks only a prefix at least that long (:func:`minimum_for`; the backend's
``cache_min_tokens=`` overrides it). Its length is **estimated** from its text, before any call:
``characters / 4`` tokens (:data:`CHARS_PER_TOKEN`; Claude's tokenizer writes English at about
3.5 characters a token, and code and non-Latin text at fewer, so for Claude the estimate errs
toward not marking; a smaller model's tokenizer may write English at more characters a token),
plus the tool's JSON Schema in tool mode. Images and documents count nothing. The estimate is the
same for every ballot of a prompt, so they all decide alike: one writes, the rest read.

A mark pays only when a later call reads the prefix: a run of one ballot (``Vote(k=1)``) pays the
write (1.25x) and reads nothing, unless the same prompt is asked again within five minutes (a
retry, another run).

On a retry the prompt carries one feedback block after the prefix (:mod:`accord.prompt._prompt`):
it is split off into a block of its own after the mark, so a retry still reads the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._turns import Block, Turn, chars_of, text_block

CHARS_PER_TOKEN = 4
EPHEMERAL = {"type": "ephemeral"}
#: The minimum cacheable prompt length, by model name (Anthropic's table, first match): a newer
#: Haiku and Opus 4.5 and later need 4,096 tokens, Sonnet 4.6 2,048, the older Haikus 2,048.
MINIMUMS = (("haiku-4", 4096), ("opus-4-5", 4096), ("opus-4-6", 4096), ("sonnet-4-6", 2048), ("haiku", 2048))
DEFAULT_MINIMUM = 1024  # every other model (Sonnet 4.5 and 4, Opus 4.1 and 4, ...), and other servers


def minimum_for(model: str) -> int:
    """The minimum cacheable prompt length of a model, in tokens, from its name."""
    name = model.lower().replace(".", "-")
    return next((tokens for part, tokens in MINIMUMS if part in name), DEFAULT_MINIMUM)


def estimate(chars: int) -> int:
    """Tokens, estimated from characters (:data:`CHARS_PER_TOKEN`)."""
    return chars // CHARS_PER_TOKEN


@dataclass(frozen=True)
class Mark:
    """What :func:`mark` decided: the prefix's estimated tokens, the minimum, and whether it was marked."""

    tokens: int
    minimum: int
    marked: bool

    def to_dict(self) -> dict[str, object]:
        return {"marked": self.marked, "estimated_tokens": self.tokens, "minimum": self.minimum}


def mark(system: list[Block], turns: list[Turn], *, feedback: str | None, tool_chars: int, minimum: int) -> Mark:
    """Mark the last block of the shared prefix cacheable, in place, when the prefix is at least
    ``minimum`` tokens (estimated); a trailing ``feedback`` text is split off after the mark first."""
    tail = bool(feedback) and _split_feedback(turns, feedback or "")
    blocks = [*system, *(block for turn in turns for block in turn["content"])]
    end = len(blocks) - (1 if tail else 0)
    tokens = estimate(chars_of(blocks[:end]) + tool_chars)
    marked = end > 0 and tokens >= minimum
    if marked:
        blocks[end - 1]["cache_control"] = dict(EPHEMERAL)
    return Mark(tokens, minimum, marked)


def _split_feedback(turns: list[Turn], feedback: str) -> bool:
    """Whether the last user block is the feedback alone, once split: a block that ends in it
    becomes two, the rest exactly as a first attempt sends it, then the separator and the feedback."""
    if not turns or turns[-1]["role"] != "user":
        return False
    content = turns[-1]["content"]
    text = content[-1].get("text") if content else None
    if not isinstance(text, str) or not text.endswith(feedback):
        return False
    head = text[: len(text) - len(feedback)].rstrip("\n")
    if head:
        content[-1:] = [{**content[-1], "text": head}, text_block(text[len(head):])]
    return True
