"""Every value a model's text may hold, in the order they are preferred on a tie.

Fenced blocks first (closed or cut off at the end of the text), then every JSON-like span in text
order (``{...}`` and ``[...]``, read strictly when they can be and leniently otherwise, see
``_jsonish``), then YAML-like ``key: value`` blocks (nested by indentation, ``- item`` lists).
The count is bounded (``MAX_CANDIDATES``) and so is the work: spans never overlap once read, and
failed attempts together may scan the text only a few times over.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from typing import Any, NamedTuple

from ._jsonish import EXACT, LITERALS, MAX_DIGITS, NULLISH, PLAIN, WORD, Fix, NotJson, Path, parse
from ._locate import WHOLE, fence_body, fence_miss, may_be_json, may_open

MAX_CANDIDATES = 16
MAX_LENIENT_CHARS = 100_000
_MAX_ATTEMPTS = 32
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)(?:```|\Z)", re.S)
_OPEN = re.compile(r"[\[{]")
_KV_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?:[-*+][ \t]+)?(?:\*\*)?[\"']?(?P<key>[A-Za-z_][\w .\-]{0,40}?)[\"']?(?:\*\*)?[ \t]*[:=][ \t]*"
    r"(?:\*\*)?[ \t]*(?P<value>.*)$"
)
_VALUE_WORDS = frozenset(LITERALS) | NULLISH  # the words _jsonish reads as a value (true, None, NaN...)
_ITEM = re.compile(r"^(?P<indent>[ \t]*)[-*+][ \t]+(?P<value>.*?)[ \t]*$")


def _kv(line: str) -> re.Match[str] | None:
    """A ``key: value`` line (its value with the space after it: strip it), or None; a line with no
    ``:`` or ``=`` is none at once."""
    return _KV_LINE.match(line) if ":" in line or "=" in line else None


class Candidate(NamedTuple):
    """One value found in the text: the data, the repairs it needed, where it came from."""

    data: Any
    fixes: tuple[Fix, ...] = ()
    closed: frozenset[Path] = frozenset()
    origin: str = "json"  # "fenced", "json", "key-value", "implied"
    open_end: bool = False  # its last value runs to the end of the text: a cut there would not show
    span: tuple[int, int] = (0, 0)  # where it stands in the text (start, end): two values in one place are one


# The least a candidate of each origin can cost (see ``_read``): once a valid candidate costs no
# more, nothing of that origin or later can beat it, and the text need not be read further.
FLOORS = {"fenced": 0, "json": 0, "key-value": 2, "implied": 4}


def candidates(text: str) -> list[Candidate]:
    """The candidate values in ``text``, deduplicated, at most ``MAX_CANDIDATES``."""
    return list(iter_candidates(text))


def iter_candidates(text: str, misses: Collection[int] = (), enough: Callable[[str], bool] | None = None,
                    known: dict[int, tuple[Any, int]] | None = None, exact: bool = False) -> Iterator[Candidate]:
    """:func:`candidates`, found lazily, in order.

    ``misses``: positions in the text already known to start no JSON value (``-1``: the whole
    text is none), from the strict reading (``_extract.first_json``): not decoded again.
    ``enough(origin)``: asked before the candidates of an origin are looked for (``key-value``);
    True stops the search there (the reader has a candidate that none of them could beat).
    ``known``: values the strict reading decoded, by the start of their span, with its end.
    ``exact``: numbers read as ``_jsonish.Written`` floats (their digits kept, for a Decimal)."""
    seen: list[Any] = []
    for candidate in _all(text, misses, enough, known, exact):
        if seen and any(candidate.data == other and type(candidate.data) is type(other) for other in seen):
            continue
        seen.append(candidate.data)
        yield candidate
        if len(seen) >= MAX_CANDIDATES:
            return


def _all(text: str, misses: Collection[int], enough: Callable[[str], bool] | None,
         known: dict[int, tuple[Any, int]] | None = None, exact: bool = False) -> Iterator[Candidate]:
    if len(text) > MAX_LENIENT_CHARS:
        return
    read: list[tuple[int, int]] = []  # the spans of fenced values read: not read again as spans
    for match in _FENCE.finditer(text) if "```" in text else ():
        body, at = fence_body(match)
        if body[:1] in "{[":
            found = _read(body, 0, fence_miss(match.start()) not in misses and at not in misses, exact)
            if found is not None:
                if found[1] < len(body):  # it ended inside the fence: the same value as a span
                    read.append((at, at + found[1]))
                yield Candidate(found[0].data, found[0].fixes, found[0].closed, "fenced", span=(at, at + found[1]))
    yield from _spans(text, misses, known, read, exact)
    if text.lstrip()[:1] not in ("{", "[") and WHOLE not in misses:  # else the spans have read it, or it is none
        whole = _whole(text, exact)
        if whole is not None:
            yield whole
    yield from _blocks(text, enough, exact)


def _whole(text: str, exact: bool = False) -> Candidate | None:
    """The whole text as one JSON value (a bare number or string, for a schema that takes one)."""
    first = len(text) - len(text.lstrip(" \t\n\r"))
    if not may_be_json(text, first):
        return None
    try:
        return Candidate((EXACT if exact else PLAIN).decode(text), span=(first, len(text.rstrip(" \t\n\r"))))
    except (ValueError, RecursionError):
        return None


def _read(text: str, start: int, strict: bool = True, exact: bool = False) -> tuple[Candidate, int] | None:
    """The value at ``start``: strictly if it is JSON, leniently if not; None if neither.
    ``strict=False``: it is known not to be JSON as written, so it is read leniently at once."""
    if strict and may_open(text, start):
        try:
            value, end = (EXACT if exact else PLAIN).raw_decode(text, start)
            return Candidate(value), end
        except (ValueError, RecursionError):
            pass
    try:
        parsed = parse(text, start, exact)
    except (NotJson, RecursionError):
        return None
    return Candidate(parsed.value, parsed.fixes, parsed.closed), parsed.end


def _spans(text: str, misses: Collection[int] = (), known: dict[int, tuple[Any, int]] | None = None,
           read: list[tuple[int, int]] | None = None, exact: bool = False) -> Iterator[Candidate]:
    """Every ``{...}`` and ``[...]`` span, left to right; a span read is not read again inside
    (nor one in ``read``: ``(start, end)`` of the values fenced blocks held)."""
    done = attempts = 0
    for match in _OPEN.finditer(text):
        if match.start() < done or (read and any(start <= match.start() < end for start, end in read)):
            continue
        attempts += 1
        if attempts > _MAX_ATTEMPTS:
            return
        decoded = known.get(match.start()) if known else None
        found = (Candidate(decoded[0]), decoded[1]) if decoded is not None else _read(text, match.start(), match.start() not in misses, exact)
        if found is None:
            continue
        candidate, done = found
        if isinstance(candidate.data, (dict, list)):
            yield candidate._replace(span=(match.start(), done))


def _blocks(text: str, enough: Callable[[str], bool] | None = None, exact: bool = False) -> Iterator[Candidate]:
    """YAML-like blocks: runs of ``key: value`` lines (``- item`` lines and indentation nest)."""
    if enough is not None and enough("key-value"):
        return  # before the text is split: most texts that reach here need no block
    lines = text.splitlines()
    starts = [0]  # where each line starts in the text
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    i = 0
    while i < len(lines):
        if _kv(lines[i]) is None:
            i += 1
            continue
        if enough is not None and enough("key-value"):
            return
        start = i
        try:
            block, i = _block(lines, i, _indent(lines[i]), exact)
        except NotJson:  # a value cut off: the block says no value
            i = max(i, start + 1)
            while i < len(lines) and _kv(lines[i]):
                i += 1
            continue
        if block:
            open_end = i >= len(lines) and not text.endswith(("\n", "\r"))
            span = (starts[start], starts[i] if i < len(starts) else len(text))
            yield Candidate(block, (Fix((), "key-value lines as an object"),), frozenset(), "key-value", open_end, span)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _block(lines: list[str], i: int, indent: int, exact: bool = False) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            if i < len(lines) and _kv(lines[i]) and _indent(lines[i]) >= indent:
                continue
            break
        match = _kv(line)
        if match is None or _indent(line) != indent:
            break
        key, value = match.group("key").strip(), match.group("value").rstrip(" \t")
        i += 1
        if value:
            out[key] = _scalar(value, exact)
            continue
        nested = lines[i] if i < len(lines) else ""
        if nested.strip() and _indent(nested) > indent:
            if _ITEM.match(nested):
                items, i = _items(lines, i, _indent(nested), exact)
                out[key] = items
            elif _kv(nested):
                out[key], i = _block(lines, i, _indent(nested), exact)
            else:
                out[key] = ""
        else:
            out[key] = ""
    return out, i


def _items(lines: list[str], i: int, indent: int, exact: bool = False) -> tuple[list[Any], int]:
    out: list[Any] = []
    while i < len(lines):
        match = _ITEM.match(lines[i])
        if match is None or _indent(lines[i]) != indent:
            break
        out.append(_scalar(match.group("value"), exact))
        i += 1
    return out, i


def _scalar(text: str, exact: bool = False) -> Any:
    """A value on a ``key: value`` line: JSON-like if the whole of it reads so, else the text.

    A value that opens a list, an object or a string it does not close is cut off: it is no
    value, and the block that holds it is none either (:class:`NotJson`).
    """
    text = text.rstrip(",").strip()
    if text[:1] in ("[", "{"):
        return parse(text, 0, exact).value  # NotJson (Cut) when it does not close
    if text[:1] in ('"', "'"):
        return _quoted(text, exact)
    return _unquoted(text, exact)


def _quoted(text: str, exact: bool) -> Any:
    """A quoted value on a ``key: value`` line: the string, read as JSON-like where it may escape
    or hold quotes; :class:`NotJson` where its closing quote is missing (cut off)."""
    if len(text) < 2 or text[-1] != text[0]:
        raise NotJson("a string cut off")
    body = text[1:-1]
    if "'" not in body and '"' not in body and "\\" not in body and body.isprintable():
        return body  # a plain quoted string: what parse reads it as
    try:
        return parse(text, 0, exact).value
    except NotJson:
        return body


def _unquoted(text: str, exact: bool) -> Any:
    """An unquoted value on a ``key: value`` line: an integer, a literal or a number JSON-like,
    else the text."""
    if text.isascii() and text.isdigit() and (text[0] != "0" or text == "0") and len(text) <= MAX_DIGITS:
        return int(text)  # a plain integer: what parse reads it as
    word = WORD.match(text)  # the word _jsonish would read first
    if word is not None and word.group(0) not in _VALUE_WORDS:
        return text  # a word that names no literal: it reads as text whatever follows (no parse needed)
    try:
        parsed = parse(f"[{text}]", 0, exact)
    except NotJson:
        return text
    if isinstance(parsed.value, list) and len(parsed.value) == 1 and not isinstance(parsed.value[0], str):
        return parsed.value[0]
    return text
