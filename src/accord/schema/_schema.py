"""What shape the output takes: one adapter over every kind of ``schema=`` accord accepts.

Kinds: ``object`` (a pydantic model), ``choice`` (``Literal[...]`` or an ``Enum``), ``scalar``
(``int``, ``float``, ``bool``, ``str``), ``type`` (any other type pydantic can validate, such as
``list[int]``), ``json`` (a JSON Schema dict), ``regex`` (:class:`Regex`) and ``grammar``
(:class:`Grammar`, a Lark grammar). A JSON Schema dict is checked and validated by
:mod:`._jsonschema`; the instruction that tells a model the shape is rendered by
:mod:`accord.prompt._signature`.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

import pydantic
import pydantic_core

from .. import _check
from .._errors import AccordError, UnsupportedSchema
from ..prompt._signature import Hint, hint, signature
from ..read import _deadline
from ._jsonschema import json_validator
from ._metaschema import MAX_PATTERN
from ._pydantic import adapter
from ._roles import Roles, roles_of

__all__ = ["Grammar", "Regex", "Schema", "ValidationFailure", "signature"]

T = TypeVar("T")

_SCALAR_WORDS = {int: "an integer", float: "a number", bool: "yes or no", str: "a short text"}


@dataclass(frozen=True)
class Regex:
    """Output that must match a regular expression as a whole (``re.fullmatch``)."""

    pattern: str

    def __post_init__(self) -> None:
        if len(self.pattern) > MAX_PATTERN:
            raise UnsupportedSchema(f"Regex pattern is {len(self.pattern):,} characters long; accord takes patterns of up to {MAX_PATTERN:,}")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise UnsupportedSchema(f"invalid regular expression {self.pattern!r}: {exc}") from exc


@dataclass(frozen=True)
class Grammar:
    """Output that must parse under a context-free grammar written in Lark (start rule ``start``)."""

    lark: str

    @cached_property
    def parser(self) -> Any:
        """The Earley parser: any context-free grammar."""
        try:
            import lark
        except ImportError as exc:  # pragma: no cover - lark is a core dependency
            raise UnsupportedSchema("Grammar needs the 'lark' package: pip install lark") from exc
        try:
            return lark.Lark(self.lark, start="start", parser="earley")
        except lark.exceptions.LarkError as exc:
            raise UnsupportedSchema(f"invalid Lark grammar: {exc}") from exc

    @cached_property
    def fast_parser(self) -> Any:
        """An LALR(1) parser when the grammar is LALR(1) (linear time), else None."""
        import lark

        try:
            return lark.Lark(self.lark, start="start", parser="lalr")
        except lark.exceptions.LarkError:
            return None

    def check(self, text: str) -> None:
        """Raise :class:`ValidationFailure` unless the text parses. The LALR parser first, where the
        grammar allows one: a parse it finds is a derivation, so the text is in the language; only
        what it rejects goes to Earley (measured: 20,000 characters of ``start: A+`` take 0.28 s
        under LALR, 11 s under Earley)."""
        import lark

        fast = self.fast_parser
        if fast is not None:
            try:
                fast.parse(text)
                return
            except lark.exceptions.LarkError:
                pass
        try:
            self.parser.parse(text)
        except lark.exceptions.LarkError as exc:
            raise ValidationFailure([{"loc": (), "msg": _short(str(exc).strip(), 200), "type": "grammar"}]) from None


class ValidationFailure(AccordError):
    """Raised by :meth:`Schema.validate`; ``errors`` are structured dicts (loc, msg, type).

    ``errors`` may also be a function that makes them, with their ``count``: they are made when
    first asked for (the lenient reader validates many candidates, and most failures are only
    counted)."""

    def __init__(self, errors: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]], count: int | None = None) -> None:
        Exception.__init__(self)
        self.result = None
        self._message: str | None = None
        self._errors = errors if isinstance(errors, list) else None
        self._make = None if isinstance(errors, list) else errors
        self.count = len(errors) if isinstance(errors, list) else int(count or 0)

    @property
    def errors(self) -> list[dict[str, Any]]:
        if self._errors is None:
            assert self._make is not None
            self._errors, self._make = self._make(), None
        return self._errors

    @property
    def message(self) -> str:
        """AccordError's message, made from the errors when first asked for."""
        if self._message is None:
            self._message = "; ".join(_error_line(e) for e in self.errors)
        return self._message

    @message.setter
    def message(self, value: str) -> None:
        self._message = value

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"ValidationFailure({self.errors!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ValidationFailure, (self.errors,))


def _pydantic_errors(exc: pydantic.ValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": tuple(e["loc"]), "msg": e["msg"], "type": e["type"], **({} if e["type"] == "missing" else {"input": _short(e.get("input"))})}
        for e in exc.errors(include_url=False)
    ]


def _error_line(error: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ())) or "value"
    return f"{loc}: {error.get('msg', 'invalid')}"


def _short(value: Any, limit: int = 80) -> Any:
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


class Schema(Generic[T]):
    """The adapter: validate data into a value, dump a value to JSON data, describe the shape."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.kind = self._kind_of(source)
        self._adapter: pydantic.TypeAdapter[T] | None = None
        self._validator: Any = None
        if self.kind in {"object", "choice", "scalar", "type"}:
            # its JSON Schema too, now: what pydantic cannot write is an UnsupportedSchema here
            self._adapter, self.__dict__["json_schema"] = adapter(source, self.name)
        elif self.kind == "json":
            self._validator = json_validator(source)
        elif self.kind == "grammar":
            source.parser  # noqa: B018 - compile now, so a bad grammar fails at construction

    @staticmethod
    def of(source: Any) -> Schema[Any]:
        return source if isinstance(source, Schema) else Schema(source)

    @staticmethod
    def _kind_of(source: Any) -> str:
        if isinstance(source, dict):
            return "json"
        if isinstance(source, Regex):
            return "regex"
        if isinstance(source, Grammar):
            return "grammar"
        if isinstance(source, type) and issubclass(source, pydantic.BaseModel):
            return "object"
        if _is_literal(source) or (isinstance(source, type) and issubclass(source, enum.Enum)):
            return "choice"
        _check.schema_type(source)  # a value (a pydantic instance, a function), object or Any: refused, named
        if source in _SCALAR_WORDS:
            return "scalar"
        if source is None or isinstance(source, (str, int, float, list, tuple)):
            raise UnsupportedSchema(
                f"schema={source!r} is not a schema: pass a pydantic model, Literal[...], an Enum, "
                "a plain type, a JSON Schema dict, accord.Regex or accord.Grammar"
            )
        return "type"

    # -- description -------------------------------------------------------------------------

    @property
    def name(self) -> str:
        if self.kind == "json":
            return str(self.source.get("title", "json"))
        if self.kind in {"regex", "grammar"}:
            return self.kind
        return getattr(self.source, "__name__", None) or repr(self.source)

    @cached_property
    def json_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the output (None for a grammar)."""
        if self.kind == "json":
            return typing.cast("dict[str, Any]", self.source)
        if self.kind == "regex":
            return {"type": "string", "pattern": self.source.pattern}
        return None

    @cached_property
    def field_names(self) -> frozenset[str]:
        """Every property name the JSON Schema declares, at any depth (for a grammar, none)."""
        names: set[str] = set()
        todo: list[Any] = [self.json_schema or {}]
        seen = 0
        while todo and seen < 10_000:  # bounded: a huge schema is read only so far
            node = todo.pop()
            seen += 1
            if isinstance(node, dict):
                props = node.get("properties")
                if isinstance(props, dict):
                    names.update(k for k in props if isinstance(k, str))
                todo.extend(node.values())
            elif isinstance(node, list):
                todo.extend(node)
        return frozenset(names)

    @cached_property
    def choices(self) -> tuple[Any, ...] | None:
        """The allowed values of a choice schema, as JSON data."""
        if self.kind != "choice":
            return None
        if _is_literal(self.source):
            return tuple(m.value if isinstance(m, enum.Enum) else m for m in typing.get_args(self.source))
        return tuple(member.value for member in self.source)

    def roles(self, overrides: typing.Mapping[str, str] | None = None) -> Roles:
        """Each leaf's role, decisive, prose or auto (``_roles``), with ``overrides`` (``Vote(roles=...)``)
        over the default rule; worked out once per set of overrides."""
        said = tuple(sorted((overrides or {}).items()))
        cache: dict[tuple[tuple[str, str], ...], Roles] = self.__dict__.setdefault("_roles", {})
        if said not in cache:
            cache[said] = roles_of(self.json_schema, dict(said))
        return cache[said]

    def describe(self) -> dict[str, Any]:
        """The schema's name, kind, and the role of each of its fields (``{path: role}``)."""
        return {"name": self.name, "kind": self.kind, "roles": self.roles().describe()}

    def render(self) -> str:
        """A short instruction that tells a model the expected shape (for unconstrained backends).

        Rendered once per schema, within the schema's compact JSON length plus 2,000 characters
        (``_signature``); ``_hint`` says in which form."""
        return self._hint.text

    @cached_property
    def _hint(self) -> Hint:
        """The rendering :meth:`render` returns, with its form and what it left out."""
        if self.kind == "choice":
            words = ", ".join(json.dumps(c) if not isinstance(c, str) else c for c in self.choices or ())
            text = f"Answer with exactly one of: {words}."
        elif self.kind == "scalar":
            text = f"Answer with {_SCALAR_WORDS[self.source]} only."
        elif self.kind == "regex":
            text = f"Answer with text matching the regular expression {self.source.pattern}"
        elif self.kind == "grammar":
            text = f"Answer in this grammar (Lark):\n{self.source.lark.strip()}"
        else:
            return hint(self.json_schema or {})
        return Hint(text, "text", (), 0)

    # -- validation --------------------------------------------------------------------------

    def validate(self, data: Any) -> T:
        """Return the validated value, or raise :class:`ValidationFailure` with structured errors."""
        adapter = self._adapter
        if adapter is not None:
            try:
                validator: Any = adapter.validator  # a mock until a deferred build is done
                if type(validator) is pydantic_core.SchemaValidator:  # built: called without the adapter's wrapper
                    value: T = validator.validate_python(data)  # the adapter is of T
                    return value
                return adapter.validate_python(data)  # a deferred build: the adapter builds it
            except pydantic.ValidationError as exc:
                raise ValidationFailure(functools.partial(_pydantic_errors, exc), exc.error_count()) from None
        if self.kind == "json":
            errors = sorted(self._validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
            if errors:
                raise ValidationFailure(
                    [
                        {"loc": tuple(e.absolute_path), "msg": _short(e.message, 200), "type": str(e.validator)}
                        for e in errors[:20]
                    ]
                )
        else:
            self._check_text(data)
        valid: T = data  # a JSON Schema's data, a regex's or a grammar's text, is its value: T is Any or str
        return valid

    def _check_text(self, data: Any) -> None:
        """Raise :class:`ValidationFailure` unless ``data`` is text that the regex or grammar takes."""
        if not isinstance(data, str):
            raise ValidationFailure([{"loc": (), "msg": "expected text", "type": "string_type", "input": _short(data)}])
        if self.kind == "regex":
            if not _deadline.fullmatch(self.source.pattern, data):
                raise ValidationFailure(
                    [{"loc": (), "msg": f"does not match {self.source.pattern}", "type": "pattern", "input": _short(data)}]
                )
            return
        self.source.check(data)

    def dump(self, value: Any) -> Any:
        """The JSON data of a validated value."""
        adapter = self._adapter
        if adapter is not None:
            serializer: Any = adapter.serializer  # a mock until a deferred build is done
            if type(serializer) is pydantic_core.SchemaSerializer:  # built: called without the adapter's wrapper
                return serializer.to_python(value, mode="json")
            return adapter.dump_python(value, mode="json")
        return value

    def __repr__(self) -> str:
        return f"Schema({self.kind}: {self.name})"
