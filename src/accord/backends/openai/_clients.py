"""The openai clients behind one OpenAI-compatible backend: a sync and an async twin per server.

accord accepts an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` (the ecosystem's convention) and
derives the other twin from its settings, or builds both from ``base_url`` / ``api_key``. Every
client has the SDK's own retries off (``max_retries=0``): accord counts and paces every call.

An async client's connection pool belongs to the event loop that opened it, and
``Stabilizer.map`` runs a fresh loop per call, so async clients are kept per loop. A client the
user passed is used as given in the first loop; later loops get a copy with a fresh connection
pool, unless the user gave it a custom ``http_client`` (a proxy, a mock transport), which is
then reused as is.
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
from ._errors import redact_url, url_secrets

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY = "unused"  # local servers need no key, but the client insists on one
_AUTH_HEADERS = {"authorization", "api-key", "x-api-key", "proxy-authorization"}


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
    def shown(self) -> str:  # read several times a call: computed once
        return redact_url(self.url)

    def sync_client(self) -> Any:
        with self._lock:
            if self._sync is None:
                import openai

                self._sync = self.sync_given or openai.OpenAI(**self.settings, max_retries=0)
            return self._sync

    def async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async.get(loop)
            if client is None:
                client = self._new_async()
                self._async[loop] = client
            return client

    def _new_async(self) -> Any:
        import openai

        given = self.async_given
        if given is not None and (not self._async or _custom_http_client(given)):
            return given
        return openai.AsyncOpenAI(**self.settings, max_retries=0)

    def fresh_async_client(self) -> Any:
        """A new async client with this server's settings, for a private event loop (its caller closes it)."""
        import openai

        return openai.AsyncOpenAI(**self.settings, max_retries=0)

    def close(self) -> None:
        with self._lock:
            if self._sync is not None and self._sync is not self.sync_given:
                self._sync.close()
            self._sync = None


def servers_from(
    client: Any, base_url: Any, api_key: str | None, timeout: Any, extra: dict[str, Any]
) -> tuple[list[Server], list[str]]:
    """The servers to call, and the secrets that must never appear in a message."""
    import openai

    if client is not None:
        if base_url is not None:
            raise ConfigError("pass either client= or base_url=, not both")
        if not isinstance(client, (openai.OpenAI, openai.AsyncOpenAI)):
            raise ConfigError(f"client must be an openai.OpenAI or openai.AsyncOpenAI, got {type(client).__name__}")
        options: dict[str, Any] = {"max_retries": 0}
        if timeout is not None:
            options["timeout"] = timeout
        given = client.with_options(**options)
        settings = _settings_of(client, timeout)
        sync_given = given if isinstance(client, openai.OpenAI) else None
        async_given = given if isinstance(client, openai.AsyncOpenAI) else None
        server = Server(str(client.base_url), settings, sync_given, async_given)
        return [server], _secrets(settings)
    urls = _urls(base_url)
    key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY
    servers = []
    secrets: list[str] = []
    for url in urls:
        settings = {"api_key": key, "base_url": url, "timeout": timeout, **extra}
        servers.append(Server(url, settings))
        secrets += _secrets(settings)
    return servers, secrets


def _urls(base_url: Any) -> list[str]:
    if base_url is None:
        base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    urls = [base_url] if isinstance(base_url, str) else list(base_url) if isinstance(base_url, (list, tuple)) else None
    if not urls:
        raise ConfigError("base_url must be a URL or a non-empty list of URLs")
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"base_url must start with http:// or https://, got {redact_url(url)!r}")
    return urls


def _settings_of(client: Any, timeout: Any) -> dict[str, Any]:
    """What it takes to build the other twin of a user's client."""
    return {
        "api_key": getattr(client, "_api_key_provider", None) or client.api_key or NO_KEY,
        "organization": client.organization,
        "project": client.project,
        "base_url": str(client.base_url),
        "timeout": timeout if timeout is not None else client.timeout,
        "default_headers": dict(getattr(client, "_custom_headers", {}) or {}),
        "default_query": dict(getattr(client, "_custom_query", {}) or {}),
    }


def _secrets(settings: dict[str, Any]) -> list[str]:
    found = [settings["api_key"]] if isinstance(settings.get("api_key"), str) and settings["api_key"] != NO_KEY else []
    found += url_secrets(settings.get("base_url", ""))
    headers = settings.get("default_headers") or {}
    found += [str(v) for k, v in headers.items() if k.lower() in _AUTH_HEADERS]
    found += [str(v) for v in (settings.get("default_query") or {}).values() if isinstance(v, str) and len(v) >= 8]
    return found


def _custom_http_client(client: Any) -> bool:
    """Whether the user gave this openai client an http_client of their own."""
    inner = getattr(client, "_client", None)
    return inner is not None and not type(inner).__name__.endswith("HttpxClientWrapper")
