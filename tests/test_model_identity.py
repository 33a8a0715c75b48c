"""A model's identity follows its code (issue #33): an edited model function never replays the old code's answer.

A model function was named by its import path (or a script's path) alone, so ``def my_llm(p):
return "positive"`` edited to return "negative" and run again on the same ledger replayed
"positive". Now its identity is a digest of its code, the values it holds, and the module
globals its code reads (data, and the functions of its module by their code), wherever it lives:
a module, a script, a notebook cell. Each edit below is made to a module's source, which is run
again in a fresh module of the same name (as a restarted process would import it): the edits
that change an answer change the identity, and the same source gives the same identity. Then
the same with two processes on one ledger, and a name that keeps answers across edits.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accord import ConfigError, Ledger, Stabilizer, Vote, models
from accord.ledger._keys import routine

BASE = '''
import functools

LABEL = "positive"
PROMPTS = {"classify": "Classify: {}", "rate": "Rate: {}"}
LIMITS = (1, 5)


def helper(p):
    return inner(p)


def inner(p):
    return LABEL


def unused():
    return "never called by the model"


@functools.lru_cache(maxsize=None)
def template():
    return PROMPTS["classify"]


def ask(p, style="plain"):
    text = template().format(p)
    words = [w for w in text.split() if w not in STOP]
    return helper(p) if words else "none"


STOP = {"a", "the"}


class Client:
    def __init__(self, model):
        self.model = model

    def complete(self, p):
        return self.model + ":" + LABEL


class Answerer:
    def __call__(self, p):
        return LABEL


def llm(p, model):
    return model + LABEL


def make():
    answer = LABEL

    def closed(p):
        return answer
    return closed


MODELS = {
    "function": lambda: ask,
    "method": lambda: Client("m1").complete,
    "callable object": lambda: Answerer(),
    "partial": lambda: functools.partial(llm, model="m1"),
    "closure": make,
    "lambda": lambda: (lambda p: LABEL),
}
'''

# (what is edited, old text, new text): each changes what some model answers
EDITS = [
    ("a returned constant", 'return self.model + ":" + LABEL', 'return self.model + "/" + LABEL'),
    ("a module constant read", 'LABEL = "positive"', 'LABEL = "negative"'),
    ("a default", 'def ask(p, style="plain")', 'def ask(p, style="fancy")'),
    ("a helper of the module", "return inner(p)", "return inner(p).upper()"),
    ("a helper's helper", "def inner(p):\n    return LABEL", "def inner(p):\n    return LABEL[::-1]"),
    ("a dict of prompts", '"classify": "Classify: {}"', '"classify": "Label: {}"'),
    ("a set read in a comprehension", 'STOP = {"a", "the"}', 'STOP = {"a", "an", "the"}'),
    ("a cached helper", 'return PROMPTS["classify"]', 'return PROMPTS["classify"].lower()'),
    ("a __call__", "    def __call__(self, p):\n        return LABEL", "    def __call__(self, p):\n        return LABEL + '!'"),
    ("a partial's function", "return model + LABEL", "return LABEL + model"),
    ("a closure's factory", "answer = LABEL", "answer = LABEL.title()"),
]
# (what is edited, old text, new text): each changes no model's answer
NEUTRAL = [
    ("a function the model does not call", 'return "never called by the model"', 'return "still never called"'),
    ("a constant the model does not read", "LIMITS = (1, 5)", "LIMITS = (0, 10)"),
    ("lines moved down", "import functools\n", "import functools\n\n\n\n"),
]
# which models each edit reaches (the others must keep their identity)
REACHES = {
    "a returned constant": {"method"},
    "a module constant read": {"function", "method", "callable object", "partial", "closure", "lambda"},
    "a default": {"function"},
    "a helper of the module": {"function"},
    "a helper's helper": {"function"},
    "a dict of prompts": {"function"},
    "a set read in a comprehension": {"function"},
    "a cached helper": {"function"},
    "a __call__": {"callable object"},
    "a partial's function": {"partial"},
    "a closure's factory": {"closure"},
}


def load(source: str, name: str = "edited_models") -> types.ModuleType:
    """``source`` run as the module ``name``, afresh (as a restarted process imports it)."""
    module = types.ModuleType(name)
    module.__file__ = f"/nowhere/{name}.py"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


@pytest.fixture
def identities() -> Iterator[Any]:
    def of(source: str) -> dict[str, str]:
        module = load(source)
        return {case: models.function(make()).identity() for case, make in module.MODELS.items()}

    yield of
    sys.modules.pop("edited_models", None)


def test_the_same_source_gives_the_same_identities(identities: Any) -> None:
    first, again = identities(BASE), identities(BASE)
    assert first == again and len(set(first.values())) == len(first), first


@pytest.mark.parametrize(("what", "old", "new"), EDITS, ids=[e[0] for e in EDITS])
def test_an_edit_that_changes_an_answer_changes_the_identity(identities: Any, what: str, old: str, new: str) -> None:
    assert old in BASE
    before, after = identities(BASE), identities(BASE.replace(old, new))
    changed = {case for case in before if before[case] != after[case]}
    assert changed == REACHES[what], f"{what}: changed {sorted(changed)}, expected {sorted(REACHES[what])}"


@pytest.mark.parametrize(("what", "old", "new"), NEUTRAL, ids=[e[0] for e in NEUTRAL])
def test_an_edit_that_changes_no_answer_keeps_the_identity(identities: Any, what: str, old: str, new: str) -> None:
    assert old in BASE
    assert identities(BASE) == identities(BASE.replace(old, new)), what


def test_a_global_that_cannot_be_fingerprinted_is_refused_naming_it(tmp_path: Path) -> None:
    module = load("import threading\nLOCK = threading.Lock()\ndef helper(p):\n    with LOCK:\n        return '1'\n"
                  "def ask(p):\n    return helper(p)\n", "locked_models")
    try:
        with Ledger(tmp_path / "l.sqlite3") as ledger:
            with pytest.raises(ConfigError, match=r"the global 'helper' it reads, the global 'LOCK' it reads.*name=") as info:
                Stabilizer(module.ask, int, ledger=ledger)
            assert "lock" in str(info.value)
            named = Stabilizer(models.function(module.ask, name="locked-v1"), int, vote=Vote(k=1, gate=None), ledger=ledger)
            assert named.run("q").value == 1 and named.run("q").replayed
    finally:
        sys.modules.pop("locked_models", None)


def test_a_name_keeps_the_answers_across_edits(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite3") as ledger:
        for label, expected in (('"1"', 1), ('"2"', 1)):  # edited, but the same name: the name is the user's word
            module = load(f"def ask(p):\n    return {label}\n", "named_models")
            result = Stabilizer(models.function(module.ask, name="my-model-v1"), int, vote=Vote(k=1, gate=None), ledger=ledger).run("q")
            assert result.value == expected
        assert result.replayed
        unnamed = Stabilizer(module.ask, int, vote=Vote(k=1, gate=None), ledger=ledger).run("q")
        assert (unnamed.value, unnamed.replayed) == (2, False), "unnamed, the edited code is another model"
    sys.modules.pop("named_models", None)


# The key accord b821b98 (the rule before #33) made for ``old_rule_models.ask`` below, unnamed, under
# ``Stabilizer(ask, int, vote=Vote(k=1, gate=None))`` and the prompt "q" (its identity was "old_rule_models:ask").
OLD_RULE_KEY = "8268915f98f6ee78637d629305a79d60f178ea32622a812052db6894601b9d49"


def test_a_model_named_by_its_old_identity_makes_the_old_rules_key(tmp_path: Path) -> None:
    """How answers stored under the old rule are kept: the user names the model by its old identity
    (``accord ledger show KEY`` prints it), vouching that the code is unchanged; unnamed, the
    function gets a new key and is decided once again (docs/ledger.md)."""
    module = load("def ask(p):\n    return '1'\n", "old_rule_models")
    try:
        with Ledger(tmp_path / "l.sqlite3") as ledger:
            vouched = Stabilizer(models.function(module.ask, name="old_rule_models:ask"), int, vote=Vote(k=1, gate=None), ledger=ledger)
            unnamed = Stabilizer(module.ask, int, vote=Vote(k=1, gate=None), ledger=ledger)
            assert ledger.key(vouched, "q") == OLD_RULE_KEY
            assert ledger.key(unnamed, "q") != OLD_RULE_KEY
            assert unnamed.model.identity().startswith("old_rule_models:ask#")
    finally:
        sys.modules.pop("old_rule_models", None)


def test_a_policy_callable_keeps_its_import_path() -> None:
    module = load("def shout(s):\n    return s.upper()\n", "policy_models")
    try:
        assert routine(module.shout) == "policy_models:shout", "normalizers, tie-breaks: the first key format's rule"
    finally:
        sys.modules.pop("policy_models", None)


# -- two processes on one ledger ---------------------------------------------------------------

SCRIPT = '''
import json, sys
from accord import Ledger, Stabilizer, Vote

LABEL = "positive"


def my_llm(prompt):
    return "positive"


with Ledger(sys.argv[1]) as ledger:
    result = Stabilizer(my_llm, str, vote=Vote(k=1, gate=None), ledger=ledger).run("Is 'great product' positive?")
print(json.dumps({"value": result.value, "replayed": result.replayed}))
'''


def test_a_scripts_model_function_edited_in_place_never_replays_the_old_answer(tmp_path: Path) -> None:
    script, ledger = tmp_path / "classify.py", tmp_path / "ledger.sqlite3"

    def run(source: str) -> dict[str, Any]:
        script.write_text(textwrap.dedent(source))
        done = subprocess.run([sys.executable, str(script), str(ledger)], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]  # one object printed

    assert run(SCRIPT) == {"value": "positive", "replayed": False}
    assert run(SCRIPT) == {"value": "positive", "replayed": True}, "the unchanged script replays"
    edited = SCRIPT.replace('return "positive"', 'return "negative"')
    assert run(edited) == {"value": "negative", "replayed": False}, "the edited function is another model"
    assert run(edited) == {"value": "negative", "replayed": True}
    reads = SCRIPT.replace('return "positive"', "return LABEL")
    assert run(reads) == {"value": "positive", "replayed": False}
    assert run(reads.replace('LABEL = "positive"', 'LABEL = "neutral"')) == {"value": "neutral", "replayed": False}, \
        "a constant the function reads, edited"
    assert run(SCRIPT) == {"value": "positive", "replayed": True}, "the first code again: its own answer"
