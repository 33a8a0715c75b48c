"""The schema in the prompt: a JSON Schema as a compact type signature, bounded in size and time.

    hint(json_schema) -> Hint(text, form, shortened)      the instruction, rendered once per schema
    signature(json_schema) -> str                         its signature alone

Small models copy a full JSON Schema back instead of answering; they answer a signature
(``{"name": string, "age": int}``, BAML's and DSPy's style). The hint takes the first of these
forms that fits within the bound, ``len(text) <= len(compact JSON of the schema) + SLACK``:

``signature``
    One field per line, nested objects indented and inlined, enums as ``"a" | "b"``,
    descriptions and bounds as ``//`` comments, a comma after every field as BAML writes it.
    (Measured on benchmarks/prompt_mode.py: without the last commas, SmolLM2-135M over
    ``transformers serve`` was valid on 20 of 24 items, with them 23.) Taken when no reference is
    recursive and nothing nests deeper than ``DEPTH`` levels.
``named``
    Each definition the schema refers to more than once (``$defs``, ``definitions``, ``"#"`` itself, any
    local ``$ref``) is written once, as a block under its name (``Node {...}``), and every reference is that
    name: ``"children": Node[]``. A recursive model costs one word per reference, unions stay unions of
    names. A definition referred to once is inlined where it is used, one that renders in ``SMALL``
    characters on one line everywhere. Linear in the schema: every definition's text is written once.
``named, without comments``: the same, without the ``//`` comments.
``json schema``: the compact JSON Schema itself, which is within the bound by definition.

In every form, a part too long to help a model is shortened: an ``enum`` shows its first members up to
``ENUM_CHARS`` characters and how many more there are, a ``pattern`` over ``PATTERN_CHARS`` characters and a
``const`` over ``CONST_CHARS`` are named, not shown, nesting deeper than ``MAX_DEPTH`` levels is ``any``.
:attr:`Hint.shortened` says what was cut; a Result whose hint took a fallback form or cut something records it
in ``result.meta["schema_hint"]`` (:meth:`Hint.note`). The work of each form is bounded by the characters it may
write, so a hint costs time linear in the schema; each distinct schema is rendered once (a bounded cache keyed
by its compact JSON).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

SLACK = 2_000  # characters a hint may take beyond the schema's compact JSON
DEPTH = 8  # nesting the inline signature renders before it hands over to the named form
MAX_DEPTH = 48  # nesting any form renders (deeper is "any"): no walk can exhaust the stack
SMALL = 40  # a definition that renders in this many characters, on one line, is inlined everywhere
ENUM_CHARS, PATTERN_CHARS, CONST_CHARS = 600, 200, 200  # the longest enum, pattern and const a hint shows
HEADER = "Answer in JSON using this schema:\n"
JSON_HEADER = "Answer in JSON matching this JSON Schema:\n"

_TYPE_WORDS = {"string": "string", "integer": "int", "number": "float", "boolean": "bool", "null": "null"}
_FORMAT_WORDS = {"date": 'string (a date, "YYYY-MM-DD")', "date-time": "string (ISO 8601 date and time)", "time": "string (HH:MM:SS)"}
_RESERVED = {"string", "int", "float", "bool", "null", "any", "object", "or", "map", "of", "to"}
_DATA_KEYS = {"enum", "const", "default", "examples", "example"}  # values, not schemas: never walked for $refs
_SCHEMA_MAPS = {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}  # name -> schema
_ALIAS_KEYS = {"$ref", "title", "description", "$comment"}  # a definition that only names another
_CACHE_SIZE = 128


@dataclass(frozen=True)
class Hint:
    """The schema as the prompt carries it. ``form``: "signature", "named", "named, without
    comments" or "json schema" (see the module docstring). ``shortened``: what was cut, one phrase
    each. ``schema_chars``: the length of the schema's compact JSON, the measure of the bound."""

    text: str
    form: str
    shortened: tuple[str, ...]
    schema_chars: int

    def note(self) -> dict[str, Any] | None:
        """What a Result records of this hint (``meta["schema_hint"]``): None for a full signature."""
        if self.form in ("signature", "named", "text") and not self.shortened:
            return None
        return {"form": self.form, "chars": len(self.text), "schema_chars": self.schema_chars, "shortened": list(self.shortened)}


def compact(schema: Any) -> str:
    """The schema's compact JSON (the measure of a hint's bound)."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False, default=str)


_CACHE: OrderedDict[str, Hint] = OrderedDict()
_LOCK = threading.Lock()


def hint(schema: dict[str, Any]) -> Hint:
    """The instruction that tells a model the shape of a JSON Schema, within
    ``len(compact(schema)) + SLACK`` characters; rendered once per distinct schema."""
    text = compact(schema)
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
            return found
    made = _make(schema, text)
    with _LOCK:
        _CACHE[key] = made
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return made


def signature(schema: dict[str, Any]) -> str:
    """The compact type signature of a JSON Schema (the hint's text without its first line)."""
    return hint(schema).text.removeprefix(HEADER).removeprefix(JSON_HEADER)


def _make(schema: dict[str, Any], text: str) -> Hint:
    limit = len(text) + SLACK - len(HEADER)
    names: dict[str, str] | None = None
    long = False  # the last form gave up for its length
    for form in ("signature", "named", "named, without comments"):
        if form != "signature" and names is None:
            names = _names(schema)
            if long and not names:
                continue  # nothing to name: the named form is the signature, as long
        render = _Render(schema, limit, names=None if form == "signature" else names, comments=form != "named, without comments")
        try:
            body = render.body()
        except _GiveUp as exc:
            long = exc.long
            continue
        if len(HEADER) + len(body) <= len(text) + SLACK:
            return Hint(HEADER + body, form, tuple(render.shortened), len(text))
    return Hint(JSON_HEADER + text, "json schema", (), len(text))


class _GiveUp(Exception):
    """This form does not fit: too long (``long``), or (the inline form) recursive or nested past ``DEPTH``."""

    def __init__(self, long: bool = False) -> None:
        super().__init__()
        self.long = long


class _Render:
    """One form's rendering. ``names``: the references written by name (None: the inline form,
    which gives up on a recursive reference or nesting past ``DEPTH``). Every piece it writes is
    counted against ``limit``; past it, it gives up: the work is bounded by what it may write."""

    def __init__(self, root: dict[str, Any], limit: int, *, names: dict[str, str] | None, comments: bool = True) -> None:
        self.root, self.limit, self.comments, self.size = root, limit, comments, 0
        self.names = None if names is None else dict(names)
        self.stack: list[str] = []  # the references being inlined
        self.blocks: dict[str, str | None] = {}  # named references met -> their block
        self.order: list[str] = []  # ... in the order met
        self.taken = set() if names is None else set(names.values())
        self.shortened: dict[str, None] = {}

    def spend(self, chars: int) -> None:
        self.size += chars
        if self.size > self.limit:
            raise _GiveUp(long=True)

    def body(self) -> str:
        """The root's signature, then a block for each named definition it reaches."""
        head = self.ref("#", 0) if self.names and "#" in self.names else self.type(self.root, 0)  # a recursive root: by name
        for ref in self.order:  # blocks met while rendering blocks join the queue
            assert self.names is not None
            target = _target(ref, self.root)
            self.stack.append(ref)
            inner = self.type(target, 0, block=True)
            self.stack.pop()
            self.blocks[ref] = f"{self.names[ref]} {inner}" if inner.startswith("{") else f"{self.names[ref]} = {inner}"
        blocks = [text for ref in self.order if (text := self.blocks[ref])]
        if blocks and self.names is not None and head == self.names[self.order[0]]:
            return "\n\n".join(blocks)  # the root is the first definition: its block is the answer
        return "\n\n".join([head, *blocks])

    # -- types ---------------------------------------------------------------------------------

    def type(self, node: Any, depth: int, *, block: bool = False) -> str:
        self.spend(1)
        if isinstance(node, dict) and isinstance(node.get("$ref"), str) and not block:
            return self.ref(node["$ref"], depth)
        if not isinstance(node, dict):
            return "any"
        if depth > (DEPTH if self.names is None else MAX_DEPTH):
            if self.names is None:
                raise _GiveUp
            self.shortened[f"parts nested deeper than {MAX_DEPTH} levels shown as any"] = None
            return "any"
        if isinstance(node.get("$ref"), str):  # a block that is itself a reference
            return self.ref(node["$ref"], depth)
        for key in ("anyOf", "oneOf"):
            if isinstance(node.get(key), list) and node[key]:
                members = [self.type(b, depth) for b in node[key]]
                return " or ".join(dict.fromkeys(members))
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
            return self.type(node["allOf"][0], depth)
        if isinstance(node.get("enum"), list):
            return self.enum(node["enum"])
        if "const" in node:
            return self.const(node["const"])
        kind = node.get("type")
        if isinstance(kind, list):
            return " or ".join(self.single(node, k, depth, listed=True) for k in kind)
        return self.single(node, kind, depth)

    def single(self, node: dict[str, Any], kind: Any, depth: int, *, listed: bool = False) -> str:
        """The node read as one type. ``listed``: one of a list of types (``["object", "null"]``),
        where only "object" and "array" render the node's properties and items."""
        structural = kind is None or kind in ("object", "array")
        if kind == "object" or ((structural or not listed) and "properties" in node):
            return self.object(node, depth)
        if kind == "array" or ((structural or not listed) and ("items" in node or "prefixItems" in node)):
            if isinstance(node.get("prefixItems"), list):
                return "[" + ", ".join(self.type(p, depth + 1) for p in node["prefixItems"]) + "]"
            inner = self.type(node.get("items", {}), depth)
            return f"({inner})[]" if " " in inner and not inner.startswith("{") else f"{inner}[]"
        if kind == "string" and node.get("format") in _FORMAT_WORDS:
            return _FORMAT_WORDS[node["format"]]
        return _TYPE_WORDS.get(kind, "any") if isinstance(kind, str) else "any"

    def ref(self, ref: str, depth: int) -> str:
        ref, names = _unalias(ref, self.root), self.names
        if names is not None and ref in names:
            if ref not in self.blocks:
                self.blocks[ref] = None  # written once, after the root
                self.order.append(ref)
            self.spend(len(names[ref]))
            return names[ref]
        if ref in self.stack or (names is not None and depth > DEPTH):
            if names is None:
                raise _GiveUp  # recursive: the inline form cannot write it
            names[ref] = _fresh_name(ref, self.root, self.taken)  # deep, or a cycle: by name
            return self.ref(ref, depth)
        target = _target(ref, self.root)
        if target is None:
            return "any"
        self.stack.append(ref)
        try:
            return self.type(target, depth)
        finally:
            self.stack.pop()

    def object(self, node: dict[str, Any], depth: int) -> str:
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        if not props:
            extra = node.get("additionalProperties")
            return f"map of string to {self.type(extra, depth + 1)}" if isinstance(extra, dict) else "object"
        required = {r for r in node.get("required") or () if isinstance(r, str)} if isinstance(node.get("required"), list) else set()
        pad = "  " * (depth + 1)
        lines = ["{"]
        for name, child in props.items():
            notes = self.notes(child if isinstance(child, dict) else {}, name in required) if self.comments else []
            comment = f" // {'; '.join(notes)}" if notes else ""
            label = _label(name)
            self.spend(len(pad) + len(label) + len(comment) + 4)
            lines.append(f"{pad}{label}: {self.type(child, depth + 1)},{comment}")
        lines.append("  " * depth + "}")
        return "\n".join(lines)

    def enum(self, members: list[Any]) -> str:
        shown: list[str] = []
        chars = 0
        for member in members:
            text = _short_json(member, CONST_CHARS)
            if shown and chars + len(text) > ENUM_CHARS:
                self.shortened[f"an enum of {len(members):,} members: {len(shown):,} shown"] = None
                shown.append(f"... ({len(members) - len(shown):,} more)")
                break
            shown.append(text)
            chars += len(text) + 3
        text = " | ".join(shown)
        self.spend(len(text))
        return text

    def const(self, value: Any) -> str:
        text = _short_json(value, CONST_CHARS)
        if text.startswith("a value of "):
            self.shortened["a const too long to show"] = None
        self.spend(len(text))
        return text

    def notes(self, node: dict[str, Any], required: bool) -> list[str]:
        notes = []
        if isinstance(node.get("description"), str):
            notes.append(" ".join(node["description"][:1_000].split())[:120])
        for key, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
                          ("minLength", "length >="), ("maxLength", "length <="), ("minItems", "items >="), ("maxItems", "items <=")):
            if isinstance(node.get(key), (int, float)) and not isinstance(node.get(key), bool):
                notes.append(f"{word} {node[key]}")
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            if len(pattern) > PATTERN_CHARS:
                self.shortened["a pattern too long to show"] = None
                notes.append(f"matches a pattern of {len(pattern):,} characters")
            else:
                notes.append(f"matches {pattern}")
        if not required:
            notes.append("optional")
        return notes


def _label(name: Any) -> str:
    """A property name as JSON text (``json.dumps``; plain names without the call)."""
    return f'"{name}"' if isinstance(name, str) and name.isascii() and name.isprintable() and '"' not in name and "\\" not in name else json.dumps(name, ensure_ascii=False)


def _short_json(value: Any, limit: int) -> str:
    if isinstance(value, str) and len(value) > limit:
        return f"a value of {len(value):,} characters"
    if isinstance(value, (dict, list)) and len(value) > limit:
        return f"a value of {len(value):,} items"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"a value of {len(text):,} characters"


# -- names ------------------------------------------------------------------------------------


def _names(root: dict[str, Any]) -> dict[str, str]:
    """The references the named form writes by name: each that is used more than once (counting
    its own place when it points into the tree rather than at a definition) and does not render in
    ``SMALL`` characters on one line."""
    counts: dict[str, int] = {}
    todo: list[tuple[Any, bool]] = [(root, False)]
    while todo:  # every node of the document once, following no reference: linear
        node, is_map = todo.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#") and not is_map:
                ref = _unalias(ref, root)  # a use of an alias is a use of what it names
                counts[ref] = counts.get(ref, 0) + 1
            todo.extend(
                (v, k in _SCHEMA_MAPS and not is_map) for k, v in node.items()
                if isinstance(v, (dict, list)) and (is_map or k not in _DATA_KEYS)
            )
        elif isinstance(node, list):
            todo.extend((v, False) for v in node if isinstance(v, (dict, list)))
    names: dict[str, str] = {}
    taken: set[str] = set()
    for ref, count in counts.items():
        if count + (0 if _is_definition(ref) else 1) < 2 or _target(ref, root) is None or _small(ref, root):
            continue  # used once, broken, or small
        names[ref] = _fresh_name(ref, root, taken)
    return names


def _unalias(ref: str, root: dict[str, Any]) -> str:
    """The reference an alias stands for (a definition that is only ``{"$ref": ...}``), followed."""
    for _ in range(32):
        target = _target(ref, root)
        if target is None or set(target) - _ALIAS_KEYS or not isinstance(target.get("$ref"), str):
            break
        ref = target["$ref"]
    return ref


def _is_definition(ref: str) -> bool:
    """A pointer to a member of the root's ``$defs``/``definitions`` (never rendered in place)."""
    parts = ref[2:].split("/") if ref.startswith("#/") else []
    return len(parts) == 2 and parts[0] in ("$defs", "definitions")


def _small(ref: str, root: dict[str, Any]) -> bool:
    render = _Render(root, SMALL, names=None)
    try:
        text = render.ref(ref, 0)
    except _GiveUp:
        return False
    return len(text) <= SMALL and "\n" not in text and not render.shortened


def _fresh_name(ref: str, root: dict[str, Any], taken: set[str]) -> str:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in ref[2:].split("/")] if ref.startswith("#/") else []
    target = _target(ref, root)
    title = target.get("title") if isinstance(target, dict) else None
    base = parts[-1] if parts and not parts[-1].isdigit() and parts[-1] not in ("items", "properties", "anyOf", "oneOf") else None
    if base is None:
        base = title if isinstance(title, str) and title else "Root" if ref == "#" else "_".join(parts) or "Root"
    word = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in base)[:60] or "Type"
    if word.casefold() in _RESERVED:
        word += "_"
    name, n = word, 2
    while name in taken:
        name, n = f"{word}{n}", n + 1
    taken.add(name)
    return name


def _target(ref: str, root: dict[str, Any]) -> Any:
    """The node a local reference names (``#``, ``#/a/b``), else None (an external or broken one)."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for escaped in ref[2:].split("/"):
        part = escaped.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node if isinstance(node, dict) else None
