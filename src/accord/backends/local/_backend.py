"""Any local causal LM through Hugging Face transformers, grammar-constrained with outlines.

``accord.models.transformers(path_or_model)``. The backend runs ``model.generate`` itself, so it
sees the logits at every step. Two logits processors run after the model's own: the grammar
engine's mask (see ``_constrain``), then :class:`StepRecorder`, which keeps for each generated
token the gap between the best and the second-best *allowed* logit (``Completion.margins``;
``inf`` where the grammar allowed one token only) and the chosen token's log-probability
(``Completion.score`` is their mean).

Greedy means greedy: with ``temperature=0`` nothing filters the logits but the grammar. The
model's own generation defaults (temperature, top-k, top-p, repetition penalty, ...) are set
aside and logged; ``top_p``/``top_k`` given with ``temperature=0`` are ignored with a warning.
Local files only, ``trust_remote_code`` off unless asked. One call at a time per instance.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import math
import os
import statistics
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..._errors import AccordError, BackendError, ConfigError, ModelNotInstalled
from ..._types import Completion, Prompt, Request, Settings, Usage
from .._base import Backend, Noise
from ._calibrate import known_floors, noise_floors
from ..._perturb import Perturbation
from ._perturbed import perturbed
from ._constrain import DEFAULT_COMPILE_TIMEOUT, Constrainer, Served, engine_chain

log = logging.getLogger("accord")

DEFAULT_MAX_TOKENS = 256
# What accord keeps of a model's generation_config: token ids and cache use. The rest (temperature,
# top_k, top_p, repetition_penalty, min_length, ...) would filter or bend the logits.
_KEPT_DEFAULTS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "use_cache")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


class GrammarDeadEnd(Exception):
    """The grammar allowed no token at all (an engine error): never decode from an all -inf row."""


class StepRecorder:
    """Logits processor placed last: records margins, chosen-token log-probs and step times."""

    def __init__(self, sampling: bool, ends: Any = ()) -> None:
        self.sampling = sampling
        self.ends = set(_as_list(ends))  # row 0 is done once it emits one (a batch may run on)
        self.done = False
        self.tops: list[Any] = []
        self.logprobs: list[float] = []
        self.times: list[float] = []
        self._previous: Any = None  # sampling: last step's log-softmax, read once the token is known

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.done or (self.tops and int(input_ids[0, -1]) in self.ends):
            self.done = True
            return scores
        self.times.append(time.perf_counter())
        row = scores[0]
        top = torch.topk(row, 2).values if row.shape[0] > 1 else torch.cat([row, row.new_full((1,), -math.inf)])
        best = float(top[0])
        if not math.isfinite(best):
            raise GrammarDeadEnd(f"the grammar allowed no token at step {len(self.tops) + 1}")
        norm = torch.logsumexp(row.float(), 0)
        if self._previous is not None:
            self.logprobs.append(float(self._previous[input_ids[0, -1]]))
        if self.sampling:
            self._previous = row.float() - norm
        else:
            self.logprobs.append(best - float(norm))
        self.tops.append(top)
        return scores

    def finish(self, last_token: int | None) -> None:
        if self._previous is not None and last_token is not None:
            self.logprobs.append(float(self._previous[last_token]))
            self._previous = None

    @property
    def margins(self) -> tuple[float, ...]:
        return tuple(float(a - b) if math.isfinite(b) else math.inf for a, b in (t.tolist() for t in self.tops))

    @property
    def seconds_per_token(self) -> float | None:
        steps = [b - a for a, b in zip(self.times, self.times[1:])]
        return statistics.median(steps) if steps else None


class TransformersBackend(Backend):
    """A local causal LM; see the module docstring.

    ``model_or_path``: a local folder (or a hub id already in the local cache) or a loaded
    ``PreTrainedModel``. ``dtype``: "float32", "bfloat16", ... or "auto" (the checkpoint's); a
    loaded model keeps its own unless given. ``device``: default CUDA when available, else CPU.
    ``engine``: the grammar engine, or a list tried in order (see ``_constrain``).
    ``compile_timeout``: seconds a compile may take before the next engine is tried (None: no
    limit, compile in-process). ``threads``: torch threads during a call.
    """

    constrains = True
    gives_margins = True
    perturbable = True

    def __init__(
        self,
        model_or_path: Any,
        tokenizer: Any = None,
        *,
        dtype: Any = None,
        device: str | None = None,
        engine: str | Sequence[str] | None = None,
        threads: int | None = None,
        compile_timeout: float | None = DEFAULT_COMPILE_TIMEOUT,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        trust_remote_code: bool = False,
        model_id: str | None = None,
        fingerprint: str | None = None,
        condition: Perturbation | None = None,
    ) -> None:
        self.engines = engine_chain(engine)  # fail on a bad engine name before loading anything
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
        self.threads = threads
        self.compile_timeout = compile_timeout
        self.default_max_tokens = max_tokens
        start = time.perf_counter()
        self.path: Path | None = None
        if isinstance(model_or_path, (str, os.PathLike)):
            self.model, self.tokenizer = _load(model_or_path, tokenizer, dtype, device, trust_remote_code)
            local = Path(model_or_path).expanduser()
            self.path = local.resolve() if local.is_dir() else None
        else:
            self.model = _place(model_or_path, dtype, device)
            self.tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(
                model_or_path.name_or_path, trust_remote_code)
        self.load_seconds = time.perf_counter() - start
        self.trust_remote_code = trust_remote_code
        self.model.eval()
        self.model_id = model_id or _model_id(self.model, self.path)
        self._fingerprint = fingerprint
        self._base_config, self.ignored_defaults = _greedy_defaults(self.model.generation_config)
        if self.ignored_defaults:
            log.info("%s: generation defaults set aside (greedy means greedy): %s", self.model_id, self.ignored_defaults)
        self._lock = threading.Lock()
        self._constrainer: Constrainer | None = None
        self._floors: dict[str, float] | None = None
        self._reference_floors: dict[str, float] | None = None
        self._noise: Noise | None = None
        self.condition = condition  # a deployment condition on every call (the audit's "busy server")

    # -- identity ---------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:  # type: ignore[override]
        if self._fingerprint is None:
            self._fingerprint = f"{self.model_id}@sha256:{_weights_hash(self.model, self.path)[:16]}"
        return self._fingerprint

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def device(self) -> str:
        return str(self.model.device)

    def load_copy(self, dtype: Any) -> Any:
        """The model loaded again from its files in ``dtype`` (None when loaded from an object)."""
        if self.path is None:
            return None
        model, _ = _load(self.path, self.tokenizer, dtype, self.device, self.trust_remote_code)
        return model

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "model": self.model_id,
            "dtype": self.dtype,
            "device": self.device,
            "engines": list(self.engines),
            "path": str(self.path) if self.path else None,
        }

    @property
    def constrainer(self) -> Constrainer:
        if self._constrainer is None:
            self._constrainer = Constrainer(
                self.tokenizer, _vocab_size(self.model), engine=self.engines, compile_timeout=self.compile_timeout
            )
        return self._constrainer

    # -- generation -------------------------------------------------------------------------------

    def generate(self, request: Request) -> Completion:
        start = time.perf_counter()
        with self._guard():
            served = self.constrainer.processor(request.schema)
            return self._generate(request.input, request.settings, served, start, request.perturbation)

    def unconstrained(
        self, prompt: Prompt, settings: Settings | None = None, perturbation: Perturbation | None = None
    ) -> Completion:
        """What the model writes with no grammar at all (greedy by default): the raw text."""
        start = time.perf_counter()
        with self._guard():
            return self._generate(prompt, settings or Settings(), None, start, perturbation)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """One call at a time; errors leave as accord errors."""
        with self._lock:
            try:
                yield
            except AccordError:
                raise
            except GrammarDeadEnd as exc:
                raise BackendError(f"{self.model_id}: {exc}") from exc
            except Exception as exc:
                raise BackendError(f"{self.model_id}: generation failed: {type(exc).__name__}: {exc}") from exc

    def _generate(
        self, prompt: Prompt, settings: Settings, served: Served | None, start: float, perturbation: Perturbation | None = None
    ) -> Completion:
        import torch
        from transformers import LogitsProcessorList

        inputs = self.encode(prompt)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        max_new = settings.max_tokens or self.default_max_tokens
        config = self.generation_config(settings, max_new)
        recorder = StepRecorder(sampling=config.do_sample, ends=self._base_config.eos_token_id)
        processors = LogitsProcessorList(([served.processor] if served else []) + [recorder])
        perturbation = perturbation if perturbation is not None else self.condition
        with perturbed(self, perturbation, inputs) as run:  # ballot i > 0: another numeric path
            with _settings(run.model, self._base_config, self.threads, settings.seed if config.do_sample else None):
                with torch.inference_mode():
                    out = run.model.generate(
                        **run.inputs, generation_config=config, logits_processor=processors,
                        tokenizer=self.tokenizer if config.stop_strings else None,
                    )
        new = _until_end(out[0, run.width:].tolist(), self._base_config.eos_token_id)
        del recorder.tops[len(new):], recorder.logprobs[len(new):]  # a batch runs on after our row ends
        recorder.finish(new[-1] if new else None)
        text, finish = self._finish(new, max_new, settings.stop)
        logprobs = recorder.logprobs
        meta: dict[str, Any] = {
            "engine": served.engine if served else None,
            "compile_seconds": round(served.compile_seconds, 6) if served else None,
            "model": self.model_id,
            "dtype": str(run.model.dtype).removeprefix("torch."),  # this ballot's compute
            "device": self.device,
            "threads": torch.get_num_threads() if self.threads is None else self.threads,
            "decoding": "sampling" if config.do_sample else "greedy",
            "prefill_seconds": round(recorder.times[0] - start, 6) if recorder.times else None,
            "seconds_per_token": recorder.seconds_per_token,
        }
        if served and served.passed_over:
            meta["passed_over"] = served.passed_over
        if perturbation is not None:
            meta["perturbation"] = perturbation.describe()
        return Completion(
            text=text,
            finish_reason=finish,
            usage=Usage(prompt_tokens, len(new), time.perf_counter() - start, 1),
            margins=recorder.margins,
            score=sum(logprobs) / len(logprobs) if logprobs else None,
            meta=meta,
        )

    def noise(self) -> Noise:
        """This deployment's measured floors (see :meth:`noise_floors`), in the form the core reads."""
        if self._noise is None:
            self._noise = Noise.measured(self.dtype, self.noise_floors(), self.reference_floor())
        return self._noise

    def noise_floor(self) -> float | None:
        """The largest logit-gap change the perturbations cause, for this model and dtype.

        Shipped for the embedded model (``accord calibrate`` regenerates it); for other models
        measured on first use and cached in the user cache, by fingerprint and dtype.
        """
        floors = self.noise_floors()
        return max(floors.values()) if floors else None

    def noise_floors(self) -> dict[str, float]:
        """``{perturbation kind: floor}`` for this model and dtype (see :meth:`noise_floor`)."""
        if self._floors is None:
            self._floors = noise_floors(self)
        return dict(self._floors)

    def reference_floor(self) -> float | None:
        """The largest floor of the perturbations other than precision, at float32: what a
        float32 ballot must clear to predict the other float32 ballots. None when not known (no
        calibration is started for it)."""
        if self._reference_floors is None:  # looked up once: every gated run asks
            found = self.noise_floors() if self.dtype == "float32" else known_floors(self.fingerprint, "float32")
            self._reference_floors = found or {}
        others = [v for k, v in self._reference_floors.items() if k != "precision"]
        return max(others) if others else None

    def encode(self, prompt: Prompt) -> dict[str, Any]:
        """The prompt through the model's chat template (a string is one user message)."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if getattr(self.tokenizer, "chat_template", None):
            inputs = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        else:
            text = prompt if isinstance(prompt, str) else "\n\n".join(str(m.get("content", "")) for m in messages)
            inputs = self.tokenizer(text, return_tensors="pt")
        return {k: v.to(self.model.device) for k, v in inputs.items() if k in ("input_ids", "attention_mask")}

    def generation_config(self, settings: Settings, max_new_tokens: int) -> Any:
        """Greedy (no filters at all) at ``temperature=0``; plain sampling, filters only if asked, above."""
        config = copy.deepcopy(self._base_config)
        config.max_new_tokens = max_new_tokens
        config.num_beams = 1
        config.do_sample = settings.temperature > 0
        if config.do_sample:
            config.temperature = settings.temperature
            config.top_k = settings.top_k if settings.top_k is not None else 0
            config.top_p = settings.top_p if settings.top_p is not None else 1.0
        elif settings.top_k is not None or settings.top_p is not None:
            warnings.warn(
                "accord decodes greedily at temperature=0: top_k/top_p are ignored (no filter runs under greedy)",
                UserWarning,
                stacklevel=4,
            )
        config.stop_strings = list(settings.stop) if settings.stop else None
        return config

    def _finish(self, tokens: list[int], max_new: int, stop: Sequence[str] | None) -> tuple[str, str]:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        ends = set(_as_list(self._base_config.eos_token_id))
        if tokens and tokens[-1] in ends:
            return text, "stop"
        cuts = [text.find(s) for s in stop or () if s and s in text]
        if cuts:
            return text[: min(cuts)], "stop"
        return text, "length" if len(tokens) >= max_new else "stop"

    def __repr__(self) -> str:
        return f"TransformersBackend({self.model_id!r}, dtype={self.dtype}, device={self.device})"


# -- loading ------------------------------------------------------------------------------------


def _load(path: Any, tokenizer: Any, dtype: Any, device: str | None, trust_remote_code: bool) -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM

    try:
        with quiet_transformers():
            model = AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, trust_remote_code=trust_remote_code, dtype=_dtype(dtype) or "auto",
            )
    except (OSError, ValueError) as exc:
        raise ModelNotInstalled(f"cannot load a causal LM from local files at {str(path)!r}: {exc}") from exc
    if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = _load_tokenizer(tokenizer or path, trust_remote_code)
    return _place(model, None, device), tokenizer


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off while loading (accord reports its own timings)."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _load_tokenizer(path: Any, trust_remote_code: bool) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelNotInstalled(f"cannot load a tokenizer from local files at {str(path)!r}: {exc}") from exc


def _dtype(dtype: Any) -> Any:
    if dtype is None or dtype == "auto":
        return None
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise ConfigError(f"unknown dtype {dtype!r}: use 'float32', 'bfloat16', 'float16' or a torch.dtype")
    return value


def _place(model: Any, dtype: Any, device: str | None) -> Any:
    import torch

    if device is None and getattr(model, "hf_device_map", None) is None and model.device.type == "cpu":
        device = "cuda" if torch.cuda.is_available() else None
    wanted = _dtype(dtype)
    if wanted is not None or device is not None:
        model = model.to(**{k: v for k, v in (("dtype", wanted), ("device", device)) if v is not None})
    return model


def _greedy_defaults(config: Any) -> tuple[Any, dict[str, Any]]:
    """(the model's generation config reduced to token ids, the settings set aside)."""
    from transformers import GenerationConfig

    if config is None:
        return GenerationConfig(), {}
    kept = {k: getattr(config, k, None) for k in _KEPT_DEFAULTS if getattr(config, k, None) is not None}
    base = GenerationConfig(**kept)
    if base.pad_token_id is None and base.eos_token_id is not None:
        base.pad_token_id = _as_list(base.eos_token_id)[0]
    ignored = {
        k: v for k, v in config.to_diff_dict().items()
        if k not in _KEPT_DEFAULTS and not k.startswith("_") and k != "transformers_version"
        and k not in ("output_attentions", "output_hidden_states", "return_dict_in_generate")
    }
    return base, ignored


@contextlib.contextmanager
def _settings(model: Any, base: Any, threads: int | None, seed: int | None) -> Iterator[None]:
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


def _until_end(tokens: list[int], eos: Any) -> list[int]:
    """The tokens up to and including the first end-of-sequence (a batch pads after it)."""
    ends = set(_as_list(eos))
    for i, token in enumerate(tokens):
        if token in ends:
            return tokens[: i + 1]
    return tokens


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _vocab_size(model: Any) -> int:
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    return int(weight.shape[0]) if weight is not None else int(model.config.vocab_size)


def _model_id(model: Any, path: Path | None) -> str:
    name = str(getattr(model, "name_or_path", "") or "")
    if path is not None or not name:
        return (path.name if path is not None else None) or type(model).__name__
    return Path(name).name if Path(name).is_dir() else name


_HASHES: dict[tuple[str, int, int], str] = {}


def _weights_hash(model: Any, path: Path | None) -> str:
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
