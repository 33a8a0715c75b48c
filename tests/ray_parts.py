"""A real local Ray cluster for the tests (one per session), and the parts its actors import.

Ray's workers import this module by name (``ray_parts``: the cluster's runtime env puts tests/
and this tree's src/ on their PYTHONPATH), so the backends below pickle by reference.

- :func:`cluster`: ``ray.init(num_cpus=2)`` on 127.0.0.1 until the block ends; its GCS address.
- :func:`counted`: a backend factory for a :class:`~accord.integrations.ray.Recipe`: a function
  backend that answers ``Row(id=n, word=...)`` for "row n" after ``latency`` seconds and appends
  ``n`` to ``log`` (one line per model call, from any process: the calls are counted, not assumed).
  With ``register``, the actor that built it hands its handle to the named :class:`Registry`
  first, so a test can ``ray.kill`` it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import accord

HERE = Path(__file__).resolve().parent
ROW = re.compile(r"row (\d+)\b")
ADDRESS = "ACCORD_TEST_RAY_ADDRESS"  # set while the session's cluster runs: benchmarks/ray.py and examples/ray_parquet.py join it


class Row(BaseModel):
    id: int
    word: str


def word(n: int) -> str:
    return ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta")[n % 7]


def answer(prompt: str, *, latency: float, log: str) -> str:
    """The model: after ``latency`` s, the row the prompt names (a prompt naming none gets prose, never valid)."""
    found = ROW.search(prompt)
    n = int(found.group(1)) if found else -1
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{n}\n".encode())  # one short write with O_APPEND: whole lines, from every process
    finally:
        os.close(fd)
    time.sleep(latency)
    return f'{{"id": {n}, "word": "{word(n)}"}}' if found else "I cannot tell."


def make_counted(latency: float, log: str, register: str | None = None) -> Any:
    if register is not None:
        import ray

        registry = ray.get_actor(register)
        ray.get(registry.add.remote(ray.get_runtime_context().current_actor, os.getpid()))
    return accord.models.function(functools.partial(answer, latency=latency, log=log), name="ray-test-rows")


def counted(latency: float, log: str | os.PathLike[str], register: str | None = None) -> Any:
    """The backend factory of a Recipe (see the module docstring)."""
    return functools.partial(make_counted, latency, str(log), register)


def vllm(url: str, model: str) -> Any:
    """A Recipe's factory for the session's vLLM: the backend is made on the actor (a client holds locks: it never travels)."""
    from accord.backends.openai._caps import Capabilities

    return accord.models.openai(base_url=url, model=model, capabilities=Capabilities(), max_tokens=16)


def calls(log: str | os.PathLike[str]) -> Counter[int]:
    """Model calls per row id, as the backend logged them."""
    path = Path(log)
    return Counter(int(line) for line in path.read_text().split()) if path.exists() else Counter()


class Registry:
    """A named actor that keeps the handles of the actors that built a counted backend (``add``)."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.pids: list[int] = []

    def add(self, handle: Any, pid: int) -> None:
        self.handles.append(handle)
        self.pids.append(pid)

    def all(self) -> list[Any]:
        return list(zip(self.handles, self.pids, strict=True))


@contextlib.contextmanager
def cluster(num_cpus: int = 2) -> Iterator[str]:
    """A local Ray cluster (``ray.init(num_cpus=...)``, no dashboard, on 127.0.0.1) until the block ends."""
    import ray
    import ray.data

    paths = [str(HERE), str(HERE.parent / "src"), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    context = ray.init(
        num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}},
    )
    quiet()
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()


def quiet() -> None:
    """No progress bars from Ray Data (the logs say enough)."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False


