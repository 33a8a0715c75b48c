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
from dataclasses import dataclass
from typing import Any

NEGATORS = frozenset({"not", "no", "never", "neither", "nor", "none", "hardly", "barely", "without", "cannot", "nothing"})
HEDGES = frozenset({"maybe", "perhaps", "possibly", "probably", "likely", "unlikely", "arguably", "unclear", "unsure",
                    "uncertain", "somewhat", "partly", "partially", "sometimes", "either", "or", "guess", "depends", "might"})
_YES = frozenset({"yes", "true", "y"})
_NO_WORDS = frozenset({"no", "false", "n"})
_BOOLS = {"yes": True, "true": True, "y": True, "no": False, "false": False, "n": False}
_SAID = frozenset({"yes", "true", "no", "false"})
_NULLS = frozenset({"", "null", "none", "nil", "n/a", "na", "n.a.", "-", "—"})
_WORDS = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_CLAUSE = re.compile(r"[.;:!?,()\n]|\s[-–—]\s")
_EMPHASIS = "*_`"
STRUCTURE = re.compile(r'[{}\[\]"]')  # what prose inside a JSON string never holds: a piece of broken structure
_QUOTES = "\"'“”‘’"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A text that names no single value: ``msg`` says why (the retry's feedback), ``kind`` names
    the class ("negated", "hedged", "several", "number_form", ...)."""

    msg: str
    kind: str

    def error(self, loc: tuple[Any, ...] = ()) -> dict[str, Any]:
        return {"loc": loc, "msg": self.msg, "type": self.kind}


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


def _negator(word: str) -> bool:
    return word in NEGATORS or word.endswith(("n't", "n’t"))


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORDS.findall(text)]


def _doubt(before: str, after: str, text: str) -> Refusal | None:
    """Why the words around a named value make it no answer: a negation or a hedge in its clause
    (before it, or within three words after it), or a question mark."""
    head = _words(_CLAUSE.split(before)[-1])
    tail = _words(_CLAUSE.split(after)[0])[:3]
    if any(_negator(w) for w in head) or any(_negator(w) for w in tail):
        return Refusal(f"{_quote(text)} negates its answer: say the one value meant", "negated")
    if any(w in HEDGES for w in head) or any(w in HEDGES for w in tail) or "?" in text:
        return Refusal(f"{_quote(text)} hedges its answer: say the one value meant", "hedged")
    return None


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def choice(text: str, members: list[Any] | tuple[Any, ...], nested: bool = False) -> tuple[Any, str | None] | Refusal | None:
    """The one string member the text names: ``(member, coercion)``, a :class:`Refusal`, or None.

    The text as a member's word (up to case and space, then without what :func:`trim` strips);
    else exactly one member named as a whole word in prose (``Positive: the parcel came``), with no
    negation or hedge in its clause. Two members named, or none with a negation, are refused.
    ``nested``: the text is a string inside JSON-like data, read in prose only when it holds none
    of JSON's brackets or quotes (a piece of broken structure is not prose). Members joined by
    ``|`` (a signature echoed) are refused."""
    words = [m for m in members if isinstance(m, str)]
    if not words:
        return None
    folded = fold(text)
    for m in words:
        if fold(m) == folded:
            return m, None
    bare = fold(trim(text))
    exact = [m for m in words if fold(m) == bare]
    if len(exact) == 1:
        return exact[0], f"{_quote(text)} as the member {exact[0]!r}"
    if "|" in text:
        return Refusal(f"{_quote(text)} lists the choices instead of choosing: answer with exactly one", "several")
    if nested and STRUCTURE.search(text):
        return None
    spans: list[tuple[int, int, str]] = []
    for m in sorted(words, key=len, reverse=True):
        if not m.strip():
            continue
        for found in re.finditer(rf"(?<!\w){re.escape(m)}(?!\w)", text, re.I):
            if not any(s < found.end() and found.start() < e for s, e, _ in spans):  # the longest member at a place
                spans.append((found.start(), found.end(), m))
    named = {m for _, _, m in spans}
    if len(named) > 1:
        return Refusal(f"{_quote(text)} names more than one choice ({', '.join(map(repr, sorted(named)))}): "
                       "answer with exactly one", "several")
    if not named:
        said = _words(text)
        if any(_negator(w) for w in said) or any(w in HEDGES for w in said):
            return Refusal(f"{_quote(text)} names none of the choices: answer with exactly one", "negated")
        return None
    for start, end, _ in spans:
        doubt = _doubt(text[:start], text[end:], text)
        if doubt is not None:
            return doubt
    member = spans[0][2]
    return member, f"{_quote(text)} as the member {member!r}"


def boolean(text: str) -> tuple[bool, str | None] | Refusal | None:
    """The yes/no the text opens with (in its first three words): ``(value, coercion)``, a
    :class:`Refusal` (``not true``, ``maybe yes``, ``yes and no``, ``yes, it isn't``), or None."""
    folded = fold(text)
    if folded in _BOOLS:
        return _BOOLS[folded], None
    said = _words(text)
    at = next((i for i, w in enumerate(said[:3]) if w in _SAID), None)  # "y" and "n" only alone (not the n of N/A)
    if at is None:
        return None
    word = said[at]
    value = _BOOLS[word]
    head, tail = said[:at], said[at + 1 : at + 5]
    if any(w in (_NO_WORDS if value else _YES) for w in tail):
        return Refusal(f"{_quote(text)} says both yes and no: answer one", "contradiction")
    if any(_negator(w) for w in head) or (value and any(_negator(w) for w in tail)):
        return Refusal(f"{_quote(text)} negates its answer: answer yes or no", "negated")
    if any(w in HEDGES for w in head + tail) or "?" in text:
        return Refusal(f"{_quote(text)} hedges its answer: answer yes or no", "hedged")
    return value, f"{_quote(text)} as {'true' if value else 'false'}"


def null_like(text: str) -> bool:
    """Whether a string stands for no value where the schema takes null: ``""``, ``null``,
    ``None``, ``N/A``, ``nil``, ``-``."""
    return fold(trim(text)) in _NULLS or fold(text) in _NULLS
