"""The anthropic clients behind a Claude backend: a sync and an async twin for one base URL.

accord accepts an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` and derives the other
twin from its settings, or builds both from ``base_url`` and the client options. Every client
has the SDK's own retries off (``max_retries=0``): accord counts and paces every call. Async
clients are kept per event loop (a connection pool belongs to the loop that opened it), as the
OpenAI backend keeps them (:mod:`accord.backends.openai._clients`).

The SDK appends ``/v1/messages`` to its base URL, so a base URL given as an OpenAI-style
``http://host:8000/v1`` (vLLM's, say) loses its ``/v1`` (:func:`sdk_base_url`).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..._errors import ConfigError
from ..openai._errors import redact_url, url_secrets

DEFAULT_BASE_URL = "https://api.anthropic.com"
NO_KEY = "unused"  # a compatible server (vLLM) needs no key, but the client insists on one
#: The options passed through to ``anthropic.Anthropic(...)``/``anthropic.AsyncAnthropic(...)``.
CLIENT_OPTIONS = ("api_key", "auth_token", "timeout", "default_headers", "default_query")
_ENV_SECRETS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
_AUTH_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization"}


@dataclass
class Server:
    """One base URL: how it is shown (credentials redacted), and its clients."""

    url: str
    settings: dict[str, Any]
    sync_given: Any = None
    async_given: Any = None
    _sync: Any = None
    _async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = field(default_factory=weakref.WeakKeyDictionary)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @functools.cached_property
    def shown(self) -> str:
        return redact_url(self.url)

    def sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                import anthropic

                self._sync = self.sync_given or anthropic.Anthropic(**self.settings, max_retries=0)
            return self._sync

    def async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
            if client is None:
                import anthropic

                first = self.async_given is not None and not self._async
                client = self.async_given if first else anthropic.AsyncAnthropic(**self.settings, max_retries=0)
                self._async[loop] = client
            return client

    def close(self) -> None:
        with self._lock:
            if self._sync is not None and self._sync is not self.sync_given:
                self._sync.close()
            self._sync = None


def server_from(client: Any, base_url: Any, options: dict[str, Any], timeout: Any) -> tuple[Server, list[str]]:
    """The server to call, and the secrets that must never appear in a message."""
    import anthropic

    if client is not None:
        if base_url is not None:
            raise ConfigError("pass either client= or base_url=, not both")
        if not isinstance(client, (anthropic.Anthropic, anthropic.AsyncAnthropic)):
            raise ConfigError(f"client must be an anthropic.Anthropic or anthropic.AsyncAnthropic, got {type(client).__name__}")
        given = client.with_options(max_retries=0, **({"timeout": timeout} if timeout is not None else {}))
        settings = _settings_of(client, timeout)
        sync_given = given if isinstance(client, anthropic.Anthropic) else None
        async_given = given if isinstance(client, anthropic.AsyncAnthropic) else None
        return Server(settings["base_url"], settings, sync_given, async_given), _secrets(settings)
    url = sdk_base_url(base_url if base_url is not None else os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL)
    key = options.pop("api_key", None) or (None if options.get("auth_token") else os.environ.get("ANTHROPIC_API_KEY"))
    if not key and not options.get("auth_token") and not os.environ.get("ANTHROPIC_AUTH_TOKEN") and url != DEFAULT_BASE_URL:
        key = NO_KEY  # a local server needs none, but the client insists on one (Anthropic's own API: the SDK's profiles)
    settings = {**({"api_key": key} if key else {}), "base_url": url, "timeout": timeout, **options}
    return Server(url, settings), _secrets(settings)


def checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """The passthrough to the anthropic clients, checked: a ConfigError names any other option."""
    unknown = sorted(set(options) - set(CLIENT_OPTIONS))
    if unknown:
        raise ConfigError(f"models.anthropic() got unknown options {unknown}; the options passed to the anthropic client are: "
                          f"{', '.join(CLIENT_OPTIONS)}")
    for name in ("api_key", "auth_token"):
        value = options.get(name)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be a string or None, got {type(value).__name__}")
    for name in ("default_headers", "default_query"):
        value = options.get(name)
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"{name} must be a dict or None, got {type(value).__name__}")
    return {k: v for k, v in options.items() if v is not None}


def sdk_base_url(url: Any) -> str:
    """The base URL as the SDK takes it: without a trailing ``/`` or ``/v1`` (it appends ``/v1/messages``)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(f"base_url must be a URL starting with http:// or https://, got {redact_url(url)!r}")
    stripped: str = url.rstrip("/")
    return stripped.removesuffix("/v1")


def _settings_of(client: Any, timeout: Any) -> dict[str, Any]:
    """What it takes to build the other twin of a user's client."""
    return {
        **({"api_key": client.api_key} if client.api_key else {}),
        **({"auth_token": client.auth_token} if client.auth_token else {}),
        "base_url": str(client.base_url).rstrip("/"),
        "timeout": timeout if timeout is not None else client.timeout,
        "default_headers": dict(getattr(client, "_custom_headers", {}) or {}),
        "default_query": dict(getattr(client, "_custom_query", {}) or {}),
    }


def _secrets(settings: dict[str, Any]) -> list[str]:
    found = [str(settings[name]) for name in ("api_key", "auth_token") if isinstance(settings.get(name), str) and settings[name] != NO_KEY]
    found += [os.environ[name] for name in _ENV_SECRETS if os.environ.get(name)]  # the SDK may read them itself
    found += url_secrets(settings.get("base_url", ""))
    found += [str(v) for k, v in (settings.get("default_headers") or {}).items() if k.lower() in _AUTH_HEADERS]
    found += [str(v) for v in (settings.get("default_query") or {}).values() if isinstance(v, str) and len(v) >= 8]
    return [secret for secret in found if len(secret) >= 4]
