"""Hostile output and bad configuration (issue #15): every case a typed error, inside the budget,
nothing lost.

Each output case is a model function that returns (or raises, or hangs on) something hostile;
each configuration case is an argument that cannot work. A case states the typed accord error it
must end in (or the exception that must propagate: ``KeyboardInterrupt`` and ``SystemExit`` are
never turned into errors, see docs/api.md "Errors"), and the suite checks that it does, that it
came within the budget + 1 s, and that ``error.result`` holds every ballot made: one per call
that reached the model function (``result.calls == len(result.ballots) == calls received``).

    PYTHONPATH=src python tests/test_hostile.py --table      # every case and its outcome, as a markdown table
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import threading
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, InstanceOf, field_validator
from pydantic.json_schema import SkipJsonSchema

import accord
from accord import Budget, Completion, Extract, Grammar, Regex, Retry, Stabilizer, Vote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recursive import Node, exponential_refs, exponential_unions
from reviews import GOOD, Review

_SCRATCH = tempfile.TemporaryDirectory(prefix="accord-hostile-")  # removed when the process ends


def scratch() -> Path:
    """A new empty folder for one case's files."""
    return Path(tempfile.mkdtemp(dir=_SCRATCH.name))


# -- the model functions ---------------------------------------------------------------------------


class Model:
    """A model function that counts the calls it receives and answers ``reply(n)`` for the n-th.

    ``reply`` returns what the function returns, or raises; a reply of ``HANG`` blocks (sync) or
    sleeps (async) until the case is over.
    """

    def __init__(self, reply: Callable[[int], Any], is_async: bool = False) -> None:
        self.reply = reply
        self.is_async = is_async
        self.calls = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    def _next(self) -> Any:
        with self.lock:
            n, self.calls = self.calls, self.calls + 1
        return self.reply(n)

    def function(self) -> Callable[..., Any]:
        if self.is_async:

            async def afn(prompt: Any) -> Any:
                out = self._next()
                if out is HANG:
                    await asyncio.sleep(60)
                return out

            return afn

        def fn(prompt: Any) -> Any:
            out = self._next()
            if out is HANG:
                self.release.wait(60)
                return "1"
            return out

        return fn


HANG = object()


def text(value: Any) -> Callable[[int], Any]:
    return lambda n: value


def raising(exc: BaseException) -> Callable[[int], Any]:
    def reply(n: int) -> Any:
        raise exc

    return reply


class Strict(BaseModel):
    """A schema whose own validator fails with something other than a ValueError."""

    name: str

    @field_validator("name")
    @classmethod
    def check(cls, value: str) -> str:
        if value == "boom":
            raise TypeError("the validator itself broke")
        return value


# -- the cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One hostile output: what the model gives, under which schema, and the error it must end in."""

    name: str
    reply: Callable[[int], Any]
    schema: Any
    expect: type[BaseException] | None  # None: a valid value
    budget: float | None = 5.0  # Budget(max_seconds=...)
    is_async: bool = False
    k: int = 3
    attempts: int = 2
    extract: Extract | None = None
    bound: float | None = None  # seconds allowed without a budget
    check: Callable[[accord.Result[Any]], None] | None = None


def error_type(kind: str) -> Callable[[accord.Result[Any]], None]:
    """The last invalid ballot's error has this type (``timeout``, ``unicode``, ...)."""

    def check(result: accord.Result[Any]) -> None:
        kinds = [e.get("type") for b in result.ballots if b.error for e in b.error.get("errors", [])]
        assert kind in kinds, kinds

    return check


OBJECT_X = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
SLOW_GRAMMAR = 'start: s "b"\ns: s s | "a"'  # LALR rejects "aaa...", Earley takes for ever

OUTPUT_CASES = [
    Case("2,000,000 characters", text("{" + "x" * 2_000_000), Review, accord.InvalidOutput),
    Case("500,000 characters of prose", text("the answer is " * 36_000), Review, accord.InvalidOutput),
    Case("nested 200,000 deep", text("[" * 200_000), list[int], accord.InvalidOutput),
    Case("100,000 keys", text(json.dumps({f"k{i}": i for i in range(100_000)})), Review, accord.InvalidOutput),
    Case("5000-digit int", text("1" * 5000), int, accord.InvalidOutput),
    Case("5000-digit int in JSON", text('{"x": %s}' % ("9" * 5000)), OBJECT_X, accord.InvalidOutput),
    Case("1e999 for float", text("1e999"), float, accord.InvalidOutput, check=error_type("finite_number")),
    Case("NaN in JSON", text('{"x": NaN}'), {"type": "object"}, accord.InvalidOutput),
    Case("Infinity in JSON", text('{"x": Infinity}'), {"type": "object"}, accord.InvalidOutput),
    Case("-1e400 for a number field", text('{"x": -1e400}'), OBJECT_X, accord.InvalidOutput),
    Case("lone surrogate", text("\ud800"), str, accord.InvalidOutput, check=error_type("unicode")),
    Case("escaped lone surrogate", text('"\\udc80"'), str, accord.InvalidOutput, check=error_type("unicode")),
    Case("invalid UTF-8 (surrogateescape)", text(b"caf\xe9 \xff".decode("utf-8", "surrogateescape")), str, accord.InvalidOutput),
    Case("NUL inside text (valid text)", text("a\x00b"), str, None),
    Case("bytes returned", text(b"4"), int, accord.BackendError),
    Case("None returned", text(None), int, accord.BackendError),
    Case("int returned", text(4), int, accord.BackendError),
    Case("Completion with bytes text", text(Completion(b"4")), int, accord.InvalidOutput),  # type: ignore[arg-type]  # hostile on purpose
    Case("Completion with no text", text(Completion(None)), int, accord.InvalidOutput),  # type: ignore[arg-type]  # hostile on purpose
    Case("raises ValueError", raising(ValueError("bad")), int, accord.BackendError),
    Case("raises CancelledError (sync)", raising(asyncio.CancelledError()), int, accord.BackendError),
    Case("raises CancelledError (async)", raising(asyncio.CancelledError()), int, accord.BackendError, is_async=True),
    Case("returns 5 (async)", text(5), int, accord.BackendError, is_async=True),
    Case("raises KeyboardInterrupt", raising(KeyboardInterrupt()), int, KeyboardInterrupt),
    Case("raises SystemExit", raising(SystemExit(3)), int, SystemExit),
    Case("hangs (sync)", text(HANG), int, accord.BudgetExceeded, budget=0.5),
    Case("hangs (async)", text(HANG), int, accord.BudgetExceeded, budget=0.5, is_async=True),
    Case("Regex (a+)+ on a*28+!", text("a" * 28 + "!"), Regex("(a+)+"), accord.InvalidOutput, budget=1.0),
    Case("Regex (a|aa)+$ on a*40+!", text("a" * 40 + "!"), Regex("(a|aa)+$"), accord.BudgetExceeded, budget=0.5),
    Case("JSON Schema pattern (a|aa)+$", text('"' + "a" * 40 + '!"'), {"type": "string", "pattern": "^(a|aa)+$"},
         accord.BudgetExceeded, budget=0.5),
    Case("Grammar A+ on 20,000 chars", text("a" * 20_000), Grammar('start: A+\nA: "a"'), None, budget=5.0),
    Case("Grammar A+ on 900,000 chars", text("a" * 900_000), Grammar('start: A+\nA: "a"'), accord.BudgetExceeded, budget=0.5),
    Case("Earley grammar on 300 chars", text("a" * 300), Grammar(SLOW_GRAMMAR), accord.BudgetExceeded, budget=0.5),
    Case("Earley grammar, no budget, Extract(max_seconds=0.5)", text("a" * 300), Grammar(SLOW_GRAMMAR), accord.InvalidOutput,
         budget=None, k=1, attempts=1, extract=Extract(max_seconds=0.5), bound=0.5, check=error_type("timeout")),
    Case("validator raises TypeError", text('{"name": "boom"}'), Strict, accord.InvalidOutput, check=error_type("error")),
    Case("schema echoed back", text(json.dumps(Review.model_json_schema())), Review, accord.InvalidOutput),
]


@dataclass
class Observed:
    """What a case did: the outcome (an exception's name, or "value"), the time, the calls counted."""

    outcome: str
    seconds: float
    received: int  # calls that reached the model function
    ballots: int | None  # ballots in the Result (error.result or the value's Result)
    statuses: list[str] = field(default_factory=list)
    result: accord.Result[Any] | None = None
    error: BaseException | None = None


def run_case(case: Case) -> Observed:
    model = Model(case.reply, case.is_async)
    seen: list[accord.Ballot] = []
    stab = Stabilizer(
        model.function(), case.schema, vote=Vote(k=case.k), retry=Retry(attempts=case.attempts),
        budget=Budget(max_seconds=case.budget), prompting=accord.Prompting(schema_in_prompt=False),
        hooks=accord.Hooks(after_ballot=seen.append), extract=case.extract,
    )
    start = time.monotonic()
    result: accord.Result[Any] | None
    error: BaseException | None = None
    try:
        result = asyncio.run(stab.arun("q")) if case.is_async else stab.run("q")
    except BaseException as exc:
        result, error = getattr(exc, "result", None), exc
    seconds = time.monotonic() - start
    model.release.set()  # hung sync calls return now, into runs that are over
    outcome = "value" if error is None else type(error).__name__
    ballots = None if result is None else len(result.ballots)
    if result is None and error is not None:
        ballots = len(seen)  # an exception that propagated: what on_ballot saw
    return Observed(outcome, seconds, model.calls, ballots, [b.status for b in (result.ballots if result else seen)], result, error)


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c.name for c in OUTPUT_CASES])
def test_hostile_output(case: Case) -> None:
    seen = run_case(case)
    expected = "value" if case.expect is None else case.expect.__name__
    assert seen.outcome == expected, f"{case.name}: {seen.outcome} ({seen.error!r}), expected {expected}"
    limit = case.budget if case.budget is not None else case.bound
    assert limit is not None and seen.seconds <= limit + 1.0, f"{case.name}: {seen.seconds:.2f} s"
    if case.expect in (KeyboardInterrupt, SystemExit):
        assert seen.result is None and seen.ballots is not None and seen.ballots <= seen.received  # propagated as raised
        return
    result = seen.result
    assert result is not None, f"{case.name}: no Result"
    assert result.calls == len(result.ballots) == seen.received == result.usage.calls, (
        f"{case.name}: {result.calls} ballots for {seen.received} calls received ({seen.statuses})"
    )
    if case.expect is accord.BudgetExceeded:
        assert result.stopped_because == "budget"
    if case.check is not None:
        case.check(result)


# -- hostile schemas (issue #28) ------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaCase:
    """A hostile schema: construction, then a run with the schema in the prompt. It must give a
    prompt within the schema's compact JSON plus 2,000 characters and a run within the budget
    + 1 s, or raise ``UnsupportedSchema`` at construction naming the part (``names``)."""

    name: str
    schema: Callable[[], Any]
    reply: str
    expect: type[BaseException] | None  # None: a valid value
    names: str = ""  # what the UnsupportedSchema message must name
    build: float = 1.0  # seconds construction may take
    check: Callable[[accord.Result[Any]], None] | None = None


def hint_says(form: str | None = None, shortened: str | None = None) -> Callable[[accord.Result[Any]], None]:
    """The Result records the shorter form or what the hint left out (``meta["schema_hint"]``)."""

    def check(result: accord.Result[Any]) -> None:
        note = result.meta.get("schema_hint")
        assert note is not None, result.meta
        assert form is None or note["form"] == form, note
        assert shortened is None or any(shortened in s for s in note["shortened"]), note

    return check


def _wide(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


class Opaque:
    """A class pydantic knows nothing of: validated by isinstance at most, never written as JSON Schema."""


class WithOpaque(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


class Holds(BaseModel):
    count: int
    inner: WithOpaque


class WithCallable(BaseModel):
    hook: Callable[[int], int]


class WithInstance(BaseModel):
    shape: InstanceOf[Opaque]


class NotDefined(BaseModel):
    name: str
    later: Undefined  # type: ignore[name-defined]  # noqa: F821 - the point: a name that is never defined


@dataclass
class NotDefinedDataclass:
    parts: list[AlsoUndefined]  # type: ignore[name-defined]  # noqa: F821 - likewise


class WithComplex(BaseModel):
    name: str
    impedance: complex


@dataclass
class HoldsPlain:
    opaque: Opaque


class RaisingHook(BaseModel):
    x: int

    @classmethod
    def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> Any:
        raise ValueError("no JSON Schema for this one")


SCHEMA_CASES = [
    SchemaCase("$ref graph exponential when inlined (2**40 objects)", exponential_refs, '{"a": {"v": 1}}', None),
    SchemaCase("union graph exponential when inlined (2**40 branches)", exponential_unions, '{"x": 7}', None),
    SchemaCase("union graph exponential, an invalid answer", exponential_unions, '{"x": "no"}', accord.BudgetExceeded),
    # Construction is jsonschema's meta-schema check, about 0.4 ms a property (4 s here under load).
    SchemaCase("10,000 properties", lambda: _wide(10_000), '{"p1": 1}', None, build=15.0, check=hint_says(form="named, without comments")),
    SchemaCase("enum of 100,000 values", lambda: {"type": "object", "properties": {"c": {"enum": [f"v{i}" for i in range(100_000)]}},
                                                  "required": ["c"]}, '{"c": "v99999"}', None, check=hint_says(shortened="enum of 100,000")),
    SchemaCase("pattern of 1 MB", lambda: {"type": "object", "properties": {"code": {"type": "string", "pattern": "a" * (1 << 20)}}},
               '{"code": "a"}', accord.UnsupportedSchema, names="#/properties/code/pattern"),
    SchemaCase("Regex of 1 MB", lambda: Regex("a" * (1 << 20)), "a", accord.UnsupportedSchema, names="1,048,576 characters"),
    SchemaCase("recursive tree (issue #28)", lambda: Node, '{"name": "a"}', None),
    # What pydantic cannot write as JSON Schema, or cannot build at all (issue #33): named, typed
    SchemaCase("arbitrary class field", lambda: WithOpaque, '{"thing": 1}', accord.UnsupportedSchema, names="WithOpaque.thing"),
    SchemaCase("arbitrary class field, nested", lambda: Holds, "{}", accord.UnsupportedSchema, names="WithOpaque.thing"),
    SchemaCase("Callable field", lambda: WithCallable, "{}", accord.UnsupportedSchema, names="WithCallable.hook"),
    SchemaCase("InstanceOf field", lambda: WithInstance, "{}", accord.UnsupportedSchema, names="WithInstance.shape"),
    SchemaCase("list[Callable]", lambda: list[Callable[[], int]], "[]", accord.UnsupportedSchema, names="JSON Schema"),
    SchemaCase("unresolved forward reference", lambda: NotDefined, "{}", accord.UnsupportedSchema, names="NotDefined.later"),
    SchemaCase("unresolved forward reference, dataclass", lambda: NotDefinedDataclass, "{}", accord.UnsupportedSchema,
               names="'AlsoUndefined' is not defined"),
    SchemaCase("unresolved ForwardRef", lambda: typing.ForwardRef("Nowhere"), "1", accord.UnsupportedSchema, names="'Nowhere'"),
    SchemaCase("list of an unresolved name", lambda: list["Nowhere"], "[]", accord.UnsupportedSchema,  # type: ignore[name-defined]  # noqa: F821
               names="'Nowhere'"),
    SchemaCase("arbitrary class", lambda: Opaque, "1", accord.UnsupportedSchema, names="schema=Opaque is a plain class"),
    SchemaCase("dict of arbitrary class", lambda: dict[str, Opaque], "{}", accord.UnsupportedSchema, names="Opaque"),
    SchemaCase("complex (issue #45)", lambda: complex, "1+2j", accord.UnsupportedSchema, names="schema=complex: a complex number has no JSON form"),
    SchemaCase("complex field", lambda: WithComplex, '{"name": "a", "impedance": "1+2j"}', accord.UnsupportedSchema,
               names="schema=WithComplex at the field WithComplex.impedance: a complex number"),
    SchemaCase("list[complex]", lambda: list[complex], "[]", accord.UnsupportedSchema, names="two float fields"),
    SchemaCase("plain class in a dataclass", lambda: HoldsPlain, "{}", accord.UnsupportedSchema,
               names="at the field HoldsPlain.opaque: Opaque is a plain class"),
    SchemaCase("SkipJsonSchema", lambda: Annotated[int, SkipJsonSchema()], "1", accord.UnsupportedSchema, names="PydanticOmit"),
    SchemaCase("a JSON Schema hook that raises", lambda: RaisingHook, '{"x": 1}', accord.UnsupportedSchema,
               names="no JSON Schema for this one"),
]
SCHEMA_BUDGET = 2.0
# A run ends by its budget plus the time the machine takes to land the deadline's interrupt and
# wind down: well under a second alone, 1.35 s once in the full suite on a loaded 2-core CI.
# Unbounded, the cases above would run for hours (2**40 branches), so this slack still fails them.
SCHEMA_SLACK = 2.5


def run_schema_case(case: SchemaCase) -> tuple[str, float, float, int, int, accord.Result[Any] | None, BaseException | None]:
    """(outcome, construction seconds, run seconds, longest prompt, schema chars, Result, error)."""
    prompts: list[str] = []
    accord.Schema({"type": "object"})  # jsonschema's first import (seconds: its format checkers) is not the case's
    start = time.monotonic()
    try:
        source = case.schema()
        stab = Stabilizer(lambda p: prompts.append(p) or case.reply, source, vote=Vote(k=3), retry=Retry(attempts=2),
                          budget=Budget(max_seconds=SCHEMA_BUDGET))
    except accord.UnsupportedSchema as exc:
        return "UnsupportedSchema", time.monotonic() - start, 0.0, 0, 0, None, exc
    built = time.monotonic()
    result: accord.Result[Any] | None
    error: BaseException | None = None
    try:
        result = stab.run("q")
    except accord.AccordError as exc:
        result, error = exc.result, exc
    ran = time.monotonic() - built
    schema_chars = len(json.dumps(stab.schema.json_schema, separators=(",", ":"), ensure_ascii=False))
    outcome = "value" if error is None else type(error).__name__
    return outcome, built - start, ran, max(map(len, prompts), default=0), schema_chars, result, error


@pytest.mark.parametrize("case", SCHEMA_CASES, ids=[c.name for c in SCHEMA_CASES])
def test_hostile_schema(case: SchemaCase) -> None:
    outcome, built, ran, prompt, schema_chars, result, error = run_schema_case(case)
    expected = "value" if case.expect is None else case.expect.__name__
    assert outcome == expected, f"{case.name}: {outcome} ({error!r})"
    assert built <= case.build + 1.0, f"{case.name}: construction took {built:.2f} s"
    if case.expect is accord.UnsupportedSchema:
        assert case.names in str(error), str(error)
        return
    assert ran <= SCHEMA_BUDGET + SCHEMA_SLACK, f"{case.name}: the run took {ran:.2f} s"
    assert 0 < prompt <= len("q\n\n") + schema_chars + 2_000, f"{case.name}: a prompt of {prompt:,} chars for a schema of {schema_chars:,}"
    assert result is not None and result.calls == len(result.ballots)
    if case.check is not None:
        case.check(result)


def test_a_plain_class_as_schema_is_one_sentence_that_names_the_fix() -> None:
    """Not pydantic's two paragraphs on its hooks: one sentence, pydantic's error kept as the cause."""

    class Invoice:
        def __init__(self, total: float) -> None:
            self.total = total

    with pytest.raises(accord.UnsupportedSchema) as info:
        Stabilizer(accord.models.scripted(['{"total": 1}']), Invoice)
    assert str(info.value) == ("schema=Invoice is a plain class, which pydantic cannot validate: make it a pydantic BaseModel "
                               "(class Invoice(BaseModel)), a dataclass or a TypedDict, with annotated fields")
    assert type(info.value.__cause__).__name__ == "PydanticSchemaGenerationError"
    with pytest.raises(accord.UnsupportedSchema, match=r"^schema=slice is a Python type with no JSON form: use a type that has one"):
        Stabilizer(accord.models.scripted(["1"]), slice)


def test_complex_is_refused_when_the_schema_is_made_naming_what_is_accepted() -> None:
    with pytest.raises(accord.UnsupportedSchema) as info:
        Stabilizer(accord.models.scripted(["1+2j"]), complex)
    assert "accord takes types with a JSON form (str, int, float, bool, lists, dicts, pydantic models" in str(info.value)
    assert "a JSON Schema dict, accord.Regex or accord.Grammar" in str(info.value) and info.value.result is None


# -- bad configuration -------------------------------------------------------------------------------


def _stab(**options: Any) -> Any:
    return lambda: Stabilizer(lambda p: "1", int, **options)


def _map(prompts: Any, **options: Any) -> Any:
    return lambda: Stabilizer(lambda p: "1", int, vote=Vote(k=1)).map(prompts, progress=False, **options)


CONFIG_CASES: list[tuple[str, Callable[[], Any], type[BaseException]]] = [
    ("Vote(k=10**9)", lambda: Vote(k=10**9), accord.ConfigError),
    ("Vote(k=0)", lambda: Vote(k=0), accord.ConfigError),
    ("Vote(k=True)", lambda: Vote(k=True), accord.ConfigError),
    ("Vote(tie_break='x')", lambda: Vote(tie_break="x"), accord.ConfigError),  # type: ignore[arg-type]
    ("Vote(gate='x')", lambda: Vote(gate="x"), accord.ConfigError),
    ("Vote(fieldwise='yes')", lambda: Vote(fieldwise="yes"), accord.ConfigError),  # type: ignore[arg-type]
    ("Vote(quorum=7) for k=5", lambda: Vote(k=5, quorum=7), accord.ConfigError),
    ("Retry(wait='x')", lambda: Retry(wait="x"), accord.ConfigError),
    ("Retry(attempts=2.5)", lambda: Retry(attempts=2.5), accord.ConfigError),  # type: ignore[arg-type]
    ("Retry(stop=3)", lambda: Retry(stop=3), accord.ConfigError),
    ("Retry(max_wait=inf)", lambda: Retry(max_wait=float("inf")), accord.ConfigError),
    ("Retry(grow_max_tokens=nan)", lambda: Retry(grow_max_tokens=float("nan")), accord.ConfigError),
    ("Budget(max_calls=2.5)", lambda: Budget(max_calls=2.5), accord.ConfigError),  # type: ignore[arg-type]
    ("Budget(max_seconds=-1)", lambda: Budget(max_seconds=-1), accord.ConfigError),
    ("Budget(max_seconds=inf)", lambda: Budget(max_seconds=float("inf")), accord.ConfigError),
    ("Budget(max_total_tokens=True)", lambda: Budget(max_total_tokens=True), accord.ConfigError),
    ("Settings(temperature=-1)", lambda: accord.Settings(temperature=-1), accord.ConfigError),
    ("Settings(top_p=0)", lambda: accord.Settings(top_p=0), accord.ConfigError),
    ("Settings(top_k=0)", lambda: accord.Settings(top_k=0), accord.ConfigError),
    ("Settings(stop=[''])", lambda: accord.Settings(stop=("",)), accord.ConfigError),
    ("Settings(temperature=nan)", lambda: accord.Settings(temperature=float("nan")), accord.ConfigError),
    ("Settings(seed='abc')", lambda: accord.Settings(seed="abc"), accord.ConfigError),  # type: ignore[arg-type]
    ("Settings(max_tokens=0)", lambda: accord.Settings(max_tokens=0), accord.ConfigError),
    ("Settings(stop=5)", lambda: accord.Settings(stop=5), accord.ConfigError),  # type: ignore[arg-type]
    ("Extract(normalize=str.casefold)", lambda: Extract(normalize=str.casefold), accord.ConfigError),  # type: ignore[arg-type]
    ("Hooks(after_ballot=3)", lambda: accord.Hooks(after_ballot=3), accord.ConfigError),  # type: ignore[arg-type]
    ("Vote(perturb='x')", lambda: Vote(perturb="x"), accord.ConfigError),  # type: ignore[arg-type]
    ("Prompting(schema_in_prompt='no')", lambda: accord.Prompting(schema_in_prompt="no"), accord.ConfigError),  # type: ignore[arg-type]
    ("Vote(on_no_consensus='x')", lambda: Vote(on_no_consensus="x"), accord.ConfigError),
    ("Stabilizer(vote=5)", _stab(vote=5), accord.ConfigError),
    ("Stabilizer(extract=Extract(max_seconds=0))", lambda: Extract(max_seconds=0), accord.ConfigError),
    ("schema={'$ref': '#/nope'}", lambda: Stabilizer(lambda p: "{}", {"$ref": "#/nope"}), accord.UnsupportedSchema),
    ("schema with a $ref to a missing $defs entry",
     lambda: Stabilizer(lambda p: "{}", {"type": "object", "properties": {"a": {"$ref": "#/$defs/gone"}}}), accord.UnsupportedSchema),
    ("schema with a remote $ref (never fetched)",
     lambda: Stabilizer(lambda p: "{}", {"$ref": "https://example.com/schema.json"}), accord.UnsupportedSchema),
    ("schema={'type': 'strin'}", lambda: Stabilizer(lambda p: "{}", {"type": "strin"}), accord.UnsupportedSchema),
    ("Regex('(')", lambda: Regex("("), accord.UnsupportedSchema),
    ("Grammar('start: ???')", lambda: Grammar("start: ???").parser, accord.UnsupportedSchema),
    ("schema=5", lambda: Stabilizer(lambda p: "1", 5), accord.UnsupportedSchema),
    ("map('abc')", _map("abc"), accord.ConfigError),
    ("map(b'ab')", _map(b"ab"), accord.ConfigError),
    ("map(5)", _map(5), accord.ConfigError),
    ("map([...], concurrency=0)", _map(["a"], concurrency=0), accord.ConfigError),
    ("map([...], concurrency=True)", _map(["a"], concurrency=True), accord.ConfigError),
    ("run(prompt=None)", lambda: Stabilizer(lambda p: "1", int).run(None), accord.ConfigError),  # type: ignore[arg-type]
    ("run('')", lambda: Stabilizer(lambda p: "1", int).run(""), accord.ConfigError),
    ("run(' \\n\\t')", lambda: Stabilizer(lambda p: "1", int).run(" \n\t"), accord.ConfigError),
    ("run(zero-width space)", lambda: Stabilizer(lambda p: "1", int).run("\u200b"), accord.ConfigError),
    ("run(messages of blank text)", lambda: Stabilizer(lambda p: "1", int).run(
        [{"role": "system", "content": ""}, {"role": "user", "content": [{"type": "text", "text": "  "}]}]), accord.ConfigError),
    ("arun('')", lambda: asyncio.run(Stabilizer(lambda p: "1", int).arun("")), accord.ConfigError),
    ("stream('')", lambda: next(Stabilizer(lambda p: "1", int).stream("")), accord.ConfigError),
    ("map(['a', ''])", _map(["a", ""]), accord.ConfigError),
    ("@stabilize ask('')", lambda: accord.stabilize(int)(lambda p: "1")(" "), accord.ConfigError),
    ("models.function(42)", lambda: accord.models.function(42), accord.ConfigError),  # type: ignore[arg-type]
    ("models.function('gpt-4o')", lambda: accord.models.function("gpt-4o"), accord.ConfigError),  # type: ignore[arg-type]
    ("Stabilizer(42, int)", lambda: Stabilizer(42, int), accord.ConfigError),
    ("@stabilize(int)(42)", lambda: accord.stabilize(int)(42), accord.ConfigError),  # type: ignore[arg-type]
    ("models.local(bogus=1)", lambda: accord.models.local(bogus=1), accord.ConfigError),
    ("models.openai(bogus=1)", lambda: accord.models.openai(bogus=1), accord.ConfigError),
    ("Ledger().runs(limit=-3)", lambda: accord.Ledger(scratch() / "l.sqlite3").runs(limit=-3), accord.ConfigError),
]


@pytest.mark.parametrize("name,build,expect", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_configuration_fails_at_once(name: str, build: Callable[[], Any], expect: type[BaseException]) -> None:
    start = time.monotonic()
    with pytest.raises(expect) as info:
        build()
    assert time.monotonic() - start < 1.0
    assert isinstance(info.value, accord.AccordError) and info.value.result is None  # no run, no ballot


def test_stop_END_is_one_stop_string() -> None:
    seen: list[Any] = []

    def fn(prompt: str, request: accord.Request) -> str:
        seen.append(request.settings.stop)
        return "1"

    Stabilizer(fn, int, vote=Vote(k=1), settings=accord.Settings(stop="END")).run("q")
    assert seen == [("END",)] and accord.Settings(stop=["a", "b"]).stop == ("a", "b")  # type: ignore[arg-type]  # a list is taken too
    assert accord.Settings(stop=[]).stop is None  # type: ignore[arg-type]  # an empty list is no stop


# -- map: one accounting of calls, nothing lost ------------------------------------------------------


def test_map_with_hung_calls_counts_only_calls_that_reached_the_model() -> None:
    """Three prompts, k=3 (quorum 2 at once), concurrency=2, every call hangs, 1 s each."""
    model = Model(text(HANG))
    stab = Stabilizer(model.function(), int, vote=Vote(k=3), budget=Budget(max_seconds=1.0), prompting=accord.Prompting(schema_in_prompt=False))
    start = time.monotonic()
    results = stab.map(["a", "b", "c"], concurrency=2, progress=False)
    seconds = time.monotonic() - start
    model.release.set()
    assert all(isinstance(r.error, accord.BudgetExceeded) for r in results)
    assert sum(r.calls for r in results) == model.calls, ([r.calls for r in results], model.calls)
    assert all(r.calls == len(r.ballots) == r.usage.calls for r in results)
    for r in results:
        assert all(b.status == "cancelled" and b.seconds >= 0.9 for b in r.ballots), r.ballots  # they ran about 1 s
    # a prompt's time waiting behind the others' calls is not its budget: each ran its full second
    assert seconds <= 3 * 1.0 + 1.0, seconds


def test_map_calls_that_never_reached_the_model_are_no_ballots() -> None:
    """Prompt a's two calls hold both slots and hang; prompt b (queued) runs out of its own budget
    only once it gets a slot. A call still waiting when its run ends is no ballot."""
    gate = threading.Event()
    received: list[str] = []

    def fn(prompt: str) -> str:
        received.append(prompt)
        gate.wait(60)
        return "1"

    stab = Stabilizer(fn, int, vote=Vote(k=3), budget=Budget(max_seconds=0.5), prompting=accord.Prompting(schema_in_prompt=False))

    async def both() -> list[accord.Result[Any]]:
        return await stab.amap(["a", "b"], concurrency=2, progress=False)

    results = asyncio.run(both())
    gate.set()
    assert [r.calls for r in results] == [received.count("a"), received.count("b")]
    assert sum(r.calls for r in results) == len(received)


def test_map_one_bad_prompt_never_loses_the_others() -> None:
    def fn(prompt: str) -> Any:
        if prompt.startswith("cancel"):
            raise asyncio.CancelledError()
        if prompt.startswith("bytes"):
            return b"1"
        if prompt.startswith("nan"):
            return "NaN"
        if prompt.startswith("surrogate"):
            return "\ud800"
        if prompt.startswith("huge"):
            return "9" * 5000
        return "7"

    stab = Stabilizer(fn, int, vote=Vote(k=3), retry=Retry(attempts=1), prompting=accord.Prompting(schema_in_prompt=False))
    prompts = ["ok 1", "cancel", "ok 2", "bytes", "nan", "surrogate", "huge", "ok 3"]
    results = stab.map(prompts, concurrency=3, progress=False)
    assert [r.value for r in results] == [7, None, 7, None, None, None, None, 7]
    assert [type(r.error).__name__ for r in results] == [
        "NoneType", "BackendError", "NoneType", "BackendError", "InvalidOutput", "InvalidOutput", "InvalidOutput", "NoneType"]
    assert all(r.calls == len(r.ballots) >= 2 for r in results)  # every failure kept its ballots


def test_cancelling_the_awaiting_task_propagates_cancellation() -> None:
    async def slow(prompt: str) -> str:
        await asyncio.sleep(60)
        return "1"

    async def main() -> None:
        task = asyncio.ensure_future(Stabilizer(slow, int).arun("q"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    start = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - start < 2.0


# -- the ledger: capped, escaped, never silently dropped ----------------------------------------------


def test_the_ledger_stores_hostile_text_and_caps_huge_outputs(tmp_path: Path) -> None:
    ledger = accord.Ledger(tmp_path / "ledger.sqlite3")
    huge = Stabilizer(lambda p: "x" * 5_000_000, int, vote=Vote(k=3), ledger=ledger)
    with pytest.raises(accord.InvalidOutput) as info:
        huge.run("five megabytes")
    assert "ledger_error" not in info.value.result.meta and info.value.result.meta["ledger"]["run"] == 1
    odd = Stabilizer(lambda p: '"a\\u0000b"', str, vote=Vote(k=1), ledger=ledger)
    first = odd.run("a prompt with a lone surrogate \udcff in it")
    assert first.value == "a\x00b" and "ledger_error" not in first.meta
    again = odd.run("a prompt with a lone surrogate \udcff in it")
    assert again.replayed and again.value == "a\x00b"
    lone = Stabilizer(lambda p: "\ud800", str, vote=Vote(k=1), retry=Retry(attempts=1), ledger=ledger)
    with pytest.raises(accord.InvalidOutput) as caught:
        lone.run("a lone surrogate back")
    assert "ledger_error" not in caught.value.result.meta  # recorded, not dropped
    runs = list(ledger.export())
    ledger.close()
    assert [b["text"] for b in runs[-1]["ballots"]] == ["\ud800"]  # stored escaped, read back as it came
    stored = runs[0]["ballots"][0]
    assert len(stored["text"]) == 16_384 and stored["meta"]["ledger_text"]["length"] == 5_000_000
    assert runs[1]["request"] == "a prompt with a lone surrogate \udcff in it"
    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    assert size < 2_000_000, size  # six 5 MB outputs: was 45 MB of database and 45 MB of WAL


def test_keyboard_interrupt_leaves_the_run_interrupted_in_the_ledger(tmp_path: Path) -> None:
    """The interrupt propagates; the ballots made before it are in the ledger (the run "interrupted")."""
    replies = iter([GOOD])
    lock = threading.Lock()

    def fn(prompt: str) -> str:
        with lock:
            reply = next(replies, None)
        if reply is not None:
            return reply
        time.sleep(0.3)  # the first ballot is recorded meanwhile
        raise KeyboardInterrupt

    ledger = accord.Ledger(tmp_path / "ledger.sqlite3")
    model = accord.models.function(fn, name="interrupted")  # fn holds a lock: no identity of its own
    stab = Stabilizer(model, Review, vote=Vote(k=3, quorum=3), prompting=accord.Prompting(schema_in_prompt=False), ledger=ledger)
    with pytest.raises(KeyboardInterrupt):
        stab.run("q")
    runs = ledger.runs()
    assert runs[0]["outcome"] == "interrupted" and len(ledger.show(runs[0]["key"])["runs"][0]["ballots"]) >= 1


# -- the command line: a one-line error and an exit code, never a traceback ---------------------------


def _ledger_file() -> Path:
    path = scratch() / "ledger.sqlite3"
    with accord.Ledger(path) as ledger:
        Stabilizer(accord.models.function(lambda p: "1", name="m"), int, ledger=ledger, vote=Vote(k=1)).run("q")
    return path


def _prompts_file() -> Path:
    path = scratch() / "prompts.jsonl"
    path.write_text('{"prompt": "hi"}\n')
    return path


# (case, arguments, exit code, what the message says)
CLI_CASES: list[tuple[str, Callable[[], list[str]], int, str]] = [
    ("ledger export -o /proc/nope.jsonl", lambda: ["ledger", "export", "--path", str(_ledger_file()), "-o", "/proc/nope.jsonl"],
     1, "cannot write /proc/nope.jsonl"),
    ("ledger ls --limit -3", lambda: ["ledger", "ls", "--path", str(_ledger_file()), "--limit", "-3"], 2, "greater than or equal to"),
    ("ledger ls --limit 0", lambda: ["ledger", "ls", "--path", str(_ledger_file()), "--limit", "0"], 2, "greater than or equal to"),
    ("ledger ls on a missing ledger", lambda: ["ledger", "ls", "--path", str(scratch() / "none.sqlite3")], 1, ""),
    ("audit --model transformers:/nonexistent", lambda: ["audit", str(_prompts_file()), "--model", "transformers:/nonexistent", "--quick"],
     2, "the path does not exist"),
]


def run_cli(args: list[str]) -> tuple[int, str, BaseException | None, float]:
    from typer.testing import CliRunner

    from accord.cli._app import app

    start = time.monotonic()
    done = CliRunner().invoke(app, args)
    escaped = done.exception if done.exception is not None and not isinstance(done.exception, SystemExit) else None
    return done.exit_code, done.output, escaped, time.monotonic() - start


@pytest.mark.parametrize("name,args,code,says", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_says_what_is_wrong_in_one_line(name: str, args: Callable[[], list[str]], code: int, says: str) -> None:
    exit_code, output, escaped, seconds = run_cli(args())
    assert escaped is None, f"{name}: raised {escaped!r}"
    assert exit_code == code and "Traceback" not in output and says in " ".join(output.split()), (exit_code, output)
    assert seconds < 30, seconds


def test_calibrate_writes_to_the_user_data_dir_not_into_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accord.backends.local import _calibrate

    monkeypatch.setenv("ACCORD_DATA_DIR", str(tmp_path))
    target = _calibrate.calibrated_file()
    assert target == tmp_path / "noise_floors.json"
    assert Path(accord.__file__).resolve().parent not in target.resolve().parents
    monkeypatch.delenv("ACCORD_DATA_DIR")
    assert Path(accord.__file__).resolve().parent not in _calibrate.calibrated_file().resolve().parents
    monkeypatch.setenv("ACCORD_DATA_DIR", str(tmp_path))
    target.write_text(json.dumps({"models": {"fp": {"float32": {"floors": {"greedy": 0.25}}}}}))
    assert _calibrate.shipped("fp", "float32") == {"greedy": 0.25}  # the user's floors are read first



def _never_loads(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the model was looked for or loaded: the option should have been refused first")


def test_calibrate_refuses_a_model_it_does_not_know_before_loading_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    from accord.backends.local import _embedded

    monkeypatch.setattr(_embedded, "find_gguf", _never_loads)
    for bogus in ("bogus", "openai:", "local:x", "transformers"):
        exit_code, output, escaped, _ = run_cli(["calibrate", "--model", bogus])
        assert escaped is None and exit_code == 2, (bogus, exit_code, output, escaped)
        assert "--model" in output and "local" in output and "openai:BASE_URL" in output and "Traceback" not in output


def test_an_unknown_dtype_is_a_config_error_before_any_load(monkeypatch: pytest.MonkeyPatch) -> None:
    from accord.backends.local import _embedded, _load

    monkeypatch.setattr(_embedded, "find_gguf", _never_loads)
    monkeypatch.setattr(_load, "load", _never_loads)
    for make in (lambda: accord.models.local(dtype="banana"), lambda: accord.models.transformers("/nonexistent", dtype="banana")):
        with pytest.raises(accord.ConfigError, match="banana"):
            make()


# -- the table -------------------------------------------------------------------------------------


def ledger_figure() -> str:
    """One failed run of six 5 MB outputs: what the ledger holds on disk."""
    with tempfile.TemporaryDirectory() as folder:
        ledger = accord.Ledger(Path(folder) / "ledger.sqlite3")
        stab = Stabilizer(lambda p: "x" * 5_000_000, int, vote=Vote(k=3), ledger=ledger)
        try:
            stab.run("five megabytes")
        except accord.InvalidOutput as error:
            calls = error.result.calls
        sizes = {f.name: f.stat().st_size for f in Path(folder).iterdir()}
        ledger.close()
    db, wal = sizes.get("ledger.sqlite3", 0), sizes.get("ledger.sqlite3-wal", 0)
    return f"ledger: one failed run of {calls} outputs of 5 MB: database {db / 1e6:.2f} MB, WAL {wal / 1e6:.2f} MB (issue #15, before the cap: 45 MB and 45 MB)"


def cell(text: str) -> str:
    """Text for a markdown table cell."""
    return text.replace("|", "\\|")


def table() -> str:
    rows = ["| case | kind | expected | outcome | seconds (budget) | calls received | ballots in the Result |", "|---|---|---|---|---|---|---|"]
    for case in OUTPUT_CASES:
        seen = run_case(case)
        expected = "a value" if case.expect is None else case.expect.__name__
        outcome = "a value" if seen.outcome == "value" else seen.outcome
        if case.expect in (KeyboardInterrupt, SystemExit):
            outcome += " (propagated)"
        budget = "none" if case.budget is None else f"{case.budget:g}"
        ballots = "-" if seen.ballots is None else str(seen.ballots)
        rows.append(f"| {cell(case.name)} | output | {expected} | {outcome} | {seen.seconds:.2f} ({budget}) | {seen.received} | {ballots} |")
    for schema_case in SCHEMA_CASES:
        outcome, built, ran, prompt, schema_chars, _, _ = run_schema_case(schema_case)
        expected = "a value" if schema_case.expect is None else schema_case.expect.__name__
        outcome = "a value" if outcome == "value" else outcome
        said = f"prompt {prompt:,} chars, schema {schema_chars:,}" if prompt else "-"
        rows.append(f"| {cell(schema_case.name)} | schema | {expected} | {outcome}; {said} | {built:.2f} + {ran:.2f} ({SCHEMA_BUDGET:g}) | - | - |")
    for name, build, expect in CONFIG_CASES:
        start = time.monotonic()
        try:
            build()
            outcome = "accepted (WRONG)"
        except BaseException as exc:
            outcome = type(exc).__name__
        rows.append(f"| {cell(name)} | configuration | {expect.__name__} | {outcome} | {time.monotonic() - start:.2f} | 0 | - |")
    for name, args, code, _ in CLI_CASES:
        exit_code, output, escaped, seconds = run_cli(args())
        lines = [line.strip(" │╭╰─╯╮") for line in output.splitlines()]
        said = next((line for line in lines if line.startswith(("Invalid value", "error", "accord"))), "")
        outcome = f"raised {type(escaped).__name__} (WRONG)" if escaped else f"exit {exit_code}: {cell(said[:70])}"
        rows.append(f"| accord {name} | command line | exit {code} | {outcome} | {seconds:.2f} | - | - |")
    return "\n".join(rows)


if __name__ == "__main__":
    if "--table" not in sys.argv:
        sys.exit("usage: python tests/test_hostile.py --table")
    print(table())
    print()
    print(ledger_figure())
