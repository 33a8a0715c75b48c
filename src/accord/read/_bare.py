"""A bare answer to an object of one field: ``Yes.`` for ``{answer: bool}``, read as that object.

The last candidate ``_read`` tries (``_candidates`` gives the others): only a text that is nothing
but the answer, so prose never turns into a value.
"""

from __future__ import annotations

import re
from typing import Any

from ..schema._schema import Schema
from ._candidates import Candidate
from ._extract import _unwrap
from ._jsonish import Fix
from ._numbers import MAX_DIGITS
from ._plan import resolve, types_of
from ._words import Refusal, boolean

IMPLIED = "the bare answer as the only field"
_BARE_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_EQUATION = re.compile(r"[-+*/x×÷().\d\s]+=\s*([-+]?\d+(?:\.\d+)?)\s*\.?")
_LEADING_BOOL = re.compile(r"(yes|no|true|false)(?:[.!,]|\Z)", re.I)
_STATED = re.compile(r"(?:the )?(?:answer|result)(?: is)?\s*:?\s*\**([-+]?\d+(?:\.\d+)?)\**\s*\.?", re.I)


def implied(text: str, schema: Schema[Any]) -> Candidate | None:
    """A bare answer to an object of one field (``Yes.`` for ``{answer: bool}``), as that object.

    Only when the text is nothing but the answer (a number, an equation's result, "the answer is
    N", a yes/no word opening the text, an enum member, a date), or its first line is "the answer
    is N", so prose never turns into a value.
    """
    root = schema.json_schema or {}
    props: dict[str, Any] = root["properties"] if isinstance(root.get("properties"), dict) else {}
    if len(props) != 1:
        return None
    name, node = next(iter(props.items()))
    node = resolve(node, root)
    types = types_of(node)
    bare = _unwrap(text).strip("*_").strip().rstrip(".!").strip()  # markdown emphasis too: **24**
    value: Any = None
    open_end = True  # the answer is the end of the text, so a cut would not show
    span = (0, len(text))
    if types & {"integer", "number"}:
        first_line = text.strip().split("\n", 1)[0].strip()
        for pattern, where in ((_BARE_NUMBER, bare), (_EQUATION, bare), (_STATED, bare), (_STATED, first_line)):
            match = pattern.fullmatch(where)
            if match:
                token = match.group(match.lastindex or 0)
                if len(token) > MAX_DIGITS:
                    return None  # int() refuses it: no answer
                value = float(token) if "." in token else int(token)
                open_end = where is bare
                if where is first_line:
                    span = (0, text.find(first_line) + len(first_line))
                break
    elif "boolean" in types:
        match = _LEADING_BOOL.match(bare)
        if match:  # a yes/no word opening the text, and no negation, hedge or contradiction after it
            said = boolean(bare)
            value = bare if isinstance(said, Refusal) else match.group(1).casefold() in ("yes", "true")
            open_end = match.end() >= len(bare)  # (a refused one is read again as the field: refused there, with why)
    elif (isinstance(node.get("enum"), list) or node.get("format") in ("date", "date-time")) and (
        bare and "\n" not in bare and len(bare) <= 64
    ):
        value = bare
    if value is None:
        return None
    return Candidate({name: value}, (Fix((name,), IMPLIED),), frozenset(), "implied", open_end, span)


def one_number(schema: Schema[Any]) -> bool:
    """Whether the schema is an object of one numeric field (its first line may state the answer)."""
    root = schema.json_schema or {}
    props = root.get("properties")
    return isinstance(props, dict) and len(props) == 1 and bool(types_of(resolve(next(iter(props.values())), root)) & {"integer", "number"})


def stated(text: str) -> bool:
    """Whether the text's first line states a number (``The answer is 7.``): for an object of one
    numeric field, a value of its own beside any JSON the text holds."""
    return _STATED.fullmatch(text.strip().split("\n", 1)[0].strip()) is not None
