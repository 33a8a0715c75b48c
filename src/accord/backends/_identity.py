"""What names a model, or a policy's callable, in the ledger, the same in every process: never a guess.

    model_identity(fn) -> "readable#digest"   a model function: a digest of its code and of what
                                              decides its answers, wherever it lives (a module,
                                              a script, a notebook cell)
    identity(fn) -> "module:qualname"         a policy's callable (a normalizer, a tie-break):
                 or "readable#digest"         its import path when it has one, else derived
    Unnamed(reason)                           raised where no identity can be had soundly

A derived identity is the sha256 (16 hex digits shown) of a canonical description (``_walk``) of:

    a function            its module, qualified name, code (bytecode, constants and the code
                          nested in it, names; the interpreter's cache tag, since bytecode
                          differs between versions), defaults, attributes and the values its
                          closure holds; for a model, also the module globals its code reads
                          (data, the functions of its module by their code, the rest by path)
    functools.partial     the function, its arguments and keywords
    a bound method        the function and the object it is bound to
    an object             its class and its state as pickle would take it (``__reduce_ex__``:
                          ``__dict__``, slots, items), walked, never pickled; an accord backend
                          by its own identity; a callable object that is a model, its
                          ``__call__`` by its code too
    a class               its import path, or (a local class) its bases and members
    data                  None, bools, numbers, strings, bytes, tuples, lists, dicts (in their
                          order), sets (sorted)

Two models that answer differently never share one: their code, a value they hold, or a global
their code reads differs. The model rule sees that far and no further: the code of a function
of another module goes by its import path, so does a class's, and what the process reads at run
time (an environment variable, a file, a server) is not code; a name (``models.function(fn,
name=...)``) is the way to say which model that is, and to keep answers across edits. A
function of a script (``__main__``) goes by the script's absolute path as well; one typed into
an interactive session (a notebook cell) by its code alone. Anything holding a value with no
stable state (a lock, a socket, a generator, an open file) is Unnamed, and so is anything too
large to describe (:data:`MAX_NODES` values, :data:`MAX_BYTES` of text). A policy's callable
keeps the rule of the first key format: its import path, or its code without the globals it
reads; Unnamed in an interactive session.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from ._base import Backend
from ._paths import DIGITS, Unnamed, digest, key_path, named, readable
from ._walk import MAX_BYTES, MAX_DEPTH, MAX_NODES, Walk

__all__ = ["DIGITS", "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "Unnamed", "derived", "digest_of", "identity", "key_path",
           "model_identity", "named", "readable"]


def model_identity(fn: Any) -> str:
    """A model function's identity: ``readable(fn)#digest`` of its code and what decides its
    answers (the module docstring); Unnamed where that cannot be had."""
    walk = Walk(model=True, home=_home(fn))
    material = walk.value(fn, "")
    call = next((vars(k)["__call__"] for k in type(fn).__mro__ if "__call__" in vars(k)), None)
    if isinstance(call, types.FunctionType) and not isinstance(fn, (types.FunctionType, types.MethodType, functools.partial, Backend)):
        material = [material, ["call", walk.value(call, f"{type(fn).__qualname__}.__call__")]]
    return f"{readable(fn)}#{digest(material)}"


def identity(fn: Any) -> str:
    """A policy callable's identity: its import path when it has one, else a derived one; Unnamed if neither."""
    return named(fn) or derived(fn)


def derived(fn: Any) -> str:
    """``readable(fn)#digest`` of what decides fn's answers under a policy's rule (no globals); Unnamed if it cannot be had."""
    return f"{readable(fn)}#{digest(Walk().value(fn, ''))}"


def digest_of(value: Any, what: str) -> str:
    """The digest of a value (arguments a call passes, say), as a model's identity describes it."""
    return digest(Walk(model=True).value(value, what))


def _home(fn: Any) -> str | None:
    """The module whose functions a model's identity describes by their code: the model's own."""
    while isinstance(fn, (functools.partial, types.MethodType)):
        fn = fn.func if isinstance(fn, functools.partial) else fn.__func__
    if isinstance(fn, types.FunctionType):
        return str(fn.__globals__.get("__name__", fn.__module__))
    module = getattr(type(fn), "__module__", None)
    return module if isinstance(module, str) else None
