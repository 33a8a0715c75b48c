"""The decisive part of a run's ballots: what the vote counts, and which texts ride along.

``schema/_roles`` gives every leaf of the schema a role. :class:`Decisions` applies them to the
ballots of one run:

- an ``auto`` text turns prose once a valid ballot writes, there, a text of its own longer than
  ``SHORT_WORDS`` words (one the input does not hold): ``observe`` says when that happened, and
  the ballot box then counts every ballot again. The rule depends only on the ballots and the
  prompt, never on their order, and a text once prose stays prose for the run;
- a ballot's vote key is the canonical key of its decisive part (:meth:`key`): prose dropped, a
  list of labels a sorted set of case-folded labels. A schema whose roles are plain (nothing
  prose, nothing auto, no labels) is keyed exactly as before roles existed;
- :meth:`voted` and :meth:`carried` say what the Result reports: the paths voted, and for each
  carried path how many versions the ballots wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..read._canonical import canonical_key, label
from ..schema._roles import ANY_KEY, AUTO, DECISIVE, ITEM, PROSE, SHORT_WORDS, Pattern, Roles, render

Path = tuple[Any, ...]


class Decisions:
    """The roles of one run's ballots (see the module docstring). ``source``: the input text the
    prompt holds; a text copied from it is the input's, never the model's prose."""

    def __init__(self, roles: Roles, source: str = "") -> None:
        self.roles = roles
        self.plain = roles.plain
        self.prose: set[Pattern] = set(roles.of(PROSE)) if not self.plain else set()
        self.auto = roles.auto
        self.source = _plain(source) if self.auto else ""
        self.nodes = roles.nodes
        self._decides: dict[Pattern, bool] = {}  # per node, under the prose as it stands
        self._touched: frozenset[Pattern] | None = None  # nodes the projection must walk into (above prose or labels)

    # -- which texts are prose --------------------------------------------------------------

    def written(self, text: str) -> bool:
        """A text the model wrote itself and at length: prose where the field is auto."""
        return len(text.split()) > SHORT_WORDS and _plain(text) not in self.source

    def judged(self, form: Any) -> set[Pattern]:
        """The prose patterns of one ballot: the run's, and the auto texts it writes at length."""
        if not self.auto:
            return self.prose
        found = self.prose
        for pattern in self.auto:
            if pattern in found:
                continue
            for value in values_at(form, pattern):  # a loop, not any(...): this runs for every ballot
                if isinstance(value, str) and self.written(value):
                    found = found | {pattern}
                    break
        return found

    def observe(self, form: Any) -> bool:
        """Take in a valid ballot; True when one of its texts turned an auto field prose."""
        if self.plain:
            return False
        found = self.judged(form)
        if found == self.prose:
            return False
        self.prose, self._decides, self._touched = set(found), {}, None
        return True

    # -- the vote key ----------------------------------------------------------------------------

    def key(self, form: Any, full_key: str) -> str:
        """The vote key of a canonical form (``full_key``: its canonical key, for plain roles)."""
        if self.plain or (not self.prose and not self.roles.labels):
            return full_key  # nothing to leave out: the canonical key itself
        return canonical_key(self.project(form))

    def project(self, form: Any, prose: set[Pattern] | None = None) -> Any:
        """The decisive part of a canonical form: prose dropped, labels as a sorted set."""
        if prose is None or prose == self.prose:
            if self._touched is None:
                self._touched = _prefixes([*self.prose, *self.roles.labels])
            return self._project(form, (), self.prose, self._touched)
        return self._project(form, (), prose, _prefixes([*prose, *self.roles.labels]))

    def _project(self, data: Any, pattern: Pattern, prose: set[Pattern], touched: frozenset[Pattern]) -> Any:
        if pattern not in touched:
            return data  # nothing below is prose or labels: as it is
        if isinstance(data, dict):
            out = {}
            for key, value in data.items():
                child = self.child(pattern, key)
                if not self.decides(child, prose):
                    continue  # prose, and anything holding only prose
                out[key] = self._project(value, child, prose, touched) if child in touched else value
            return out
        if isinstance(data, list):
            items = (*pattern, ITEM)
            if items in self.roles.labels and items not in prose and all(isinstance(v, str) for v in data):
                return sorted({label(v) for v in data})
            return [self._project(value, items, prose, touched) for value in data]
        return data

    def decides(self, pattern: Pattern, prose: set[Pattern] | None = None) -> bool:
        """Whether any leaf at or under ``pattern`` is voted (an unknown node is: voted as before)."""
        if prose is not None and prose != self.prose:
            return any(leaf not in prose for leaf in self.roles.below.get(pattern, ((),)))
        known = self._decides.get(pattern)
        if known is None:
            known = self._decides[pattern] = any(leaf not in self.prose for leaf in self.roles.below.get(pattern, ((),)))
        return known

    def child(self, pattern: Pattern, key: Any) -> Pattern:
        """The pattern of a key or an index below ``pattern``."""
        if isinstance(key, int):
            return (*pattern, ITEM)
        named = (*pattern, str(key))
        return named if named in self.nodes else (*pattern, ANY_KEY)

    def pattern(self, path: Path) -> Pattern:
        pattern: Pattern = ()
        for key in path:
            pattern = self.child(pattern, key)
        return pattern

    def graft(self, decided: Any, source: Any, pattern: Pattern = ()) -> Any:
        """``decided`` (decisive data) with the prose of ``source`` (one ballot's data) put in
        where ``decided`` has room for it: a fieldwise decision no single ballot holds."""
        if isinstance(decided, dict) and isinstance(source, dict):
            out = dict(decided)
            for key, value in source.items():
                child = self.child(pattern, key)
                if not self.decides(child):
                    out[key] = value
                elif key in out:
                    out[key] = self.graft(out[key], value, child)
            return out
        if isinstance(decided, list) and isinstance(source, list) and (*pattern, ITEM) not in self.roles.labels:
            items = (*pattern, ITEM)
            return [self.graft(d, s, items) for d, s in zip(decided, source, strict=False)] + decided[len(source):]
        return decided

    # -- what the Result reports -------------------------------------------------------------

    def voted(self) -> tuple[str, ...]:
        """The paths the vote decided (every leaf not prose), in the schema's order."""
        if self.plain:
            return self.roles.rendered
        return tuple(render(p) for p, role in self.roles.leaves.items() if role in (DECISIVE, AUTO) and p not in self.prose)

    def carried(self, forms: Iterable[Any]) -> dict[str, int]:
        """For each prose path: how many distinct versions the ballots wrote there."""
        forms = list(forms)
        if self.plain or not self.prose or not forms:
            return {}
        patterns = [p for p in self.roles.leaves if p in self.prose]
        return {render(p): len({canonical_key(values_at(form, p)) for form in forms}) for p in patterns}


def values_at(data: Any, pattern: Pattern) -> list[Any]:
    """The values of ``data`` at ``pattern`` (every item for ``[]``, every value for ``*``)."""
    found = [data]
    for part in pattern:
        step: list[Any] = []
        for value in found:
            if part == ITEM and isinstance(value, list):
                step += value
            elif part == ANY_KEY and isinstance(value, dict):
                step += value.values()
            elif isinstance(value, dict) and part in value:
                step.append(value[part])
        found = step
    return found


def _prefixes(patterns: Iterable[Pattern]) -> frozenset[Pattern]:
    """Every node on the way to each pattern (the patterns' own prefixes, themselves excluded)."""
    return frozenset(p[:i] for p in patterns for i in range(len(p)))


def _plain(text: str) -> str:
    """A text as compared with the input: as a label is compared (case-folded, one space between
    words, no end punctuation)."""
    return label(text)
