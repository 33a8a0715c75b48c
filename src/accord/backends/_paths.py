"""Import paths: what names a function or class the same in every process (``module:qualname``).

A path names only what one process can hold at it: the object at that path in this process is
the object named (or a wrapper of it). A script's objects (``__main__``) go by the script's
absolute path, or by the module ``python -m`` ran; in an interactive session (a REPL,
``python -c``, a notebook) ``__main__`` has no path another process could share
(:func:`main_module` is None).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import types
from typing import Any

DIGITS = 16  # hex digits of a digest shown in an identity


class Unnamed(Exception):
    """No identity can be derived soundly; ``reason`` says why, in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# accord's own modules that moved into role folders after the first key format: a key names each by
# its path in that format, so what a ledger decided before the move still replays.
_KEY_PATHS = {
    "accord.read._read": "accord._read",
    "accord.read._extract": "accord._extract",
    "accord.read._jsonish": "accord._jsonish",
    "accord.read._candidates": "accord._candidates",
    "accord.read._coerce": "accord._coerce",
    "accord.read._normalize": "accord._normalize",
    "accord.read._validate": "accord._validate",
    "accord.read._canonical": "accord._canonical",
    "accord.read._deadline": "accord._deadline",
    "accord.schema._schema": "accord._schema",
    "accord.schema._metaschema": "accord._metaschema",
    "accord.prompt._prompt": "accord._prompt",
    "accord.prompt._signature": "accord._signature",
    "accord.prompt._examples": "accord._examples",
    "accord.vote._vote": "accord._vote",
    "accord.vote._fieldwise": "accord._fieldwise",
    "accord.vote._gate": "accord._gate",
    "accord.vote._predict": "accord._predict",
    "accord.vote._perturb": "accord._perturb",
    "accord.observe._hooks": "accord._hooks",
    "accord.observe._telemetry": "accord._telemetry",
    "accord.observe._prices": "accord._prices",
    "accord.run._partial": "accord._partial",
}


def key_path(module_name: str) -> str:
    """The module path a ledger key names: the path of the first key format for a moved accord module."""
    return _KEY_PATHS.get(module_name, module_name)


def readable(fn: Any) -> str:
    """A name for people (spans, messages): ``module:qualname`` of fn, of its function, or of its class."""
    if isinstance(fn, functools.partial):
        return f"partial({readable(fn.func)})"
    if isinstance(fn, types.MethodType):
        return readable(fn.__func__)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        module, qualname = type(fn).__module__, type(fn).__qualname__
    return f"{module}:{qualname}"


_MISSING = object()


def named(obj: Any) -> str | None:
    """``module:qualname`` when the object at that import path in this process is ``obj`` (or a
    wrapper of it, through ``__wrapped__``); None when it has no such path. A script's object is
    ``__main__:qualname#`` and a digest of the script's path; Unnamed in an interactive session."""
    module_name, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module is None:
        return None
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, _MISSING)
        if target is _MISSING:
            return None
    if not is_or_wraps(target, obj):
        return None
    if module_name == "__main__":
        return f"__main__:{qualname}#{digest(['main', main_module() or _interactive()])}"
    return f"{key_path(module_name)}:{qualname}"


def is_or_wraps(target: Any, obj: Any) -> bool:
    """Whether ``target`` is ``obj``, or wraps it (``__wrapped__``, up to 8 deep)."""
    for _ in range(8):
        if target is obj or (isinstance(obj, types.MethodType) and target == obj):
            return True
        target = getattr(target, "__wrapped__", None)
        if target is None:
            return False
    return False


def main_module() -> str | None:
    """The identity of ``__main__``: the module a ``python -m`` runs, or the script's absolute
    path; None in an interactive session (``python -c``, a REPL, a notebook)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return f"module {spec.name}"
    path = getattr(main, "__file__", None)
    if isinstance(path, str) and path:
        return f"script {os.path.abspath(path)}"
    return None


def _interactive() -> str:
    raise Unnamed("it was defined in an interactive session (no module file), so no other process can name it the same")


def digest(material: Any) -> str:
    """The sha256 (:data:`DIGITS` hex digits) of ``material``'s canonical JSON."""
    text = json.dumps(material, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]
