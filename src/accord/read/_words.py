"""What a word in a model's answer says: a choice, a yes/no, a null, or a refusal with its reason.

One reading at every depth: the same functions read the whole answer (``_extract``) and a field,
a list item or a union member (``_normalize``), so a text gets the same value wherever it stands.
Each returns the value and the coercion it took (``None`` when the text is the value's own word,
up to case and space), a :class:`Refusal` that says why the text is no value, or ``None`` when
the text does not name one at all.

Refused, never read as the member they name:

- a negated choice or answer: ``not positive``, ``isn't neutral``, ``definitely not true``;
- a hedged one: ``maybe positive``, ``probably yes``, ``positive?``;
- a self-contradicting or undecided one: ``positive or negative``, ``yes and no``, ``neither``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from ._coercions import (
    HEDGES,
    NEGATORS,
    NULL_LIKES,
    YES_NO,
    Refusal,
    doubt,
    hedged,
    negator,
    quote,
    sentence_around,
    unknown,
    words,
    yes_no,
)

__all__ = ["HEDGES", "NEGATORS", "STRUCTURE", "Refusal", "boolean", "choice", "fold", "mentions", "null_like", "trim"]

_YES = frozenset(w for w, v in YES_NO.items() if v)
_NO_WORDS = frozenset(w for w, v in YES_NO.items() if not v)
_SAID = frozenset({"yes", "true", "no", "false"})
_EMPHASIS = "*_`"
STRUCTURE = re.compile(r'[{}\[\]"]')  # what prose inside a JSON string never holds: a piece of broken structure
_QUOTES = "\"'“”‘’"
# A yes/no word where an answer starts: the text's start, after a sentence's end, a colon, an equals
# sign or a bracket (quotes and emphasis between): "No. ...", "Correction: yes", '{"answer": true}'.
_OPENING = re.compile(r"(?:\A|[.!?;:=\n(\[{])[\s\"'*_`]*(yes|no|true|false)\b", re.I)


def fold(value: str) -> str:
    """Text compared case- and whitespace-insensitively (NFC first)."""
    return " ".join(unicodedata.normalize("NFC", value).split()).casefold()


def trim(text: str) -> str:
    """A bare answer without what wraps it: space, quotes, backticks, markdown emphasis
    (``**Positive**``) and a closing ``.`` or ``!``."""
    out = text.strip()
    for _ in range(3):
        before = out
        out = out.strip().strip(_EMPHASIS).strip()
        if (len(out) >= 2 and out[0] == out[-1] and out[0] in _QUOTES) or (out[:1] in "“‘" and out[-1:] in "”’"):
            out = out[1:-1]
        out = out.rstrip(".!").strip()
        if out == before:
            break
    return out


def choice(text: str, members: list[Any] | tuple[Any, ...], nested: bool = False) -> tuple[Any, str | None] | Refusal | None:
    """The one string member the text names: ``(member, coercion)``, a :class:`Refusal`, or None.

    The text as a member's word (up to case and space, recorded unless it is the member as
    written, then without what :func:`trim` strips); else exactly one member named as a whole word
    in prose (``Positive: the parcel came``), with no negation in its clause and no hedge or
    unknown in its sentence (``_coercions.doubt``). Two members named, or none with a negation,
    a hedge or an unknown, are refused. ``nested``: the text is a string inside JSON-like data,
    read in prose only when it holds none of JSON's brackets or quotes (a piece of broken
    structure is not prose). Members joined by ``|`` (a signature echoed) are refused."""
    named_words = [m for m in members if isinstance(m, str)]
    if not named_words:
        return None
    found = _as_word(text, named_words)
    if found is not None:
        return found
    if "|" in text:
        return Refusal(f"{quote(text)} lists the choices instead of choosing: answer with exactly one", "several")
    if nested and STRUCTURE.search(text):
        return None
    return _in_prose(text, named_words)


def _as_word(text: str, named_words: list[str]) -> tuple[str, str | None] | None:
    """The member whose word the text is, up to case and space (recorded unless it is the member
    as written), then without what :func:`trim` strips; None when it is no member's word."""
    folded = fold(text)
    for m in named_words:
        if fold(m) == folded:
            return m, None if text.strip() == m else f"{quote(text)} as the member {m!r}"
    bare = fold(trim(text))
    exact = [m for m in named_words if fold(m) == bare]
    return (exact[0], f"{quote(text)} as the member {exact[0]!r}") if len(exact) == 1 else None


def _in_prose(text: str, named_words: list[str]) -> tuple[str, str | None] | Refusal | None:
    """The one member named as a whole word in prose, with no negation or doubt about it; two
    members named, or none with a negation, a hedge or an unknown, are refused."""
    spans = mentions(text, named_words)
    named = {m for _, _, m in spans}
    if len(named) > 1:
        return Refusal(f"{quote(text)} names more than one choice ({', '.join(map(repr, sorted(named)))}): "
                       "answer with exactly one", "several")
    if not named:
        said = unknown(text)
        if said is not None:
            return said
        said_words = words(text)
        if any(negator(w) for w in said_words) or any(w in HEDGES for w in said_words):
            return Refusal(f"{quote(text)} names none of the choices: answer with exactly one", "negated")
        return None
    for start, end, _ in spans:
        why = doubt(text[:start], text[end:], text)
        if why is not None:
            return why
    member = spans[0][2]
    return member, f"{quote(text)} as the member {member!r}"


def mentions(text: str, members: list[str]) -> list[tuple[int, int, str]]:
    """Where each member is named in the text as a whole word (the longest member at a place)."""
    spans: list[tuple[int, int, str]] = []
    for m in sorted(members, key=len, reverse=True):
        if not m.strip():
            continue
        for found in re.finditer(rf"(?<!\w){re.escape(m)}(?!\w)", text, re.I):
            if not any(s < found.end() and found.start() < e for s, e, _ in spans):
                spans.append((found.start(), found.end(), m))
    return spans


def boolean(text: str) -> tuple[bool, str | None] | Refusal | None:
    """The yes/no the text opens with (in its first three words): ``(value, coercion)``, a
    :class:`Refusal`, or None.

    Refused: a number or on/off (``1``, ``off``); a text that says it does not know (``no idea``,
    ``no way to tell``); a contradiction in the words after it (``yes and no``, ``yes, it isn't``);
    a negation before it (``not true``); a hedge in its sentence (``yes, I think``, ``maybe yes``)
    or a question mark; and another yes/no of the other value where an answer starts later in the
    text (``Yes. Correction: no``). The coercion is None only for JSON's ``true`` and ``false``."""
    alone = yes_no(text)
    if isinstance(alone, Refusal):
        return alone
    if alone is not None:
        return alone, None if text.strip() in ("true", "false") else f"{quote(text)} as {'true' if alone else 'false'}"
    why = unknown(text)
    if why is not None:
        return why
    said = words(text)
    at = next((i for i, w in enumerate(said[:3]) if w in _SAID), None)  # "y" and "n" only alone (not the n of N/A)
    return None if at is None else _opening(text, said, at)


def _opening(text: str, said: list[str], at: int) -> tuple[bool, str | None] | Refusal:
    """The yes/no word ``said[at]`` among the text's first three: its value, unless the words
    around it contradict, negate or hedge it, or a later answer says the other."""
    word = said[at]
    value = YES_NO[word]
    head, tail = said[:at], said[at + 1 : at + 5]
    if any(w in (_NO_WORDS if value else _YES) for w in tail):
        return Refusal(f"{quote(text)} says both yes and no: answer one", "contradiction")
    if any(negator(w) for w in head) or (value and any(negator(w) for w in tail)):
        return Refusal(f"{quote(text)} negates its answer: answer yes or no", "negated")
    where = re.search(rf"(?<![^\W\d_]){word}(?![^\W\d_])", text, re.I)
    around = said if where is None else sentence_around(text[: where.start()], text[where.end() :])
    if hedged(around) or "?" in text:
        return Refusal(f"{quote(text)} hedges its answer: answer yes or no", "hedged")
    if any(YES_NO[m.group(1).casefold()] != value for m in _OPENING.finditer(text)):
        return Refusal(f"{quote(text)} gives both yes and no as its answer: answer once", "several")
    return value, f"{quote(text)} as {'true' if value else 'false'}"


def null_like(text: str) -> bool:
    """Whether a string stands for no value where the schema takes null: ``""``, ``null``,
    ``None``, ``N/A``, ``nil``, ``-``."""
    return fold(trim(text)) in NULL_LIKES or fold(text) in NULL_LIKES
