"""The decision ledger: once accord has accepted an answer, the same request gets it again."""

from ._ledger import Ledger, default_path, migrate
from ._open import exists

__all__ = ["Ledger", "default_path", "exists", "migrate"]
