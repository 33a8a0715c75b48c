"""Real processes for the proxy's tests and benchmark: the fake upstream and ``accord serve``.

    with fake_upstream() as fake:                       # tests/fake_upstream.py, its own process
        with accord_serve([fake.url], "--api-key", KEY) as proxy:
            openai.OpenAI(base_url=proxy.url, api_key=KEY)

Each binds a free 127.0.0.1 port, is ready once it answers ``/health`` (the proxy) or
``/v1/models`` (the fake), and is stopped (its whole process group) when the block ends. The
proxy's stderr (its log lines) goes to a file: :meth:`Proc.log_text`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from servers import free_port

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_KEY = "sk-upstream-c0ffee-not-for-clients-4242"  # the proxy's OPENAI_API_KEY in the tests
CLIENT_KEY = "client-key-for-tests-7f3a"  # a client key the tests' proxies take (--api-key)


# -- the review the proxy's tests ask for, through chat completions and the Responses API -----------


class Review(BaseModel):
    stars: int = Field(ge=1, le=5)
    sentiment: Literal["positive", "negative", "neutral"]


RIGHT = {"stars": 4, "sentiment": "positive"}
NOISY = [
    '{"stars": 2, "sentiment": "negative"}',  # the first ballot alone is wrong
    'Sure! Here is the review: {stars: 4, sentiment: "positive"}',  # prose, unquoted keys
    '```json\n{"sentiment": "positive", "stars": "4"}\n```',  # fenced, keys reordered, "4" for 4
    "{'stars': 4, 'sentiment': 'positive',}",  # single quotes, a trailing comma
    '{"stars": 4, "sentiment": "positive"}',
]


def fresh(text: str = "Review: 'Great pen, writes smoothly.'", **directive: Any) -> str:
    """A prompt no other test sends, with the fake's directive (tests/fake_upstream.py), so the
    fake's books per prompt say what one test alone caused."""
    tag = uuid.uuid4().hex[:10]
    return f"{text} [{tag}]" + (f" FAKE:{json.dumps(directive)}" if directive else "")


@dataclass
class Proc:
    """One server process on a loopback port."""

    url: str  # the base URL, ending in /v1
    process: subprocess.Popen[bytes]
    log: Path
    command: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: a crash."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def _get(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())


def _start(command: list[str], url: str, ready: str, env: dict[str, str], timeout: float = 60.0) -> Proc:
    log = Path(tempfile.mkstemp(prefix="accord-serve-test-", suffix=".log")[1])
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=ROOT)
    proc = Proc(url, process, log, command)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{command[2:5]} exited with {process.returncode}:\n{proc.log_text()[-3000:]}")
        try:
            _get(ready)
            return proc
        except (urllib.error.URLError, OSError, ValueError):
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"not ready after {timeout:.0f} s:\n{proc.log_text()[-3000:]}") from None
            time.sleep(0.1)


class Fake:
    """The fake upstream's process, with its books (``GET /_stats``, ``POST /_reset``)."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc
        self.url = proc.url

    def stats(self) -> dict[str, Any]:
        return _get(f"{self.proc.root}/_stats")  # type: ignore[no-any-return]

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.proc.root}/_reset", data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=5):
            pass


@contextlib.contextmanager
def fake_upstream(port: int | None = None, *, responses: bool = False, messages: bool = False) -> Iterator[Fake]:
    """tests/fake_upstream.py in its own process, on ``port`` (default: a free one); with
    ``responses`` (``messages``), it serves ``POST /v1/responses`` (``POST /v1/messages``) too."""
    port = port or free_port()
    flags = [*(["--responses"] if responses else []), *(["--messages"] if messages else [])]
    command = [sys.executable, str(ROOT / "tests" / "fake_upstream.py"), "--port", str(port), *flags]
    proc = _start(command, f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1/models", dict(os.environ))
    try:
        yield Fake(proc)
    finally:
        proc.stop()
        proc.log.unlink(missing_ok=True)


def serve_command(upstreams: list[str], port: int, *args: str) -> list[str]:
    ups = [a for u in upstreams for a in ("--upstream", u)]
    return [sys.executable, "-c", "from accord.cli import main; main()", "serve", *ups, "--port", str(port), *args]


@contextlib.contextmanager
def accord_serve(upstreams: list[str], *args: str, env: dict[str, str] | None = None, keep_log: bool = False) -> Iterator[Proc]:
    """``accord serve`` in its own process, with ``OPENAI_API_KEY`` set to :data:`UPSTREAM_KEY`."""
    port = free_port()
    command = serve_command(upstreams, port, *args)
    environ = {**os.environ, "OPENAI_API_KEY": UPSTREAM_KEY, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    if "ACCORD_API_KEYS" not in (env or {}):
        environ.pop("ACCORD_API_KEYS", None)  # the tests' keys are the flags'
    proc = _start(command, f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/health", environ)
    try:
        yield proc
    finally:
        proc.stop()
        if not keep_log:
            proc.log.unlink(missing_ok=True)


def start_serve(upstreams: list[str], *args: str, env: dict[str, str] | None = None) -> Proc:
    """``accord serve`` started and left running (the caller stops or kills it)."""
    port = free_port()
    environ = {**os.environ, "OPENAI_API_KEY": UPSTREAM_KEY, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return _start(serve_command(upstreams, port, *args), f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/health", environ)
