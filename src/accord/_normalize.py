"""Stage 4, normalize: bring extracted data into the canonical form the schema expects.

Guided by the schema's JSON Schema: strings to Unicode NFC and trimmed; case- and
whitespace-insensitive matches of enum members; numeric strings to numbers for numeric fields;
``3.0`` to ``3`` for integers only when exact; yes/no/true/false to booleans. Unknown shapes pass
through untouched. The pipeline validates the normalized data and falls back to the raw data when
only that validates, so normalization never turns a valid value invalid.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any

_NUMERIC = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "y": True, "n": False}


def normalize(data: Any, schema: dict[str, Any] | None) -> Any:
    """Normalized copy of ``data`` under ``schema`` (a JSON Schema; ``None`` means no guidance)."""
    return _walk(data, schema or {}, schema or {}, 0)


def _resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    for _ in range(32):  # bounded: a cycle of bare $refs ends here
        if not isinstance(node, dict):
            return {}
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        node = target
    return {}


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    return set()


def _walk(data: Any, node: Any, root: dict[str, Any], depth: int) -> Any:
    node = _resolve(node, root)
    if not node or depth > 64:
        return _plain(data)
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and branches:
            return _branch(data, [_resolve(b, root) for b in branches], root, depth)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        return _walk(data, all_of[0], root, depth + 1)
    types = _types(node)
    if "enum" in node and isinstance(node["enum"], list):
        return _member(_plain(data), node["enum"])
    if "const" in node:
        return _member(_plain(data), [node["const"]])
    if isinstance(data, dict):
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        extra = node.get("additionalProperties")
        out = {}
        for key, value in data.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            out[_text(key) if isinstance(key, str) else key] = _walk(value, sub, root, depth + 1)
        return out
    if isinstance(data, list):
        prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
        items = node.get("items")
        return [
            _walk(value, prefix[i] if i < len(prefix) else items if isinstance(items, dict) else None, root, depth + 1)
            for i, value in enumerate(data)
        ]
    if "integer" in types and "string" not in types:
        return _integer(data)
    if "number" in types and "string" not in types:
        return _number(data)
    if "boolean" in types and "string" not in types:
        return _boolean(data)
    return _plain(data)


def _branch(data: Any, branches: list[dict[str, Any]], root: dict[str, Any], depth: int) -> Any:
    """Normalize under the one branch whose type fits the data; if none or several, leave it."""
    if data is None:
        return None
    fits = [b for b in branches if _fits(data, b)]
    if len(fits) == 1:
        return _walk(data, fits[0], root, depth + 1)
    return _plain(data)


def _fits(data: Any, node: dict[str, Any]) -> bool:
    types = _types(node)
    if not types:
        return False
    if isinstance(data, bool):
        return "boolean" in types
    if isinstance(data, (int, float)):
        return bool(types & {"integer", "number"})
    if isinstance(data, str):
        return "string" in types
    if isinstance(data, dict):
        return "object" in types
    if isinstance(data, list):
        return "array" in types
    return "null" in types and data is None


def _plain(data: Any) -> Any:
    """Type-independent normalization: strings to NFC and trimmed, recursively."""
    if isinstance(data, str):
        return _text(data)
    if isinstance(data, dict):
        return {(_text(k) if isinstance(k, str) else k): _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def _text(value: str) -> str:
    return unicodedata.normalize("NFC", value).strip()


def _fold(value: str) -> str:
    return " ".join(unicodedata.normalize("NFC", value).split()).casefold()


def _member(data: Any, members: list[Any]) -> Any:
    """The enum member the data names, matched exactly, then case- and whitespace-insensitively."""
    if any(data == m and type(data) is type(m) for m in members):
        return data
    if isinstance(data, str):
        folded = [m for m in members if isinstance(m, str) and _fold(m) == _fold(data)]
        if len(folded) == 1:
            return folded[0]
        numeric = [m for m in members if isinstance(m, (int, float)) and not isinstance(m, bool)]
        if numeric and _NUMERIC.fullmatch(data):
            value = _number(data)
            if value in numeric:
                return value
    return data


def _number(data: Any) -> Any:
    if isinstance(data, str) and _NUMERIC.fullmatch(data):
        value = float(data)
        if math.isfinite(value):
            return int(value) if value.is_integer() and re.fullmatch(r"\s*[-+]?\d+\s*", data) else value
    return data


def _integer(data: Any) -> Any:
    data = _number(data)
    if isinstance(data, float) and data.is_integer() and abs(data) < 2**53:
        return int(data)
    return data


def _boolean(data: Any) -> Any:
    if isinstance(data, str):
        return _BOOLS.get(_fold(data), data)
    return data
