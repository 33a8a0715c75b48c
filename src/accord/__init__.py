"""accord: turn a fluctuating LLM output into a stable, validated result.

    prompt -> generate -> extract -> normalize -> validate -> canonicalize -> vote -> Result
"""

from . import determinism, models
from ._canonical import Unordered
from ._decorator import Stabilized, stabilize
from ._errors import (
    AccordError,
    BackendError,
    BudgetExceeded,
    ConfigError,
    InvalidOutput,
    LedgerError,
    ModelNotInstalled,
    NoConsensus,
    OutputError,
    UnsupportedSchema,
)
from ._extract import Extract
from ._gate import MarginGate
from ._normalize import Normalize, casefold, collapse_whitespace, nfkc
from ._perturb import Perturb, Perturbation
from ._result import Ballot, Result
from ._retry import Budget, Retry
from ._schema import Grammar, Regex, Schema, ValidationFailure
from ._stabilizer import Stabilizer
from ._types import Completion, Feedback, Request, Settings, Usage
from ._vote import (
    Candidate,
    StopRule,
    Tally,
    Vote,
    highest_score,
    smallest_key,
    stop_when_confident,
    stop_when_unanimous,
    stop_when_unbeatable,
)
from .ledger import Ledger

__version__ = "0.1.0"

__all__ = [
    "AccordError",
    "BackendError",
    "Ballot",
    "Budget",
    "BudgetExceeded",
    "Candidate",
    "Completion",
    "ConfigError",
    "Extract",
    "Feedback",
    "Grammar",
    "InvalidOutput",
    "Ledger",
    "LedgerError",
    "MarginGate",
    "ModelNotInstalled",
    "NoConsensus",
    "Normalize",
    "OutputError",
    "Perturb",
    "Perturbation",
    "Regex",
    "Request",
    "Result",
    "Retry",
    "Schema",
    "Settings",
    "Stabilized",
    "Stabilizer",
    "StopRule",
    "Tally",
    "Unordered",
    "UnsupportedSchema",
    "Usage",
    "ValidationFailure",
    "Vote",
    "casefold",
    "collapse_whitespace",
    "determinism",
    "highest_score",
    "models",
    "nfkc",
    "smallest_key",
    "stabilize",
    "stop_when_confident",
    "stop_when_unanimous",
    "stop_when_unbeatable",
]
