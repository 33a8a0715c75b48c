"""The closed list of what a reading may change, and of what it refuses: one table, every reader.

A reading may change how a value is written, never which value it is. Every reader (the whole
answer in ``_extract``, a field, a list item or a union member in ``_normalize``, a candidate
bent toward the schema in ``_coerce``, the bare answer in ``_bare``) asks this module; none keeps
a list of its own. :data:`ALLOWED` names every coercion a reading may apply, each recorded in
``coercions`` when applied; :data:`REFUSED` names every kind of refusal, each a
:class:`Refusal` whose message is the retry's feedback. The word lists below are the data the
rules read; docs/parsing.md prints both tables (``tests/test_parsing_rules.py`` keeps it true).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ._jsonish import NotJson

# -- the two lists -------------------------------------------------------------------------------

ALLOWED: dict[str, str] = {
    "case and spacing": "a member, a key, a yes/no word or a code in another case or spacing ('BUG' as 'bug', 'usd' as 'USD')",
    "quotes, emphasis, a fence": "what wraps the value: quotes, markdown emphasis, a closing '.', a code fence",
    "JSON written loosely": "the lenient reader's repairs (unquoted keys, single quotes, trailing commas, comments, ...)",
    "a string for a number": "'31' as 31; a number written another way as docs/parsing.md lists it ('$1,234.50', '1/2', '45%')",
    "a unit the text names": "a currency sign or code, a percent sign, a unit written onto the number ('12 EUR' as 12)",
    "a yes/no word": "'yes', 'no', 'true', 'false', 'y', 'n' (any case, wrapped) as true or false",
    "a member named in prose": "'Positive: it came on time' as 'positive': one member, no doubt in its sentence",
    "one number in prose": "'The answer is 42.' as 42; an equation's result ('2 + 3 = 5' as 5)",
    "a null-like": "'', 'N/A', 'null', 'None', '-' as null where the schema takes null and no free text",
    "a list spelled in a string": "'a, b, c' or \"['a', 'b']\" as the list it spells, where the schema wants a list",
    "one value as a list": "a single value (no separator in it) as a one-element list, and a one-element list as its element",
    "a number as a string": "12345 as '12345' where the schema wants a string",
    "a key written another way": "'firstName' as 'first_name', when exactly one property matches",
    "a missing nullable field": "a required field that may be null, missing from a complete object, as null",
    "a label once": "in a list of labels ('tags', 'keywords'), an item that repeats an earlier label in another case or "
                    "spacing ('Billing' after 'billing'), or that is no label (', '), dropped",
    "the answer marked final": "of several different values, the one after 'final answer:' or 'correction:', last in the text",
}

REFUSED: dict[str, str] = {
    "ambiguous": "two or more different values in one text (a draft, an example, a correction): answer once",
    "several": "several members, numbers or yes/no answers in one text, or the choices listed",
    "negated": "a negation in the value's clause ('not billing', 'isn't positive', 'neither')",
    "hedged": "a hedge in the value's sentence ('I think billing', 'billing, I guess', 'could be', 'positive?')",
    "unknown": "an answer that says it does not know ('no idea', 'no clue', 'no way to tell', 'no information')",
    "contradiction": "a yes/no that says both ('yes and no', 'Yes, it isn't.')",
    "ordinal": "an ordinal or a rank where a count belongs ('2nd highest', '#2', 'ranked 3')",
    "bool_for_number": "true or false where the schema wants a number",
    "number_for_bool": "a number (1, 0, '1') or on/off where the schema wants true or false",
    "list_in_string": "a string that holds a list in no one way ('a, b and c', a bracket that does not read)",
    "number_form": "a number with two readings ('1,234' for a float, '0,5'), or one too long to read",
    "range": "a range ('40-45', 'between 4 and 5')",
    "estimate": "an estimate or a bound ('about 40', '40+', 'at least 3')",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A text that names no single value: ``msg`` says why (the retry's feedback), ``kind`` names
    the class (a key of :data:`REFUSED`)."""

    msg: str
    kind: str

    def error(self, loc: tuple[Any, ...] = ()) -> dict[str, Any]:
        return {"loc": loc, "msg": self.msg, "type": self.kind}


# -- the data the rules read ------------------------------------------------------------------------

NEGATORS = frozenset({"not", "no", "never", "neither", "nor", "none", "hardly", "barely", "without", "cannot", "nothing"})
HEDGES = frozenset({"maybe", "perhaps", "possibly", "probably", "likely", "unlikely", "arguably", "unclear", "unsure",
                    "uncertain", "somewhat", "partly", "partially", "sometimes", "either", "or", "guess", "guessing",
                    "depends", "might", "could", "think", "thinks", "seems", "seem", "seemingly", "apparently",
                    "presumably", "suppose", "believe", "assume", "assuming", "if", "unless", "whether", "may",
                    "probable", "possible", "supposedly", "reckon"})
HEDGE_PHRASES = ("looks like", "sounds like", "kind of", "sort of", "i'd say", "i would say", "not really", "more or less",
                 "if anything", "at a guess", "best guess", "my guess", "not certain", "can't be sure", "cannot be sure")
UNKNOWNS = ("no idea", "no clue", "no way to tell", "no way to know", "no way of knowing", "no way of telling",
            "no information", "no info", "no data", "not enough information", "not enough info", "insufficient information",
            "unknown", "not known", "don't know", "do not know", "dont know", "can't tell", "cannot tell", "can not tell",
            "can't say", "cannot say", "hard to say", "hard to tell", "impossible to say", "impossible to tell", "not sure",
            "unsure", "undetermined", "indeterminate", "cannot be determined", "can't be determined", "not specified",
            "unspecified", "not stated", "not mentioned", "not provided", "no answer", "unanswerable")
ORDINAL_SUFFIXES = frozenset({"st", "nd", "rd", "th"})
RANKS = frozenset({"rank", "ranked", "ranking", "place", "placed", "position"})
YES_NO = {"yes": True, "true": True, "y": True, "no": False, "false": False, "n": False}
NOT_YES_NO = frozenset({"1", "0", "1.0", "0.0", "on", "off", "t", "f"})  # what pydantic would take for a bool, refused
NULL_LIKES = frozenset({"", "null", "none", "nil", "n/a", "na", "n.a.", "-", "—"})

_WORDS = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_CLAUSE = re.compile(r"[.;:!?,\n]|\s[-–—]\s")  # a negation stays in its clause
_SENTENCE = re.compile(r"[.;:!?\n]|\s[-–—]\s")  # a hedge or an unknown reaches over its sentence
# Before a value, a colon ends no clause: "not Category: billing", "I think: billing" (after it,
# it does: "Positive: it was not late" explains the answer).
_HEAD_CLAUSE = re.compile(r"[.;!?,\n]|\s[-–—]\s")
_HEAD_SENTENCE = re.compile(r"[.;!?\n]|\s[-–—]\s")
_MARKED = re.compile(
    r"(?:final\s+answer|corrected\s+answer|correct\s+answer|revised\s+answer|updated\s+answer|actual\s+answer|"
    r"real\s+answer|my\s+answer|correction)[\s*_]*(?:(?:is|would\s+be|will\s+be)\b)?[\s*_]*[:=\-–—]?[\s*_]*"
    r"(?:```[A-Za-z0-9_+-]*\s*)?\Z", re.I)
_NOT_FINAL = frozenset({"example", "examples", "sample", "format", "template", "draft", "guess", "first", "initial",
                        "previous", "old", "wrong", "incorrect", "not", "schema", "shape", "placeholder", "like", "eg",
                        "hypothetical", "suppose", "instance"})
_LIST_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_GROUPED_DIGITS = re.compile(r"\d,\d")
_PIECE_STRUCTURE = re.compile(r"[\[\]{}()]|^[\"']|[\"']$")  # a piece of broken structure, not an item


# -- the rules --------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    """The words of a text, casefolded (letters, with an inner apostrophe: ``isn't``)."""
    return [w.casefold().replace("’", "'") for w in _WORDS.findall(text)]


def quote(text: str) -> str:
    """A text as a refusal or a coercion quotes it: one line, at most 60 characters."""
    text = " ".join(text.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def negator(word: str) -> bool:
    return word in NEGATORS or word.endswith("n't")


def _has(said: list[str], phrases: tuple[str, ...]) -> str | None:
    joined = f" {' '.join(said)} "
    return next((p for p in phrases if f" {p} " in joined), None)


def unknown(text: str) -> Refusal | None:
    """Why the text says it does not know (``no idea``, ``no way to tell``), or None."""
    found = _has(words(text), UNKNOWNS)
    if found is None:
        return None
    return Refusal(f"{quote(text)} says it does not know ({found!r}): answer with the value, or say none is given", "unknown")


def sentence_around(before: str, after: str) -> list[str]:
    """The words of the sentence a value stands in, before it and after it ("|" where it stands)."""
    return [*words(_HEAD_SENTENCE.split(before)[-1]), "|", *words(_SENTENCE.split(after)[0])]


def hedged(said: list[str]) -> bool:
    """Whether words hold a hedge word or a hedging phrase."""
    return any(w in HEDGES for w in said) or _has(said, HEDGE_PHRASES) is not None


def doubt(before: str, after: str, text: str) -> Refusal | None:
    """Why the words around a value make it no answer: an unknown anywhere in the text (``billing.
    No idea, really``); a negation in its clause (before it, or in the three words after it); a
    hedge word or a hedging phrase in its sentence, before or after it (``I think billing``,
    ``billing, I guess``, ``billing (not sure)``); a question mark."""
    sentence = sentence_around(before, after)
    if _has(words(text), UNKNOWNS) is not None:
        return Refusal(f"{quote(text)} says it does not know: say the one value meant", "unknown")
    head = words(_HEAD_CLAUSE.split(before)[-1])
    tail = words(_CLAUSE.split(after)[0])[:3]
    if any(negator(w) for w in head) or any(negator(w) for w in tail):
        return Refusal(f"{quote(text)} negates its answer: say the one value meant", "negated")
    if hedged(sentence) or "?" in text:
        return Refusal(f"{quote(text)} hedges its answer: say the one value meant", "hedged")
    return None


def rank(before: str, number: str, after: str, text: str) -> Refusal | None:
    """Why a number in a text is a rank or an ordinal, not a count (``2nd``, ``#2``, ``ranked 3``,
    ``in place 2``), or None."""
    tail = re.match(r"\d[\d.,]*([A-Za-z]*)", number.lstrip("#"))
    said = words(_CLAUSE.split(before)[-1]) + words(_CLAUSE.split(after)[0])[:3]
    if (number.startswith("#") or (tail is not None and tail.group(1).casefold() in ORDINAL_SUFFIXES)
            or any(w in RANKS for w in said)):
        return Refusal(f"{quote(text)} is a rank or an ordinal, not a count: write the number itself", "ordinal")
    return None


def yes_no(text: str) -> bool | Refusal | None:
    """A yes/no word alone (any case, wrapped in nothing): its value; a number or on/off: a
    :class:`Refusal`; anything else: None (prose, read by ``_words.boolean``)."""
    folded = text.strip().casefold()
    if folded in YES_NO:
        return YES_NO[folded]
    if folded in NOT_YES_NO:
        kind = "a number" if folded[:1].isdigit() else "not a yes/no"
        return Refusal(f"{quote(text)} is {kind}: answer true or false", "number_for_bool")
    return None


def bool_for_number(value: Any) -> Refusal:
    return Refusal(f"{'true' if value else 'false'} is a yes/no, not a number: write the number", "bool_for_number")


def number_for_bool(value: Any) -> Refusal:
    return Refusal(f"{value!r} is a number, not a yes/no: answer true or false", "number_for_bool")


def spelled_list(text: str, parse: Any) -> list[Any] | Refusal | None:
    """The list a string spells where the schema wants a list, or why it spells none for sure.

    ``['a', 'b']`` or ``(a, b)``: the list it writes (``parse`` reads it, JSON-like); ``- ``
    items on lines, ``;`` or ``,``: the pieces, trimmed. Refused: a bracket that does not read as a
    list, an empty piece, ``or`` or ``and`` among the pieces (a choice, or a list in no one way),
    a piece holding a bracket or quoted at one end only (broken structure), a comma between digits
    (``1,234``: one number, or two?), lines that are not all items, an empty string. None: no
    separator (one value)."""
    s = text.strip()
    if not s:
        return Refusal("an empty string holds no list: write a JSON list", "list_in_string")
    if s[0] in "[(" and s[-1] in "])":
        return _bracketed(text, s, parse)
    pieces = _pieces(text, s)
    if not isinstance(pieces, list):
        return pieces
    if (len(pieces) < 2 and "\n" not in s and not _LIST_BULLET.match(s)) or any(
            not p or {"and", "or"} & set(words(p)) or _PIECE_STRUCTURE.search(p) for p in pieces):
        return Refusal(f"{quote(text)} holds a list in no one way: write a JSON list", "list_in_string")
    return pieces


def _bracketed(text: str, s: str, parse: Any) -> list[Any] | Refusal:
    """The list a bracketed string (``s``, stripped) writes, read JSON-like (``(a, b)`` as ``[a, b]``)."""
    try:
        found = parse("[" + s[1:-1] + "]" if s[0] == "(" and s[-1] == ")" else s)
    except (ValueError, RecursionError, NotJson):  # a bracket that does not read: no list for sure
        found = None
    if isinstance(found, list):
        return found
    return Refusal(f"{quote(text)} writes a list inside a string that does not read as one: write a JSON list", "list_in_string")


def _pieces(text: str, s: str) -> list[str] | Refusal | None:
    """The pieces of a list spelled without brackets (``s``, stripped): ``- `` items on lines, then
    ``;``, then ``,``; None where there is no separator (one value)."""
    if "\n" in s or _LIST_BULLET.match(s):
        lines = [line for line in s.splitlines() if line.strip()]
        if not all(_LIST_BULLET.match(line) for line in lines):  # lines, some not items: one text, or a list?
            return Refusal(f"{quote(text)} holds lines, not items: write a JSON list", "list_in_string")
        pieces = [_LIST_BULLET.sub("", line).strip() for line in lines]
    elif ";" in s:
        pieces = [p.strip() for p in s.split(";")]
    elif "," in s:
        if _GROUPED_DIGITS.search(s):
            return Refusal(f"{quote(text)} may be one number or a list: write a JSON list", "list_in_string")
        pieces = [p.strip() for p in s.split(",")]
    else:
        return None
    return pieces


def marked_final(text: str, start: int) -> bool:
    """Whether the value at ``start`` is marked as the final answer: right after ``final answer:``,
    ``correction:``, ``my answer:`` (``is``, a colon, emphasis, a fence between them), with no word
    of an example or a draft before the mark in its sentence (``Example format:``, ``my first
    answer``)."""
    before = text[max(0, start - 160) : start]
    mark = _MARKED.search(before)
    if mark is None:
        return False
    lead = words(_SENTENCE.split(before[: mark.start()])[-1].replace("e.g.", " eg "))
    return not any(w in _NOT_FINAL or negator(w) for w in lead)
