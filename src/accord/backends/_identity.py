"""What names a model function in the ledger, the same in every process: never a guess.

    named(fn) -> "module:qualname"     fn is what that import path names (or wraps), as pickle
                                       finds a function by reference
    derived(fn) -> "readable#digest"   otherwise: a digest of what decides fn's answers
    Unnamed(reason)                    raised where neither can be had soundly

A derived identity is the sha256 (16 hex digits shown) of a canonical description of:

    a function            its module, qualified name, code (bytecode, constants, names; the
                          interpreter's cache tag, since bytecode differs between versions),
                          defaults, attributes and the values its closure holds
    functools.partial     the function, its arguments and keywords
    a bound method        the function and the object it is bound to
    an object             its class and its state as pickle would take it (``__reduce_ex__``:
                          ``__dict__``, slots, items), walked, never pickled; an accord backend
                          by its own identity
    a class               its import path, or (a local class) its bases and members
    data                  None, bools, numbers, strings, bytes, tuples, lists, dicts (in their
                          order), sets (sorted)

Two things that answer differently never share one: their code, or a value they hold, differs.
What a function reads from its module's globals is not walked: the module stands for it, so a
global that another process sets otherwise (a client chosen from an environment variable) is one
reason to name the model. A function of a script (``__main__``) goes by the script's absolute
path; one typed into an interactive session has no module another process could share, and is
Unnamed. So is anything holding a value with no stable state (a lock, a socket, a generator, an
open file), or too large to describe (:data:`MAX_NODES` values, :data:`MAX_BYTES` of text).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import types
from typing import Any

from ._base import Backend

MAX_NODES = 20_000  # values described: past this, a model is too large to fingerprint (name it)
MAX_BYTES = 4_000_000  # characters of strings and bytes described, likewise
MAX_DEPTH = 120  # nesting of the values described
DIGITS = 16  # hex digits of the digest shown in a derived identity


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


def identity(fn: Any) -> str:
    """``fn``'s identity: its import path when it has one, else a derived one; Unnamed if neither."""
    return named(fn) or derived(fn)


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


def named(obj: Any) -> str | None:
    """``module:qualname`` when the object at that import path in this process is ``obj`` (or a
    wrapper of it, through ``__wrapped__``); None when it has no such path. A script's function
    is ``__main__:qualname#`` and a digest of the script's path; Unnamed in an interactive session."""
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
    if not _is_or_wraps(target, obj):
        return None
    if module_name == "__main__":
        return f"__main__:{qualname}#{_digest(['main', _main()])}"
    return f"{key_path(module_name)}:{qualname}"


def derived(fn: Any) -> str:
    """``readable(fn)#digest`` of what decides fn's answers (see the module docstring); Unnamed if it cannot be had."""
    return f"{readable(fn)}#{_digest(_Walk().value(fn, ''))}"


def digest_of(value: Any, what: str) -> str:
    """The digest of a value (arguments a call passes, say), as a derived identity describes it."""
    return _digest(_Walk().value(value, what))


_MISSING = object()
_PLAIN = frozenset({str, int, float, complex, bool, bytes, bytearray, type(None), type(...)})
_NOT_MEMBERS = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "_abc_impl"})
# Objects whose state is weights or devices: walking it would copy gigabytes, and it is no name.
_HEAVY = frozenset({"torch", "tensorflow", "jax", "jaxlib"})


def _is_or_wraps(target: Any, obj: Any) -> bool:
    for _ in range(8):
        if target is obj or (isinstance(obj, types.MethodType) and target == obj):
            return True
        target = getattr(target, "__wrapped__", None)
        if target is None:
            return False
    return False


def _main() -> str:
    """The identity of ``__main__``: the module a ``python -m`` runs, the script's absolute path,
    or Unnamed (an interactive session, ``python -c``, a notebook)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", None):
        return f"module {spec.name}"
    path = getattr(main, "__file__", None)
    if isinstance(path, str) and path:
        return f"script {os.path.abspath(path)}"
    raise Unnamed("it was defined in an interactive session (no module file), so no other process can name it the same")


def _module(name: Any) -> str:
    if name == "__main__":
        return _main()
    return str(name)


def _digest(material: Any) -> str:
    text = json.dumps(material, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]


class _Walk:
    """One description: values seen are referred to by their order (cycles end there)."""

    def __init__(self) -> None:
        self.seen: dict[int, int] = {}
        self.alive: list[Any] = []  # keeps every walked object alive, so no id is reused meanwhile
        self.nodes = 0
        self.size = 0
        self.depth = 0

    def value(self, v: Any, where: str) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or self.size > MAX_BYTES:
            raise Unnamed(_at(where, f"it holds too much to fingerprint (over {MAX_NODES:,} values or {MAX_BYTES:,} characters)"))
        if type(v) in _PLAIN:
            return self.plain(v)
        if type(v) not in (tuple, frozenset):  # those never close a cycle alone, and how equal ones are
            if id(v) in self.seen:  # shared differs between processes: never referred to, always described
                return ["ref", self.seen[id(v)]]
            self.seen[id(v)] = len(self.seen)
            self.alive.append(v)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unnamed(_at(where, "its values nest too deep to fingerprint"))
        try:
            return self.compound(v, where)
        finally:
            self.depth -= 1

    def plain(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            self.size += len(v) if isinstance(v, str) else 1
            return v
        if isinstance(v, int):
            return ["int", format(v, "x")]
        if isinstance(v, float):
            return ["float", v.hex()]
        if isinstance(v, complex):
            return ["complex", v.real.hex(), v.imag.hex()]
        if isinstance(v, (bytes, bytearray)):
            self.size += len(v)
            return [type(v).__name__, hashlib.sha256(v).hexdigest()]
        return ["ellipsis"]

    def compound(self, v: Any, where: str) -> Any:
        kind = type(v)
        if kind in (tuple, list):
            return [kind.__name__, [self.value(x, where) for x in v]]
        if kind is dict:
            return ["dict", [[self.value(k, where), self.value(x, _join(where, f"the entry {k!r}"))] for k, x in v.items()]]
        if kind in (set, frozenset):  # walked in an order of their own descriptions, not the hash order of this process
            return [kind.__name__, [self.value(x, where) for x in sorted(v, key=lambda x: _order(_Walk().value(x, where)))]]
        if isinstance(v, types.ModuleType):
            return ["module", _module(v.__name__)]
        if isinstance(v, type):
            return self.klass(v, where)
        if isinstance(v, types.FunctionType):
            return self.function(v, where)
        if isinstance(v, functools.partial):
            return ["partial", self.value(v.func, where), self.value(v.args, _join(where, "an argument of the partial")),
                    self.value(v.keywords, _join(where, "a keyword of the partial")), self.value(vars(v), where)]
        if isinstance(v, types.MethodType):
            return ["method", self.value(v.__func__, where), self.value(v.__self__, _join(where, "the object the method is bound to"))]
        if isinstance(v, types.CodeType):
            return self.code(v)
        if isinstance(v, (staticmethod, classmethod)):
            return [kind.__name__, self.value(v.__func__, where)]
        if isinstance(v, property):
            return ["property", self.value(v.fget, where), self.value(v.fset, where), self.value(v.fdel, where)]
        if isinstance(v, types.CellType):
            return ["cell", self.cell(v, where)]
        routine = self.routine(v)
        if routine is not None:
            return routine
        return self.instance(v, where)

    def klass(self, cls: type, where: str) -> Any:
        path = named(cls)
        if path is not None:
            return ["class", path]
        members = [[name, self.value(member, _join(where, f"{cls.__qualname__}.{name}"))]
                   for name, member in vars(cls).items() if name not in _NOT_MEMBERS and not _is_slot(member)]
        return ["local class", _module(cls.__module__), cls.__qualname__, [self.value(b, where) for b in cls.__bases__],
                sorted([n for n, m in vars(cls).items() if _is_slot(m)]), members]

    def function(self, fn: types.FunctionType, where: str) -> Any:
        path = named(fn)
        if path is not None:
            return ["function", path]
        names = fn.__code__.co_freevars
        closure = [self.cell(cell, _join(where, f"the variable {name!r} it closes over")) for name, cell in zip(names, fn.__closure__ or (), strict=True)]
        return ["code", _module(fn.__globals__.get("__name__", fn.__module__)), fn.__qualname__, self.code(fn.__code__),
                self.value(fn.__defaults__, _join(where, "a default")), self.value(fn.__kwdefaults__, _join(where, "a default")),
                self.value(dict(vars(fn)), _join(where, "an attribute")), closure]

    def cell(self, cell: types.CellType, where: str) -> Any:
        try:
            contents = cell.cell_contents
        except ValueError:  # not assigned yet
            return ["empty"]
        return self.value(contents, where)

    def code(self, co: types.CodeType) -> Any:
        consts = [self.code(c) if isinstance(c, types.CodeType) else self.const(c) for c in co.co_consts]
        return ["bytecode", sys.implementation.cache_tag, co.co_name, co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount,
                co.co_flags, hashlib.sha256(co.co_code).hexdigest(), hashlib.sha256(getattr(co, "co_exceptiontable", b"")).hexdigest(),
                consts, list(co.co_names), list(co.co_varnames), list(co.co_freevars), list(co.co_cellvars)]

    def const(self, c: Any) -> Any:
        if isinstance(c, (tuple, frozenset)):
            items = [self.code(x) if isinstance(x, types.CodeType) else self.const(x) for x in c]
            return [type(c).__name__, items if isinstance(c, tuple) else sorted(items, key=_order)]
        return self.plain(c) if type(c) in _PLAIN else ["const", repr(c)]

    def routine(self, v: Any) -> Any:
        """A function written in C (``len``, ``str.upper``, ``"x".join``): by import path and what it is bound to."""
        if isinstance(v, (types.BuiltinFunctionType, types.WrapperDescriptorType, types.MethodWrapperType,
                          types.MethodDescriptorType, types.ClassMethodDescriptorType)):
            owner = getattr(v, "__self__", None)
            objclass = getattr(v, "__objclass__", None)
            path = named(v)
            if path is not None and (owner is None or isinstance(owner, (types.ModuleType, type))):
                return ["builtin", path]
            base = self.value(objclass, "a method") if objclass is not None else None
            bound = None if owner is None or isinstance(owner, types.ModuleType) else self.value(owner, f"the object {v.__name__} is bound to")
            return ["builtin", getattr(owner, "__name__", None) if isinstance(owner, types.ModuleType) else None, v.__name__, base, bound]
        return None

    def instance(self, v: Any, where: str) -> Any:
        """An object: an accord backend by its identity; anything else by its class and its state
        as pickle would take it, walked (nothing is pickled)."""
        if isinstance(v, Backend):
            try:
                return ["backend", v.identity()]
            except Exception as exc:  # noqa: BLE001 - ConfigError: the backend has no identity
                raise Unnamed(_at(where, f"the backend {type(v).__name__} has none ({exc})")) from None
        kind = type(v)
        if kind.__module__.partition(".")[0] in _HEAVY or sys.getsizeof(v) > MAX_BYTES:
            raise Unnamed(_at(where, f"a {kind.__module__}.{kind.__qualname__} object (weights, a device, bulk data) is too heavy to fingerprint"))
        try:
            reduced = v.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - TypeError "cannot pickle": a value with no stable state
            raise Unnamed(_at(where, f"a {kind.__module__}.{kind.__qualname__} object has no stable state to fingerprint")) from None
        if isinstance(reduced, str):  # a global, by name
            return ["global", _module(getattr(v, "__module__", kind.__module__)), reduced]
        if not isinstance(reduced, tuple) or len(reduced) < 2:
            raise Unnamed(_at(where, f"a {kind.__qualname__} object describes itself in a way accord cannot read"))
        parts = list(reduced) + [None] * (6 - len(reduced))
        make, args, state, items, pairs = parts[:5]
        what = _join(where, f"a {kind.__qualname__}")
        out = ["object", self.value(make, what), self.value(args, what), self.value(state, what)]
        if items is not None:
            out.append(["items", [self.value(x, what) for x in items]])
        if pairs is not None:
            out.append(["pairs", [[self.value(k, what), self.value(x, what)] for k, x in pairs]])
        return out


def _at(where: str, what: str) -> str:
    return f"{where}: {what}" if where else what


def _join(where: str, part: str) -> str:
    return f"{where}, {part}" if where else part


def _is_slot(member: Any) -> bool:
    return isinstance(member, (types.MemberDescriptorType, types.GetSetDescriptorType))


def _order(material: Any) -> str:
    return json.dumps(material, ensure_ascii=True, separators=(",", ":"))
