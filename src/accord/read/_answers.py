"""One answer or none: a text that holds two different values is refused, whoever reads it.

A model that writes a draft before its answer, an example of the format, or a correction after
it leaves several candidate values in one text. Taking the first, or the cheapest to repair, takes
a value the model did not mean. The rule, for the strict and the lenient reading alike:

- every candidate that reads as a valid value of the schema counts, wherever it stands, unless it
  stands inside another (the lines of a JSON object are no second answer) or says nothing of the
  schema (an object that names none of its fields, beside one that does);
- candidates whose vote keys are equal are one answer: the cheapest reading of it is kept;
- candidates that differ are refused (``"type": "ambiguous"``, feedback that asks for one answer),
  with one exception: the candidate marked as the final answer (``final answer:``,
  ``correction:``, ``my answer:``; ``_coercions.marked_final``), when it is the last value in the
  text and no other is so marked; an example or a draft is never marked (``Example format:``,
  ``my first answer:``), and the exception is recorded in ``coercions``.

Clean output costs nothing more: :func:`alone` looks at the text outside the value found
(brackets, ``key: value`` lines that name a field, a stated number) before anything else is read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from ._bare import one_number, stated
from ._candidates import _KV_LINE, FLOORS
from ._coerce import key_fold
from ._coercions import marked_final

_KV_LINES = re.compile(_KV_LINE.pattern, re.M)  # the key-value lines of a text, as the candidates read them
# A line that gives a value (``key: value``, a ``- item``): else a line like ``Here is the JSON:``
# makes no value (a key with nothing after it and no item under it).
_VALUED = re.compile(r"[:=][ \t]*\S|^[ \t]*[-*+][ \t]+\S", re.M)
_FOLD = str.maketrans("", "", "_-. \t\r\f\v")  # what key_fold drops (with the case)
# Text that may hold an echoed schema: any type name at all (for text read leniently).
_ANY_HINT = re.compile("|".join(map(re.escape, ("propert", "$defs", "$ref", "type", "str", "int", "float", "number", "double",
                                                  "bool", "date", "yyyy"))))

R = TypeVar("R")  # what a candidate's reading is (the caller's Reading or Misreading)


class Found(NamedTuple):
    """A candidate that read as a valid value: what it cost, its value, the coercions it took,
    whether its last value ran to the end of the text, where it stands, and its data as read."""

    cost: int
    value: Any
    coercions: tuple[dict[str, str], ...]
    open_end: bool
    span: tuple[int, int]
    data: Any


def alone(text: str, span: Sequence[int], fields: frozenset[str] | None, numeric: bool = False) -> bool:
    """Whether nothing outside ``span`` in the text can be another value: no ``{`` or ``[``, no
    ``key: value`` line whose key names a field (``fields``: the schema's properties, key-folded;
    None: the schema takes no object, so no such line is a value; empty: any key may be one), and,
    for an object of one numeric field (``numeric``), no number stated on the first line.
    (On the path of every clean reading: a few operations, no more.)"""
    rest = f"{text[: span[0]]}\n{text[span[1] :]}"
    if "{" in rest or "[" in rest:
        return False
    if fields is not None and (":" in rest or "=" in rest) and _VALUED.search(rest):
        for line in _KV_LINES.finditer(rest):
            if not fields or line.group("key").translate(_FOLD).casefold() in fields:
                return False
    return not (numeric and stated(text))


def fields_of(root: dict[str, Any], types: frozenset[str]) -> frozenset[str] | None:
    """The key-folded properties of a schema whose value may be an object (empty: any key);
    None when it takes no object."""
    if types and "object" not in types:
        return None
    props = root.get("properties")
    return frozenset(key_fold(k) for k in props) if isinstance(props, dict) else frozenset()


def substantive(found: Found, fields: frozenset[str] | None) -> bool:
    """Whether a candidate says something of the schema: not an object that names none of its fields."""
    data = found.data
    return not (fields and isinstance(data, dict) and not any(key_fold(str(k)) in fields for k in data))


def one_answer(text: str, found: list[Found], fields: frozenset[str] | None, finish: Callable[[Found], R],
               key_of: Callable[[R], str | None]) -> R | tuple[str, str]:
    """The one answer among valid candidates (``finish`` makes its Reading), or the Misreading of
    an ambiguous text (see the module docstring). ``key_of(reading)``: its vote key, or None when
    it is a Misreading."""
    said = [f for f in found if substantive(f, fields)] or found
    best = min(said, key=lambda f: f.cost)  # the earliest on a tie
    others = [f for f in said if f is not best and _apart(f.span, best.span)]
    if not others:
        return finish(best)
    readings = {id(f): finish(f) for f in said}
    keys = {id(f): key_of(readings[id(f)]) for f in said}
    if len({keys[id(f)] for f in [best, *others]}) == 1:
        return readings[id(best)]
    marked = [f for f in said if marked_final(text, f.span[0])]
    if marked and len({keys[id(f)] for f in marked}) == 1:
        final = min(marked, key=lambda f: f.cost)
        before = [f for f in said if keys[id(f)] != keys[id(final)]]
        if keys[id(final)] is not None and all(f.span[1] <= min(m.span[0] for m in marked) for f in before):
            note = {"path": "", "fix": f"the answer marked final ({len(before)} other value{'s' * (len(before) > 1)} before it)"}
            return finish(final._replace(coercions=(*final.coercions, note)))
    distinct = len({k for k in keys.values() if k is not None})
    return ("ambiguous", f"the output holds {distinct} different values (a draft, an example or a correction?): "
            "answer once, with the one value meant")


def _apart(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two spans are two places: neither holds the other."""
    return not ((a[0] <= b[0] and b[1] <= a[1]) or (b[0] <= a[0] and a[1] <= b[1]))


class Tally:
    """The candidates tried so far: the valid ones (``found``) and the cheapest (``best``), whether
    one was an echo, the most telling failure; and, called, whether the text names any type at all
    (so it may hold an echoed schema), looked for once and only when asked."""

    __slots__ = ("best", "echo", "failure", "fields", "found", "hint", "lone", "schema", "text")

    def __init__(self, text: str, fields: frozenset[str] | None, schema: Any) -> None:
        self.best: Found | None = None
        self.found: list[Found] = []
        self.echo = False
        self.failure: Any = None  # a Misreading
        self.text = text
        self.fields = fields
        self.schema = schema
        self.hint: bool | None = None
        self.lone: bool | None = None  # whether the best so far is alone in the text (asked once per best)

    def __call__(self) -> bool:
        if self.hint is None:
            self.hint = _ANY_HINT.search(self.text.lower()) is not None
        return self.hint

    def alone(self) -> bool:
        """Whether nothing outside the best candidate may be another value (``_answers.alone``)."""
        if self.lone is None:
            self.lone = self.best is not None and alone(self.text, self.best.span, self.fields, one_number(self.schema))
        return self.lone

    def enough(self, origin: str) -> bool:
        """Whether no candidate of this origin could beat the best so far (its least cost is no
        less), and nothing else in the text may be another value."""
        return self.best is not None and self.best.cost <= FLOORS[origin] and self.alone()

    def beaten_by(self, cost: int) -> bool:
        """Whether a candidate of this cost could beat the best so far (or, the best not alone,
        whether it should be read at all: every value counts then)."""
        return self.best is None or cost < self.best.cost or not self.alone()

    def take(self, found: Any) -> None:
        """A candidate tried: its :class:`Found`, its Misreading, or \"echo\"."""
        if isinstance(found, Found):
            self.found.append(found)
            if self.best is None or found.cost < self.best.cost:
                self.best, self.lone = found, None
        elif isinstance(found, str):
            self.echo = self.echo or found == "echo"
        else:
            self.fail(found)

    def fail(self, found: Any) -> None:
        """A Misreading: kept when it has fewer errors than the one kept (the most telling)."""
        if self.failure is None or found.count < self.failure.count:
            self.failure = found
