"""jsonschema, imported without building the parsers of formats that no schema has used yet.

Importing jsonschema registers its format checkers. With the ``format-nongpl`` extras installed,
that imports ``rfc3987_syntax``, which builds about forty Earley parsers of RFC 3987 when it is
imported. That took most of the first ``Schema(json_schema)`` of a process: 1.3 s of 1.4 s here,
and 5.6 s on a loaded machine. jsonschema uses only one function of it, ``is_valid_syntax(term,
value)``, for the ``iri`` and ``iri-reference`` formats. :func:`jsonschema` imports jsonschema with
a stand-in for that package, which builds the one parser those checks use from the package's
own grammar the first time a value of those formats is checked (about 0.1 s). The stand-in is in
``sys.modules`` only while jsonschema is imported, so anyone who imports ``rfc3987_syntax`` later
gets the real package. Where jsonschema is imported already, or the package is missing, or
``rfc3987`` is installed (jsonschema then uses that), nothing is stood in for.

``python benchmarks/construction.py`` prints what building a Stabilizer costs.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
_STARTS = ("iri", "iri_reference", "absolute_iri")  # the starts of rfc3987_syntax's ``syntax_parser``


def jsonschema() -> Any:
    """The jsonschema module, imported once (see the module docstring)."""
    if "jsonschema" in sys.modules:
        return sys.modules["jsonschema"]
    with _LOCK:
        standin = _standin()
        if standin is not None:
            sys.modules["rfc3987_syntax"] = standin
        try:
            import jsonschema
        finally:
            if standin is not None and sys.modules.get("rfc3987_syntax") is standin:
                del sys.modules["rfc3987_syntax"]
    return jsonschema


def _standin() -> types.ModuleType | None:
    """A module with rfc3987_syntax's ``is_valid_syntax``, or None where none is needed."""
    if "rfc3987_syntax" in sys.modules or _installed("rfc3987"):
        return None
    spec = importlib.util.find_spec("rfc3987_syntax")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    grammar = next((Path(f) / "syntax_rfc3987.lark" for f in folders if (Path(f) / "syntax_rfc3987.lark").is_file()), None)
    if grammar is None:
        return None
    module = types.ModuleType("rfc3987_syntax", "accord's stand-in while jsonschema is imported (accord.schema._formats)")
    vars(module)["is_valid_syntax"] = _Syntax(grammar)  # (a module's attributes are its dict)
    return module


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


class _Syntax:
    """``is_valid_syntax(term, value)`` of rfc3987_syntax: whether ``value`` parses as ``term``
    under its grammar, by the same Earley parser, built on the first call."""

    def __init__(self, grammar: Path) -> None:
        self.grammar = grammar
        self.parser: Any = None
        self.lock = threading.Lock()

    def __call__(self, term: str, value: str) -> bool:
        import lark

        if self.parser is None:
            with self.lock:
                if self.parser is None:
                    self.parser = lark.Lark(self.grammar.read_text(encoding="utf-8"), start=list(_STARTS), parser="earley")
        try:
            self.parser.parse(value, start=term)
        except lark.exceptions.LarkError:
            return False
        return True
