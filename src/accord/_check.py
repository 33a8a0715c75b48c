"""The one validation of configuration: every policy and setting is checked when it is built.

``Settings``, ``Vote``, ``Retry``, ``Budget``, ``Extract`` and the ``Stabilizer`` call these
checks from their constructors, so a value that cannot work fails at once with a
:class:`~accord.ConfigError` naming the parameter, before any model call, never later as a raw
``TypeError`` or a hang. The limits:

    counts (k, attempts, max_calls, max_tokens, top_k)   ints >= 1 (never a bool, never 2.5)
    Vote(k=...)                                           at most ``MAX_K`` ballots
    seconds and factors                                   finite real numbers in their range
    stop=                                                 one string or a sequence of strings
    callables (tie_break, wait, stop, on_ballot)          callable
    schema= (past the kinds it names itself)              a type or a typing form, never a value,
                                                          never ``object`` or ``Any``
"""

from __future__ import annotations

import math
import types
import typing
import unicodedata
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from ._errors import ConfigError, UnsupportedSchema

MAX_K = 1000  # ballots per run: each is at least one model call; more is a typo, not a policy


def deprecated(old: str, new: str, stacklevel: int = 2) -> None:
    """The one DeprecationWarning of a spelling of the release before: ``old`` as the user wrote
    it, ``new`` what to write now. ``stacklevel``: as ``warnings.warn`` counts it from the caller."""
    warnings.warn(f"{old} is deprecated: use {new} (the old spelling goes in the next release)", DeprecationWarning,
                  stacklevel=stacklevel + 1)


def _name(owner: str, name: str) -> str:
    return f"{owner}({name}=...)" if owner else f"{name}="


def integer(owner: str, name: str, value: Any, *, low: int = 1, high: int | None = None, optional: bool = False) -> None:
    """An int in ``[low, high]`` (None allowed when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"{_name(owner, name)} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ConfigError(f"{_name(owner, name)} must be an int {span}, got {value!r}")


def number(
    owner: str, name: str, value: Any, *, low: float = 0.0, high: float = math.inf, strict: bool = False, optional: bool = False
) -> None:
    """A finite real number in ``[low, high]`` (``(low, high]`` when ``strict``)."""
    if value is None and optional:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ConfigError(f"{_name(owner, name)} must be a number, got {value!r}")
    if not math.isfinite(value) or value < low or value > high or (strict and value == low):
        above = f"> {low:g}" if strict else f">= {low:g}"
        span = above if high == math.inf else f"{above} and <= {high:g}"
        raise ConfigError(f"{_name(owner, name)} must be a finite number {span}, got {value!r}")


def boolean(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{_name(owner, name)} must be True or False, got {value!r}")


def function(owner: str, name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise ConfigError(f"{_name(owner, name)} must be callable, got {value!r}")


def stop_strings(value: Any) -> tuple[str, ...] | None:
    """``stop=``: one string (``"END"`` is one stop string, never ``("E", "N", "D")``) or a
    sequence of non-empty strings; None or empty for none."""
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    elif isinstance(value, (bytes, dict)) or not isinstance(value, Iterable):
        raise ConfigError(f"stop= must be a string or a sequence of strings, got {value!r}")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"stop= must hold non-empty strings, got {item!r}")
    return out or None


def settings(s: Any) -> None:
    """Check a :class:`~accord.Settings` (its ``stop`` is made a tuple by the caller)."""
    integer("Settings", "max_tokens", s.max_tokens, optional=True)
    number("Settings", "temperature", s.temperature)
    integer("Settings", "seed", s.seed, low=-(2**63), high=2**64 - 1, optional=True)
    number("Settings", "top_p", s.top_p, strict=True, high=1.0, optional=True)
    integer("Settings", "top_k", s.top_k, optional=True)


def vote(v: Any) -> None:
    """Check a :class:`~accord.Vote` (its quorum and early stop are checked by Vote itself)."""
    integer("Vote", "k", v.k, high=MAX_K)
    boolean("Vote", "fieldwise", v.fieldwise)
    function("Vote", "tie_break", v.tie_break)
    if v.gate is not None and not (callable(getattr(v.gate, "check", None)) and callable(getattr(v.gate, "floor_for", None))):
        raise ConfigError(f"Vote(gate=...) must be an accord.MarginGate or None, got {v.gate!r}")


def retry(r: Any) -> None:
    """Check a :class:`~accord.Retry`."""
    integer("Retry", "attempts", r.attempts)
    integer("Retry", "transport_attempts", r.transport_attempts)
    function("Retry", "wait", r.wait)
    function("Retry", "stop", r.stop, optional=True)
    function("Retry", "transport_stop", r.transport_stop, optional=True)
    number("Retry", "grow_max_tokens", r.grow_max_tokens, low=1.0)
    number("Retry", "max_wait", r.max_wait)
    boolean("Retry", "grow_loops", r.grow_loops)
    boolean("Retry", "close_prose", r.close_prose)


def budget(b: Any) -> None:
    """Check a :class:`~accord.Budget`: each limit positive, or None for no limit."""
    number("Budget", "max_seconds", b.max_seconds, strict=True, optional=True)
    integer("Budget", "max_calls", b.max_calls, optional=True)
    integer("Budget", "max_total_tokens", b.max_total_tokens, optional=True)


def one_of(owner: str, name: str, value: Any, kind: type, *, optional: bool = True) -> None:
    """``value`` is an instance of ``kind`` (or None)."""
    if value is None and optional:
        return
    if not isinstance(value, kind):
        raise ConfigError(f"{_name(owner, name)} must be an accord.{kind.__name__}, got {type(value).__name__}")


def normalizers(value: Any) -> tuple[Callable[[str], str], ...]:
    """``normalize=``: a sequence of callables ``str -> str``."""
    if callable(value) or isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise ConfigError(f"normalize= takes a list of callables str -> str (e.g. [accord.casefold]), got {value!r}")
    out = tuple(value)
    for fn in out:
        if not callable(fn):
            raise ConfigError(f"normalize= takes callables str -> str, got {fn!r}")
    return out


def prompt(value: Any) -> Any:
    """A prompt: a string, or a non-empty list of ``{"role": ..., "content": ...}`` messages,
    that says something: never empty or blank (only whitespace or invisible characters), nor a
    list whose every message is. A message says something when its content holds visible text
    or a part that is not text (an image), or it calls a tool."""
    if isinstance(value, str):
        if _blank(value):
            raise ConfigError(f"the prompt is {'empty' if not value else 'blank'} ({_shown(value)}): nothing would be asked of the model")
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        if not any(_says(m) for m in value):
            raise ConfigError(f"every message of the prompt is empty or blank ({len(value)} message{'s' * (len(value) != 1)}): "
                              "nothing would be asked of the model")
        return value
    raise ConfigError("a prompt must be a string or a non-empty list of {'role': ..., 'content': ...} messages")


def _says(message: dict[str, Any]) -> bool:
    if message.get("tool_calls") or message.get("function_call"):
        return True
    content = message["content"]
    if isinstance(content, str):
        return not _blank(content)
    if isinstance(content, list):  # parts: {"type": "text", "text": ...}, {"type": "image_url", ...}
        return any(not (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) and _blank(p["text"]))
                   for p in content)
    return content is not None


def _blank(text: str) -> bool:
    """Only whitespace and invisible format characters (a zero-width space, a BOM)."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


def prompts(value: Any) -> list[Any]:
    """``map(prompts)``: an iterable of prompts, never one string (which would be one prompt per character)."""
    if isinstance(value, (str, bytes, dict)):
        raise ConfigError(f"map() takes an iterable of prompts, got one {type(value).__name__}: pass [prompt]")
    if not isinstance(value, Iterable):
        raise ConfigError(f"map() takes an iterable of prompts, got {type(value).__name__}")
    return list(value)


_SCHEMAS = "pass a pydantic model, Literal[...], an Enum, a plain type, a JSON Schema dict, accord.Regex or accord.Grammar"


def schema_type(source: Any) -> None:
    """``schema=`` that is no pydantic model, choice, dict, Regex or Grammar: it must be a type
    or a typing form (``list[int]``, ``int | None``, ``Annotated[...]``) that can refuse a value.
    An UnsupportedSchema naming what was given otherwise: a value (a pydantic instance, a string,
    a function), or ``object`` and ``Any``, which every value passes."""
    if source is object or source is typing.Any:
        raise UnsupportedSchema(f"schema={_shown(source)} accepts every value, so nothing would be validated: use str for free text, "
                                "dict for any JSON object, or the type you expect")
    if isinstance(source, type) or typing.get_origin(source) is not None or isinstance(source, (typing.NewType, typing.TypeVar)):
        return
    if type(source).__name__ in ("TypeAliasType", "ForwardRef"):
        return
    kind = type(source)
    what = f"an instance of {kind.__name__}" if hasattr(kind, "model_fields") else f"a {kind.__module__}.{kind.__qualname__}"
    if isinstance(source, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        what = f"a {kind.__name__} ({getattr(source, '__qualname__', source)!r})"
    raise UnsupportedSchema(f"schema={_shown(source)} is {what}, a value, not a schema: {_SCHEMAS}")


def _shown(value: Any) -> str:
    text = getattr(value, "__name__", None) if isinstance(value, type) or value is typing.Any else None
    text = text if isinstance(text, str) else repr(value)
    return text if len(text) <= 80 else text[:79] + "…"
