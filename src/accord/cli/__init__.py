"""The ``accord`` console script, one module per command: ``accord demo | calibrate | audit | ledger | version``."""

from ._app import app, main

__all__ = ["app", "main"]
