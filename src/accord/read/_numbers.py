"""What a number in a model's answer says: one number, with how it was read, or a refusal with why.

One reading at every depth: :func:`number` reads the whole answer (``_extract``) and a string
where a field, a list item or a union member wants a number (``_normalize``). Each form has one
decision (docs/parsing.md lists them):

=============================  ==============================================================
written                        read as
=============================  ==============================================================
``12``, ``-3.5``, ``1e6``      the number (no coercion recorded: it is the number's own text)
``1,234,567`` / ``1,234.5``    the number, "thousands separators" recorded
``1,234``                      1234 for an integer; refused for a float (1.234 with a decimal comma)
``0,5``, ``3,14``, ``1.234,5`` refused: a decimal comma (or a list), ambiguous by locale
``$1.50``, ``12 EUR``          the number, the currency recorded
``45%``                        45, the percent sign recorded (a schema that wants 0.45 says so
                               with its bounds)
``1/2``, ``3/4``               0.5, 0.75 for a float, recorded; refused for an integer
``2^10``, ``10**6``, ``3x10^8`` 1024, 1000000, 300000000, recorded (bounded in size)
``40-45``, ``40 to 45``        refused: a range
``about 40``, ``~40``, ``40+`` refused: an estimate or a bound
``not 40``, ``40?``            refused: negated or hedged
prose with one number          that number, recorded (``The answer is 42.``); an equation's
                               result (``2 + 3 = 5``); several different numbers: refused
=============================  ==============================================================
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from ._coercions import Refusal, doubt, quote, rank
from ._words import STRUCTURE, trim

MAX_DIGITS = 4300  # Python's default limit on int <-> str conversion (sys.get_int_max_str_digits)
_MAX_POWER = 308  # 10**308: about the largest float

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_PLAIN = re.compile(rf"[-+]?{_NUM}")
_INTEGER = re.compile(r"[-+]?\d+")
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_COMMA = re.compile(r"[-+]?\d+(?:[.,]\d+)*,\d+(?:[.,]\d+)*")
_CURRENCY_BEFORE = re.compile(r"([-+]?)\s*(?:[$€£¥]|usd|eur|gbp)\s*(.+)", re.I)
_CURRENCY_AFTER = re.compile(r"(.+?)\s*(?:[$€£¥]|usd|eur|gbp|dollars?|euros?)", re.I)
_PERCENT = re.compile(r"(.+?)\s*(?:%|percent|per cent)", re.I)
_FRACTION = re.compile(r"([-+]?\d+)\s*/\s*(\d+)")
_POWER = re.compile(r"([-+]?\d+(?:\.\d+)?)\s*(?:\^|\*\*)\s*([-+]?\d+)")
_SCIENTIFIC = re.compile(r"([-+]?\d+(?:\.\d+)?)\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*([-+]?\d+)")
_ONE = r"[-+]?[$€£¥]?\s*\d[\d.,]*\s*%?"
_RANGE = re.compile(rf"(?:between\s+|from\s+)?{_ONE}\s*(?:-|–|—|to|or|and|/)\s*{_ONE}", re.I)
_APPROX = re.compile(r"(?:about|around|approx(?:imately|\.)?|roughly|nearly|almost|circa|ca\.|some|over|under|"
                     r"at\s+least|at\s+most|more\s+than|less\s+than|fewer\s+than|up\s+to|>=?|<=?|~|≈|±)\s*$", re.I)
_BOUND_AFTER = re.compile(r"\s*(?:\+|-?ish\b|or\s+so\b|or\s+more\b|or\s+less\b)", re.I)
_CHUNK = re.compile(r"\S+")
_EDGE = "\"'“”‘’()[]{}.,;:!?*_`"
_LEADS = "~≈<>≤≥±"
_UNIT = re.compile(r"(.*\d)([A-Za-z]{1,12})")  # 5km, 3rd: a number and a unit written onto it
_EQUATION = re.compile(r"[-+*/x×÷^().\d\s]+=\s*([-+]?\d+(?:\.\d+)?)")

Read = tuple[int | float | Decimal, str | None]


def number(text: str, integer: bool, nested: bool = False, exact: bool = False) -> Read | Refusal | None:
    """The one number the text says: ``(value, coercion)``, a :class:`Refusal`, or None (no number).

    ``integer``: the schema wants an integer (a fraction is refused, ``1,234`` is 1234).
    ``nested``: a string inside JSON-like data, read in prose only when it holds none of JSON's
    brackets or quotes (``3{`` is a piece of broken structure, not prose). ``exact``: the schema
    wants a ``Decimal``: the value is the Decimal of the digits written (``$1,234.50`` is
    ``Decimal('1234.50')``), never a float that may have lost some of them."""
    if _PLAIN.fullmatch(text.strip()) and len(text.strip()) <= MAX_DIGITS:  # a number as written (``12.`` too): no coercion
        found = _form(text.strip(), integer, exact)
        if found is not None:
            return found
    bare = trim(text)
    if len(bare) > MAX_DIGITS:
        return Refusal(f"a number of {len(bare):,} characters is too long to read (at most {MAX_DIGITS:,})", "number_form")
    found = _form(bare, integer, exact)
    if isinstance(found, tuple):
        value, how = found
        if how is None and bare == text.strip():
            return value, None
        return value, f"{quote(text)} as {_shown(value)}" + (f": {how}" if how else "")
    if found is not None:
        return found
    if nested and STRUCTURE.search(text):
        return None
    return _prose(text, integer, exact)


def _shown(value: int | float | Decimal) -> str:
    return str(value) if isinstance(value, Decimal) else repr(value)


def _real(digits: str, exact: bool) -> float | Decimal:
    """A number with a point or an exponent, as the schema keeps it: a float, or a Decimal of its digits."""
    return Decimal(digits) if exact else float(digits)


def _form(bare: str, integer: bool, exact: bool = False) -> Read | Refusal | None:
    """One number written in one form (the whole of ``bare``): the form it matches reads it."""
    if _PLAIN.fullmatch(bare):
        return _plain(bare, exact)
    if _GROUPED.fullmatch(bare):
        return _grouped(bare, integer, exact)
    if _COMMA.fullmatch(bare):
        return Refusal(f"{quote(bare)} has a decimal comma (or is a list): write one number with a decimal point",
                       "number_form")
    match = _FRACTION.fullmatch(bare)
    if match:
        return _fraction(bare, int(match.group(1)), int(match.group(2)), integer, exact)
    match = _SCIENTIFIC.fullmatch(bare) or _POWER.fullmatch(bare)
    if match:
        return _power(bare, match, integer, scientific=match.re is _SCIENTIFIC, exact=exact)
    for pattern, what in _AROUND:
        match = pattern.fullmatch(bare)
        if match:
            return _around(match, what, integer, exact)
    if _RANGE.fullmatch(bare):
        return Refusal(f"{quote(bare)} is a range, not one number: write one number", "range")
    return None


def _plain(bare: str, exact: bool) -> Read | Refusal:
    """A number as JSON writes it (``12.`` too): an int, or a float or a Decimal within a float's range."""
    if _INTEGER.fullmatch(bare):
        return int(bare), None  # (at most MAX_DIGITS digits: checked before)
    value = _real(bare, exact)
    if not math.isfinite(value) or (isinstance(value, Decimal) and abs(value.adjusted()) > _MAX_POWER):
        return Refusal(f"{quote(bare)} is not a finite number (past a float's range)", "finite_number")
    return value, None


def _grouped(bare: str, integer: bool, exact: bool) -> Read | Refusal:
    """A number with thousands separators (``1,234``); one comma and no point may be a decimal comma: refused."""
    digits = bare.replace(",", "")
    if not integer and bare.count(",") == 1 and "." not in bare:
        return Refusal(f"{quote(bare)} may be {digits} or {bare.replace(',', '.')} (a decimal comma): "
                       "write the number without a comma", "number_form")
    return (int(digits) if _INTEGER.fullmatch(digits) else _real(digits, exact)), "thousands separators"


def _fraction(bare: str, top: int, bottom: int, integer: bool, exact: bool) -> Read | Refusal:
    """``top/bottom``: its value where a number (exactly, for a Decimal) is wanted; else refused."""
    if integer:
        return Refusal(f"{quote(bare)} is a fraction, not an integer: write the integer", "number_form")
    if bottom == 0:
        return Refusal(f"{quote(bare)} divides by zero: write one number", "number_form")
    if not exact:
        return top / bottom, "a fraction"
    share = Decimal(top) / Decimal(bottom)
    if share * bottom != top:
        return Refusal(f"{quote(bare)} has no exact decimal: write the number", "number_form")
    return share, "a fraction"


# A number inside a currency or a percent sign: the pattern, and the coercion it records.
_AROUND = ((_CURRENCY_BEFORE, "the currency dropped"), (_CURRENCY_AFTER, "the currency dropped"),
           (_PERCENT, "the percent sign dropped"))


def _around(match: re.Match[str], what: str, integer: bool, exact: bool) -> Read | Refusal | None:
    """The number inside a currency or a percent sign (``what``: the coercion recorded), read in its own form."""
    inner = _form(match.group(match.lastindex or 1).strip(), integer, exact)
    if not isinstance(inner, tuple):
        return inner
    sign = -1 if match.re is _CURRENCY_BEFORE and match.group(1) == "-" else 1
    return sign * inner[0], what if inner[1] is None else f"{inner[1]}, {what}"


def _power(bare: str, match: re.Match[str], integer: bool, scientific: bool, exact: bool = False) -> Read | Refusal:
    base_text, exponent = match.group(1), int(match.group(2))
    base = 10 if scientific else float(base_text)
    if abs(exponent) > _MAX_POWER or (base and math.log10(abs(base)) * exponent > _MAX_POWER):
        return Refusal(f"{quote(bare)} is too large a power to read: write the number", "number_form")
    if exact and (scientific or exponent >= 0):
        try:
            worth = Decimal(base_text).scaleb(exponent) if scientific else Decimal(base_text) ** exponent
        except InvalidOperation:
            return Refusal(f"{quote(bare)} is too large a power to read: write the number", "number_form")
        return (int(worth) if integer and worth == worth.to_integral_value() else worth), "a power"
    if scientific:
        value: int | float = float(base_text) * 10.0**exponent
    elif _INTEGER.fullmatch(base_text) and exponent >= 0:
        value = int(base_text) ** exponent
    else:
        value = base**exponent
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)
    return value, "a power"


def _chunks(text: str) -> list[tuple[str, int, int]]:
    """The words of the text that hold a digit, without the punctuation around them, with where
    they stand: each is one number written in one form, or no number at all (``3x10^8``,
    ``COVID-19``, ``0x1F`` are one word each, never a number picked out of a word)."""
    out = []
    for match in _CHUNK.finditer(text):
        word = match.group(0)
        if not any(c.isdigit() for c in word):
            continue
        inner = word.strip(_EDGE).lstrip(_LEADS)
        start = match.start() + word.find(inner)
        out.append((inner, start, start + len(inner)))
    return out


def _prose(text: str, integer: bool, exact: bool = False) -> Read | Refusal | None:
    """The one number in prose (``The answer is 42.``), or why there is none to read: a range,
    several numbers of different values, an estimate or a bound, a rank or an ordinal (``2nd
    highest``), a negation, an unknown or a hedge around it. (A text with no digit says no number:
    None, whatever else it says.)"""
    chunks = _chunks(text)
    if not chunks:
        return None
    equation = _EQUATION.fullmatch(trim(text))
    if equation:
        value = _form(equation.group(1), integer, exact)
        if isinstance(value, tuple):
            return value[0], f"{quote(text)} as {_shown(value[0])}: the result of the equation"
    if _RANGE.search(text):
        return Refusal(f"{quote(text)} gives a range, not one number: write one number", "range")
    if len({inner for inner, _, _ in chunks}) > 1 and not _agree(chunks, integer, exact):
        return Refusal(f"{quote(text)} holds several numbers: write the one number meant", "several")
    for inner, start, end in chunks:
        why = rank(text[:start], inner, text[end:], text)
        if why is not None:
            return why
    inner, start, end = chunks[0]
    if _APPROX.search(text[:start]) or inner.endswith("+") or _BOUND_AFTER.match(text, end):
        return Refusal(f"{quote(text)} is an estimate or a bound, not one number: write the number", "estimate")
    why = doubt(text[:start], text[end:], text)
    if why is not None:
        return why
    found = _inner(inner, integer, exact)
    if isinstance(found, tuple):
        return found[0], f"{quote(text)} as {_shown(found[0])}: the number in the text" + (f", {found[1]}" if found[1] else "")
    return found


def _inner(inner: str, integer: bool, exact: bool) -> Read | Refusal | None:
    """A word of prose that holds a digit, as one number (with a unit written onto it: ``5km``)."""
    found = _form(inner, integer, exact)
    if found is None:
        unit = _UNIT.fullmatch(inner)
        found = _form(unit.group(1), integer, exact) if unit else None
    return found


def _agree(chunks: list[tuple[str, int, int]], integer: bool, exact: bool) -> bool:
    """Whether several numbers written in prose all say one value (``$1,234.50, that is 1234.5``)."""
    values = [_inner(inner, integer, exact) for inner, _, _ in chunks]
    return all(isinstance(v, tuple) for v in values) and len({v[0] for v in values if isinstance(v, tuple)}) == 1
