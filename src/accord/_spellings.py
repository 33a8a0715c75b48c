"""The Stabilizer keywords of the release before this one, mapped to their new homes.

Each still works for this release and raises a ``DeprecationWarning`` that names the new
spelling; an unknown keyword is a :class:`~accord.ConfigError`. The new homes group what belongs
together::

    max_tokens, temperature, seed, stop     settings=accord.Settings(...)
    system, examples, schema_in_prompt      prompting=accord.Prompting(...)
    normalize                               extract=accord.Extract(normalize=[...])
    on_no_consensus, perturb                vote=accord.Vote(...)
    on_ballot                               hooks=accord.Hooks(after_ballot=...)
    telemetry=True                          the default: nothing, or accord.Telemetry(...)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from . import _check
from ._errors import ConfigError
from ._types import Settings
from .prompt._prompting import Prompting
from .read._extract import Extract
from .vote._vote import Vote

# old keyword -> (the new object's Stabilizer keyword, the field of that object)
MOVED = {
    "max_tokens": ("settings", "max_tokens"),
    "temperature": ("settings", "temperature"),
    "seed": ("settings", "seed"),
    "stop": ("settings", "stop"),
    "system": ("prompting", "system"),
    "examples": ("prompting", "examples"),
    "schema_in_prompt": ("prompting", "schema_in_prompt"),
    "normalize": ("extract", "normalize"),
    "on_no_consensus": ("vote", "on_no_consensus"),
    "perturb": ("vote", "perturb"),
}
_KINDS: dict[str, type] = {"settings": Settings, "prompting": Prompting, "extract": Extract, "vote": Vote}


@dataclass(frozen=True)
class Grouped:
    """The grouped options of one Stabilizer, the old spellings moved in."""

    vote: Vote
    settings: Settings
    prompting: Prompting
    extract: Extract
    on_ballot: Any = None


def grouped(old: dict[str, Any], given: dict[str, Any]) -> Grouped:
    """``given``: the new keywords (None where not passed); ``old``: the deprecated ones passed."""
    unknown = sorted(set(old) - set(MOVED) - {"on_ballot"})
    if unknown:
        raise ConfigError(f"Stabilizer() got unknown options {unknown}; see help(accord.Stabilizer)")
    made = {name: given[name] if given.get(name) is not None else kind() for name, kind in _KINDS.items()}
    moved: dict[str, dict[str, Any]] = {}
    for name, value in old.items():
        if name == "on_ballot":
            _check.deprecated("Stabilizer(on_ballot=...)", "hooks=accord.Hooks(after_ballot=...)", stacklevel=3)
            continue
        home, attribute = MOVED[name]
        _check.deprecated(f"Stabilizer({name}=...)", f"{home}=accord.{_KINDS[home].__name__}({attribute}=...)", stacklevel=3)
        moved.setdefault(home, {})[attribute] = value
    for home, changes in moved.items():
        made[home] = replace(made[home], **changes)
    return Grouped(made["vote"], made["settings"], made["prompting"], made["extract"], old.get("on_ballot"))


def telemetry_default(telemetry: Any) -> Any:
    """``telemetry=True`` (deprecated) is the default, None."""
    if telemetry is True:
        _check.deprecated("Stabilizer(telemetry=True)", "nothing (spans are on when the application has a tracer provider), or "
                          "accord.Telemetry(...)", stacklevel=3)
        return None
    return telemetry
