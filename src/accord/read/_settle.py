"""One value settled: its data normalized, validated and canonicalized, into a :class:`Reading`
(valid) or a :class:`Misreading` (why not); of several valid candidates, one answer or none
(``_answers``). The strict and the lenient reading (``_read``, ``_lenient``) both end here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema._schema import Schema
from ._answers import Found, one_answer
from ._canonical import NotUnicode, canonical_form, canonical_key
from ._echo import ECHO
from ._exact import decimals, exact_form, has_decimals
from ._leaves import Said
from ._normalize import normalize
from ._validate import ValidationFailure, validate


@dataclass(frozen=True, slots=True)
class Reading:
    """A valid output: the validated value, its JSON data, its canonical form and vote key, and the
    repairs and coercions it took (``{"path", "fix"}`` dicts; empty when read as written).
    ``open_ended``: its last value ran to the very end of the text with nothing to close it
    (``key: value`` lines, a bare answer), so a text cut off at ``max_tokens`` may have cut it
    (the run loop then treats it as truncated)."""

    value: Any
    data: Any
    form: Any
    key: str
    coercions: tuple[dict[str, str], ...] = ()
    open_ended: bool = False


class Misreading:  # noqa: PLW1641 - equal by value (its errors are dicts), so never hashed: Python sets __hash__ to None
    """An invalid output: which stage rejected it (``stage``: "extract" | "validate") and the
    structured ``errors``; given a :class:`ValidationFailure` in their place, they are made from it
    when first asked for (most failed candidates of a lenient reading are only counted)."""

    __slots__ = ("_errors", "_failure", "stage")

    def __init__(self, stage: str, errors: tuple[dict[str, Any], ...] | ValidationFailure) -> None:
        self.stage = stage
        self._errors = errors if isinstance(errors, tuple) else None
        self._failure = None if isinstance(errors, tuple) else errors

    @property
    def errors(self) -> tuple[dict[str, Any], ...]:
        if self._errors is None:
            assert self._failure is not None
            self._errors, self._failure = tuple(self._failure.errors), None
        return self._errors

    @property
    def count(self) -> int:
        """How many errors (without making them)."""
        return len(self._errors) if self._errors is not None else self._failure.count if self._failure is not None else 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Misreading) and (self.stage, self.errors) == (other.stage, other.errors)

    def __repr__(self) -> str:
        return f"Misreading(stage={self.stage!r}, errors={self.errors!r})"

    @property
    def message(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'value'}: {e.get('msg')}" for e in self.errors)


def decide(text: str, found: list[Found], fields: frozenset[str] | None, schema: Schema[Any],
            float_digits: int | None) -> Reading | Misreading:
    """One answer among the valid candidates, or the Misreading of an ambiguous text (``_answers``)."""
    exact = has_decimals(schema)
    decided = one_answer(text, found, fields, lambda f: finish_value(f.value, schema, float_digits, f.coercions, f.open_end, exact=exact),
                         lambda r: r.key if isinstance(r, Reading) else None)
    if isinstance(decided, tuple):
        return Misreading("extract", ({"loc": (), "msg": decided[1], "type": decided[0]},))
    return decided


def settle_data(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]], float_digits: int | None,
            coercions: tuple[dict[str, str], ...] = (), *, exact: bool = False) -> Reading | Misreading:
    """normalize -> validate -> canonicalize of extracted data."""
    checked = check_data(data, schema, normalizers)
    if isinstance(checked, Misreading):
        return checked
    return finish_value(checked[0], schema, float_digits, coercions + checked[1], exact=exact)


def check_data(data: Any, schema: Schema[Any], normalizers: Sequence[Callable[[str], str]]) -> tuple[Any, tuple[dict[str, str], ...]] | Misreading:
    """normalize -> validate: ``(value, what normalizing took)``, or a Misreading (where a text
    was refused, as a negation or a number of two readings, its reason in place of the validator's;
    a refusal is a Misreading even where the validator would take the data: ``true`` for a number)."""
    said = Said()
    normalized = normalize(data, schema.json_schema, normalizers, said)
    try:
        value, used = validate(normalized, data, schema)
    except ValidationFailure as failure:
        exact = decimals(normalized, failure, schema, said) if not said.refusals else None
        if exact is not None:
            return exact
        if not said.refusals:
            return Misreading("validate", failure)
        refused = {tuple(path) for path, _ in said.refusals}
        errors = [refusal.error(tuple(path)) for path, refusal in said.refusals]
        errors += [e for e in failure.errors if not any(tuple(e.get("loc", ()))[: len(p)] == p for p in refused)]
        return Misreading("validate", tuple(errors))
    if said.refusals:
        return Misreading("validate", tuple(refusal.error(tuple(path)) for path, refusal in said.refusals))
    return value, tuple(said.notes) if used is normalized else ()


def finish_value(value: Any, schema: Schema[Any], float_digits: int | None, coercions: tuple[dict[str, str], ...],
            open_ended: bool = False, *, exact: bool = False) -> Reading | Misreading:
    """canonicalize a validated value into its Reading (``exact``: the schema holds a Decimal)."""
    dumped = schema.dump(value)
    form = canonical_form(exact_form(schema, value, dumped) if exact else dumped, schema.json_schema, float_digits)
    try:
        key = canonical_key(form, strict=True)
    except NotUnicode:  # "\ud800" is no text: it could be neither stored nor sent on
        return Misreading("validate", ({"loc": (), "msg": "a lone surrogate: not valid Unicode text", "type": "unicode"},))
    except ValueError:  # NaN or infinity: JSON has no such number, so no vote key either
        return Misreading("validate", ({"loc": (), "msg": "not a finite number", "type": "finite_number"},))
    return Reading(value, dumped, form, key, coercions, open_ended)


def echo_refused() -> Misreading:
    return Misreading("extract", ({"loc": (), "msg": ECHO, "type": "schema_echo"},))
