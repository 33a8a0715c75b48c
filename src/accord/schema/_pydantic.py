"""A type as pydantic validates it and writes its JSON Schema, or an UnsupportedSchema naming the field.

accord needs both from a pydantic schema: a validator, and the JSON Schema that goes into the
prompt's hint, a grammar and the ledger key. Pydantic can fail at either, with errors of its
own: a type it cannot validate (``PydanticSchemaGenerationError``), an annotation that names
nothing (``PydanticUndefinedAnnotation``, a model left not fully defined), a type it validates
but cannot write as JSON Schema (``PydanticInvalidForJsonSchema``: an arbitrary class allowed by
``arbitrary_types_allowed``, ``InstanceOf[...]``, a ``Callable``), one it leaves out of JSON
Schema (``PydanticOmit``), and a user's own hook that raises. :func:`adapter` makes both at
once, when the schema is made, so every one of those is an :class:`~accord.UnsupportedSchema`
there, naming the field where it can (``Order.customer``), never a pydantic error at the first
run. Two are said in one sentence of accord's own, pydantic's error kept as ``__cause__``: a
plain class (neither a model, a dataclass nor a TypedDict), and a ``complex``, which pydantic
validates but describes to a model only as "a string", so no model could know what to write.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pydantic
from pydantic.json_schema import GenerateJsonSchema

from .._errors import UnsupportedSchema


def adapter(source: Any, name: str) -> tuple[pydantic.TypeAdapter[Any], dict[str, Any]]:
    """The TypeAdapter of ``source`` and its JSON Schema; an UnsupportedSchema naming the field
    where pydantic cannot make either (``name``: the schema's name, for the message)."""
    try:
        made: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(source)
    except RecursionError:
        raise UnsupportedSchema(f"pydantic cannot validate {name}: it nests too deep") from None
    except Exception as exc:  # pydantic's errors, and a user's hook: named, typed
        plain = _unknown(exc)
        if plain is not None and isinstance(source, type) and plain.startswith(f"{source.__name__} "):  # the schema itself
            raise UnsupportedSchema(f"schema={plain}") from exc
        raise UnsupportedSchema(f"cannot validate {_shown(source)}{_at(source, exc)}: {plain or _message(exc)}") from exc
    if _holds_complex(made.core_schema):
        raise UnsupportedSchema(f"schema={_shown(source)}{_at_name(source, 'complex')}: a complex number has no JSON form (pydantic "
                                "would ask the model for any string, so it could not know what to write); accord takes types "
                                "with a JSON form (str, int, float, bool, lists, dicts, pydantic models, dataclasses, TypedDicts, "
                                "Literal, Enum), a JSON Schema dict, accord.Regex or accord.Grammar: for a complex number, use a "
                                "model with two float fields (real and imag)")
    try:
        return made, made.json_schema()
    except RecursionError:
        raise UnsupportedSchema(f"pydantic cannot write the JSON Schema of {name}: it nests too deep") from None
    except Exception as exc:  # as above
        if isinstance(exc, pydantic.PydanticUndefinedAnnotation) or getattr(exc, "code", None) == "class-not-fully-defined":
            named = _undefined_name(made, exc)
            raise UnsupportedSchema(f"{_shown(source)} is not fully defined{_at(source, named)}: {_message(named)}. Define every "
                                    "type it names before the schema is made (then call its model_rebuild())") from exc
        where = _failing_field(made)
        at = "" if not where or where == [_shown(source)] else f" at the field {'.'.join(where)}" if len(where) > 1 else f" in {where[0]}"
        raise UnsupportedSchema(f"pydantic cannot write the JSON Schema of {_shown(source)}{at}: {_message(exc)}. accord needs "
                                "it for the prompt, a grammar and the ledger key: use a JSON-able type there") from exc


def undefined(exc: BaseException) -> bool:
    """Whether an UnsupportedSchema from :func:`adapter` is an annotation not defined yet (a
    model whose forward reference is defined later in its module)."""
    cause = exc.__cause__
    return isinstance(cause, pydantic.PydanticUndefinedAnnotation) or getattr(cause, "code", None) == "class-not-fully-defined"


def _undefined_name(made: pydantic.TypeAdapter[Any], exc: Exception) -> Exception:
    """The error that names the undefined annotation (``PydanticUndefinedAnnotation``), from a
    rebuild, where pydantic said only that the type is not fully defined."""
    if isinstance(exc, pydantic.PydanticUndefinedAnnotation):
        return exc
    try:
        made.rebuild(force=True, raise_errors=True)
    except pydantic.PydanticUndefinedAnnotation as named:
        return named
    except Exception:  # noqa: BLE001 - no better error: the first one stands
        return exc
    return exc


def _message(exc: BaseException) -> str:
    if isinstance(exc, pydantic.PydanticUserError | pydantic.PydanticUndefinedAnnotation):
        text = exc.message
    else:
        text = str(exc) or type(exc).__name__
    text = text.split("\n\nFor further information visit", 1)[0].strip()
    return f"{type(exc).__name__}: {text}" if type(exc).__module__.startswith("pydantic") else f"{type(exc).__name__}({text})"


def _unknown(exc: BaseException) -> str | None:
    """One sentence for a class pydantic knows nothing of (``PydanticSchemaGenerationError``,
    whose own message is two paragraphs on its hooks): a plain class of the user's, or a Python
    type with no JSON form (``slice``); None for any other error."""
    if not isinstance(exc, pydantic.PydanticSchemaGenerationError):
        return None
    text = str(exc)
    if "<class '" not in text:
        return None
    qualified = text.split("<class '", 1)[1].split("'", 1)[0]
    module, _, name = qualified.rpartition(".")
    if module in ("", "builtins"):
        return (f"{qualified} is a Python type with no JSON form: use a type that has one (str, int, float, bool, a list, a "
                "dict, a pydantic model)")
    return (f"{name} is a plain class, which pydantic cannot validate: make it a pydantic BaseModel "
            f"(class {name}(BaseModel)), a dataclass or a TypedDict, with annotated fields")


def _holds_complex(core: Any) -> bool:
    """Whether a pydantic core schema validates a ``complex`` anywhere (defaults and metadata,
    which are values rather than schemas, left aside; bounded like ``Schema.field_names``)."""
    todo, seen = [core], 0
    while todo and seen < 10_000:
        node = todo.pop()
        seen += 1
        if isinstance(node, dict):
            if node.get("type") == "complex":
                return True
            todo.extend(v for k, v in node.items() if k not in ("default", "metadata", "expected", "cls", "ref"))
        elif isinstance(node, list | tuple):
            todo.extend(node)
    return False


def _shown(source: Any) -> str:
    text = getattr(source, "__qualname__", None) if isinstance(source, type) else None
    return text if isinstance(text, str) else repr(source)


def _at(source: Any, exc: BaseException) -> str:
    """`` at the field Model.field`` of the field whose type names what pydantic could not use."""
    culprit = getattr(exc, "name", None)  # PydanticUndefinedAnnotation: the name left undefined
    if not isinstance(culprit, str):
        text = str(exc)
        culprit = next((part.split(">")[0] for part in text.split("<class '")[1:]), None)  # "for <class 'mod.Foo'>"
        culprit = culprit.rstrip("'").rsplit(".", 1)[-1] if culprit else None
    return _at_name(source, culprit) if culprit else ""


def _at_name(source: Any, culprit: str) -> str:
    """`` at the field Model.field`` of the first field whose annotation names ``culprit``."""
    where = _field_naming(source, culprit)
    return f" at the field {where}" if where else ""


def _field_naming(source: Any, culprit: str) -> str | None:
    """``Model.field`` of the first field (in the models, dataclasses and TypedDicts ``source``
    reaches) whose annotation names ``culprit``."""
    todo, seen = [source], 0
    visited: set[int] = set()
    while todo and seen < 2_000:
        tp = todo.pop(0)
        seen += 1
        if id(tp) in visited:
            continue
        visited.add(id(tp))
        for field, annotation in _fields(tp):
            if _names(annotation, culprit):
                return f"{getattr(tp, '__qualname__', tp)}.{field}"
            todo.append(annotation)
        todo.extend(typing.get_args(tp))
    return None


def _fields(tp: Any) -> list[tuple[str, Any]]:
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return [(name, field.annotation) for name, field in tp.model_fields.items()]
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return [(field.name, field.type) for field in dataclasses.fields(tp)]
    if isinstance(tp, type) and typing.is_typeddict(tp):
        return list(getattr(tp, "__annotations__", {}).items())
    return []


def _names(annotation: Any, culprit: str) -> bool:
    """Whether ``annotation`` is, or holds, ``culprit`` (a class's name, or a forward reference's)."""
    todo = [annotation]
    while todo:
        tp = todo.pop()
        if isinstance(tp, str) and culprit in tp:
            return True
        if isinstance(tp, typing.ForwardRef) and culprit in tp.__forward_arg__:
            return True
        if getattr(tp, "__name__", None) == culprit and not (isinstance(tp, type) and _fields(tp)):
            return True
        todo.extend(typing.get_args(tp))
    return False


def _failing_field(made: pydantic.TypeAdapter[Any]) -> list[str] | None:
    """``Model.field`` where pydantic cannot write the JSON Schema: the JSON Schema written again
    with a generator that tracks the field it is in (only when the first try failed)."""
    generator = _Tracking()
    try:
        generator.generate(made.core_schema)
    except Exception:  # noqa: BLE001 - the error already seen; what is wanted is where
        return generator.failed_at or None
    return None


class _Tracking(GenerateJsonSchema):
    """The default JSON Schema generator, keeping the models and fields it is in, so that where it
    fails can be named (``failed_at``: the innermost model's name and the fields below it)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[int, str] = {}
        self.path: list[tuple[bool, str]] = []  # (a model, its name) or (a field, its name)
        self.failed_at: list[str] | None = None

    def generate_inner(self, schema: Any) -> Any:
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind in ("model-fields", "typed-dict"):
            self.names.update((id(field), name) for name, field in schema["fields"].items())
        elif kind == "dataclass-args":
            self.names.update((id(field), field["name"]) for field in schema["fields"])
        step: tuple[bool, str] | None = None
        if kind in ("model", "dataclass", "typed-dict") and isinstance(schema.get("cls"), type):
            step = (True, schema["cls"].__qualname__)
        elif id(schema) in self.names:
            step = (False, self.names[id(schema)])
        if step is not None:
            self.path.append(step)
        try:
            out = super().generate_inner(schema)
        except Exception:
            if self.failed_at is None:
                models = [i for i, (model, _) in enumerate(self.path) if model]
                self.failed_at = [name for _, name in self.path[models[-1] if models else 0:]]
            raise
        if step is not None:
            self.path.pop()
        return out
