"""What one ``accord serve`` process is: its upstreams, its bind, its keys, its caps and defaults.

A :class:`Config` comes from the command line, a config file (``--config FILE``: TOML or JSON,
the same names as the flags, plus a ``[policy]`` table, the server's default ``accord`` field,
a ``[backend]`` table of ``accord.models.openai`` options, and a ``[models]`` table to route by
model, ``._routes``), and the environment (``ACCORD_API_KEYS``, comma-separated). Everything is
checked here, once, before the server starts: a value that cannot work is a
:class:`~accord.ConfigError` that names it.

Either ``upstreams`` (``--upstream``: one set of upstreams, the request's ``model`` passed on as
it is; ``wire``: what they speak) or ``models`` (``--model`` / ``[models]``: the request's
``model`` picks one, each with its own ``wire``) is given.

An upstream's own key is never part of a Config: it is read from ``OPENAI_API_KEY`` (or
``ANTHROPIC_API_KEY`` for an upstream that speaks Messages, or a model's ``key_env``) by the
upstream client, as ``accord.models.openai`` does, and never shown.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import ConfigError
from ._routes import BACKEND_OPTIONS, POLICY_NAMES, Route, check_tables, check_unique, check_wire, parse_flag, read_models

__all__ = ["BACKEND_OPTIONS", "KEYS_ENV", "POLICY_NAMES", "Config", "build", "loopback"]

KEYS_ENV = "ACCORD_API_KEYS"


@dataclass(frozen=True)
class Config:
    """One server's settings (see the module docstring); built by :func:`build`.

    ``upstreams``: base URLs (ending in ``/v1``), round-robin. ``api_keys``: the client keys
    (none: every local client is let in). ``max_k`` / ``max_seconds``: the caps a request's
    ``accord`` field may not pass. ``max_body``: bytes a request body may hold (413 past it).
    ``concurrency``: upstream chat calls in flight, all requests together. ``queue``: requests
    that may wait beyond ``concurrency`` (one more is a 429). ``grace``: seconds in-flight requests
    get after SIGTERM. ``transport_attempts``: calls per ballot for a transient upstream fault
    (429, 5xx, a dropped connection), the first included. ``policy``: the default ``accord``
    field. ``backend``: ``accord.models.openai`` options (``accord.models.anthropic``'s for
    Messages upstreams). ``models``: the models a request may name, each with its upstreams
    (``._routes.Route``); none: ``upstreams`` for every model. ``wire``: what ``upstreams``
    speak: "chat" (chat completions) or "messages" (Anthropic's Messages API, through
    ``accord.models.anthropic``; a routed model names its own).
    """

    upstreams: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    ledger: str | None = field(default=None, repr=False)  # a DSN may hold a password
    max_k: int = 9
    max_seconds: float = 120.0
    max_body: int = 4 * 1024 * 1024
    concurrency: int = 64
    queue: int = 512
    grace: float = 30.0
    transport_attempts: int = 2
    insecure: bool = False
    log_level: str = "info"
    policy: Mapping[str, Any] = field(default_factory=dict)
    backend: Mapping[str, Any] = field(default_factory=dict)
    models: tuple[Route, ...] = ()
    wire: str = "chat"

    def __post_init__(self) -> None:
        _check_routing(self)
        check_unique(self.models)
        _check_numbers(self)
        _check_keys(self.api_keys)
        if self.log_level not in ("debug", "info", "warning", "error"):
            raise ConfigError(f"log_level must be debug, info, warning or error, got {self.log_level!r}")
        check_wire(self.wire, "")
        if self.models and self.wire != "chat":
            raise ConfigError("wire names what --upstream speaks; with routes, give each model its own wire ([models.NAME] wire = ...)")
        check_tables(self.policy, self.backend, "", "any" if self.models else self.wire)
        if not self.api_keys and not self.insecure and not loopback(self.host):
            raise ConfigError(
                f"refusing to bind {self.host} without client keys: set --api-key (or {KEYS_ENV}), bind 127.0.0.1, or say --insecure"
            )

    def shown(self) -> dict[str, Any]:
        """What may be printed: no key, no DSN."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.repr}
        out["api_keys"] = len(self.api_keys)
        out["ledger"] = self.ledger is not None
        return out


def loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _integer(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ConfigError(f"{name} must be an int {span}, got {value!r}")


def _check_routing(config: Config) -> None:
    """Upstreams or models, not both and not neither; each upstream an http(s) URL, each model a Route."""
    if config.models and config.upstreams:
        raise ConfigError("give --upstream (one set of upstreams for every model name) or --model / [models] (routing by model), not both")
    if not config.models:
        if not config.upstreams:
            raise ConfigError("accord serve needs an upstream: --upstream URL (an OpenAI-compatible base URL, e.g. "
                              "http://127.0.0.1:8001/v1), or --model NAME=URL for each model it routes")  # fmt: skip
        for url in config.upstreams:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError("--upstream must be an http:// or https:// base URL")
    if not all(isinstance(m, Route) for m in config.models):
        raise ConfigError("models must be Routes (built by build(), from --model or a [models] table)")


# name: (lowest, highest or None), each an int
_INTEGERS: dict[str, tuple[int, int | None]] = {
    "port": (0, 65535),
    "max_k": (1, 1000),
    "max_body": (1024, None),
    "concurrency": (1, None),
    "queue": (0, None),
    "transport_attempts": (1, 10),
}


def _check_numbers(config: Config) -> None:
    """Every int within its span, every span of seconds a positive finite number."""
    for name, (low, high) in _INTEGERS.items():
        _integer(name, getattr(config, name), low, high)
    for name in ("max_seconds", "grace"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")


def _check_keys(keys: tuple[str, ...]) -> None:
    for key in keys:
        if not isinstance(key, str) or len(key) < 8 or any(c.isspace() for c in key):
            raise ConfigError("every client key must be a string of at least 8 characters without spaces")


def read_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A config file's settings: TOML (``.toml``) or JSON (anything else)."""
    file = Path(path)
    try:
        text = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {file}: {exc.strerror or exc}") from None
    try:
        if file.suffix == ".toml":
            import tomllib

            data: Any = tomllib.loads(text.decode())
        else:
            data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the config file {file} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the config file {file} must hold a table of settings")
    return data


_FILE_NAMES = {f.name for f in dataclasses.fields(Config)} | {"upstream", "api_key"}


def build(given: Mapping[str, Any], file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """The Config of the flags ``given`` (None or empty: not given), over the file's, over the defaults.

    Client keys are the flags', else the file's, else ``ACCORD_API_KEYS``'s. ``given["models"]``
    holds ``--model`` flags (text); they replace the file's ``[models]``.
    """
    environ = os.environ if environ is None else environ
    settings = _from_file(file) if file is not None else {}
    _apply_flags(settings, given)
    if not settings.get("api_keys") and environ.get(KEYS_ENV):
        settings["api_keys"] = [k.strip() for k in environ[KEYS_ENV].split(",") if k.strip()]
    for name in ("upstreams", "api_keys"):
        _as_tuple(settings, name)
    for name in ("policy", "backend"):
        if not isinstance(settings.get(name, {}), dict):
            raise ConfigError(f"[{name}] must be a table")
    settings.setdefault("upstreams", ())
    try:
        return Config(**settings)
    except TypeError as exc:  # a wrong name that slipped past the checks above
        raise ConfigError(str(exc)) from None


def _from_file(file: str | os.PathLike[str]) -> dict[str, Any]:
    """The file's settings under Config's names (``upstream`` and ``api_key`` read as the plurals)."""
    data = read_file(file)
    unknown = sorted(set(data) - _FILE_NAMES)
    if unknown:
        raise ConfigError(f"the config file has unknown names {unknown}")
    for alias, name in (("upstream", "upstreams"), ("api_key", "api_keys")):
        if alias in data:
            data[name] = data.pop(alias)
    if "models" in data:
        data["models"] = read_models(data["models"])
    return data


def _apply_flags(settings: dict[str, Any], given: Mapping[str, Any]) -> None:
    """The flags given over ``settings``; routing named on the command line replaces the file's."""
    for name, value in given.items():
        if value is not None and value not in ((), []):
            settings[name] = tuple(parse_flag(v) if isinstance(v, str) else v for v in value) if name == "models" else value
    if given.get("upstreams") and not given.get("models"):
        settings.pop("models", None)  # --upstream on the command line replaces the file's routing
    elif given.get("models") and not given.get("upstreams"):
        settings.pop("upstreams", None)
        settings.pop("upstream", None)


def _as_tuple(settings: dict[str, Any], name: str) -> None:
    """``settings[name]`` as a tuple: one string is a tuple of one, a list its tuple."""
    value = settings.get(name)
    if isinstance(value, str):
        settings[name] = (value,)
    elif value is not None:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of strings")
        settings[name] = tuple(value)
