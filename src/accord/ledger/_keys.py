"""The ledger key: everything that decides an answer, as canonical JSON, hashed.

The key of a prompt under a subject is the sha256 (hex) of the canonical JSON (sorted keys, no
spaces) of ``{"ledger", "model", "policy", "request", "schema"}``: the key format version, the
model's identity (``backend.identity()``: its name, or for a function an identity derived from
its code, what it holds and the module globals it reads; never a guess, a ConfigError where none
can be had), the policy that
chooses the answer (:func:`describe_policy`), the request as passed, and the schema
(:func:`describe_schema`). Never the environment (device, dtype, host, library versions):
another worker gets the same key.

What a key is made of is a :class:`Subject`: the model, the schema and the policy (a Stabilizer is
one, and so is the run path's ``Decider``). Everything but the request (the *context*) is computed
once per policy object and cached, so a key costs one canonical dump of the request and one hash.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import threading
import types
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._errors import ConfigError, LedgerError
from ..backends._identity import Unnamed, key_path, named, readable
from ..backends._identity import identity as identify
from ..prompt._prompt import shows_schema
from ..read._canonical import canonical_key
from ..schema._schema import Schema
from ._store import Entry

if TYPE_CHECKING:
    from ..backends._base import Backend
    from ..run._policy import Policy

KEY_VERSION = 2  # bump when the key material changes shape: old answers then miss, never go stale
# Version 2: a backend that can enforce the schema (a grammar, ``response_format``) is shown the
# schema in its prompt too, and a local model decodes in its own JSON layout: another computation,
# so its runs take keys of version 2. Every other run is the computation it was and keeps version 1's
# key. A key of version 2 that misses is looked up as version 1 (``Entry.legacy``): the answers a
# ledger stored before still replay. A choice a server's grammar takes wrapped (``{"answer": ...}``)
# is not shown its choices (``prompt._prompt.shows_schema``): the computation of version 1, its key.
LEGACY_VERSION = 1


class Subject(Protocol):
    """What decides an answer besides the prompt, as a ledger keys it: the model (its identity),
    the schema and the policy (``Stabilizer`` has the three)."""

    @property
    def model(self) -> Backend: ...
    @property
    def schema(self) -> Schema[Any]: ...
    @property
    def policy(self) -> Policy: ...


class Context(NamedTuple):
    """A subject's part of every key: ``head + request + tail`` is the key's canonical JSON."""

    head: str
    tail: str
    id: str  # sha256 of ``material``
    material: str  # the canonical JSON of the key material without the request
    legacy_head: str = ""  # ``head`` as key version 1 wrote it, for a run version 2 changed ("" for the others)


class Keys:
    """Keys of prompts under subjects, with the context of each policy object cached (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # id(policy) -> (the policy, weakly; the schema; the model identity; the context)
        self._contexts: dict[int, tuple[weakref.ref[Any], Schema[Any], str, Context]] = {}

    def entry(self, subject: Subject, prompt: Any) -> Entry:
        """The key of ``prompt`` under ``subject``, with its request and context as stored, and the
        key of version 1 to look up when it misses (``legacy``, for the runs version 2 changed)."""
        context = self.context(subject)
        request = canonical_key(prompt)
        key = hashlib.sha256((context.head + request + context.tail).encode()).hexdigest()
        legacy = hashlib.sha256((context.legacy_head + request + context.tail).encode()).hexdigest() if context.legacy_head else None
        return Entry(key, request, context.id, context.material, legacy)

    def context(self, subject: Subject) -> Context:
        """Everything in the key but the request; recomputed when the subject's policy, schema or
        model identity is another object than the cached one's. A ConfigError when the model
        (or a callable of the policy) has no identity another process would derive the same."""
        fingerprint, policy, schema = subject.model.identity(), subject.policy, subject.schema
        with self._lock:
            cached = self._contexts.get(id(policy))
            if cached and cached[0]() is policy and cached[1] is schema and cached[2] == fingerprint:
                return cached[3]
            # shown the schema and its own layout since version 2 (a wrapped choice is not: as version 1)
            changed = subject.model.enforces(schema) and shows_schema(True, schema, subject.model)
            ledger, model = canonical_key(KEY_VERSION if changed else LEGACY_VERSION), canonical_key(fingerprint)
            described, shape = canonical_key(describe_policy(policy)), canonical_key(describe_schema(schema))
            head = f'{{"ledger":{ledger},"model":{model},"policy":{described},"request":'
            tail = f',"schema":{shape}}}'
            material = f'{{"ledger":{ledger},"model":{model},"policy":{described},"schema":{shape}}}'  # without the request
            legacy = f'{{"ledger":{LEGACY_VERSION},"model":{model},"policy":{described},"request":' if changed else ""
            context = Context(head, tail, hashlib.sha256(material.encode()).hexdigest(), material, legacy)
            self._contexts[id(policy)] = (weakref.ref(policy, self._forget(id(policy))), schema, fingerprint, context)
            return context

    def _forget(self, ident: int) -> Any:
        """A callback for when the policy ``ident`` names is gone: its context goes too (no lock: it
        may run inside ``context``, and a dict pop is atomic)."""
        return lambda _ref: self._contexts.pop(ident, None)


def key_prefix(prefix: str) -> str:
    """A key prefix as the stores compare it (lower-case hex); LedgerError when it is not hex."""
    text = prefix.strip().lower()
    if not text or any(ch not in "0123456789abcdef" for ch in text):
        raise LedgerError(f"a ledger key is hexadecimal, got {prefix!r}")
    return text


def describe_schema(schema: Schema[Any]) -> dict[str, Any]:
    """The schema part of the key: its canonical JSON Schema (or the grammar text)."""
    if schema.kind == "grammar":
        return {"kind": "grammar", "lark": schema.source.lark}
    return {"kind": schema.kind, "json_schema": schema.json_schema}


# Policy fields that decide whether and how fast a run ends, never which answer it accepts.
# Everything else is in the key, new fields included: a miss is better than a stale hit.
_POLICY_NOT_IN_KEY = frozenset({"budget", "on_ballot", "prices"})
# In the key once set, left out while unset: keys written before they existed stay the same.
_POLICY_IN_KEY_WHEN_SET = frozenset({"system", "examples"})
# Vote(on_no_consensus=) is not in the key (it never was, as a Stabilizer option); Vote(perturb=) is,
# as the policy's ``perturb``, where it has always been.
_VOTE_NOT_IN_KEY = ("on_no_consensus", "perturb")
_RETRY_NOT_IN_KEY = frozenset({"wait", "transport_attempts", "transport_stop"})
_RETRY_NEW_SINCE_V1 = frozenset({"close_prose"})  # in the key only when set away from its default
# Policy fields added after the first key format: in the key only when set away from their
# default, so the answers a ledger holds from before they existed still replay (the default is
# what those runs did: the lenient reader reads every valid JSON value unchanged).
_NEW_SINCE_V1 = frozenset({"extract"})
_GATE_NEW_SINCE_V1 = (("risk", 1e-4), ("rule", "risk"))  # MarginGate's learned-noise rule (vote/_gate)


def describe_policy(policy: Any) -> dict[str, Any]:
    """The policy part of the key: vote, retry attempts, settings, normalizers, schema hint,
    perturbation, and the system prompt and examples when there are any.

    Callables go by their import path (``module:qualname``) when they have one, else by an
    identity derived from their code and what they hold (``_identity``). Left out: the budget, transport retries and their waits,
    ``on_ballot``, ``on_no_consensus`` and the prices; fields newer than the first key format
    while they hold their default (``extract``), and ``system`` and ``examples`` while unset.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(policy):
        value = getattr(policy, f.name)
        if f.name in _POLICY_NOT_IN_KEY or (f.name in _POLICY_IN_KEY_WHEN_SET and not value):
            continue
        if f.name in _NEW_SINCE_V1 and f.default_factory is not dataclasses.MISSING and value == f.default_factory():
            continue
        if f.name == "retry":
            kept = [g.name for g in dataclasses.fields(value) if g.name not in _RETRY_NOT_IN_KEY
                    and not (g.name in _RETRY_NEW_SINCE_V1 and getattr(value, g.name) == g.default)]
            out["retry"] = {name: describe(getattr(value, name)) for name in kept}
        elif f.name == "vote":
            vote = {**describe(value), "quorum": value.needed, "early_stop": describe(value.stop_rule)}
            if not value.roles:
                vote.pop("roles")  # newer than the first key format: in the key once set
            for name in _VOTE_NOT_IN_KEY:
                vote.pop(name, None)
            gate = vote.get("gate")
            if isinstance(gate, dict):  # newer than the first key format: in the key once set away from the default
                for name, default in _GATE_NEW_SINCE_V1:
                    if gate.get(name) == default:
                        gate.pop(name)
            if value.float_digits is None:
                # Keys made before float_digits defaulted to None (exact) said 9, the old default: a
                # default Vote keeps that key, so the answers existing ledgers hold still replay.
                vote["float_digits"] = 9
            out["vote"] = vote
        else:
            out[f.name] = describe(value)
    return out


def describe(obj: Any, depth: int = 0) -> Any:
    """A stable JSON description of a policy object: never an address, never pickled."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if depth > 4:
        return qualname(type(obj))
    if isinstance(obj, (list, tuple)):
        return [describe(v, depth + 1) for v in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, functools.partial):
        return {"partial": routine(obj.func), "args": describe(obj.args, depth + 1), "keywords": describe(obj.keywords, depth + 1)}
    if inspect.isroutine(obj) or isinstance(obj, type):
        return routine(obj)
    if dataclasses.is_dataclass(obj):
        fields = {f.name: describe(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj)}
        return {"type": qualname(type(obj)), **fields}
    own = getattr(obj, "describe", None)
    if callable(own):
        return describe(own(), depth + 1)
    kind: Any = type(obj)  # Any: mypy reads ``type(obj).__repr__`` as unbound and the check as never true
    if kind.__repr__ is not object.__repr__:
        text = repr(obj)
        if " at 0x" not in text:
            return text
    attrs = {k: describe(v, depth + 1) for k, v in sorted(getattr(obj, "__dict__", {}).items()) if not k.startswith("_")}
    return {"type": qualname(type(obj)), **attrs}


def routine(obj: Any) -> str:
    """A function or class of a policy, as the key names it: its import path (``module:qualname``);
    a class or a C function that has none by its qualified name, as before; anything else by an
    identity derived from its code and what it holds; a ConfigError where none can be had."""
    try:
        path = named(obj)
        if path is not None:
            return path
        if (isinstance(obj, type) and "<locals>" not in obj.__qualname__) or _unbound_builtin(obj):
            return qualname(obj)
        return identify(obj)
    except Unnamed as why:
        raise ConfigError(f"{readable(obj)} (in the policy) has no identity a ledger can trust: {why.reason}; use a module-level function") from None


def _unbound_builtin(obj: Any) -> bool:
    """A function written in C bound to no object (``str.lower``, ``len``): its name is all of it."""
    if isinstance(obj, (types.FunctionType, types.MethodType, type)):
        return False
    owner = getattr(obj, "__self__", None)
    return owner is None or isinstance(owner, (types.ModuleType, type))


def qualname(obj: Any) -> str:
    """``module:qualname`` of a function or class (of the object's type when it has none)."""
    return f"{key_path(getattr(obj, '__module__', '?'))}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"
