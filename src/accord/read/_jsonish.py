"""A lenient reader of JSON-like text: what models write when nothing constrains their output.

Reads what ``json.loads`` refuses and says what it did: unquoted keys, single quotes, trailing
and missing commas, ``//``, ``#`` and ``/* */`` comments, Python and JavaScript literals
(``True``, ``None``, ``undefined``; ``NaN`` and ``Infinity`` read as null, never as a number),
tuples, unquoted string values, raw control characters and unescaped inner quotes in strings.

Truncated text is read as far as it is certain: an object cut off is closed (and said to be),
but the member being written when the text ended is dropped, and a string, number, literal or
list cut off is never a value (:class:`Cut` when the cut value is the whole of it). Work is
bounded: nesting deeper than ``MAX_DEPTH`` is :class:`NotJson`, and every step consumes input.
No ``eval``, no ``ast.literal_eval``.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

MAX_DEPTH = 128
MAX_DIGITS = 4300  # Python's limit on int <-> str conversion

Path = tuple[str | int, ...]

_SKIP = re.compile(r"(?:\s+|//[^\n]*|#[^\n]*|/\*.*?(?:\*/|\Z))*", re.S)
_COMMENT = re.compile(r"//|#|/\*")
_SPACE = re.compile(r"\s+")
# A string: runs of plain characters, each escape taken whole; a backslash at the very end: cut off.
_DQ = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*\\?)("|\Z)', re.S)
_SQ = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*\\?)('|\Z)", re.S)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
WORD = re.compile(r"[A-Za-z_$][\w$]*")  # a word where a value or a key may be
_KEY = re.compile(r"[A-Za-z_$][\w$ .-]{0,63}?(?=\s*[:=])")
_BARE_END = {"object": re.compile(r"[,}\n]|\Z"), "array": re.compile(r"[,\]\n]|\Z"), "top": re.compile(r"\Z")}
# After a number or a literal, on its line: more of one answer, not the next member (``4 or 5``,
# ``4-5``, ``4 to 5``, ``40+``, ``40?``, ``true or false``): the value is read as the unquoted text
# it is, so the schema's reading names the hedge (a range, an estimate) rather than finding no
# JSON. A space before a sign and none after (``[1 -2]``) is two numbers, a missing comma; ``//``
# and ``/*`` are comments; ``to:`` is the next key.
_HEDGE_AFTER = re.compile(r"-(?=\d)|[ \t]*(?:(?:or|to|and)\b(?!\s*[:=])|[-–—]\s|[–—~?]|/(?![/*])|\+(?![\d.]))", re.I)
_CONTROL = re.compile(r"[\x00-\x1f]")
_INNER_QUOTE = re.compile(r'(?<!\\)((?:\\\\)*)"')
_PLAIN = re.compile(r'[^\\\x00-\x1f"]*')
_BAD_ESCAPE = re.compile(r'(?<!\\)((?:\\\\)*)\\(?!["\\/bfnrtu])')
_PY_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\(x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8})")
LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
NULLISH = {"undefined", "NaN", "Infinity", "nan", "inf"}
_AFTER_STRING = re.compile(r"[ \t]*(?:[,:}\]\)\n]|\Z|//|#|/\*)")
# The common cases in one match each (what the general path would read, and no repair): a plain
# double-quoted key, its colon and the space after (no comment there); a plain double-quoted
# string followed by a delimiter.
_PLAIN_KEY = re.compile(r'"([^"\\\x00-\x1f]*)"\s*:\s*(?![\s/#])')  # (?!\s): all the space, never part of it
_PLAIN_STRING = re.compile(r'"([^"\\\x00-\x1f]*)"(?=[ \t]*(?:[,:}\]\)\n]|\Z|//|#|/\*))')


def _json_escape(char: str) -> str:
    """A character as JSON escapes (a surrogate pair beyond the BMP)."""
    return json.dumps(char)[1:-1] if ord(char) < 0x10000 else json.dumps(char, ensure_ascii=True)[1:-1]


class Written(float):
    """A float that keeps the digits the text wrote (``str`` gives them back): what a schema that
    holds a ``Decimal`` reads a JSON number as, so the Decimal is the number written, every digit
    (pydantic builds a Decimal from ``str`` of a float; a float field takes it as the float it is)."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> Written:
        made = super().__new__(cls, text)
        made.text = text
        return made

    def __str__(self) -> str:
        return self.text


EXACT = json.JSONDecoder(parse_float=Written)  # JSON read for a schema that holds a Decimal
PLAIN = json.JSONDecoder()


class NotJson(Exception):
    """The text is not JSON-like at this position."""


class Cut(NotJson):
    """The text ended inside a value that cannot be completed (a string, number, literal or list)."""


class Fix(NamedTuple):
    """One repair made to the text: ``kind`` (e.g. "unquoted key") at ``path`` in the value.
    (Named tuples, here and below: made many times a reading, and cheaper to make than a frozen
    dataclass.)"""

    path: Path
    kind: str


class Parsed(NamedTuple):
    """A value read leniently: where it ends in the text, the repairs made, the objects closed."""

    value: Any
    end: int
    fixes: tuple[Fix, ...]
    closed: frozenset[Path]  # paths of objects the text ended inside (closed by the reader)


def parse(text: str, start: int = 0, exact: bool = False) -> Parsed:
    """Read one JSON-like value at ``start`` (leading space and comments skipped); ``exact``: a
    number with a point or an exponent is a :class:`Written` float (its digits kept).

    Raises :class:`NotJson` when there is none, :class:`Cut` when it was cut off beyond repair.
    """
    reader = _Reader(text)
    reader.real = Written if exact else float
    pos = reader.skip(start)
    value, pos, complete = reader.value(pos, (), 0, "top")
    if not complete:
        raise Cut("the value was cut off")
    return Parsed(value, pos, tuple(reader.fixes), frozenset(reader.closed))


class _Reader:
    def __init__(self, text: str) -> None:
        self.real: type[float] = float
        self.text = text
        self.n = len(text)
        self.fixes: list[Fix] = []
        self.closed: set[Path] = set()

    def fix(self, path: Path, kind: str) -> None:
        self.fixes.append(Fix(path, kind))

    def skip(self, pos: int, path: Path = ()) -> int:
        """Past the space and comments at ``pos`` (a comment is noted)."""
        text = self.text
        if pos >= self.n:
            return pos
        if text[pos] not in "/#":
            if not text[pos].isspace():  # nothing to skip (``\s`` is str.isspace)
                return pos
            if pos + 1 < self.n and not text[pos + 1].isspace():
                pos += 1  # one space: the common case, no match to run
            else:
                space = _SPACE.match(text, pos)  # (always a match: \s+ at a space)
                pos = space.end() if space else pos
            if pos >= self.n or text[pos] not in "/#":
                return pos  # space alone: the common case, one match
        skipped = _SKIP.match(text, pos)  # (always a match: the pattern matches the empty string)
        end = skipped.end() if skipped else pos
        if end > pos and _COMMENT.search(text, pos, end):
            self.fix(path, "comment removed")
        return end

    # -- values ---------------------------------------------------------------------------------

    def value(self, pos: int, path: Path, depth: int, context: str) -> tuple[Any, int, bool]:
        """``(value, end, complete)``; a cut string, number or list comes back incomplete."""
        if depth > MAX_DEPTH:
            raise NotJson(f"nested more than {MAX_DEPTH} levels deep")
        if pos >= self.n:
            return None, pos, False
        char = self.text[pos]
        if char == "{":
            return self.object(pos + 1, path, depth)
        if char in "[(":
            return self.array(pos + 1, path, depth, "]" if char == "[" else ")")
        if char == '"':
            plain = _PLAIN_STRING.match(self.text, pos)
            if plain is not None:
                return plain.group(1), plain.end(), True
            return self.double(pos, path)
        if char == "'":
            return self.single(pos, path)
        number = _NUMBER.match(self.text, pos)
        if number:
            return self.number(number, path, context)
        word = WORD.match(self.text, pos)
        if word:
            return self.word(word, path, context)
        raise NotJson(f"unexpected {char!r}")

    def object(self, pos: int, path: Path, depth: int) -> tuple[Any, int, bool]:
        out: dict[str, Any] = {}
        expect_comma = False
        text = self.text
        while True:
            if pos < self.n and (text[pos] in "/#" or text[pos].isspace()):  # else there is nothing to skip
                pos = self.skip(pos, path)
            if pos >= self.n:
                self.closed.add(path)
                self.fix(path, "closed a cut-off object")
                return out, pos, True
            char = self.text[pos]
            if char == "}":
                return out, pos + 1, True
            if char == ",":
                pos, expect_comma = self.comma(pos, path, expect_comma, "}"), False
                continue
            if expect_comma:
                self.fix(path, "missing comma")
            plain = _PLAIN_KEY.match(self.text, pos) if char == '"' else None
            if plain is not None:
                key, pos = plain.group(1), plain.end()
            else:
                key, pos, complete = self.key(pos, path)
                if not complete:
                    self.closed.add(path)
                    self.fix(path, "closed a cut-off object")
                    return out, self.n, True
                pos = self.skip(pos, path)
                if pos >= self.n:
                    self.closed.add(path)
                    self.fix((*path, key), "dropped a member cut off")
                    return out, pos, True
                if self.text[pos] in ":=":
                    if self.text[pos] == "=":
                        self.fix((*path, key), "'=' as ':'")
                    pos = self.skip(pos + 1, path)
                else:
                    raise NotJson(f"expected ':' after key {key!r}")
            value, pos, complete = self.value(pos, (*path, key), depth + 1, "object")
            if not complete:
                self.closed.add(path)
                self.fix((*path, key), "dropped a member cut off")
                return out, self.n, True
            if key in out:
                self.fix((*path, key), "duplicate key, last kept")
            out[key] = value
            expect_comma = True

    def comma(self, pos: int, path: Path, expected: bool, close: str) -> int:
        """Past the comma at ``pos``; one where no comma belongs, or just before ``close``, is noted."""
        if not expected:
            self.fix(path, "extra comma")
        noted = len(self.fixes)
        after = self.skip(pos + 1, path)
        plain = len(self.fixes) == noted  # no comment: skipping again from pos + 1 would end at ``after``, noting nothing
        if after < self.n and self.text[after] == close:
            self.fix(path, "trailing comma")
        return after if plain else pos + 1  # a comment is noted again where the next member is read

    def key(self, pos: int, path: Path) -> tuple[str, int, bool]:
        char = self.text[pos]
        if char == '"':
            value, end, complete = self.double(pos, path, key=True)
            return value, end, complete
        if char == "'":
            value, end, complete = self.single(pos, path)
            return value, end, complete
        match = _KEY.match(self.text, pos)
        if match:
            key = match.group(0).strip()
            self.fix((*path, key), "unquoted key")
            return key, match.end(), True
        number = _NUMBER.match(self.text, pos)
        if number:
            self.fix((*path, number.group(0)), "unquoted key")
            return number.group(0), number.end(), True
        if WORD.fullmatch(self.text, pos):
            return "", self.n, False  # a key cut off
        raise NotJson(f"unexpected {char!r} where a key belongs")

    def array(self, pos: int, path: Path, depth: int, close: str) -> tuple[Any, int, bool]:
        if close == ")":
            self.fix(path, "tuple as list")
        out: list[Any] = []
        expect_comma = False
        text = self.text
        while True:
            if pos < self.n and (text[pos] in "/#" or text[pos].isspace()):  # else there is nothing to skip
                pos = self.skip(pos, path)
            if pos >= self.n:
                return out, pos, False  # a list cut off: its length is unknown
            char = self.text[pos]
            if char == close:
                return out, pos + 1, True
            if char == ",":
                pos, expect_comma = self.comma(pos, path, expect_comma, close), False
                continue
            if char in "}])":
                raise NotJson(f"unexpected {char!r} in a list")
            if expect_comma:
                self.fix(path, "missing comma")
            value, pos, complete = self.value(pos, (*path, len(out)), depth + 1, "array")
            if not complete:
                return out, self.n, False
            out.append(value)
            expect_comma = True

    # -- scalars --------------------------------------------------------------------------------

    def double(self, pos: int, path: Path, key: bool = False) -> tuple[str, int, bool]:
        """A double-quoted string; an inner quote not followed by a delimiter is part of it."""
        text = self.text
        match = _DQ.match(text, pos)
        assert match is not None
        if not match.group(2):
            return "", self.n, False
        end = match.end()
        if not key:
            inner = False
            while not _AFTER_STRING.match(text, end):
                more = _DQ.match(text, end - 1)  # from the quote that did not close the string
                if more is None or not more.group(2):
                    break
                end, inner = more.end(), True
            if inner:
                self.fix(path, "unescaped quote in a string")
        return self.decode(text[pos + 1 : end - 1], path), end, True

    def single(self, pos: int, path: Path) -> tuple[str, int, bool]:
        match = _SQ.match(self.text, pos)
        assert match is not None
        if not match.group(2):
            return "", self.n, False
        self.fix(path, "single quotes")
        body = match.group(1).replace("\\'", "'").replace('"', '\\"')
        return self.decode(body, path), match.end(), True

    def decode(self, body: str, path: Path) -> str:
        if "\\" not in body and '"' not in body and (body.isprintable() or _PLAIN.fullmatch(body)):
            return body  # no escape, no control character: the text is the string
        try:
            decoded: str = json.loads(f'"{body}"')  # a JSON string's body reads as a str
            return decoded
        except ValueError:
            pass
        if _CONTROL.search(body):
            self.fix(path, "raw control character in a string")
            body = _CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", body)
        if _PY_ESCAPE.search(body):
            self.fix(path, "Python escape in a string")
            body = _PY_ESCAPE.sub(lambda m: m.group(1) + _json_escape(chr(int(m.group(2)[1:], 16))), body)
        if _BAD_ESCAPE.search(body):
            self.fix(path, "invalid escape kept as a backslash")
            body = _BAD_ESCAPE.sub(lambda m: m.group(1) + "\\\\", body)
        body = _INNER_QUOTE.sub(r'\1\\"', body)  # an inner quote kept
        try:
            decoded = json.loads(f'"{body}"')
            return decoded
        except ValueError as exc:
            raise NotJson("unreadable string") from exc

    def number(self, match: re.Match[str], path: Path, context: str) -> tuple[Any, int, bool]:
        end = match.end()
        if end >= self.n:
            return None, end, False  # a number at the very end may be cut
        if context != "top" and (WORD.match(self.text, end) or _HEDGE_AFTER.match(self.text, end)):
            return self.bare(match.start(), path, context)  # "34 years", "3rd", "4 or 5": text, not a number
        token = match.group(0)
        if len(token) > MAX_DIGITS:
            raise NotJson(f"a number of {len(token):,} characters")  # int() refuses it: never a value
        if token.startswith("+"):
            self.fix(path, "leading '+'")
            token = token[1:]
        digits = token[1:] if token[0] == "-" else token
        if token[0] == "." or token[-1] == "." or (digits[0] == "0" and digits[1:2].isdecimal()):  # .5, 5., 05 (-?0\d)
            self.fix(path, "number written loosely")
        if "." not in token and "e" not in token and "E" not in token:  # -?\d+
            return int(token), end, True
        return self.real(token), end, True

    def word(self, match: re.Match[str], path: Path, context: str) -> tuple[Any, int, bool]:
        word, end = match.group(0), match.end()
        follows = self.text[end : end + 1]
        if word in LITERALS and (not follows or not (follows.isalnum() or follows == "_")):
            if end >= self.n and context != "top":
                return None, end, False  # "tru" or "true" at the very end: maybe cut
            if context != "top" and _HEDGE_AFTER.match(self.text, end):
                return self.bare(match.start(), path, context)  # "true or false": text, not a literal
            if word not in ("true", "false", "null"):
                self.fix(path, f"{word} as {json.dumps(LITERALS[word])}")
            return LITERALS[word], end, True
        if word in NULLISH:
            if end >= self.n and context != "top":
                return None, end, False
            self.fix(path, f"{word} as null")
            return None, end, True
        if context == "top":
            raise NotJson("a bare word is not a value")
        return self.bare(match.start(), path, context)

    def bare(self, pos: int, path: Path, context: str) -> tuple[Any, int, bool]:
        """An unquoted string value: up to the next delimiter of its container, trimmed."""
        stop = _BARE_END[context].search(self.text, pos)
        assert stop is not None
        if stop.start() >= self.n:
            return None, self.n, False  # unquoted text running to the end: maybe cut
        value = self.text[pos : stop.start()].strip()
        self.fix(path, "unquoted string")
        return value, stop.start(), True
