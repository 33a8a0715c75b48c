"""The prompt as Messages content: a system prompt and user/assistant turns. No I/O.

accord builds every prompt as chat messages (``Request.messages``): a system message and worked
examples first when the run has them (``Prompting(system=, examples=)``), then the prompt. The
Messages API takes the system prompt apart (``system=``) and the rest as alternating turns whose
content is a list of blocks; :func:`turns` makes that shape:

    {"role": "system", "content": s}       a text block of ``system``
    {"role": "user"|"assistant", ...}      a turn; consecutive turns of one role become one
    content: a string                      one text block (none when empty: the API refuses
                                           empty text)
    content: parts                         OpenAI's text parts as text blocks; a part that is
                                           already a Messages block (an image, a document) as is

Every block is a fresh dict, so a later stage (:mod:`._cache`) may mark one in place.
"""

from __future__ import annotations

from typing import Any

from ..._types import Message

Block = dict[str, Any]
Turn = dict[str, Any]
_TEXT_PARTS = ("text", "input_text", "output_text")


def turns(messages: list[Message]) -> tuple[list[Block], list[Turn]]:
    """The system blocks and the turns of a chat message list."""
    system: list[Block] = []
    found: list[Turn] = []
    for message in messages:
        role = message.get("role", "user")
        blocks = blocks_of(message.get("content"))
        if role in ("system", "developer"):
            system += blocks
            continue
        role = "assistant" if role == "assistant" else "user"
        if not blocks:
            continue
        if found and found[-1]["role"] == role:
            found[-1]["content"] += blocks
        else:
            found.append({"role": role, "content": blocks})
    return system, found


def blocks_of(content: Any) -> list[Block]:
    """One message's content as Messages blocks (fresh dicts)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_block(content)] if content else []
    if not isinstance(content, list):
        return [text_block(str(content))]
    found: list[Block] = []
    for part in content:
        if isinstance(part, str):
            found += [text_block(part)] if part else []
        elif isinstance(part, dict) and part.get("type") in _TEXT_PARTS:
            found += [text_block(str(part.get("text") or ""))] if part.get("text") else []
        elif isinstance(part, dict):
            found.append(dict(part))
    return found


def text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def chars_of(blocks: list[Block]) -> int:
    """How many characters of text the blocks hold (what the cache estimate counts)."""
    return sum(len(block["text"]) for block in blocks if isinstance(block.get("text"), str))
