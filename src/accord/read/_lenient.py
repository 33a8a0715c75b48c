"""The lenient reading: every candidate value in a text, each repaired and bent toward the schema,
the cheapest valid one kept (``_answers``: several different ones are refused).

A candidate is weighed in turn (:func:`lenient`): JSON as written is validated as it is; a
repaired one is tried as read, then coerced (``_coerce``); each costs its repairs and coercions,
and the search stops as soon as nothing left could cost less than the best so far.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from ..schema._schema import Schema
from ._answers import Found, Tally
from ._bare import IMPLIED, implied
from ._candidates import Candidate, iter_candidates
from ._coerce import Coercion, coerce
from ._echo import echoed, may_echo
from ._jsonish import Fix
from ._settle import Misreading, Reading, check_data, decide, echo_refused

_FIX_COSTS = {"closed a cut-off object": 3, "dropped a member cut off": 3, "key-value lines as an object": 2,
              "unescaped quote in a string": 2, "unquoted string": 2, IMPLIED: 4}
Normalizers = Sequence[Callable[[str], str]]
Coerced = tuple[Any, list[Coercion], int, int]  # a candidate's data coerced, its coercions, how many misfit, its repairs' cost


def lenient(text: str, schema: Schema[Any], normalizers: Normalizers, float_digits: int | None,
            tried: tuple[Any, Reading | Misreading] | None = None, *, misses: Collection[int] = (),
            known: dict[int, tuple[Any, int]] | None = None, fields: frozenset[str] | None = None,
            exact: bool = False) -> Reading | Misreading | None:
    """The one valid answer among the candidates (``_answers``: several different ones are
    refused); else the most telling failure (an echo, or the fewest errors).

    While the best candidate so far is :func:`~._answers.alone` in the text, the search stops as
    soon as nothing left could cost less (a candidate that is JSON as written and valid as it is
    ends it at once: clean JSON costs what it did before any repair existed). ``misses``: where
    the strict reading found no JSON value; ``fields`` and ``exact``: the schema's, as ``_read``
    keeps them."""
    tally = Tally(text, fields, schema)
    deferred: list[tuple[Candidate, Any, list[Coercion], int]] = []
    for candidate in _found(text, schema, misses, tally.enough, known, exact=exact):
        if tally.enough(candidate.origin):
            break  # nothing from here on can cost less than the best so far, and nothing else may be a value
        if candidate.fixes:
            coerced = _repaired(candidate, schema, normalizers, tally)
        else:  # JSON as written: valid as it is, it takes no coercion and nothing beats it
            checked = _as_written(candidate, tried, schema, normalizers)
            if not isinstance(checked, Misreading) and not (may_echo(candidate.data) and echoed(candidate.data, schema)):
                tally.take(Found(0, checked[0], checked[1], candidate.open_end, candidate.span, candidate.data))
                if tally.enough("fenced"):
                    break
                continue
            coerced = _coerced_as_written(candidate, checked, schema, tally)
        if coerced is None:
            continue
        data, coercions, misfits, fixed = coerced
        cost = fixed + sum(c.cost for c in coercions)
        if not tally.beaten_by(cost):
            continue  # cannot win: an earlier candidate is at least as good, and it is alone
        if misfits:
            # Validation may still accept it (a format or pattern the coercer does not model),
            # but a candidate that fits the schema's types is tried first.
            deferred.append((candidate, data, coercions, cost))
            continue
        tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=tally))
    for candidate, data, coercions, cost in deferred:
        if tally.beaten_by(cost):
            tally.take(_try(candidate, data, coercions, cost, schema=schema, normalizers=normalizers, hinted=tally))
    return _outcome(text, tally, fields, schema, float_digits)


def _as_written(candidate: Candidate, tried: tuple[Any, Reading | Misreading] | None, schema: Schema[Any],
                normalizers: Normalizers) -> tuple[Any, tuple[dict[str, str], ...]] | Misreading:
    """A candidate that is JSON as written, validated as it is (``(value, what normalizing took)``);
    the strict reading already read this very value (``tried``): not validated twice."""
    if tried is not None and (candidate.data is tried[0] or candidate.data == tried[0]):
        reading = tried[1]
        return (reading.value, reading.coercions) if isinstance(reading, Reading) else reading
    return check_data(candidate.data, schema, normalizers)


def _coerced_as_written(candidate: Candidate, checked: tuple[Any, tuple[dict[str, str], ...]] | Misreading,
                        schema: Schema[Any], tally: Tally) -> Coerced | None:
    """A candidate invalid as written (or an echo), coerced; None where nothing is to coerce (an
    echo or its failure, ``checked``, then tallied)."""
    data, coercions, misfits = coerce(candidate.data, schema.json_schema, candidate.closed)
    if coercions:
        return data, coercions, misfits, 0
    if tally() and echoed(candidate.data, schema):  # invalid as written, and nothing to coerce
        tally.echo = True
    elif isinstance(checked, Misreading):
        tally.fail(checked)
    return None


def _repaired(candidate: Candidate, schema: Schema[Any], normalizers: Normalizers, tally: Tally) -> Coerced | None:
    """A repaired candidate, tried as read, then coerced; None where it is tallied as it is, or
    cannot win (its repairs alone cost no less than the best so far).

    The data as read is tried first: a value valid as it is is never coerced (a key "start "
    stays), and needs no coercer's walk. (A data the coercer would have to change for its types,
    a scalar where a list belongs, is invalid as it stands unless the schema's own validators take
    it: then it is taken as they took it.)"""
    fixed = sum(_FIX_COSTS.get(f.kind, 1) for f in candidate.fixes)
    if tally.best is not None and fixed >= tally.best.cost and tally.alone():
        return None
    found = _try(candidate, candidate.data, [], fixed, schema=schema, normalizers=normalizers, hinted=tally)
    if not isinstance(found, Misreading):
        tally.take(found)
        return None
    data, coercions, misfits = coerce(candidate.data, schema.json_schema, candidate.closed)
    if not coercions:
        tally.take(found)
        return None
    return data, coercions, misfits, fixed


def _outcome(text: str, tally: Tally, fields: frozenset[str] | None, schema: Schema[Any],
             float_digits: int | None) -> Reading | Misreading | None:
    """What the search found: one answer among the valid ones, else an echo, else the most telling failure."""
    if tally.found:
        return decide(text, tally.found, fields, schema, float_digits)
    if tally.echo:
        return echo_refused()
    failure: Misreading | None = tally.failure
    return failure


def _found(text: str, schema: Schema[Any], misses: Collection[int] = (), enough: Callable[[str], bool] | None = None,
           known: dict[int, tuple[Any, int]] | None = None, *, exact: bool = False) -> Iterator[Candidate]:
    """Every candidate in the text, then the bare answer to a one-field object; ``enough(origin)``
    stops the search before the candidates of an origin that could not win (see :class:`Tally`)."""
    yield from iter_candidates(text, misses, enough, known, exact)
    if enough is not None and enough("implied"):
        return
    bare = implied(text, schema)
    if bare is not None:
        yield bare


def _try(candidate: Candidate, data: Any, coercions: list[Coercion], cost: int, *, schema: Schema[Any],
         normalizers: Sequence[Callable[[str], str]], hinted: Tally) -> Found | Misreading | str:
    """One coerced candidate validated: its :class:`~._answers.Found`, its Misreading, or "echo"."""
    checked = check_data(data, schema, normalizers)
    if may_echo(candidate.data) and hinted() and echoed(candidate.data, schema):
        return "echo"  # an echo is never a value, valid or not
    if isinstance(checked, Misreading):
        return checked
    return Found(cost, checked[0], _said(candidate.fixes, coercions) + checked[1], candidate.open_end, candidate.span, candidate.data)


def _said(fixes: tuple[Fix, ...], coercions: list[Coercion]) -> tuple[dict[str, str], ...]:
    """The repairs, then the coercions, as ``{"path", "fix"}`` dicts, each (path, fix) once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for path, kind in [*fixes, *((c.path, c.fix) for c in coercions)]:
        mark = (".".join(map(str, path)), kind)
        if mark not in seen:
            seen.add(mark)
            out.append({"path": mark[0], "fix": kind})
    return tuple(out)
