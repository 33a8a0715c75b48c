"""The one narrow boundary every backend implements."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from .._request import Completion, Request
from .._threads import spawn


class Backend:
    """A model accord can call.

    A backend implements ``generate(request) -> Completion``; ``agenerate`` defaults to running
    ``generate`` in a daemon worker thread, so a hanging call can be abandoned when the budget ends.
    It maps its own errors to :class:`~accord.BackendError` at this boundary.

    Class attributes:
      ``constrains``: True when the backend enforces the schema itself (grammar decoding); when
        False, accord puts a short rendering of the schema in the prompt.
      ``blocking``: False only for backends that return at once (the scripted test double); the
        sync driver then calls them inline instead of in a worker thread.
    """

    constrains: ClassVar[bool] = False
    blocking: ClassVar[bool] = True
    fingerprint: str = "unknown"

    def generate(self, request: Request) -> Completion:
        raise NotImplementedError

    async def agenerate(self, request: Request) -> Completion:
        if not self.blocking:
            return self.generate(request)
        return await asyncio.wrap_future(spawn(self.generate, request))

    def describe(self) -> dict[str, object]:
        """Backend facts recorded on every Result (JSON-serializable)."""
        return {"backend": type(self).__name__, "fingerprint": self.fingerprint}
