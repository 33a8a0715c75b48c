"""What ``models.openai(...)`` takes beside the server: how margins are read (:class:`Margins`),
the options passed through to the ``openai`` clients, and the checks on each.

    Margins(logprobs=True, top_logprobs=2, noise_floor=None, dtype_label=None)
    client_options(options)    the passthrough (api_key, timeout, organization, ...), checked
    margins_from(margins, options, where)    the older spellings (logprobs=, top_logprobs=,
                               noise_floor=, dtype=) folded in, each with a DeprecationWarning
    flat_margins(options)      a config file's flat names as margins=Margins(...), no warning
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ... import _check
from ..._errors import ConfigError
from .._renamed import deprecated

#: The options passed through to ``openai.OpenAI(...)``/``openai.AsyncOpenAI(...)``.
CLIENT_OPTIONS = ("api_key", "timeout", "organization", "project", "default_headers", "default_query")
STRUCTURED = {"auto": "auto", True: "on", False: "off"}
#: The APIs a backend can speak to its servers (``models.openai(api=...)``).
APIS = ("chat", "responses")
#: models.openai's older spellings of the Margins fields: old name -> field.
_OLD_MARGINS = {"logprobs": "logprobs", "top_logprobs": "top_logprobs", "noise_floor": "noise_floor", "dtype": "dtype_label"}
_FLAT_MARGINS = {**_OLD_MARGINS, "learn": "learn"}  # a [backend] table's names (learn is no old option of models.openai)


@dataclass(frozen=True)
class Margins:
    """How an OpenAI-compatible backend reads its answers' margins (``models.openai(margins=...)``).

    ``logprobs``: ask for ``top_logprobs`` alternatives per token and record the top-1/top-2 gap
    as each completion's margins (False: no margins; the margin gate stands aside). ``top_logprobs``:
    how many alternatives (2 to 20). ``noise_floor``: the logprob gap below which a step counts as
    fragile on this server; None uses the floor ``accord calibrate --model openai:URL`` measured
    (with a floor the margin gate may accept one ballot alone). ``dtype_label``: the dtype the
    server computes in, as a label only (nothing is loaded: it picks the calibrated floor measured
    for that dtype; None: the largest floor measured for the server and model). ``learn``: with no
    floor given, calibrated or learned against a reference, learn the server's noise from its own
    ballots (:mod:`._noise`; the gate then reads that distribution); False: the gate stands aside there.
    """

    logprobs: bool = True
    top_logprobs: int = 2
    noise_floor: float | None = None
    dtype_label: str | None = None
    learn: bool = True

    def __post_init__(self) -> None:
        _check.boolean("Margins", "logprobs", self.logprobs)
        _check.boolean("Margins", "learn", self.learn)
        _check.integer("Margins", "top_logprobs", self.top_logprobs, low=2, high=20)
        floor = self.noise_floor
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not floor >= 0):
            raise ConfigError(f"noise_floor must be >= 0 or None, got {floor!r}")
        label = self.dtype_label
        if label is not None and (not isinstance(label, str) or not label):
            raise ConfigError(f"dtype_label must be a non-empty string or None, got {label!r}")


def margins_from(margins: Margins, options: dict[str, Any], where: str = "models.openai") -> Margins:
    """``margins``, with the older spellings popped from ``options`` folded in (each warned)."""
    if not isinstance(margins, Margins):
        raise ConfigError(f"margins must be an accord.models.Margins, got {type(margins).__name__}")
    old = {name: options.pop(name) for name in _OLD_MARGINS if name in options}
    if not old:
        return margins
    for name in old:
        deprecated(name, f"margins=accord.models.Margins({_OLD_MARGINS[name]}=...)", where, stacklevel=5)
    if margins != Margins():
        raise ConfigError(f"{where}: give margins= or its older spellings ({', '.join(sorted(old))}), not both")
    folded: Margins = flat_margins(old)["margins"]
    return folded


def flat_margins(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the Margins fields written flat (``logprobs``, ``top_logprobs``,
    ``noise_floor``, ``dtype``, ``learn``: a config file's ``[backend]`` table, ``accord serve``'s) as one
    ``margins=Margins(...)``, without a warning: that vocabulary is the config file's own."""
    found = {field: options[name] for name, field in _FLAT_MARGINS.items() if name in options}
    if not found:
        return dict(options)
    rest = {k: v for k, v in options.items() if k not in _FLAT_MARGINS}
    return {**rest, "margins": Margins(found.get("logprobs", True), found.get("top_logprobs", 2), found.get("noise_floor"),
                                       found.get("dtype_label"), found.get("learn", True))}


def client_options(options: dict[str, Any], where: str = "models.openai") -> dict[str, Any]:
    """The passthrough to the ``openai`` clients, checked: a ConfigError names any other option."""
    unknown = sorted(set(options) - set(CLIENT_OPTIONS))
    if unknown:
        raise ConfigError(f"{where}() got unknown options {unknown}; the options passed to the openai client are: "
                          f"{', '.join(CLIENT_OPTIONS)}")
    for name in ("api_key", "organization", "project"):
        value = options.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a string or None, got {type(value).__name__}")
    return {k: v for k, v in options.items() if v is not None}


def checked(model: Any, max_tokens: Any, structured: Any, streamed: Any) -> None:
    """A ConfigError for a model name, output budget, ``structured`` or ``streamed`` it cannot take."""
    if model is not None and (not isinstance(model, str) or not model):
        raise ConfigError(f"model must be a non-empty string or None, got {model!r}")
    _check.integer("", "max_tokens", max_tokens, optional=True)
    if structured not in STRUCTURED:
        raise ConfigError(f'structured must be "auto", True or False, got {structured!r}')
    _check.boolean("", "streamed", streamed)


def api_of(api: Any) -> str:
    """``api`` checked: a ConfigError names the choices."""
    if not isinstance(api, str) or api not in APIS:
        raise ConfigError(f"api must be one of {', '.join(map(repr, APIS))}, got {api!r}")
    return api


DEFAULT_MARGINS = Margins()
