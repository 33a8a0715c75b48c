"""Running the app: uvicorn, one process, with a graceful drain on SIGTERM.

On SIGTERM (or Ctrl-C) the server starts draining: ``/ready`` answers 503 (a load balancer
takes it out), a new request gets a 503 with ``connection: close`` (the official clients retry a
503, on another replica behind a balancer), and the requests in flight go on. Once none is left,
or ``--grace`` seconds have passed, uvicorn shuts down (what is still running then is
cancelled, its ballots with it). A second signal stops at once.

Logging: one line per request on ``accord.serve`` (``._observe``), uvicorn's own warnings, and
no access log (the request line is accord's). accord's per-run records stay below WARNING.
"""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Any

import uvicorn

from ._app import Proxy
from ._config import Config


def log_config(level: str) -> dict[str, Any]:
    upper = level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {"stderr": handler},
        "loggers": {
            "accord.serve": {"handlers": ["stderr"], "level": upper, "propagate": False},
            "accord": {"handlers": ["stderr"], "level": "WARNING" if upper in ("INFO", "DEBUG") else upper, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
            "uvicorn.error": {"level": "WARNING"},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def serve(config: Config, *, announce: bool = True) -> int:
    """Run the proxy for ``config`` until it is stopped; the exit status (0 after a clean drain)."""
    proxy = Proxy(config)
    app = proxy.app()
    app.state.proxy = proxy
    options = uvicorn.Config(app, host=config.host, port=config.port, log_config=log_config(config.log_level), access_log=False,
                             timeout_graceful_shutdown=1, server_header=False, lifespan="on", proxy_headers=False)  # fmt: skip
    server = Draining(options, proxy)
    if announce:
        where = f"[{config.host}]" if ":" in config.host else config.host
        upstreams = f"{len(config.upstreams)} upstream(s)" if not config.models else f"{len(config.models)} model(s): {', '.join(m.name for m in config.models)}"
        logging.getLogger("accord.serve").info(
            "accord serve on http://%s:%d/v1 -> %s, %s, concurrency %d, queue %d", where, config.port,
            upstreams, "client keys required" if config.api_keys else "no client keys", config.concurrency, config.queue,
        )  # fmt: skip
    server.run()
    return 0 if server.started else 1


class Draining(uvicorn.Server):
    """uvicorn's Server, which drains on the first signal instead of closing at once."""

    def __init__(self, config: uvicorn.Config, proxy: Proxy) -> None:
        super().__init__(config)
        self.proxy = proxy
        self.drain_since: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_since is None and sig in (signal.SIGTERM, signal.SIGINT):
            self.drain_since = time.monotonic()
            self.proxy.draining = True
            logging.getLogger("accord.serve").warning(
                "draining: %d request(s) in flight, %g s grace", self.proxy.active, self.proxy.config.grace)
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self.drain_since is not None:
            over = time.monotonic() - self.drain_since > self.proxy.config.grace
            if self.proxy.active == 0 or over:
                return True
        return await super().on_tick(counter)
