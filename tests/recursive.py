"""Recursive and deep schemas, beside the real-world corpus (tests/test_schema_corpus.py,
benchmarks/schemas.py): trees, mutual recursion, unions of recursive models, deep ``$defs``
chains, and JSON Schema dicts whose ``$ref`` graph is exponential when inlined.

Each entry of :data:`SCHEMAS` is ``(name, schema, valid JSON text)``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model


class Node(BaseModel):
    """The tree of issue #28: a file tree with left/right links and an alternative."""

    name: str
    kind: Literal["file", "dir"] = "file"
    children: list[Node] = []
    left: Node | None = None
    right: Node | None = None
    alt: Node | int | str | None = None


class Comment(BaseModel):
    author: str
    text: str
    replies: list[Comment] = []


class Employee(BaseModel):
    name: str
    title: str
    department: Department | None = None
    reports: list[Employee] = []


class Department(BaseModel):
    name: str
    head: Employee | None = None
    members: list[Employee] = []
    parent: Department | None = None


class Num(BaseModel):
    op: Literal["num"] = "num"
    value: float


class Add(BaseModel):
    op: Literal["add"] = "add"
    left: Expr
    right: Expr


class Mul(BaseModel):
    op: Literal["mul"] = "mul"
    left: Expr
    right: Expr


class Neg(BaseModel):
    op: Literal["neg"] = "neg"
    arg: Expr


Expr = Num | Add | Mul | Neg


class Program(BaseModel):
    body: list[Expr] = Field(description="the expressions, evaluated in order")
    comments: list[Comment] = []


def chain(depth: int) -> type[BaseModel]:
    """A ``$defs`` chain ``depth`` models deep: each model holds the next one once."""
    model: type[BaseModel] = create_model("Leaf", value=(int, ...))
    for i in range(depth):
        model = create_model(f"Level{i}", label=(str, ...), child=(model, ...))
    return model


def exponential_refs(levels: int = 40) -> dict[str, Any]:
    """Each level's object holds the level below twice: 2**levels objects when inlined."""
    defs: dict[str, Any] = {"d0": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}}
    for i in range(1, levels + 1):
        below = {"$ref": f"#/$defs/d{i - 1}"}
        defs[f"d{i}"] = {"type": "object", "properties": {"a": below, "b": below}}
    return {"$defs": defs, "$ref": f"#/$defs/d{levels}"}


def exponential_unions(levels: int = 40) -> dict[str, Any]:
    """Each level is a union of the level below, twice: 2**levels branches when inlined."""
    defs: dict[str, Any] = {"u0": {"type": "integer"}}
    for i in range(1, levels + 1):
        defs[f"u{i}"] = {"anyOf": [{"$ref": f"#/$defs/u{i - 1}"}, {"$ref": f"#/$defs/u{i - 1}"}]}
    return {"type": "object", "properties": {"x": {"$ref": f"#/$defs/u{levels}"}}, "required": ["x"], "$defs": defs}


SELF = {"title": "Tree", "type": "object", "required": ["v"],
        "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}}}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"value": 1}
    for i in range(depth):
        value = {"label": f"level {i}", "child": value}
    return value


SCHEMAS: list[tuple[str, Any, str]] = [
    ("tree (issue #28)", Node, '{"name": "root", "kind": "dir", "children": [{"name": "a"}], "alt": 3}'),
    ("comment thread", Comment, '{"author": "ann", "text": "hi", "replies": [{"author": "bo", "text": "yo"}]}'),
    ("org chart (mutual recursion)", Department, '{"name": "R&D", "head": {"name": "Ann", "title": "VP"}, "members": []}'),
    ("expression (union of recursive models)", Program,
     '{"body": [{"op": "add", "left": {"op": "num", "value": 1}, "right": {"op": "neg", "arg": {"op": "num", "value": 2}}}]}'),
    ("$defs chain 40 deep", chain(40), json.dumps(_nested(40))),  # pydantic's own JSON Schema ends near 50
    ("the root referring to itself ($ref: #)", SELF, '{"v": 1, "kids": [{"v": 2, "kids": []}]}'),
    ("$ref graph exponential when inlined", exponential_refs(), '{"a": {"v": 1}, "b": {"v": 2}}'),
    ("union graph exponential when inlined", exponential_unions(), '{"x": 7}'),
]
