"""Loading a local causal LM: from local files only, in a dtype, on a device, with greedy defaults.

    open_model(model_or_path, tokenizer, dtype, device, trust_remote_code) -> (model, tokenizer, folder)
    greedy_defaults(generation_config) -> (the config accord keeps, the settings it sets aside)
    weights_hash(model, folder), file_sha256(file)   what the fingerprint is made of
    vocab_size(model)                                 the width of a grammar mask
    model_id_of(model, folder)                        the model's name, when none is given
    quiet_transformers()                              progress bars off while loading

Nothing here reaches a model hub: ``HF_HUB_OFFLINE=1`` is set before transformers is imported and
every ``from_pretrained`` passes ``local_files_only=True``; ``trust_remote_code`` is the caller's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..._errors import ConfigError, ModelNotInstalled

# What accord keeps of a model's generation_config: token ids and cache use. The rest (temperature,
# top_k, top_p, repetition_penalty, min_length, ...) would filter or bend the logits.
KEPT_DEFAULTS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "use_cache")
_NOT_SETTINGS = ("output_attentions", "output_hidden_states", "return_dict_in_generate", "transformers_version")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def open_model(
    model_or_path: Any, tokenizer: Any, dtype: Any, device: str | None, trust_remote_code: bool
) -> tuple[Any, Any, Path | None]:
    """(the model placed in ``dtype`` on ``device``, its tokenizer, the local folder it came from).

    ``model_or_path``: a local folder (or a hub id already in the local cache) or a loaded model,
    which keeps its own dtype unless one is given; the folder is None for a hub id or an object.
    """
    torch_dtype(dtype)  # an unknown dtype is a ConfigError before anything is loaded
    if isinstance(model_or_path, (str, os.PathLike)):
        model, tokenizer = load(model_or_path, tokenizer, dtype, device, trust_remote_code)
        local = Path(model_or_path).expanduser()
        return model, tokenizer, local.resolve() if local.is_dir() else None
    model = place(model_or_path, dtype, device)
    if tokenizer is None:
        tokenizer = load_tokenizer(model_or_path.name_or_path, trust_remote_code)
    return model, tokenizer, None


def load(path: Any, tokenizer: Any, dtype: Any, device: str | None, trust_remote_code: bool) -> tuple[Any, Any]:
    """(the model from the files at ``path``, the tokenizer given or loaded from ``tokenizer`` or ``path``)."""
    written = os.fspath(path)
    if (os.path.isabs(written) or written.startswith(("./", "../", "~"))) and not Path(written).expanduser().exists():
        raise ModelNotInstalled(f"no model at {written!r}: the path does not exist (a folder with config.json and the weights)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM

    wanted = torch_dtype(dtype) or "auto"  # outside the try: an unknown dtype is a ConfigError, not a missing model
    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=trust_remote_code, dtype=wanted,
            )
    except (OSError, ValueError) as exc:
        raise ModelNotInstalled(f"cannot load a causal LM from local files at {str(path)!r}: {exc}") from exc
    if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer or path, trust_remote_code)
    return place(model, None, device), tokenizer


def load_tokenizer(path: Any, trust_remote_code: bool) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelNotInstalled(f"cannot load a tokenizer from local files at {str(path)!r}: {exc}") from exc


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off while loading (accord reports its own timings)."""
    from transformers.utils import logging as hf_logging

    disable: Callable[[], None] = hf_logging.disable_progress_bar  # unannotated in transformers
    enable: Callable[[], None] = hf_logging.enable_progress_bar
    was_on = hf_logging.is_progress_bar_enabled()
    disable()
    try:
        yield
    finally:
        if was_on:
            enable()


def torch_dtype(dtype: Any) -> Any:
    """``dtype`` ("float32", "torch.bfloat16", a torch.dtype) as a torch.dtype; None for None or "auto"."""
    if dtype is None or dtype == "auto":
        return None
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"unknown dtype {dtype!r}: use 'float32', 'bfloat16', 'float16' or a torch.dtype")
    return value


def place(model: Any, dtype: Any, device: str | None) -> Any:
    """The model in ``dtype`` on ``device`` (default: CUDA when available for a model on the CPU)."""
    import torch

    if device is None and getattr(model, "hf_device_map", None) is None and model.device.type == "cpu":
        device = "cuda" if torch.cuda.is_available() else None
    wanted = torch_dtype(dtype)
    if wanted is not None or device is not None:
        model = model.to(**{k: v for k, v in (("dtype", wanted), ("device", device)) if v is not None})
    return model


def greedy_defaults(config: Any) -> tuple[Any, dict[str, Any]]:
    """(the model's generation config reduced to token ids, the settings set aside)."""
    from transformers import GenerationConfig

    new_config: Callable[..., Any] = GenerationConfig  # unannotated in transformers
    if config is None:
        return new_config(), {}
    kept = {k: getattr(config, k, None) for k in KEPT_DEFAULTS if getattr(config, k, None) is not None}
    base = new_config(**kept)
    if base.pad_token_id is None and base.eos_token_id is not None:
        eos = base.eos_token_id
        base.pad_token_id = eos[0] if isinstance(eos, (list, tuple)) else eos
    ignored = {
        k: v for k, v in config.to_diff_dict().items()
        if k not in KEPT_DEFAULTS and k not in _NOT_SETTINGS and not k.startswith("_")
    }
    return base, ignored


def vocab_size(model: Any) -> int:
    """The rows of the output head (what a grammar mask must cover), else the config's vocab size."""
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None else int(model.config.vocab_size)


def model_id_of(model: Any, path: Path | None) -> str:
    """The folder's name, else the model's ``name_or_path`` (its last part when a folder), else its class name."""
    name = str(getattr(model, "name_or_path", "") or "")
    if path is not None or not name:
        return (path.name if path is not None else None) or type(model).__name__
    return Path(name).name if Path(name).is_dir() else name


def weights_hash(model: Any, path: Path | None) -> str:
    """sha256 of the weights files in ``path`` (or, for an in-memory model, of its tensors)."""
    digest = hashlib.sha256()
    files = sorted(p for p in path.iterdir() if p.suffix in _WEIGHT_SUFFIXES) if path is not None else []
    if not files:
        import torch

        for name, tensor in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        return digest.hexdigest()
    for file in files:
        digest.update(file.name.encode())
        digest.update(file_sha256(file).encode())
    return digest.hexdigest()


_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(file: Path) -> str:
    """sha256 of a file, memoized per (path, size, mtime) in this process."""
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


@contextlib.contextmanager
def call_settings(model: Any, base: Any, threads: int | None, seed: int | None) -> Iterator[None]:
    """For one call: the model's generation defaults swapped for ``base``, threads, a seeded RNG."""
    import torch

    saved, old_threads = model.generation_config, torch.get_num_threads()
    model.generation_config = base
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        if seed is None:
            yield
        else:
            devices = [model.device] if model.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                yield
    finally:
        model.generation_config = saved
        if threads is not None:
            torch.set_num_threads(old_threads)


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """accord's user cache: ``cache_dir``, else ``$ACCORD_CACHE_DIR``, else platformdirs' (converted
    models, found layouts)."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("ACCORD_CACHE_DIR"):
        return Path(os.environ["ACCORD_CACHE_DIR"])
    import platformdirs

    return Path(platformdirs.user_cache_dir("accord"))
