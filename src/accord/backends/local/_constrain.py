"""Constrained decoding: compile a Schema into a logits processor that lets only its shape through.

    schema  ->  Spec (a strict JSON Schema, a regex, or a Lark grammar)
            ->  the first engine of the chain that compiles it (llguidance, xgrammar, outlines_core)
            ->  a fresh outlines logits processor per generation

Object schemas are made strict first: an object that lists its properties gets
``additionalProperties: false`` unless the schema says otherwise, so a small model cannot invent
keys. Choices, plain types and ``accord.Regex`` become regexes; ``accord.Grammar`` is Lark, which
only llguidance takes. What a grammar cannot say (numeric ranges some engines skip, lengths,
custom validators) is left to validation, which retries with feedback.

Each engine builds its vocabulary index once per tokenizer, compiled grammars are cached in
memory per (engine, tokenizer, spec), and so are failures. An engine that cannot compile a spec,
or runs past ``compile_timeout``, hands over to the next one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._errors import ConfigError, UnsupportedSchema
from ...schema._schema import Schema
from ._compile_worker import indent_of
from ._engines import ENGINES, CompileError, Engine, Worker
from ._layout import LAYOUTS

DEFAULT_ENGINES = ("llguidance", "xgrammar", "outlines_core")
DEFAULT_COMPILE_TIMEOUT = 10.0
_CACHE_SIZE = 64  # compiled grammars can be large (an outlines_core index: MBs)

_SCALARS = {
    int: r"-?(0|[1-9][0-9]{0,17})",
    float: r"-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?([eE][-+]?[0-9]{1,3})?",
    str: r"[\s\S]+",
}
_REGEX_META = set("\\.+*?()|[]{}^$")


@dataclass(frozen=True)
class Spec:
    """What an engine compiles: ``kind`` is "json" (a JSON Schema as text, written with one space
    after ``,`` and ``:``), "json-compact" (the same, written without whitespace between tokens),
    "json-free" (any whitespace between tokens, the model's choice), "regex" or "lark"."""

    kind: str
    text: str


#: The JSON kinds by ``whitespace``: a server's layout a reference decodes in ("compact", "free"),
#: or a model's own (``_layout``: "spaced", "compact" or "indent-N"); None: "spaced".
JSON_KINDS: dict[str | None, str] = {None: "json", "spaced": "json", "compact": "json-compact", "free": "json-free",
                                     **{layout: f"json-{layout}" for layout in LAYOUTS if layout.startswith("indent-")}}


@functools.lru_cache(maxsize=_CACHE_SIZE)
def spec_of(schema: Schema[Any], whitespace: str | None = None) -> Spec:
    """What the engines compile for a schema, made once per schema object (every generation asks);
    ``whitespace``: the JSON layout, "spaced", "compact", "free", "indent-N" or None (see :data:`JSON_KINDS`)."""
    if whitespace not in JSON_KINDS:
        raise ConfigError(f'whitespace must be "spaced", "compact", "free", "indent-N" (N from 1 to 8) or None, got {whitespace!r}')
    if schema.kind == "grammar":
        return Spec("lark", schema.source.lark)
    if schema.kind == "regex":
        return Spec("regex", schema.source.pattern)
    if schema.kind == "choice":
        return Spec("regex", choice_regex(schema.choices or ()))
    if schema.kind == "scalar":
        return Spec("regex", choice_regex(("yes", "no")) if schema.source is bool else _SCALARS[schema.source])
    return Spec(JSON_KINDS[whitespace], json.dumps(strict(schema.json_schema), ensure_ascii=False))


def choice_regex(choices: Sequence[Any]) -> str:
    """The members as written, plus a capitalized form of each text member that stays unambiguous.

    Small models start an answer with a capital ("Positive"); normalization maps it back to the
    member, so the grammar need not force an unnatural first token.
    """
    texts = [c if isinstance(c, str) else json.dumps(c) for c in choices]
    folded = Counter(t.casefold() for t in texts)
    words: list[str] = []
    for text, choice in zip(texts, choices, strict=True):
        words.append(text)
        if isinstance(choice, str) and folded[text.casefold()] == 1:
            words.append(text[:1].upper() + text[1:])
    escaped = ("".join("\\" + ch if ch in _REGEX_META else ch for ch in w) for w in dict.fromkeys(words))
    return "(" + "|".join(escaped) + ")"


# -- strict objects -------------------------------------------------------------------------------

_SUBSCHEMA = ("items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames",
              "additionalProperties", "unevaluatedProperties", "unevaluatedItems")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems", "items")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_READ_FORMATS = ("date", "date-time")  # formats the reader brings to ISO 8601 (read/_normalize)
_OPEN = ("additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "$ref", "if")


def strict(schema: Any) -> Any:
    """A copy where every object that lists properties allows no others, unless it says so, and
    where a ``date``/``date-time`` string is any string.

    The reader turns a date written as the model writes it ("12 January 1978") into ISO 8601 and
    validates that, so the grammar need not force ISO digits on a model that was about to copy the
    input's spelling: forced, a small model starts with a digit it cannot yet know and ends in
    another date ("1201-01-01", seen on Qwen2.5-Coder-0.5B-Instruct, benchmarks/apps.py).

    Left open: objects that set ``additionalProperties``/``patternProperties``/
    ``unevaluatedProperties`` themselves, objects combined with ``allOf``/``anyOf``/``oneOf``/
    ``$ref``/``if`` (closing one part would reject the others' properties), the members of an
    ``allOf``, and objects that list no properties (free-form maps).
    """
    return _strict(schema, closable=True)


def _strict(node: Any, closable: bool) -> Any:
    if not isinstance(node, dict):
        return node
    out = dict(node)
    if out.get("format") in _READ_FORMATS:
        del out["format"]
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _strict(sub, True) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_strict(sub, True) for sub in out[key]]
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [_strict(sub, False) for sub in out["allOf"]]
    for key in _SUBSCHEMA:
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key], True)
    properties = out.get("properties")
    if closable and isinstance(properties, dict) and properties and not any(k in node for k in _OPEN):
        out["additionalProperties"] = False
    return out


# -- engines and caches ---------------------------------------------------------------------------


def engine_chain(engine: str | Sequence[str] | None) -> tuple[str, ...]:
    """``None``: the default chain; a name: that engine first, then the others; a list: exactly it."""
    if engine is None:
        return DEFAULT_ENGINES
    names = (engine,) if isinstance(engine, str) else tuple(engine)
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise ConfigError(f"engine must be one of {', '.join(DEFAULT_ENGINES)} (or a list of them), got {engine!r}")
    if isinstance(engine, str):
        return (engine, *[n for n in DEFAULT_ENGINES if n != engine])
    return names


def tokenizer_key(tokenizer: Any, vocab_size: int) -> str:
    """A content hash of the tokenizer, so equal tokenizers share one vocabulary index."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(f"{vocab_size}|{tokenizer.eos_token_id}|{text}".encode()).hexdigest()[:16]


@dataclass
class _Caches:
    lock: threading.Lock = field(default_factory=threading.Lock)
    key_locks: dict[Any, threading.Lock] = field(default_factory=dict)
    engines: dict[tuple[str, str], Engine | CompileError] = field(default_factory=dict)
    workers: dict[tuple[str, str], Worker] = field(default_factory=dict)
    compiled: OrderedDict[tuple[str, str, Spec], Any] = field(default_factory=OrderedDict)
    failed: dict[tuple[str, str, Spec], str] = field(default_factory=dict)

    def key_lock(self, key: Any) -> threading.Lock:
        with self.lock:
            return self.key_locks.setdefault(key, threading.Lock())


_CACHES = _Caches()


@dataclass(frozen=True)
class Served:
    """The processor for one generation, and what the Completion records about it."""

    engine: str
    processor: Any
    compile_seconds: float  # 0.0 when the compiled grammar came from the cache
    passed_over: dict[str, str]  # engine -> why it did not serve this schema


class Constrainer:
    """Compiles schemas for one tokenizer with a chain of engines; see the module docstring."""

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        *,
        engine: str | Sequence[str] | None = None,
        compile_timeout: float | None = DEFAULT_COMPILE_TIMEOUT,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.chain = engine_chain(engine)
        self.compile_timeout = compile_timeout
        self.key = tokenizer_key(tokenizer, vocab_size)

    def processor(self, schema: Schema[Any], whitespace: str | None = None) -> Served:
        """The first engine of the chain that compiles the schema in ``whitespace``'s layout; a
        model's own indented layout that no engine compiles falls back to "spaced" (recorded in
        ``passed_over`` under ``"layout"``)."""
        spec = spec_of(schema, whitespace)
        passed_over: dict[str, str] = {}
        specs = [spec, spec_of(schema, "spaced")] if indent_of(spec.kind) is not None else [spec]
        for tried in specs:
            for name in self.chain:
                start = time.perf_counter()
                try:
                    compiled, cached = self.compile(name, tried)
                except CompileError as exc:
                    passed_over[name if tried is spec else f"{name} (spaced)"] = str(exc)
                    continue
                if tried is not spec:
                    passed_over["layout"] = f"{whitespace} compiled by no engine: spaced"
                seconds = 0.0 if cached else time.perf_counter() - start
                return Served(name, self.engine(name).processor(compiled), seconds, passed_over)
        raise UnsupportedSchema(_no_engine_message(schema, spec, passed_over))

    def compile(self, name: str, spec: Spec) -> tuple[Any, bool]:
        """The compiled grammar (and whether it came from the cache); raises CompileError."""
        key = (name, self.key, spec)
        with _CACHES.key_lock(key):
            with _CACHES.lock:
                if key in _CACHES.compiled:
                    _CACHES.compiled.move_to_end(key)
                    return _CACHES.compiled[key], True
                if key in _CACHES.failed:
                    raise CompileError(_CACHES.failed[key])
            try:
                compiled = self._compile(name, spec)
            except CompileError as exc:
                with _CACHES.lock:
                    _CACHES.failed[key] = str(exc)
                raise
            with _CACHES.lock:
                _CACHES.compiled[key] = compiled
                while len(_CACHES.compiled) > _CACHE_SIZE:
                    _CACHES.compiled.popitem(last=False)
            return compiled, False

    def _compile(self, name: str, spec: Spec) -> Any:
        cls = ENGINES[name]
        if ("json-indent" if indent_of(spec.kind) is not None else spec.kind) not in cls.kinds:
            raise CompileError(f"{name} does not take {spec.kind} grammars")
        engine = self.engine(name)
        if cls.isolated and self.compile_timeout is not None:
            return self._worker(engine).compile(spec.kind, spec.text, self.compile_timeout)
        try:
            return engine.compile(spec.kind, spec.text)
        except CompileError:
            raise
        except Exception as exc:  # any engine failure passes the schema on
            raise CompileError(f"{type(exc).__name__}: {exc}"[:2000]) from exc

    def engine(self, name: str) -> Engine:
        """The engine for this tokenizer, its vocabulary index built on first use (once)."""
        key = (name, self.key)
        with _CACHES.key_lock(key):
            built = _CACHES.engines.get(key)
            if built is None:
                cls = ENGINES[name]
                if not cls.installed():
                    built = CompileError(f"{name} is not installed (pip install {cls.package.replace('_', '-')})")
                else:
                    try:
                        built = cls(self.tokenizer, self.vocab_size)
                    except Exception as exc:  # noqa: BLE001 - an engine that cannot load is skipped
                        built = CompileError(f"{name} could not index the tokenizer: {type(exc).__name__}: {exc}")
                _CACHES.engines[key] = built
        if isinstance(built, CompileError):
            raise built
        return built

    def _worker(self, engine: Engine) -> Worker:
        key = (engine.name, self.key)
        with _CACHES.lock:
            if key not in _CACHES.workers:
                _CACHES.workers[key] = Worker(engine)
            return _CACHES.workers[key]


def _no_engine_message(schema: Schema[Any], spec: Spec, passed_over: dict[str, str]) -> str:
    reasons = "; ".join(f"{name}: {why}" for name, why in passed_over.items())
    if spec.kind == "lark":
        if "llguidance" not in passed_over:
            return "accord.Grammar (Lark) runs on llguidance only; add 'llguidance' to engine="
        if not ENGINES["llguidance"].installed():
            return ("accord.Grammar (Lark) needs llguidance, the only engine of outlines_core, llguidance and "
                    "xgrammar that takes Lark grammars: pip install llguidance")
    return f"no grammar engine could compile {schema!r}: {reasons}"
