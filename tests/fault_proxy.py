"""A small fault proxy: a real HTTP server on a loopback port in front of a real upstream (the
session's vLLM), which records what every client sent and answers with a scripted fault instead
of forwarding when told to. The one fake in the Claude backend's tests: the model, the server and
the SDK are real, only the faults are injected.

    with fault_proxy("http://127.0.0.1:8000") as proxy:
        proxy.fail(429, {"type": "error", ...}, headers={"retry-after": "0.5"})   # the next call
        models.anthropic(base_url=proxy.url, ...)
        proxy.bodies("/v1/messages")                                              # what was sent

Every request is recorded (method, path, headers, JSON body) before it is forwarded or failed;
header names are recorded in lower case, values as they came (a test can check where a key
went). A fault answers the next ``times`` calls whose path ends as ``path`` says.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


@dataclass
class Fault:
    status: int
    body: Any
    headers: dict[str, str]
    path: str
    times: int


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FaultProxy:
    upstream: str
    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, status: int, body: Any = None, *, headers: dict[str, str] | None = None, path: str = "/v1/messages",
             times: int = 1) -> None:
        """Answer the next ``times`` calls to ``path`` with this status, JSON body and headers."""
        with self.lock:
            self.faults.append(Fault(status, body, dict(headers or {}), path, times))

    def bodies(self, path: str = "/v1/messages") -> list[Any]:
        """The JSON bodies sent to ``path``, in order."""
        with self.lock:
            return [s.body for s in self.seen if s.path.partition("?")[0] == path]

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()
            self.faults.clear()

    def _fault_for(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if path.partition("?")[0].endswith(fault.path) and fault.times > 0:
                    fault.times -= 1
                    return fault
        return None


def _handler(proxy: FaultProxy, client: httpx.Client) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            with proxy.lock:
                proxy.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            fault = proxy._fault_for(self.path)
            if fault is not None:
                self._answer(fault.status, json.dumps(fault.body).encode(), {"content-type": "application/json", **fault.headers})
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            reply = client.request(self.command, proxy.upstream + self.path, content=raw, headers=headers)
            self._answer(reply.status_code, reply.content, {k: v for k, v in reply.headers.items() if k.lower() not in _HOP})

        def _answer(self, status: int, content: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _any

    return Handler


@contextlib.contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    """A fault proxy in front of ``upstream`` (a base URL without ``/v1``) until the block ends."""
    proxy = FaultProxy(upstream.rstrip("/"))
    with httpx.Client(timeout=120) as client:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy, client))
        server.daemon_threads = True
        proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, name="fault-proxy", daemon=True)
        thread.start()
        try:
            yield proxy
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)
