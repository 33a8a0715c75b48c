"""Stage 6, canonicalize: the vote key of a validated value.

Votes count canonical forms, never raw text: the canonical JSON (sorted keys, no whitespace) of
the validated value's JSON data.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_key(data: Any) -> str:
    """Canonical JSON of ``data``: equal values give equal keys."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
