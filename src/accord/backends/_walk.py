"""The description a derived identity hashes: a value walked into canonical JSON, never pickled.

Two rules share the walk (:mod:`._identity` says which is used where):

    a policy's callable   a function at an import path goes by that path; any other by its code
    a model               every function the model is, holds or calls within its module goes
                          by its code, with the module globals that code reads; a function of
                          another module goes by its path. An interactive session's objects
                          (no path another process shares) go by what they are.

What a function's code reads from its module (``model`` only): every global name its bytecode
loads (``LOAD_GLOBAL``, in nested code too) and does not assign itself (a name it rebinds is
its state: ``global calls; calls += 1``), with the value the name holds: data walked, a function
of the same module by its code (and what it reads, cycles ended by reference; a wrapped one, as
``functools.lru_cache`` wraps it, too), a module by its name, a class by its path, any other
object by its state. A builtin it calls is the
interpreter's. What cannot be walked (a lock, a socket, a client with a connection pool,
weights, too much) is :class:`~._paths.Unnamed`, with where it was found.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import inspect
import json
import sys
import types
from typing import Any

from ._base import Backend
from ._paths import Unnamed, is_or_wraps, main_module, named

MAX_NODES = 20_000  # values described: past this, a model is too large to fingerprint (name it)
MAX_BYTES = 4_000_000  # characters of strings and bytes described, likewise
MAX_DEPTH = 120  # nesting of the values described

_PLAIN = frozenset({str, int, float, complex, bool, bytes, bytearray, type(None), type(...)})
_NOT_MEMBERS = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__doc__", "_abc_impl"})
# Objects whose state is weights or devices: walking it would copy gigabytes, and it is no name.
_HEAVY = frozenset({"torch", "tensorflow", "jax", "jaxlib"})
_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_STORES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


class Walk:
    """One description: values seen are referred to by their order (cycles end there).
    ``model``: the model rule (see the module docstring), for a model of the module ``home``
    (the model's own functions are described by code there); else a policy's."""

    def __init__(self, model: bool = False, home: str | None = None) -> None:
        self.model = model
        self.seen: dict[int, int] = {}
        self.alive: list[Any] = []  # keeps every walked object alive, so no id is reused meanwhile
        self.homes: list[Any] = [home] if home else []  # the module of each function being described, innermost last
        self.nodes = 0
        self.size = 0
        self.depth = 0

    def value(self, v: Any, where: str) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or self.size > MAX_BYTES:
            raise Unnamed(at(where, f"it holds too much to fingerprint (over {MAX_NODES:,} values or {MAX_BYTES:,} characters)"))
        if type(v) in _PLAIN:
            return self.plain(v)
        if type(v) not in (tuple, frozenset):  # those never close a cycle alone, and how equal ones are
            if id(v) in self.seen:  # shared differs between processes: never referred to, always described
                return ["ref", self.seen[id(v)]]
            self.seen[id(v)] = len(self.seen)
            self.alive.append(v)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unnamed(at(where, "its values nest too deep to fingerprint"))
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
            return ["dict", [[self.value(k, where), self.value(x, join(where, f"the entry {k!r}"))] for k, x in v.items()]]
        if kind in (set, frozenset):  # walked in an order of their own descriptions, not the hash order of this process
            return [kind.__name__, [self.value(x, where) for x in sorted(v, key=lambda x: _order(Walk(self.model, self.homes[-1] if self.homes else None).value(x, where)))]]
        if isinstance(v, types.ModuleType):
            return ["module", self.module(v.__name__)]
        if isinstance(v, type):
            return self.klass(v, where)
        if isinstance(v, types.FunctionType):
            return self.function(v, where)
        if isinstance(v, functools.partial):
            return ["partial", self.value(v.func, where), self.value(v.args, join(where, "an argument of the partial")),
                    self.value(v.keywords, join(where, "a keyword of the partial")), self.value(vars(v), where)]
        if isinstance(v, types.MethodType):
            return ["method", self.value(v.__func__, where), self.value(v.__self__, join(where, "the object the method is bound to"))]
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

    def path(self, obj: Any) -> str | None:
        """``obj``'s import path (:func:`named`); under the model rule, None for an object of an
        interactive session, which is then described by what it is."""
        try:
            return named(obj)
        except Unnamed:
            if self.model:
                return None
            raise

    def module(self, name: Any) -> str:
        """A module as a description names it; ``__main__`` by the script or the module run."""
        if name != "__main__":
            return str(name)
        main = main_module()
        if main is not None:
            return main
        if self.model:  # its objects are described by what they are: the session needs no name
            return "interactive session"
        raise Unnamed("it was defined in an interactive session (no module file), so no other process can name it the same")

    def klass(self, cls: type, where: str) -> Any:
        path = self.path(cls)
        if path is not None:
            return ["class", path]
        members = [[name, self.value(member, join(where, f"{cls.__qualname__}.{name}"))]
                   for name, member in vars(cls).items() if name not in _NOT_MEMBERS and not _is_slot(member)]
        return ["local class", self.module(cls.__module__), cls.__qualname__, [self.value(b, where) for b in cls.__bases__],
                sorted([n for n, m in vars(cls).items() if _is_slot(m)]), members]

    def function(self, fn: types.FunctionType, where: str) -> Any:
        path = self.path(fn)
        module = fn.__globals__.get("__name__", fn.__module__)
        if path is not None and not (self.model and self.homes and self.homes[-1] == module):
            return ["function", path]
        self.homes.append(module)
        try:
            names = fn.__code__.co_freevars
            closure = [self.cell(cell, join(where, f"the variable {name!r} it closes over"))
                       for name, cell in zip(names, fn.__closure__ or (), strict=True)]
            out = ["code", self.module(module), fn.__qualname__, self.code(fn.__code__),
                   self.value(fn.__defaults__, join(where, "a default")), self.value(fn.__kwdefaults__, join(where, "a default")),
                   self.value(dict(vars(fn)), join(where, "an attribute")), closure]
            reads = self.globals(fn, where) if self.model else []
            if reads:  # only then: an identity derived before globals were read stays the same
                out.append(["globals", reads])
            return out
        finally:
            self.homes.pop()

    def globals(self, fn: types.FunctionType, where: str) -> list[Any]:
        """``[name, description]`` of each module global fn's code reads (see the module docstring)."""
        space = fn.__globals__
        builtins = space.get("__builtins__", {})
        builtins = vars(builtins) if isinstance(builtins, types.ModuleType) else builtins
        loads, stores = global_names(fn.__code__)
        out: list[Any] = []
        for name in sorted(loads - stores):
            if name in space:
                value = space[name]
                what = ["self"] if is_or_wraps(value, fn) else self.value(value, join(where, f"the global {name!r} it reads"))
            elif isinstance(builtins, dict) and name in builtins:
                continue  # the interpreter's
            else:
                what = ["unbound"]
            out.append([name, what])
        return out

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
            path = self.path(v)
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
                raise Unnamed(at(where, f"the backend {type(v).__name__} has none ({exc})")) from None
        kind = type(v)
        if kind.__module__.partition(".")[0] in _HEAVY or sys.getsizeof(v) > MAX_BYTES:
            raise Unnamed(at(where, f"a {kind.__module__}.{kind.__qualname__} object (weights, a device, bulk data) is too heavy to fingerprint"))
        try:
            reduced = v.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - TypeError "cannot pickle": a value with no stable state
            raise Unnamed(at(where, f"a {kind.__module__}.{kind.__qualname__} object has no stable state to fingerprint")) from None
        if isinstance(reduced, str):  # a global, by name
            return ["global", self.module(getattr(v, "__module__", kind.__module__)), reduced, *self.wraps(v, where)]
        if not isinstance(reduced, tuple) or len(reduced) < 2:
            raise Unnamed(at(where, f"a {kind.__qualname__} object describes itself in a way accord cannot read"))
        parts = list(reduced) + [None] * (6 - len(reduced))
        make, args, state, items, pairs = parts[:5]
        what = join(where, f"a {kind.__qualname__}")
        out = ["object", self.value(make, what), self.value(args, what), self.value(state, what)]
        if items is not None:
            out.append(["items", [self.value(x, what) for x in items]])
        if pairs is not None:
            out.append(["pairs", [[self.value(k, what), self.value(x, what)] for k, x in pairs]])
        return out + self.wraps(v, where)

    def wraps(self, v: Any, where: str) -> list[Any]:
        """For a model, a wrapper of a function (``functools.lru_cache``): the function it wraps, by its code."""
        wrapped = inspect.getattr_static(v, "__wrapped__", None) if self.model else None  # never a __getattr__ of v
        if not isinstance(wrapped, types.FunctionType):
            return []
        return [["wraps", self.value(wrapped, join(where, "the function it wraps"))]]


@functools.lru_cache(maxsize=1024)
def global_names(code: types.CodeType) -> tuple[frozenset[str], frozenset[str]]:
    """The global names ``code`` (and the code nested in it) loads, and those it assigns or deletes."""
    loads: set[str] = set()
    stores: set[str] = set()
    todo = [code]
    while todo:
        co = todo.pop()
        for ins in dis.get_instructions(co):
            if ins.opname in _LOADS and isinstance(ins.argval, str):
                loads.add(ins.argval)
            elif ins.opname in _STORES and isinstance(ins.argval, str):
                stores.add(ins.argval)
        todo.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return frozenset(loads), frozenset(stores)


def at(where: str, what: str) -> str:
    return f"{where}: {what}" if where else what


def join(where: str, part: str) -> str:
    return f"{where}, {part}" if where else part


def _is_slot(member: Any) -> bool:
    return isinstance(member, (types.MemberDescriptorType, types.GetSetDescriptorType))


def _order(material: Any) -> str:
    return json.dumps(material, ensure_ascii=True, separators=(",", ":"))
