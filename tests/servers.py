"""A real OpenAI-compatible server for tests and benchmarks: ``transformers serve`` on loopback.

    with serve(model_folder()) as server:
        backend = accord.models.openai(base_url=server.url)

Starts ``transformers serve <model> --model-timeout -1`` (the ``dev`` extra) on a free
127.0.0.1 port with ``HF_HUB_OFFLINE=1``, waits for ``/health`` and one warm-up completion, and
stops the whole process group on exit. The server's output goes to a temporary log file (its
tail is in the error if the server fails to start; ``Served.log_tail()`` reads it while it
runs), removed on exit.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

@dataclass(frozen=True)
class Served:
    url: str  # the base URL, ending in /v1
    model: str  # the name the server is pinned to
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def model_folder() -> str:
    """The folder of the embedded SmolLM2-135M-Instruct (``accord.models.local().path``).

    Found without loading the model when the local backend allows (the converted folder is
    built once and cached); raises :class:`~accord.ModelNotInstalled` when the model is missing.
    """
    from accord.backends.local._embedded import converted_folder, find_gguf

    return str(converted_folder(find_gguf())[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve(
    model: str,
    *,
    continuous_batching: bool = False,
    threads: int | None = None,
    start_timeout: float = 300.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[Served]:
    """Run ``transformers serve`` for ``model`` until the block ends."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="accord-serve-", suffix=".log")[1])
    command = [
        sys.executable, "-m", "transformers.cli.transformers", "serve", model,
        "--host", "127.0.0.1", "--port", str(port), "--model-timeout", "-1", "--log-level", "warning",
        "--continuous-batching" if continuous_batching else "--no-continuous-batching", *extra_args,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    served = Served(f"http://127.0.0.1:{port}/v1", model, log)
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_ready(process, served, start_timeout)
        yield served
    finally:
        _stop(process)
        log.unlink(missing_ok=True)


def _wait_ready(process: subprocess.Popen[bytes], served: Served, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    root = served.url.removesuffix("/v1")
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"transformers serve exited with {process.returncode}:\n{served.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"transformers serve not healthy after {timeout:.0f} s:\n{served.log_tail()}")
        try:
            with urllib.request.urlopen(f"{root}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    body = {"model": served.model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 2, "temperature": 0}
    request = urllib.request.Request(
        f"{served.url}/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    left = max(5.0, deadline - time.monotonic())
    with urllib.request.urlopen(request, timeout=left) as answer:  # the model loads on the first request
        json.loads(answer.read())


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
