"""How busy a server is: the requests it runs and queues, as its ``/metrics`` says, and whether it
is a server of the user's own at all (:func:`self_hosted`: batch neighbours and ``/metrics`` reads
go only there).

vLLM (``vllm:num_requests_running``, ``..._waiting``), SGLang (``sglang:num_running_reqs``,
``..._queue_reqs``) and llama.cpp started with ``--metrics`` (``llamacpp:requests_processing``,
``..._deferred``) publish their count in Prometheus text at ``{root}/metrics``. The learned noise
records it as each ballot's load (:mod:`._noise`), and the spreader sends fewer batch neighbours
beside a ballot when others already keep the server busy (:mod:`._spread`).
"""

from __future__ import annotations

import ipaddress
import re
import threading
import time
from urllib.parse import urlsplit

import httpx  # imported here, once: a poller thread importing it while the caller's thread does half-imports it for both

METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting", "sglang:num_running_reqs", "sglang:num_queue_reqs",
           "llamacpp:requests_processing", "llamacpp:requests_deferred")
PERIOD = 0.25  # seconds between two polls of a server's /metrics while ballots go to it
FRESH = 1.0  # a count older than this is not read
IDLE = 10.0  # polling stops this long after the last ballot
_METRIC = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+([0-9.eE+-]+|NaN)\s*$")


def self_hosted(url: str) -> bool:
    """Whether a base URL names a server of the user's own (loopback, a private or link-local
    address, a one-label or ``.local``/``.internal``/``.lan`` name), not a hosted API."""
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return False
    if host == "localhost" or "." not in host or host.endswith((".local", ".internal", ".lan", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class ServerLoad:
    """A self-hosted server's ``/metrics`` count of the requests it runs and queues, polled in a
    daemon thread every :data:`PERIOD` seconds while the backend has ballots there (:meth:`watch`,
    :meth:`done`) and :data:`IDLE` seconds after, so reading it (:meth:`read`) never waits on the
    server. A server with no such count (one failed read) is never asked again."""

    def __init__(self) -> None:
        self._absent: set[str] = set()
        self._seen: dict[str, tuple[float, int]] = {}  # url -> (when, requests it runs and queues)
        self._others: dict[str, tuple[float, int]] = {}  # url -> (when, requests of others it ran)
        self._wanted: dict[str, float] = {}  # url -> when a ballot last went to it or came back
        self._active: dict[str, int] = {}  # url -> ballots there now
        self._polling: set[str] = set()
        self._lock = threading.Lock()

    def done(self, base_url: str) -> None:
        """A ballot :meth:`watch` saw go to ``base_url`` came back."""
        with self._lock:
            if self._active.get(base_url):
                self._active[base_url] -= 1
                self._wanted[base_url] = time.monotonic()

    def watch(self, base_url: str) -> None:
        """A ballot goes to ``base_url``: keep its count fresh while ballots are there (:meth:`done`)."""
        if not self_hosted(base_url):
            return
        with self._lock:
            if base_url in self._absent:
                return
            self._wanted[base_url] = time.monotonic()
            self._active[base_url] = self._active.get(base_url, 0) + 1
            if base_url in self._polling:
                return
            self._polling.add(base_url)
        threading.Thread(target=self._poll, args=(base_url,), name="accord-server-load", daemon=True).start()

    def _poll(self, base_url: str) -> None:
        while True:
            found = _fetch(base_url)
            now = time.monotonic()
            with self._lock:
                if found is None:
                    self._absent.add(base_url)
                else:
                    self._seen[base_url] = (now, found)
                idle = not self._active.get(base_url) and now - self._wanted.get(base_url, 0.0) > IDLE
                if found is None or idle:
                    self._polling.discard(base_url)
                    return
            time.sleep(PERIOD)

    def others(self, base_url: str, fresh: float = 5.0) -> int:
        """The requests of others the server ran at its last read, if that read is recent (else 0)."""
        with self._lock:
            found = self._others.get(base_url)
        return found[1] if found is not None and time.monotonic() - found[0] <= fresh else 0

    def read(self, base_url: str, own: int = 0) -> int | None:
        """The requests the server runs and queues, as last polled (None: it does not say, or no
        poll is recent); ``own``: how many of them are this backend's, so that what others send
        is remembered (:meth:`others`)."""
        now = time.monotonic()
        with self._lock:
            found = self._seen.get(base_url)
            if found is None or now - found[0] > FRESH:
                return None
            self._others[base_url] = (now, max(0, found[1] - own))
        return found[1]


def _fetch(base_url: str) -> int | None:
    try:
        response = httpx.get(_metrics_url(base_url), timeout=2.0)
        return _running(response.text) if response.status_code == 200 else None
    except Exception:  # noqa: BLE001 - a load read is a hint: any failure means "not known"
        return None


def _metrics_url(base_url: str) -> str:
    parts = urlsplit(base_url)
    path = re.sub(r"/v1/?$", "", parts.path.rstrip("/"))
    return f"{parts.scheme}://{parts.netloc}{path}/metrics"


def _running(text: str) -> int | None:
    total, seen = 0.0, False
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match and match.group(1) in METRICS and match.group(2) != "NaN":
            total, seen = total + float(match.group(2)), True
    return round(total) if seen else None
