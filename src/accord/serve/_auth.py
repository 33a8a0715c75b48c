"""Client keys: with keys set, every ``/v1`` request and ``/metrics`` needs
``Authorization: Bearer <one of them>`` (what OpenAI's clients send) or ``x-api-key: <one of them>``
(what Anthropic's send); else a 401 (in the route's error shape), and nothing is forwarded.

Keys are compared in constant time, each against every configured key, and never echoed.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence

from ._errors import ApiError

UNAUTHORIZED = ApiError(401, "Incorrect or missing API key: send Authorization: Bearer <a key this accord serve was given> "
                        "(or x-api-key: <the key>)", code="invalid_api_key")  # fmt: skip


class Keys:
    """The client keys of one server (none: every client is let in)."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = [k.encode() for k in keys]

    @property
    def required(self) -> bool:
        return bool(self._keys)

    def check(self, headers: Mapping[str, str]) -> None:
        """Raise the 401 unless ``headers`` carry one of the keys."""
        if not self._keys:
            return
        given = headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        offered = token.strip().encode() if scheme.lower() == "bearer" else headers.get("x-api-key", "").strip().encode()
        found = False
        for key in self._keys:  # every key compared: the time does not tell which one matched
            found |= hmac.compare_digest(offered, key)
        if not found:
            raise UNAUTHORIZED
