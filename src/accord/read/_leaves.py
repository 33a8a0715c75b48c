"""A leaf's value under its schema node: a number, a yes/no, an enum member, a date.

The readers :mod:`._normalize` calls where a node takes a scalar: a string that says a number or
a yes/no read as one (``_numbers``, ``_words``), an enum member matched by its fold or as a
choice, a date written another way in ISO 8601. What each did beyond case, space and NFC is noted
in a :class:`Said`, and what it refused to read is refused there, with why.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any

from ._coercions import YES_NO, Refusal, bool_for_number, number_for_bool
from ._numbers import number
from ._words import boolean, choice, fold

_NUMERIC = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")

# A dotted date with the year last is day.month.year ("12.02.2024", as German and most European invoices write it).
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %d %Y", "%Y.%m.%d", "%d.%m.%Y")
_DAY_OR_MONTH_FIRST = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")  # 14/12/2023 (day first) or 12/14/2023 (month first)


class Said:
    """What one normalization did beyond case, space and NFC (``notes``: ``{"path", "fix"}`` dicts,
    the reading's coercions) and what it refused to read (``refusals``: ``(path, Refusal)``)."""

    __slots__ = ("notes", "refusals")

    def __init__(self) -> None:
        self.notes: list[dict[str, str]] | tuple[()] = ()  # made a list at the first note (most readings have none)
        self.refusals: list[tuple[tuple[Any, ...], Refusal]] | tuple[()] = ()

    def note(self, path: tuple[Any, ...], fix: str) -> None:
        if not self.notes:
            self.notes = []
        self.notes.append({"path": ".".join(map(str, path)), "fix": fix})

    def refuse(self, path: tuple[Any, ...], refusal: Refusal) -> None:
        if not self.refusals:
            self.refusals = []
        self.refusals.append((path, refusal))


def scalar(data: Any, scalar: str, path: tuple[Any, ...], said: Said) -> Any:
    """A value where the node takes a number or a yes/no (``scalar``): a string read as one, a
    number or a yes/no kept (a float for an integer: made exact), the other kind refused."""
    if type(data) is str:
        return _boolean(data, path, said) if scalar == "boolean" else _numeric(data, scalar == "integer", path, said)
    if scalar == "boolean":
        if isinstance(data, (int, float)) and type(data) is not bool:  # (a JSON number may be a float subclass)
            said.refuse(path, number_for_bool(data))
        return data
    if type(data) is bool:
        said.refuse(path, bool_for_number(data))
        return data
    return _integer(data) if scalar == "integer" else data


def member(data: Any, members: list[Any], path: tuple[Any, ...] = (), said: Said | None = None) -> Any:
    """The enum member the data names: matched exactly, then case- and whitespace-insensitively,
    then as ``_words.choice`` reads it (recorded in ``said``; a negated or hedged one refused)."""
    if any(data == m and type(data) is type(m) for m in members):
        return data
    if said is not None and _other_kind(data, members, path, said):
        return data
    if isinstance(data, str):
        return _member_named(data, members, path, said)
    return data


def _other_kind(data: Any, members: list[Any], path: tuple[Any, ...], said: Said) -> bool:
    """Whether the data is a yes/no among no yes/no members, or a number among yes/no members
    (refused where the members are all of the other kind): kept as it is."""
    if type(data) is bool and not any(type(m) is bool for m in members):
        if any(type(m) in (int, float) for m in members):
            said.refuse(path, bool_for_number(data))
        return True
    if isinstance(data, (int, float)) and any(type(m) is bool for m in members):
        if not any(type(m) in (int, float) for m in members):
            said.refuse(path, number_for_bool(data))
        return True
    return False


def _member_named(data: str, members: list[Any], path: tuple[Any, ...], said: Said | None) -> Any:
    """The member a string names: by its fold, its number, or as ``_words.choice`` reads it."""
    folded = [m for m in members if isinstance(m, str) and fold(m) == fold(data)]
    if len(folded) == 1:
        if said is not None and folded[0] != data.strip():  # a case fold too is recorded
            said.note(path, f"{data!r} as the member {folded[0]!r}")
        return folded[0]
    numeric = [m for m in members if isinstance(m, (int, float)) and not isinstance(m, bool)]
    if numeric and _NUMERIC.fullmatch(data):
        value = _number(data)
        if value in numeric:
            return value
    if said is None or folded:
        return data
    return _taken(choice(data, members, nested=True), data, path, said)


def _taken(read: Any, data: Any, path: tuple[Any, ...], said: Said) -> Any:
    """What a word or number reader said of ``data``: its value (with its note recorded), or
    ``data`` unchanged when it read nothing or refused (the refusal recorded)."""
    if isinstance(read, Refusal):
        said.refuse(path, read)
        return data
    if read is None:
        return data
    if read[1] is not None:
        said.note(path, read[1])
    return read[0]


def _number(data: Any) -> Any:
    if isinstance(data, str) and _NUMERIC.fullmatch(data):
        value = float(data)
        if math.isfinite(value):
            return int(value) if value.is_integer() and re.fullmatch(r"\s*[-+]?\d+\s*", data) else value
    return data


def _integer(data: Any) -> Any:
    data = _number(data)
    if isinstance(data, float) and data.is_integer() and abs(data) < 2**53:
        return int(data)
    return data


def _numeric(data: Any, integer: bool, path: tuple[Any, ...], said: Said) -> Any:
    """A number, or a string that says one number (``_numbers``: recorded; a form with two
    readings refused)."""
    out = _integer(data) if integer else _number(data)
    if type(out) is not str:
        if type(data) is str:
            said.note(path, "numeric string as a number")
        return out
    value = _taken(number(out, integer, nested=True), out, path, said)
    return _integer(value) if integer and value is not out else value


def _boolean(data: Any, path: tuple[Any, ...] = (), said: Said | None = None) -> Any:
    if not isinstance(data, str):
        return data
    exact = YES_NO.get(fold(data))
    if exact is not None or said is None:
        if exact is not None and said is not None:
            said.note(path, f"{data!r} as {'true' if exact else 'false'}")
        return data if exact is None else exact
    return _taken(boolean(data), data, path, said)


def iso(text: str, fmt: str) -> str:
    """An unambiguous date (or datetime) written another way, to ISO 8601; else unchanged."""
    if fmt == "date-time":
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).isoformat().replace("+00:00", "Z")
        except ValueError:
            return text
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    for pattern in _DATE_FORMATS:
        try:
            return datetime.strptime(text, pattern).date().isoformat()
        except ValueError:
            continue
    return _one_order(text)


def _one_order(text: str) -> str:
    """``a/b/YYYY`` where day-first and month-first give one date (``14/12/2023``, ``12/14/2023``,
    ``05/05/2024``), to ISO; where they give two (``03/05/2024``), unchanged."""
    match = _DAY_OR_MONTH_FIRST.fullmatch(text)
    if match is None:
        return text
    a, b, year = (int(part) for part in match.groups())
    found = set()
    for month, day in ((b, a), (a, b)):
        try:
            found.add(date(year, month, day).isoformat())
        except ValueError:
            continue
    return found.pop() if len(found) == 1 else text
