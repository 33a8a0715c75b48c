"""What ``accord audit`` reads: PROMPTS.jsonl, the schemas it names, and the gold answers.

One JSON object a line: ``prompt`` (a string or chat messages), optional ``id``, optional
``schema`` (``module:Name``, overriding ``--schema``; imported with the current directory on
``sys.path``), optional ``gold`` (the expected value as JSON data). Bad input is a
:class:`~accord.ConfigError` (or :class:`~accord.UnsupportedSchema`) naming the file and line.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from .._errors import AccordError, ConfigError, UnsupportedSchema
from .._types import Prompt
from ..read._read import Reading, read
from ..schema._schema import Schema

DEFAULT_SCHEMA = "str"
_BUILTINS = {"str": str, "int": int, "float": float, "bool": bool}


@dataclass(frozen=True)
class Item:
    """One prompt to audit. ``gold_key`` is the gold answer's canonical key (None without gold)."""

    id: str
    prompt: Prompt
    schema: Schema[Any]
    schema_name: str
    gold: Any = None
    gold_key: str | None = None

    @property
    def text(self) -> str:
        """The prompt as one line of text (for tables and the report)."""
        if isinstance(self.prompt, str):
            return self.prompt
        return " / ".join(str(m.get("content", "")) for m in self.prompt)


def resolve_schema(spec: str) -> Any:
    """``module:Name`` (imported with the current directory on sys.path) or a plain type name."""
    if spec in _BUILTINS:
        return _BUILTINS[spec]
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UnsupportedSchema(f"schema {spec!r}: expected module:Name (e.g. tasks:Person) or one of {', '.join(_BUILTINS)}")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module failing as it runs
        raise UnsupportedSchema(f"schema {spec!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})") from exc
    finally:
        if added:
            sys.path.remove(cwd)
    found = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise UnsupportedSchema(f"schema {spec!r}: {module_name!r} has no {attr!r}")
        found = getattr(found, part)
    return found


def gold_key(gold: Any, schema: Schema[Any]) -> str:
    """The gold answer's canonical key, read the way a model's output is read."""
    text = gold if isinstance(gold, str) else json.dumps(gold, ensure_ascii=False)
    reading = read(text, schema)
    if isinstance(reading, Reading):
        return reading.key
    raise ConfigError(f"gold {gold!r} does not match the schema {schema.name}: {reading.message}")


def load_items(path: str | os.PathLike[str], default_schema: str | None = None) -> list[Item]:
    """Read PROMPTS.jsonl into Items; every error names the file and line."""
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read it ({exc})") from exc
    schemas: dict[str, Schema[Any]] = {}
    items: list[Item] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not a JSON object ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(row).__name__}")
        prompt = row.get("prompt")
        if not _is_prompt(prompt):
            raise ConfigError(f"{where}: 'prompt' must be a string or a list of {{role, content}} messages")
        spec = row.get("schema") or default_schema or DEFAULT_SCHEMA
        if not isinstance(spec, str):
            raise ConfigError(f"{where}: 'schema' must be a string module:Name")
        try:
            if spec not in schemas:
                schemas[spec] = Schema.of(resolve_schema(spec))
            schema = schemas[spec]
            gold = row.get("gold")
            key = gold_key(gold, schema) if gold is not None else None
        except AccordError as exc:
            raise type(exc)(f"{where}: {exc}") from exc
        items.append(Item(str(row.get("id", f"line-{number}")), prompt, schema, spec, gold, key))
    if not items:
        raise ConfigError(f"{file}: no prompts in it")
    return items


def _is_prompt(prompt: Any) -> TypeGuard[Prompt]:
    if isinstance(prompt, str):
        return bool(prompt.strip())
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt)
    )
