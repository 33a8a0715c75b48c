"""One model output, read top to bottom: extract -> normalize -> validate -> canonicalize."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ._canonical import DEFAULT_FLOAT_DIGITS, canonical_form, canonical_key
from ._extract import ExtractionFailure, extract
from ._normalize import normalize
from ._schema import Schema
from ._validate import ValidationFailure, validate


@dataclass(frozen=True)
class Reading:
    """A valid output: the validated value, its JSON data, its canonical form and vote key."""

    value: Any
    data: Any
    form: Any
    key: str


@dataclass(frozen=True)
class Misreading:
    """An invalid output: which stage rejected it and the structured errors."""

    stage: str  # "extract" | "validate"
    errors: tuple[dict[str, Any], ...]

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'value'}: {e.get('msg')}" for e in self.errors)


def read(
    text: str,
    schema: Schema[Any],
    normalizers: Sequence[Callable[[str], str]] = (),
    float_digits: int = DEFAULT_FLOAT_DIGITS,
) -> Reading | Misreading:
    """Turn one model output into a Reading (valid) or a Misreading (why not).

    ``normalizers`` are the per-schema text normalizers; ``float_digits`` the significant digits
    floats keep in the vote key.
    """
    try:
        raw = extract(text, schema)
    except ExtractionFailure as failure:
        return Misreading("extract", tuple(failure.errors))
    data = normalize(raw, schema.json_schema, normalizers)
    try:
        value, data = validate(data, raw, schema)
    except ValidationFailure as failure:
        return Misreading("validate", tuple(failure.errors))
    dumped = schema.dump(value)
    form = canonical_form(dumped, schema.json_schema, float_digits)
    return Reading(value, dumped, form, canonical_key(form))
