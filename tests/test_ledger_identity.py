"""A model's identity in the ledger is never guessed.

Two models that can answer differently never share a key: two lambdas, two closures of one
factory, two ``functools.partial`` of one function, bound methods of two clients, two callable
objects. Where accord cannot derive an identity that another process derives the same, a ledger
use is refused with a ConfigError that says how to name the model; the ones it can derive replay
across processes (a fresh interpreter, another hash seed).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import accord
from accord import ConfigError, Extract, Ledger, Prices, Stabilizer, Vote, models
from accord._types import Completion, Usage


def llm(prompt: str, model: str) -> str:
    return {"m1": "1", "m2": "2"}[model]


def one(prompt: str) -> str:
    return "1"


def factory(answer: str) -> Any:
    def ask(prompt: str) -> str:
        return answer

    return ask


class Client:
    def __init__(self, model: str) -> None:
        self.model = model

    def complete(self, prompt: str) -> str:
        return {"m1": "1", "m2": "2"}[self.model]


class Callable_:
    def __init__(self, answer: str) -> None:
        self._answer = answer  # private state decides the answer too

    def __call__(self, prompt: str) -> str:
        return self._answer


def decide(ledger: Ledger, fn: Any, prompt: str = "q") -> Any:
    return Stabilizer(fn, schema=int, vote=Vote(k=1), ledger=ledger).run(prompt)


PAIRS: dict[str, tuple[Any, Any]] = {
    "lambdas": (lambda p: "1", lambda p: "2"),
    "closures of one factory": (factory("1"), factory("2")),
    "partials": (functools.partial(llm, model="m1"), functools.partial(llm, model="m2")),
    "bound methods of two clients": (Client("m1").complete, Client("m2").complete),
    "callable objects": (Callable_("1"), Callable_("2")),
    "function backends": (models.function(lambda p: "1"), models.function(lambda p: "2")),
}


@pytest.mark.parametrize("case", list(PAIRS))
def test_two_models_that_answer_differently_never_replay_each_other(case: str, tmp_path: Path) -> None:
    one, two = PAIRS[case]
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        first, second = decide(ledger, one), decide(ledger, two)
        assert (first.value, first.replayed) == (1, False)
        assert (second.value, second.replayed) == (2, False), f"{case}: the second model got the first's answer"
        assert decide(ledger, one).replayed and decide(ledger, two).value == 2


def test_the_same_model_built_twice_replays(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        for make in (lambda: factory("1"), lambda: functools.partial(llm, model="m1"), lambda: Client("m1").complete,
                     lambda: Callable_("1")):
            assert not decide(ledger, make(), "same").replayed, "each is a model of its own"
            again = decide(ledger, make(), "same")
            assert again.replayed and again.value == 1


def test_a_model_function_goes_by_its_code_wherever_it_lives() -> None:
    backend = models.function(one)  # at an import path: its code too (tests/test_model_identity.py)
    assert backend.fingerprint.startswith(f"{__name__}:one#") and backend.identity() == backend.fingerprint
    assert models.function(factory("1")).fingerprint.startswith(f"{__name__}:factory.<locals>.ask#")
    assert models.function(functools.partial(llm, model="m1")).fingerprint.startswith(f"partial({__name__}:llm)#")
    assert models.function(Client("m1").complete).fingerprint.startswith(f"{__name__}:Client.complete#")


def test_a_model_without_an_identity_is_refused_with_how_to_name_it(tmp_path: Path) -> None:
    lock = threading.Lock()

    def guarded(prompt: str) -> str:
        with lock:
            return "1"

    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        with pytest.raises(ConfigError, match=r"name=") as info:
            Stabilizer(guarded, schema=int, ledger=ledger)
        assert "lock" in str(info.value)
        assert Stabilizer(guarded, schema=int, vote=Vote(k=1)).run("q").value == 1, "no ledger: no identity needed"
        named = Stabilizer(models.function(guarded, name="guarded-v1"), schema=int, vote=Vote(k=1), ledger=ledger)
        assert named.run("q").value == 1 and named.run("q").replayed
        assert ledger.show(ledger.key(named, "q"))["material"]["model"] == "guarded-v1"


def test_an_object_with_generate_and_no_fingerprint_is_refused(tmp_path: Path) -> None:
    class Plain:
        def generate(self, request: Any) -> Completion:
            return Completion("1", "stop", Usage(calls=1))

    class Named(Plain):
        fingerprint = "named-model"

    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        with pytest.raises(ConfigError, match="fingerprint"):
            Stabilizer(Plain(), schema=int, ledger=ledger)
        assert Stabilizer(Named(), schema=int, vote=Vote(k=1), ledger=ledger).run("q").value == 1


def test_a_backend_subclass_that_names_nothing_is_refused(tmp_path: Path) -> None:
    class Mine(accord.models.Backend):
        def generate(self, request: Any) -> Completion:
            return Completion("1", "stop", Usage(calls=1))

    with Ledger(tmp_path / "ledger.sqlite3") as ledger, pytest.raises(ConfigError, match="fingerprint"):
        Stabilizer(Mine(), schema=int, ledger=ledger)


def test_a_lambda_as_normalizer_goes_by_its_code(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        upper = Stabilizer(lambda p: "a", schema=str, vote=Vote(k=1), ledger=ledger, extract=Extract(normalize=[lambda s: s.upper()]))
        lower = Stabilizer(lambda p: "a", schema=str, vote=Vote(k=1), ledger=ledger, extract=Extract(normalize=[lambda s: s.lower()]))
        assert upper.run("q").value == "A" and lower.run("q").value == "a"


def test_the_name_goes_into_prices_spans_and_the_ledger(tmp_path: Path) -> None:
    def priced(prompt: str) -> Completion:
        return Completion("1", "stop", Usage(prompt_tokens=1_000_000, completion_tokens=0, calls=1))

    backend = models.function(priced, name="gpt-4o-mini")
    assert backend.fingerprint == "gpt-4o-mini" and backend.telemetry()["gen_ai.request.model"] == "gpt-4o-mini"
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        stab = Stabilizer(backend, schema=int, vote=Vote(k=1), ledger=ledger, prices=Prices({"gpt-4o-mini": (2.0, 0.0)}))
        result = stab.run("q")
        assert result.usage.cost == 2.0 and result.fingerprint == "gpt-4o-mini"
        assert ledger.show(result.ledger_key)["material"]["model"] == "gpt-4o-mini"
    with pytest.warns(DeprecationWarning, match=r"models\.function\(fingerprint=\.\.\.\) is deprecated"):  # the old spelling still works
        assert models.function(priced, fingerprint="old-spelling").fingerprint == "old-spelling"
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError):
        models.function(priced, name="a", fingerprint="b")
    with pytest.raises(ConfigError):
        models.function(priced, name="")


class Keyed:
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.me = self  # a cycle in its state

    def complete(self, prompt: str) -> str:
        return "1"


def test_a_derived_identity_is_stable_ends_cycles_and_never_holds_a_secret(tmp_path: Path) -> None:
    def countdown(prompt: str, n: int = 3) -> str:
        return "1" if n == 0 else countdown(prompt, n - 1)  # closes over itself

    first = models.function(countdown).identity()
    assert first == models.function(countdown).identity() and first.startswith(f"{__name__}:")
    secret = Keyed("sk-not-to-be-written").complete
    assert models.function(secret).identity() == models.function(Keyed("sk-not-to-be-written").complete).identity()
    assert models.function(secret).identity() != models.function(Keyed("sk-another").complete).identity()
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        stab = Stabilizer(secret, schema=int, vote=Vote(k=1), ledger=ledger)
        stab.run("q")
        assert "sk-not-to-be-written" not in json.dumps(ledger.show(ledger.key(stab, "q")))
    assert not any(b"sk-not" in f.read_bytes() for f in tmp_path.iterdir()), "nor in the file (or its WAL)"


def test_order_of_a_dict_counts_and_order_of_a_set_does_not() -> None:
    def asking(shots: Any) -> Any:
        def ask(prompt: str) -> str:
            return "1"

        ask.shots = shots  # type: ignore[attr-defined]  # an attribute: part of its identity
        return ask

    identity = lambda shots: models.function(asking(shots)).identity()  # noqa: E731 - read as a table
    assert identity({"a": 1, "b": 2}) != identity({"b": 2, "a": 1}), "a prompt built from a dict follows its order"
    assert identity({"a", "b", "c"}) == identity({"c", "b", "a"})
    assert identity([1, 2]) != identity((1, 2)) and identity(1) != identity(True) and identity(1) != identity(1.0)


def test_what_is_too_large_or_holds_weights_is_refused() -> None:
    big = ["x" * 1000] * 5000
    with pytest.raises(ConfigError, match="too much"):
        models.function(lambda p: big[0]).identity()
    torch = pytest.importorskip("torch")
    layer = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigError, match="too heavy"):
        models.function(lambda p: str(layer)).identity()


# -- across processes --------------------------------------------------------------------------

MODELS = '''
import functools, threading

def llm(prompt, model):
    return {"m1": "1", "m2": "2"}[model]

def one(prompt):
    return "1"

def factory(answer):
    def ask(prompt):
        return answer
    return ask

class Client:
    def __init__(self, model):
        self.model = model
    def complete(self, prompt):
        return {"m1": "1", "m2": "2"}[self.model]

def choosing(words):
    def ask(prompt):
        return "1" if "a" in words else "2"
    return ask

def build(case, which):
    answer = "1" if which == 1 else "2"
    model = "m1" if which == 1 else "m2"
    return {
        "lambda": [lambda p: "1", lambda p: "2"][which - 1],
        "closure": factory(answer),
        "partial": functools.partial(llm, model=model),
        "method": Client(model).complete,
        "named": one if which == 1 else None,
        "set": choosing({"a", "b", "c", "d", "e"} if which == 1 else {"x", "y", "z"}),
    }[case]
'''

RUN = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from accord import Ledger, Stabilizer, Vote, models
import identity_models

cfg = json.loads(sys.argv[2])
calls = []
fn = identity_models.build(cfg["case"], cfg["which"])
if fn is None:
    fn = lambda p: "2"
def counted(prompt):
    calls.append(prompt)
    return fn(prompt)
backend = models.function(fn)
fingerprint = backend.fingerprint  # the identity of fn, derived before the call is counted below
backend.fn = counted
with Ledger(cfg["ledger"]) as ledger:
    result = Stabilizer(backend, int, vote=Vote(k=1), ledger=ledger).run("q")
print(json.dumps({"value": result.value, "replayed": result.replayed, "calls": len(calls), "fingerprint": backend.fingerprint}))
'''


def in_a_process(folder: Path, ledger: Path, case: str, which: int, seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, str(folder / "run.py"), str(folder), json.dumps({"case": case, "which": which,
                           "ledger": str(ledger)})], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]  # the script prints one object


@pytest.mark.parametrize("case", ["lambda", "closure", "partial", "method", "named", "set"])
def test_a_derived_identity_replays_in_another_process_and_tells_two_models_apart(case: str, tmp_path: Path) -> None:
    (tmp_path / "identity_models.py").write_text(MODELS)
    (tmp_path / "run.py").write_text(RUN)
    ledger = tmp_path / "ledger.sqlite3"
    first = in_a_process(tmp_path, ledger, case, 1, seed="1")
    assert first == {**first, "value": 1, "replayed": False, "calls": 1}
    again = in_a_process(tmp_path, ledger, case, 1, seed="2")  # another process, another hash seed
    assert again == {**first, "replayed": True, "calls": 0}, "the same model in another process replays"
    other = in_a_process(tmp_path, ledger, case, 2, seed="3")
    assert other["value"] == 2 and not other["replayed"] and other["fingerprint"] != first["fingerprint"]


SCRIPT = r'''
import json, sys
from accord import Ledger, Stabilizer, Vote

def ask(prompt):
    return sys.argv[2]

with Ledger(sys.argv[1]) as ledger:
    result = Stabilizer(ask, int, vote=Vote(k=1), ledger=ledger).run("q")
print(json.dumps({"value": result.value, "replayed": result.replayed}))
'''


def test_a_function_of_a_script_is_named_by_the_script_not_by_main(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.sqlite3"
    for name in ("one.py", "two.py"):
        (tmp_path / name).write_text(SCRIPT)

    def run(script: str, answer: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, str(tmp_path / script), str(ledger), answer], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]  # one object printed

    assert run("one.py", "1") == {"value": 1, "replayed": False}
    assert run("one.py", "1") == {"value": 1, "replayed": True}, "the same script replays"
    assert run("two.py", "2") == {"value": 2, "replayed": False}, "__main__:ask of another script is another model"


def test_a_function_typed_into_an_interactive_session_goes_by_its_code(tmp_path: Path) -> None:
    def run(answer: str, guarded: bool = False) -> str:
        code = ("import accord, threading\n"
                f"ledger = accord.Ledger({str(tmp_path / 'l.sqlite3')!r})\n"
                "lock = threading.Lock()\n"
                f"def ask(p):\n    {'with lock: ' if guarded else ''}return {answer!r}\n"
                "try:\n    r = accord.Stabilizer(ask, int, vote=accord.Vote(k=1), ledger=ledger).run('q')\n"
                "    print(r.value, r.replayed)\n"
                "except accord.ConfigError as e:\n    print('refused:', e)\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    assert run("1") == "1 False"
    assert run("1") == "1 True", "the same cell in another session replays"
    assert run("2") == "2 False", "an edited cell is another model"
    refused = run("1", guarded=True)
    assert refused.startswith("refused:") and "'lock'" in refused and "name=" in refused
