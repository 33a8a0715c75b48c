"""Routing by model: the models one ``accord serve`` fronts, each with its own upstreams.

A config file names them in a ``[models]`` table (TOML, or the same in JSON), one sub-table per
name a client may send as ``model``:

    [models.small]
    upstream = ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1"]
    model = "HuggingFaceTB/SmolLM2-135M-Instruct"   # the upstream's name for it (default: the table's)
    wire = "chat"                                   # what the upstream speaks: chat (completions), or messages (Anthropic's)
    key_env = "SMALL_API_KEY"                       # where its key is read (default OPENAI_API_KEY; ANTHROPIC_API_KEY for messages)
    max_k = 9                                       # its caps (default: the server's)
    [models.small.policy]                           # its default ``accord`` field, over the server's [policy]
    k = 7
    gate = false
    [models.small.backend]                          # accord.models.openai options, over the server's [backend]
    noise_floor = 0.5                               # (accord.models.anthropic's for wire = "messages")

and the command line repeats ``--model NAME=URL[,URL...][;setting=value...]``, the settings
being the table's names and the policy's and backend's, e.g.
``--model 'small=http://10.0.0.5:8000/v1;k=7;gate=false;max_k=9'``.

Each :class:`Route` is checked here, once, before the server starts: a value that cannot work is
a :class:`~accord.ConfigError` that names the model and the setting. A key itself is never part
of a Route: only the name of the environment variable that holds it.

An upstream that speaks Anthropic's Messages API (``wire = "messages"``: Anthropic's API, or vLLM's
``/v1/messages``) is called through ``accord.models.anthropic`` (the ``anthropic`` extra), its
base URL ending in ``/v1`` as the others' (``https://api.anthropic.com/v1``); its ``[backend]``
takes that backend's options (:data:`MESSAGES_OPTIONS`), the server's ``[backend]`` names that only
``accord.models.openai`` takes left out for it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import ConfigError
from ..backends.openai._options import flat_margins

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
#: What an upstream may speak, and where its key is read by default.
WIRES = {"chat": DEFAULT_KEY_ENV, "messages": "ANTHROPIC_API_KEY"}
#: ``accord.models.openai`` options a ``[backend]`` table may set.
BACKEND_OPTIONS = ("noise_floor", "dtype", "spread", "logprobs", "top_logprobs", "structured", "timeout", "max_tokens", "learn")
#: ``accord.models.anthropic`` options a ``[backend]`` table may set for an upstream that speaks Messages.
MESSAGES_OPTIONS = ("spread", "structured", "timeout", "max_tokens", "cache_min_tokens")
_MESSAGES_STRUCTURED = ("auto", "output_config", "tool", "off")
#: The policy names a ``[policy]`` table may set (the ``accord`` request field's, less ``refresh``).
POLICY_NAMES = ("k", "quorum", "fieldwise", "retry", "max_seconds", "early_stop", "gate", "plurality", "normalize")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODEL_NAMES = ("upstream", "upstreams", "model", "wire", "key_env", "max_k", "max_seconds", "policy", "backend")


def check_urls(urls: Any, where: str) -> tuple[str, ...]:
    """``urls`` as a tuple of http(s) base URLs, or the ConfigError that says what is wrong."""
    if isinstance(urls, str):
        urls = (urls,)
    if not isinstance(urls, (list, tuple)) or not urls:
        raise ConfigError(f"{where} needs an upstream: an OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1")
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: an upstream must be an http:// or https:// base URL, got {url!r}")
    return tuple(urls)


def check_wire(wire: Any, where: str) -> None:
    """What an upstream speaks: "chat" or "messages" (which needs the anthropic SDK)."""
    if wire not in WIRES:
        raise ConfigError(f"{where}wire must be chat (chat completions) or messages (Anthropic's Messages API), got {wire!r}")
    if wire == "messages" and importlib.util.find_spec("anthropic") is None:
        raise ConfigError(f"{where}wire = messages calls the upstream through accord.models.anthropic, which needs the anthropic "
                          "SDK: pip install 'accord[anthropic]'")  # fmt: skip


def backend_options(wire: str) -> tuple[str, ...]:
    """The ``[backend]`` names for an upstream that speaks ``wire`` ("any": the server's table over routes of either)."""
    if wire == "any":
        return tuple(dict.fromkeys((*BACKEND_OPTIONS, *MESSAGES_OPTIONS)))
    return MESSAGES_OPTIONS if wire == "messages" else BACKEND_OPTIONS


def check_tables(policy: Any, backend: Any, where: str, wire: str = "chat") -> None:
    """The names of a ``[policy]`` and a ``[backend]`` table, and the margin values of an OpenAI-wire
    ``[backend]`` (``noise_floor``, ``learn``, ...: a bad one is a ConfigError at startup, not at the
    first request); the other values are checked when the server builds its backends."""
    if wire == "messages" and isinstance(backend, Mapping) and backend.get("structured", "auto") not in _MESSAGES_STRUCTURED:
        raise ConfigError(f"{where}[backend] structured must be one of {', '.join(_MESSAGES_STRUCTURED)} for an upstream that speaks "
                          f"Messages, got {backend['structured']!r}")  # fmt: skip
    for name, table, known in (("policy", policy, POLICY_NAMES), ("backend", backend, backend_options(wire))):
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}[{name}] must be a table")
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ConfigError(f"{where}[{name}] has unknown names {unknown}; it takes: {', '.join(known)}")
    if wire != "messages":
        try:
            flat_margins(backend)
        except ConfigError as exc:
            raise ConfigError(f"{where}[backend]: {exc}") from None


@dataclass(frozen=True)
class Route:
    """One model a client may name (see the module docstring).

    ``name``: what the client sends as ``model``. ``upstreams``: its base URLs, round-robin.
    ``model``: the upstream's name for it (None: ``name``). ``wire``: what they speak, "chat"
    (chat completions) or "messages" (Anthropic's Messages API). ``key_env``: the environment
    variable holding its upstream key (None: ``OPENAI_API_KEY``, or ``ANTHROPIC_API_KEY`` for
    Messages). ``max_k`` / ``max_seconds``: its caps (None: the server's). ``policy`` /
    ``backend``: over the server's ``[policy]`` and ``[backend]``.
    """

    name: str
    upstreams: tuple[str, ...]
    model: str | None = None
    key_env: str | None = None
    max_k: int | None = None
    max_seconds: float | None = None
    policy: Mapping[str, Any] = field(default_factory=dict)
    backend: Mapping[str, Any] = field(default_factory=dict)
    wire: str = "chat"

    def __post_init__(self) -> None:
        where = f"models.{self.name}"
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip():
            raise ConfigError(f"a model's name must be a non-empty string without surrounding spaces, got {self.name!r}")
        object.__setattr__(self, "upstreams", check_urls(self.upstreams, where))
        check_wire(self.wire, f"{where}.")
        if self.key_env is None:
            object.__setattr__(self, "key_env", WIRES[self.wire])
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise ConfigError(f"{where}.model must be the upstream's model name, got {self.model!r}")
        if not isinstance(self.key_env, str) or not _ENV_NAME.fullmatch(self.key_env):
            raise ConfigError(f"{where}.key_env must name an environment variable (e.g. SMALL_API_KEY), not hold a key")
        if self.max_k is not None and (isinstance(self.max_k, bool) or not isinstance(self.max_k, int) or not 1 <= self.max_k <= 1000):
            raise ConfigError(f"{where}.max_k must be an int from 1 to 1000, got {self.max_k!r}")
        seconds = self.max_seconds
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0):
            raise ConfigError(f"{where}.max_seconds must be a positive number of seconds, got {seconds!r}")
        check_tables(self.policy, self.backend, where, self.wire)

    @property
    def upstream_model(self) -> str:
        return self.model or self.name


def read_models(table: Any) -> tuple[Route, ...]:
    """The Routes of a config file's ``[models]`` table (name -> settings)."""
    if not isinstance(table, Mapping):
        raise ConfigError("[models] must be a table: one sub-table per model name, e.g. [models.small]")
    return tuple(route_of(name, settings) for name, settings in table.items())


def route_of(name: str, settings: Any) -> Route:
    if not isinstance(settings, Mapping):
        raise ConfigError(f"[models.{name}] must be a table of settings")
    unknown = sorted(set(settings) - set(_MODEL_NAMES))
    if unknown:
        raise ConfigError(f"[models.{name}] has unknown names {unknown}; it takes: {', '.join(_MODEL_NAMES)}")
    values = dict(settings)
    if "upstream" in values:
        if "upstreams" in values:
            raise ConfigError(f"[models.{name}]: give upstream or upstreams, not both")
        values["upstreams"] = values.pop("upstream")
    values.setdefault("upstreams", ())
    return Route(name=name, **values)


def parse_flag(text: str) -> Route:
    """A ``--model NAME=URL[,URL...][;setting=value...]`` flag as a Route."""
    head, *settings = [part.strip() for part in text.split(";")]
    name, sep, urls = head.partition("=")
    if not sep or not name.strip() or not urls.strip():
        raise ConfigError(f"--model takes NAME=URL[,URL...][;setting=value...], got {text!r}")
    values: dict[str, Any] = {"upstreams": tuple(u.strip() for u in urls.split(",") if u.strip())}
    policy: dict[str, Any] = {}
    backend: dict[str, Any] = {}
    for setting in settings:
        if not setting:
            continue
        key, sep, raw = (s.strip() for s in setting.partition("="))
        if not sep or not key:
            raise ConfigError(f"--model {name.strip()}: a setting must be name=value, got {setting!r}")
        value = _value(raw)
        if key in ("model", "wire", "key_env", "max_k", "max_seconds"):
            values[key] = raw if key in ("model", "wire", "key_env") else value
        elif key in POLICY_NAMES:
            policy[key] = value
        elif key in backend_options("any"):
            backend[key] = value
        else:
            known = ("model", "wire", "key_env", "max_k", "max_seconds", *POLICY_NAMES, *backend_options("any"))
            raise ConfigError(f"--model {name.strip()}: unknown setting {key!r}; it takes: {', '.join(known)}")
    return Route(name=name.strip(), policy=policy, backend=backend, **values)


def _value(raw: str) -> Any:
    """A flag's value: JSON where it reads as JSON (numbers, true/false, lists), else the text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def check_unique(routes: tuple[Route, ...]) -> None:
    seen: set[str] = set()
    for route in routes:
        if route.name in seen:
            raise ConfigError(f"the model {route.name!r} is configured twice")
        seen.add(route.name)
