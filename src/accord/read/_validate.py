"""Stage 5, validate: data to a validated value (pydantic, or jsonschema for dict schemas).

Errors are structured data (loc, msg, type), rendered to text only in ``_prompt``. The normalized
data is tried first; if only the raw data validates, the raw data wins, so normalization can never
make a valid answer invalid.
"""

from __future__ import annotations

from typing import Any

from ..schema._schema import Schema, ValidationFailure

__all__ = ["ValidationFailure", "validate"]


def validate(normalized: Any, raw: Any, schema: Schema[Any]) -> tuple[Any, Any]:
    """``(value, data)``: the validated value and the data it came from; raises ValidationFailure."""
    try:
        return schema.validate(normalized), normalized
    except ValidationFailure:
        if raw is normalized or raw == normalized:
            raise
        try:
            return schema.validate(raw), raw
        except ValidationFailure:
            pass
        raise
