"""A lean HTTP/1.1 client for the upstream's chat completions: asyncio streams, kept-alive
connections per host, the response read whole.

The openai client's own stack (its request transform and response construction, then httpx
over httpcore and anyio) costs several milliseconds of CPU a call on a small machine, many times
what the call itself needs (benchmarks/serve.py), and the proxy makes every ballot through it.
This does what those calls need and no more: a POST with a body, an answer with
``content-length`` or ``chunked`` encoding, TLS for ``https://``, one timeout over the whole
exchange, and a connection used again only when its answer was read to the end. A kept
connection the server has closed (its keep-alive timeout passed) is dropped before it is used; one
it closes as the request goes out is retried once, on a new connection. Failures are the HTTP package's own exceptions
(``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``). Streamed answers, proxies from the
environment (:func:`usable`) and everything else go through the full transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
_IDLE_KEPT = 64  # idle connections kept per host
_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024
_DROPPED = (b"host", b"accept-encoding", b"connection", b"content-length", b"transfer-encoding")

Origin = tuple[str, str, int]


def usable() -> bool:
    """Whether the lean client may be used (no proxy set in the environment)."""
    return not any(os.environ.get(name) for name in _PROXY_ENV)


@dataclass(frozen=True)
class Target:
    """Where a request goes: scheme, host, port, the path, and the Host header."""

    origin: Origin
    path: str
    netloc: str
    url: str

    @classmethod
    def of(cls, url: str) -> Target:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path or "/"
        if parts.query:
            path += f"?{parts.query}"
        return cls((parts.scheme, parts.hostname or "", port), path, parts.netloc.rpartition("@")[2], url)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()

    @property
    def closed(self) -> bool:
        """The server closed it while it was idle (its end seen), or it is closing."""
        return self.reader.at_eof() or self.writer.is_closing()


def _alive(idle: list[_Connection]) -> _Connection | None:
    """The most recently kept connection still open; those the server closed are dropped (a
    server closes idle connections after its keep-alive timeout: uvicorn's is 5 s)."""
    while idle:
        conn = idle.pop()
        if not conn.closed:
            return conn
        conn.close()
    return None


class LeanClient:
    """POSTs over kept-alive connections (see the module docstring); ``http``: the HTTP package
    whose exceptions it raises."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self._idle: defaultdict[Origin, list[_Connection]] = defaultdict(list)
        self._tls: ssl.SSLContext | None = None

    async def post(self, target: Target, headers: list[tuple[str, str]], content: bytes, timeout: float) -> Answer:
        lines = [f"POST {target.path} HTTP/1.1", f"host: {target.netloc}"]
        lines += [f"{name}: {value}" for name, value in headers if name.lower().encode() not in _DROPPED]
        lines += ["accept-encoding: identity", f"content-length: {len(content)}", "", ""]
        message = "\r\n".join(lines).encode("latin-1") + content
        try:
            return await asyncio.wait_for(self._exchange(target.origin, message), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise self.http.ReadTimeout("the upstream did not answer in time") from None

    async def _exchange(self, origin: Origin, message: bytes) -> Answer:
        for attempt in (0, 1):
            idle = self._idle[origin]
            conn = _alive(idle) if attempt == 0 else None  # the retry: on a new connection, never another kept one
            reused = conn is not None
            if conn is None:
                conn = await self._connect(origin)
            try:
                conn.writer.write(message)
                await conn.writer.drain()
                answer, keep = await _read(conn.reader)
            except (ValueError, asyncio.LimitOverrunError) as exc:  # not HTTP as this reads it
                conn.close()
                raise self.http.RemoteProtocolError(f"the upstream's answer cannot be read ({type(exc).__name__})") from None
            except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
                conn.close()
                if reused and attempt == 0:
                    continue  # a kept connection the server had closed: once more, on a new one
                raise self.http.RemoteProtocolError(f"the upstream closed the connection ({type(exc).__name__})") from None
            except BaseException:  # cancelled, or timed out: the connection is in an unknown state
                conn.close()
                raise
            if keep and len(idle) < _IDLE_KEPT:
                idle.append(conn)
            else:
                conn.close()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        tls = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        try:
            reader, writer = await asyncio.open_connection(host, port, ssl=tls, limit=_MAX_HEAD)
        except OSError as exc:
            raise self.http.ConnectError(f"cannot connect to the upstream ({exc.strerror or type(exc).__name__})") from None
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for conn in connections:
                conn.close()
        self._idle.clear()


async def _read(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    """One answer, and whether the connection may carry another."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    status = int(rest[:3])
    headers = []
    length = None
    chunked = False
    keep = version == b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip(), value.strip()
        lower = name.lower()
        if lower == b"content-length":
            length = int(value)
        elif lower == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
            continue  # the body is handed on whole
        elif lower == b"connection":
            keep = value.lower() != b"close" if keep else value.lower() == b"keep-alive"
        headers.append((name, value))
    if chunked:
        body = await _chunks(reader)
    elif length is not None:
        if length > _MAX_BODY:
            raise ValueError("the upstream's answer is too large")
        body = await reader.readexactly(length)
    elif status in (204, 304) or 100 <= status < 200:
        body = b""
    else:
        body = await reader.read(_MAX_BODY)  # until the server closes
        keep = False
    return Answer(status, headers, body), keep


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        count = int(line.split(b";", 1)[0].strip(), 16)
        if count == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the blank line
                pass
            return b"".join(parts)
        size += count
        if size > _MAX_BODY:
            raise ValueError("the upstream's answer is too large")
        parts.append(await reader.readexactly(count))
        await reader.readexactly(2)
