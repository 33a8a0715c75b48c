"""accord: turn a fluctuating LLM output into a stable, validated result.

    prompt -> generate -> extract -> normalize -> validate -> canonicalize -> vote -> Result
"""

from . import determinism, models
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
from ._records import Fieldwise, Fragility, LedgerRecord, Referral
from ._result import Ballot, Result, StopReason
from ._retry import Budget, Retry
from ._stabilizer import Stabilizer
from ._types import Completion, Feedback, Request, Settings, Usage
from ._version import __version__ as __version__
from .ledger import Ledger
from .observe._hooks import Hooks, RetryEvent
from .observe._prices import Prices
from .observe._telemetry import Telemetry
from .prompt._prompting import Prompting
from .read._canonical import Unordered
from .read._extract import Extract
from .read._normalize import Normalize, casefold, collapse_whitespace, nfkc
from .run._partial import Decided, Partial
from .schema._roles import Decisive, Prose
from .schema._schema import Grammar, Regex, Schema, ValidationFailure
from .vote._gate import MarginGate
from .vote._perturb import Perturb, Perturbation
from .vote._vote import (
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

__all__ = [
    "AccordError",
    "BackendError",
    "Ballot",
    "Budget",
    "BudgetExceeded",
    "Candidate",
    "Completion",
    "ConfigError",
    "Decided",
    "Decisive",
    "Extract",
    "Feedback",
    "Fieldwise",
    "Fragility",
    "Grammar",
    "Hooks",
    "InvalidOutput",
    "Ledger",
    "LedgerError",
    "LedgerRecord",
    "MarginGate",
    "ModelNotInstalled",
    "NoConsensus",
    "Normalize",
    "OutputError",
    "Partial",
    "Perturb",
    "Perturbation",
    "Prices",
    "Prompting",
    "Prose",
    "Referral",
    "Regex",
    "Request",
    "Result",
    "Retry",
    "RetryEvent",
    "Schema",
    "Settings",
    "Stabilized",
    "Stabilizer",
    "StopReason",
    "StopRule",
    "Tally",
    "Telemetry",
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
