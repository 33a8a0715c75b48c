"""The backend boundary: everything the core asks of a model, declared here with its default.

The core (the run loop, the gate, the predictor, the Stabilizer) reads a backend only through
what :class:`Backend` declares below; it never ``getattr``s one. A backend implements
``generate(request) -> Completion`` and overrides only what it knows better:

    generate(request)         one model call (required)
    agenerate(request)        its async twin (default: ``generate`` in a daemon worker thread)
    stream(request)           one call's text as it is written: text deltas, then the Completion
                              (default: ``generate``, its whole text as one delta)
    astream(request)          its async twin (default: ``agenerate``, likewise)
    constrains                the backend enforces the schema itself (default False)
    constrains_for(schema)    ... for this schema (default: ``constrains``)
    enforces(schema)          the backend sets out to enforce it, fixed before any server is
                              probed (the ledger key's version; default: ``constrains_for``)
    wraps(schema)             it goes to the server's grammar wrapped, ``{"answer": ...}`` (a bare
                              type over a wire whose formats take objects only, until a server is
                              known to refuse the format; default False)
    blocking                  False only for a backend that returns at once (default True)
    one_at_a_time             the calls of one run go one after another, each once the one
                              before is answered (default False; the OpenAI backend spreading)
    fingerprint               the logical model name, on every Result and in spans (default "unknown")
    identity()                the model's identity in ledger keys: ``fingerprint``, or a
                              ConfigError when it names no model (the default "unknown")
    gives_margins             ``Completion.margins`` are filled in (default False)
    perturbable               ballots can run under ``accord.Perturb`` perturbations (default False);
                              ``accord audit`` measures the noise floors of such a backend
    default_max_tokens        the output budget when the run sets none (default 512)
    sizes_max_tokens          True: a run whose schema's answer needs more than that asks for
                              more (``schema._size``; default False: the backend's own was set)
    noise()                   how far numeric noise moves its logits, or None (default None)
    reference                 the deployment of the same weights that decides a prompt whose
                              first ballot was fragile (default None; ``models.openai(...,
                              reference=...)``, docs/determinism.md)
    map_error(exc)            an exception from ``generate`` as an accord error (default below)
    describe()                facts recorded on every Result
    telemetry()               how its calls are named in traces: ``gen_ai.provider.name``,
                              ``gen_ai.request.model``, ``server.address`` (default: "accord" and
                              the fingerprint)

An object with ``generate`` that is not a Backend is wrapped by :func:`as_backend`, which reads
these names from it once, at the boundary.

The command line (``accord audit``, ``accord demo``) reads a few facts more, optional, each None
where the backend does not know it; it too never ``getattr``s a backend:

    dtype                     the deployment's compute dtype ("float32", "bfloat16", ...): the
                              audit measures noise floors per dtype (default None)
    tokenizer                 the local model's tokenizer (``encode(text, add_special_tokens=False)``):
                              the audit counts raw outputs' divergence in its tokens, else in
                              characters (default None: an HTTP backend)
    conversion_seconds        the one-time GGUF conversion this load did, in seconds, which the
                              demo reports apart from its time (default None: none was done)
    unconstrained(prompt)     what the model writes with no grammar (the audit's raw phase), a
                              Completion, or None where the backend cannot write apart from
                              ``generate`` (default None: the audit calls ``generate``)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import _check
from .._errors import AccordError, BackendError, ConfigError
from .._threads import spawn
from .._types import Completion, Prompt, Request, Settings
from ._renamed import deprecated

if TYPE_CHECKING:
    from ..schema._schema import Schema

DEFAULT_MAX_TOKENS = 512
UNKNOWN = "unknown"  # the fingerprint of a backend that names no model
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


@dataclass(frozen=True, init=False)
class Noise:
    """What a backend knows of its own numeric noise, in logits (``accord calibrate`` measures it).

    ``floor``: the margin gate's floor; a decoding step whose margin is below it is fragile.
    ``dtype``: the deployment's compute dtype. ``floors``: the floor of each perturbation kind
    in that dtype (``precision``: against the other precision). ``learned``: the noise learned as
    a distribution from the deployment's own ballots (``vote/_gate.Learned``; the gate then reads
    the chance of a flip, not the floor), None where it is not. ``float32_floor``: at float32,
    the largest floor of the perturbations other than precision (what a float32 ballot must clear
    to predict the other float32 ballots); None when not known. Only ``floor`` is needed for the
    gate; prediction needs ``dtype`` and ``floors`` as well. ``reference=`` is ``float32_floor``'s
    older spelling (deprecated; ``reference`` names a deployment elsewhere).
    """

    floor: float | None
    dtype: str | None = None
    floors: Mapping[str, float] = field(default_factory=dict)
    float32_floor: float | None = None
    learned: Any = None

    def __init__(self, floor: float | None, dtype: str | None = None, floors: Mapping[str, float] | None = None,
                 float32_floor: float | None = None, *, reference: float | None = None, learned: Any = None) -> None:
        if reference is not None:
            deprecated("reference", "float32_floor=", "Noise", stacklevel=3)
            if float32_floor is not None and float32_floor != reference:
                raise ConfigError("Noise(float32_floor=..., reference=...): give one (reference= is float32_floor='s older spelling)")
            float32_floor = reference
        for name, value in (("floor", floor), ("dtype", dtype), ("floors", {} if floors is None else floors),
                            ("float32_floor", float32_floor), ("learned", learned)):
            object.__setattr__(self, name, value)

    @property
    def reference(self) -> float | None:
        """``float32_floor``'s older name (deprecated)."""
        _check.deprecated("Noise.reference", "Noise.float32_floor")
        return self.float32_floor

    @classmethod
    def measured(cls, dtype: str | None, floors: Mapping[str, float], float32_floor: float | None = None) -> Noise:
        """The noise of a deployment with measured floors: the gate's floor is the largest."""
        return cls(max(floors.values()) if floors else None, dtype, dict(floors), float32_floor)


def backend_error(exc: BaseException) -> AccordError:
    """An exception raised by a model call as an accord error (transient faults are retryable)."""
    if isinstance(exc, AccordError):
        return exc
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    status = status if isinstance(status, int) else None
    retryable = isinstance(exc, (TimeoutError, ConnectionError)) or status in _RETRYABLE_STATUS
    error = BackendError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, retryable=retryable, status=status)
    error.__cause__ = exc
    return error


class Backend:
    """A model accord can call; see the module docstring for the whole surface.

    It maps its own errors to :class:`~accord.BackendError` at this boundary (``map_error``
    catches what slips through).
    """

    # The facts the core reads, with their defaults. A subclass gives one as a class attribute,
    # sets it in ``__init__`` or computes it in a property; so the type checker reads each as a
    # read-only property (a property may override it), while at run time it is a plain class
    # attribute (an instance may set it).
    if TYPE_CHECKING:

        @property
        def constrains(self) -> bool: ...
        @property
        def blocking(self) -> bool: ...
        @property
        def one_at_a_time(self) -> bool: ...
        @property
        def fingerprint(self) -> str: ...
        @property
        def gives_margins(self) -> bool: ...
        @property
        def perturbable(self) -> bool: ...
        @property
        def default_max_tokens(self) -> int: ...
        @property
        def sizes_max_tokens(self) -> bool: ...
        @property
        def reference(self) -> Backend | None: ...
        @property
        def dtype(self) -> str | None: ...
        @property
        def tokenizer(self) -> Any: ...
        @property
        def conversion_seconds(self) -> float | None: ...
    else:
        constrains = False
        blocking = True
        one_at_a_time = False
        fingerprint = UNKNOWN
        gives_margins = False
        perturbable = False
        default_max_tokens = DEFAULT_MAX_TOKENS
        sizes_max_tokens = False  # True: a run whose schema needs more than default_max_tokens asks for more
        reference = None
        # What the command line reads (see the module docstring): optional, None when not known.
        dtype = None
        tokenizer = None
        conversion_seconds = None

    def generate(self, request: Request) -> Completion:
        raise NotImplementedError

    async def agenerate(self, request: Request) -> Completion:
        if not self.blocking:
            return self.generate(request)
        return await asyncio.wrap_future(spawn(self.generate, request))

    def stream(self, request: Request) -> Iterator[str | Completion]:
        """One call as it is written: text deltas (``str``), then the :class:`Completion` (last)."""
        completion = self.generate(request)
        if completion.text:
            yield completion.text
        yield completion

    async def astream(self, request: Request) -> AsyncIterator[str | Completion]:
        """The async twin of :meth:`stream`."""
        completion = await self.agenerate(request)
        if completion.text:
            yield completion.text
        yield completion

    def constrains_for(self, schema: Schema[Any]) -> bool:
        """Whether this schema's shape is enforced by the backend (a grammar, ``response_format``)."""
        return self.constrains

    def enforces(self, schema: Schema[Any]) -> bool:
        """Whether this backend sets out to enforce this schema's shape, whatever a server later
        turns out to honour: fixed for a backend and a schema, so the ledger key's version, which
        reads it, is too (default: :meth:`constrains_for`)."""
        return self.constrains_for(schema)

    def wraps(self, schema: Schema[Any]) -> bool:
        """Whether this schema goes to the server's grammar wrapped in ``{"answer": ...}`` (a bare
        type over a wire whose formats take an object root only): from before any probe, until a
        server is known to ignore or refuse the format. The prompt does not list a choice that goes
        so (:func:`accord.prompt._prompt.shows_schema`). Default False: the model writes the value bare."""
        return False

    def unconstrained(self, prompt: Prompt, settings: Settings | None = None) -> Completion | None:
        """What the model writes with no grammar at all, for the audit's raw phase; None (the
        default) where the backend cannot write apart from ``generate``."""
        return None

    def noise(self) -> Noise | None:
        """The measured (or given) numeric noise of this deployment; None when unknown."""
        return None

    def map_error(self, exc: BaseException) -> AccordError:
        """An exception from a call as an accord error (see :func:`backend_error`)."""
        return backend_error(exc)

    def identity(self) -> str:
        """The model's identity in ledger keys, the same in every process; a ConfigError when the
        backend names no model (its fingerprint is the default ``"unknown"``, or empty): two such
        backends would replay each other's answers."""
        if not self.fingerprint or self.fingerprint == UNKNOWN:
            raise ConfigError(
                f"{type(self).__module__}.{type(self).__qualname__} names no model (fingerprint {self.fingerprint!r}), so a "
                "ledger cannot tell its answers from another model's: set its fingerprint to the model's name"
            )
        return self.fingerprint

    def describe(self) -> dict[str, object]:
        """Backend facts recorded on every Result (JSON-serializable)."""
        return {"backend": type(self).__name__, "fingerprint": self.fingerprint}

    def telemetry(self) -> dict[str, str | int]:
        """The OpenTelemetry GenAI attributes that name this backend's calls in a trace."""
        return {"gen_ai.provider.name": "accord", "gen_ai.request.model": self.fingerprint}


class Adapted(Backend):
    """A model object with ``generate`` that is not a :class:`Backend`: its surface, read once."""

    fingerprint: str
    constrains: bool
    blocking: bool
    gives_margins: bool
    default_max_tokens: int
    sizes_max_tokens: bool

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        kind = type(inner)
        self.named = getattr(inner, "fingerprint", None)  # the model's name, when the object gives one
        self.fingerprint = str(self.named or f"{kind.__module__}:{kind.__qualname__}")
        self.constrains = bool(getattr(inner, "constrains", False))
        self.blocking = bool(getattr(inner, "blocking", True))
        self.gives_margins = bool(getattr(inner, "gives_margins", False))
        self.default_max_tokens = int(getattr(inner, "default_max_tokens", DEFAULT_MAX_TOKENS))
        self.sizes_max_tokens = bool(getattr(inner, "sizes_max_tokens", False))
        floor = getattr(inner, "noise_floor", None)
        floor = floor() if callable(floor) else floor
        self._noise = Noise(float(floor)) if isinstance(floor, (int, float)) and not isinstance(floor, bool) else None
        self._constrains_for = getattr(inner, "constrains_for", None)
        self._wraps = getattr(inner, "wraps", None)
        self._agenerate = getattr(inner, "agenerate", None)
        self._describe = getattr(inner, "describe", None)

    def generate(self, request: Request) -> Completion:
        completion: Completion = self.inner.generate(request)  # a user object: typed by its use
        return completion

    async def agenerate(self, request: Request) -> Completion:
        if callable(self._agenerate):
            completion: Completion = await self._agenerate(request)  # a user object
            return completion
        return await super().agenerate(request)

    def constrains_for(self, schema: Schema[Any]) -> bool:
        return bool(self._constrains_for(schema)) if callable(self._constrains_for) else self.constrains

    def wraps(self, schema: Schema[Any]) -> bool:
        return bool(self._wraps(schema)) if callable(self._wraps) else False

    def noise(self) -> Noise | None:
        return self._noise

    def identity(self) -> str:
        kind = type(self.inner)
        if not self.named and self.fingerprint == f"{kind.__module__}:{kind.__qualname__}":  # a type's name: a guess
            raise ConfigError(
                f"a {kind.__module__}.{kind.__qualname__} (an object with generate()) has no fingerprint, so a ledger cannot "
                "tell its answers from another model's: give it a fingerprint attribute naming the model"
            )
        return self.fingerprint

    def describe(self) -> dict[str, object]:
        return dict(self._describe()) if callable(self._describe) else super().describe()


def as_backend(model: Any) -> Backend:
    """``model`` as a Backend: itself, or an :class:`Adapted` wrapper around an object with ``generate``."""
    return model if isinstance(model, Backend) else Adapted(model)
