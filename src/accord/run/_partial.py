"""Streaming: the first ballot as it is written, then the decision. ``stab.stream(prompt)``.

    Partial(text, data, value, attempt)   slot 0's text so far, read as far as it goes
    ...
    Decided(result, changed)              the Result, and whether it is not what slot 0 showed

A Partial is read from the text so far: for a JSON shape (objects, lists), ``data`` is the
partial JSON (an unfinished string kept as far as it goes, an unfinished number or word left
out) and ``value`` the schema's value once pydantic's partial validation accepts it (every
required field present; the last string may still grow); for a choice, a scalar or a string,
``value`` (and ``data``, its JSON data) is the text read as accord reads any output, once it reads. A retry of slot 0 starts
again from an empty text (``attempt`` says which call it is).

A UI shows the Partials as they come and then replaces them with ``Decided.result.value``; when
``Decided.changed`` is set, the margin gate or the vote chose another answer than the one the
first ballot showed (or none: ``result.error``), so the UI should say so rather than swap it
silently.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pydantic
import pydantic_core

from .._result import Result
from ..read._extract import shape_of
from ..read._read import Reading, read
from ..schema._schema import Schema

T = TypeVar("T")


@dataclass(frozen=True)
class Partial(Generic[T]):
    """Slot 0's text so far (``text``), its partial JSON ``data`` and its partially validated
    ``value`` (None until they read; see the module docstring); ``attempt``: its call number."""

    text: str
    data: Any = None
    value: T | None = None
    attempt: int = 1


@dataclass(frozen=True)
class Decided(Generic[T]):
    """The last event of a stream: the run's Result (``result.error`` set when it failed: a stream
    never raises it), and ``changed``: the answer is not the one the first ballot showed."""

    result: Result[T]
    changed: bool

    @property
    def value(self) -> T | None:
        return self.result.value


def changed(result: Result[Any]) -> bool:
    """Whether ``result`` is not the first ballot's (slot 0's) answer as it was written."""
    first = next((b for b in reversed(result.ballots) if b.slot == 0 and b.status == "valid"), None)
    return result.error is not None or first is None or first.key != result.key


_UNFINISHED_NUMBER = re.compile(r"([:,\[]\s*)-?\d[\d.eE+-]*$")  # a number the text ends in: more digits may come
_ADAPTERS: weakref.WeakKeyDictionary[Schema[Any], pydantic.TypeAdapter[Any] | None] = weakref.WeakKeyDictionary()


class Partials:
    """Reads one stream's text as it grows (one Partial per delta)."""

    def __init__(self, schema: Schema[Any]) -> None:
        self.schema = schema
        self.json = shape_of(schema) == "json"
        self.adapter = _adapter(schema) if self.json else None
        self.key: tuple[int, int] | None = None
        self.text = ""

    def feed(self, slot: int, attempt: int, delta: str) -> Partial[Any]:
        if self.key != (slot, attempt):
            self.key, self.text = (slot, attempt), ""  # a retry writes from the start
        self.text += delta
        if self.json:
            data, value = self.read_json(self.text)
        else:
            reading = read(self.text, self.schema)
            data, value = (reading.data, reading.value) if isinstance(reading, Reading) else (None, None)
        return Partial(self.text, data, value, attempt)

    def read_json(self, text: str) -> tuple[Any, Any]:
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
        if start < 0:
            return None, None
        body = text[start:].rstrip().removesuffix("```").rstrip()
        body = _UNFINISHED_NUMBER.sub(r"\1", body)  # "age": 3 may be the start of 30
        try:
            data = pydantic_core.from_json(body, allow_partial="trailing-strings")
        except ValueError:
            return None, None
        if self.adapter is None:
            return data, None
        try:
            return data, self.adapter.validate_json(body, experimental_allow_partial="trailing-strings")
        except pydantic.ValidationError:
            return data, None


def _adapter(schema: Schema[Any]) -> pydantic.TypeAdapter[Any] | None:
    """A pydantic adapter of the schema's type (None for a JSON Schema dict: no partial values)."""
    if schema.kind not in ("object", "type"):
        return None
    if schema not in _ADAPTERS:
        _ADAPTERS[schema] = pydantic.TypeAdapter(schema.source)
    return _ADAPTERS[schema]
