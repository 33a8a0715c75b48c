"""Any local causal LM through Hugging Face transformers, grammar-constrained with outlines.

``accord.models.transformers(path_or_model)``. The backend runs ``model.generate`` itself (or
``_jump``'s loop of the same steps), so it sees the logits at every step. Two logits processors
run after the model's own: the grammar engine's mask (see ``_constrain``), then
``_steps.StepRecorder``, which keeps for each generated token the gap between the best and the
second-best *allowed* logit (``Completion.margins``) and the chosen token's log-probability
(``Completion.score`` is their mean).

Greedy means greedy: with ``temperature=0`` nothing filters the logits but the grammar. The
model's own generation defaults (temperature, top-k, top-p, repetition penalty, ...) are set
aside and logged; ``top_p``/``top_k`` given with ``temperature=0`` are ignored with a warning.
Local files only (see ``_load``), ``trust_remote_code`` off unless asked. One call at a time per
instance.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import queue
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from ... import _check
from ..._errors import AccordError, BackendError, ConfigError
from ..._threads import aiterate, spawn
from ..._types import Completion, Prompt, Request, Settings, Usage
from ...vote._perturb import Perturbation
from .._base import Backend, Noise
from .._renamed import local_name
from ._calibrate import known_floors, noise_floors
from ._constrain import DEFAULT_COMPILE_TIMEOUT, Constrainer, Served, engine_chain
from ._deltas import TextDeltas
from ._forced import forced_logits, text_ids
from ._jump import generated
from ._layout import check_layout, own_layout
from ._load import call_settings, greedy_defaults, load, model_id_of, open_model, vocab_size, weights_hash
from ._loops import LOOP, Closing, LoopStop
from ._perturbed import perturbed
from ._steps import GrammarDeadEnd, StepRecorder, pieces_of, token_ids, until_end

log = logging.getLogger("accord")

DEFAULT_MAX_TOKENS = 256


class TransformersBackend(Backend):
    """A local causal LM; see the module docstring.

    ``model_or_path``: a local folder (or a hub id already in the local cache) or a loaded
    ``PreTrainedModel``. ``dtype``: "float32", "bfloat16", ... or "auto" (the checkpoint's); a
    loaded model keeps its own unless given. ``device``: default CUDA when available, else CPU.
    ``engine``: the grammar engine, or a list tried in order (see ``_constrain``).
    ``compile_timeout``: seconds a compile may take before the next engine is tried (None: no
    limit, compile in-process). ``threads``: torch threads during a call. ``stop_loops``: end a
    constrained call once its text ends in a loop (``finish_reason="loop"``, :mod:`._loops`), not
    at ``max_tokens`` (:meth:`unconstrained` writes the raw text as it comes). ``layout``: the JSON
    layout constrained decoding writes, "indent-N", "spaced" or "compact" (None, the default: the
    model's own, found by a probe once per model, :mod:`._layout`). ``name``: the model's identity,
    used as given (default: folder name and weights hash; ``fingerprint=``/``model_id=``: older, deprecated).
    """

    constrains = gives_margins = perturbable = True
    default_max_tokens: int
    sizes_max_tokens: bool
    tokenizer: Any
    conversion_seconds: float | None = None  # set by models.local when its load converted the GGUF

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
        max_tokens: int | None = None,
        stop_loops: bool = True,
        trust_remote_code: bool = False,
        layout: str | None = None,
        name: str | None = None,
        condition: Perturbation | None = None,
        model_id: str | None = None,
        fingerprint: str | None = None,
    ) -> None:
        name, label = local_name(name, fingerprint, model_id)
        self.engines = engine_chain(engine)  # fail on a bad engine name before loading anything
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
        self.threads = threads
        self.compile_timeout = compile_timeout
        self.default_max_tokens, self.sizes_max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens, max_tokens is None  # None: sized (schema._size)
        _check.boolean("", "stop_loops", stop_loops)
        self.stop_loops = stop_loops
        self._layout = check_layout(layout)
        start = time.perf_counter()
        self.model, self.tokenizer, self.path = open_model(model_or_path, tokenizer, dtype, device, trust_remote_code)
        self.load_seconds = time.perf_counter() - start
        self.trust_remote_code = trust_remote_code
        self.model.eval()
        self.model_id = label or model_id_of(self.model, self.path)
        self._fingerprint = name
        self.base_config, self.ignored_defaults = greedy_defaults(self.model.generation_config)
        if self.ignored_defaults:
            log.info("%s: generation defaults set aside (greedy means greedy): %s", self.model_id, self.ignored_defaults)
        self._lock = threading.Lock()
        self._constrainer: Constrainer | None = None
        self._constrainers: dict[str, Constrainer] = {}  # one engine each (constrainer_for)
        self._floors: dict[str, float] | None = None
        self._reference_floors: dict[str, float] | None = None
        self._noise: Noise | None = None
        self._token_ids: dict[int, dict[str, int]] = {}  # text -> id, for teacher forcing (_forced)
        self.closing = Closing(self.tokenizer)  # loops closed within a call (._loops)
        self.twins: dict[tuple[Any, bool], Any] = {}  # the model in other dtypes (see _perturbed.twin)
        self.condition = condition  # a deployment condition on every call (the audit's "busy server")

    # -- identity ---------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:  # hashed on first use
        if self._fingerprint is None:
            self._fingerprint = f"{self.model_id}@sha256:{weights_hash(self.model, self.path)[:16]}"
        return self._fingerprint

    @property
    def layout(self) -> str:
        """The JSON layout constrained decoding writes: ``layout=`` as given, else the model's own
        (its unconstrained answer to a probe, once per model, kept in the user cache; :mod:`._layout`)."""
        if self._layout is None:
            self._layout = own_layout(self)
        return self._layout

    @property
    def dtype(self) -> str:  # the loaded model's
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def device(self) -> str:
        return str(self.model.device)

    def load_copy(self, dtype: Any) -> Any:
        """The model loaded again from its files in ``dtype`` (None when loaded from an object)."""
        if self.path is None:
            return None
        model, _ = load(self.path, self.tokenizer, dtype, self.device, self.trust_remote_code)
        return model

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "model": self.model_id,
            "dtype": self.dtype,
            "device": self.device,
            "engines": list(self.engines),
            "layout": self._layout,  # None until the first constrained call finds it
            "path": str(self.path) if self.path else None,
        }

    def telemetry(self) -> dict[str, str | int]:
        return {"gen_ai.provider.name": "transformers", "gen_ai.request.model": self.model_id}

    def constrainer_for(self, engine: str | None) -> Constrainer:
        """The constrainer of this backend's engines, or of ``engine`` alone (made once)."""
        if engine is None or (engine,) == self.engines:
            return self.constrainer
        if engine not in self._constrainers:
            self._constrainers[engine] = Constrainer(self.tokenizer, vocab_size(self.model), engine=engine,
                                                     compile_timeout=self.compile_timeout)
        return self._constrainers[engine]

    @property
    def constrainer(self) -> Constrainer:
        if self._constrainer is None:
            self._constrainer = Constrainer(
                self.tokenizer, vocab_size(self.model), engine=self.engines, compile_timeout=self.compile_timeout
            )
        return self._constrainer

    # -- generation -------------------------------------------------------------------------------

    def generate(self, request: Request, streamer: Any = None, *, whitespace: str | None = None, engine: str | None = None) -> Completion:
        """One call. A reference deployment decodes as the server it stands for does:
        ``whitespace``, how that server writes JSON: "compact" (no whitespace between tokens,
        vLLM's ``disable_any_whitespace``) or "free" (any, the model's choice: vLLM's default);
        ``engine``, that grammar engine
        for this call (vLLM's xgrammar lets the model spell a constant in any tokens; llguidance
        forces one spelling). Without ``whitespace``, the model's own layout (:attr:`layout`)."""
        start = time.perf_counter()
        layout = whitespace if whitespace is not None else self.layout  # a probe on the first call (its own lock)
        with self._guard():
            served = self.constrainer_for(engine).processor(request.schema, layout)
            return self._generate(request.input, request.settings, served, start, request.perturbation, streamer=streamer,
                                  prose=request.prose, labels=request.labels, jump=whitespace is None)

    def stream(self, request: Request) -> Iterator[str | Completion]:
        """:meth:`generate`, its text handed out as it is decoded (``generate`` runs in a worker
        thread meanwhile), then the Completion."""
        deltas: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        streamer = TextDeltas(self.tokenizer, self.base_config.eos_token_id, deltas.put)

        def call() -> Completion:
            try:
                return self.generate(request, streamer)
            finally:
                deltas.put(None)

        done = spawn(call)
        while (delta := deltas.get()) is not None:
            yield delta
        yield done.result()

    async def astream(self, request: Request) -> AsyncIterator[str | Completion]:
        async for item in aiterate(lambda: self.stream(request)):
            yield item

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
        self, prompt: Prompt, settings: Settings, served: Served | None, start: float, perturbation: Perturbation | None = None,
        *, streamer: Any = None, prose: frozenset[str] = frozenset(), labels: frozenset[str] = frozenset(), jump: bool = False,
    ) -> Completion:
        inputs = self.encode(prompt)
        prompt_tokens = int(inputs["input_ids"].shape[1])
        max_new = settings.max_tokens or self.default_max_tokens
        config = self.generation_config(settings, max_new)
        recorder = StepRecorder(sampling=config.do_sample, ends=self.base_config.eos_token_id)
        perturbation = perturbation if perturbation is not None else self.condition
        stop = self.closing.stop(0, self.base_config.eos_token_id, prose, labels, max_new) if self.stop_loops and served else None
        processors = [served.processor, *self.closing.processors(stop), recorder] if served else [recorder]
        new, dtype = self._decode(inputs, settings, config, processors, perturbation, streamer=streamer, stop=stop, jump=jump)
        recorder.keep(new)
        written = len(new)
        closed, pieces = self.closing.trim(new, recorder, stop) if stop is not None and stop.closed else ((), None)
        text, finish = self._finish(new, max_new, settings.stop, written)
        pieces = pieces if closed and text == "".join(pieces or ()) else pieces_of(self.tokenizer, new, text)
        if stop is not None and stop.loop is not None and not (new and new[-1] in token_ids(self.base_config.eos_token_id)):
            finish = LOOP  # ended for a loop (._loops), not at max_tokens
        meta = self._meta(served, config, recorder, start=start, dtype=dtype, perturbation=perturbation)
        usage = Usage(prompt_tokens, written, time.perf_counter() - start, 1)
        return Completion(text, finish, usage, recorder.margins, recorder.score, meta, pieces,
                          model=self.model_id, engine=served.engine if served else None, closed_loops=closed)

    def _meta(self, served: Served | None, config: Any, recorder: StepRecorder, *, start: float, dtype: str,
              perturbation: Perturbation | None) -> dict[str, Any]:
        """What a Completion records about its call."""
        import torch

        meta: dict[str, Any] = {
            "engine": served.engine if served else None,
            "compile_seconds": round(served.compile_seconds, 6) if served else None,
            "model": self.model_id,
            "dtype": dtype,  # this ballot's compute
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
        return meta

    def _decode(self, inputs: Any, settings: Settings, config: Any, processors: list[Any], perturbation: Perturbation | None, *,
                streamer: Any, stop: LoopStop | None, jump: bool = False) -> tuple[list[int], str]:
        """One generation under its perturbation: the new token ids and the dtype it computed in.
        ``stop``: a constrained call's loop check (``._loops``), told where row 0's tokens start;
        ``jump``: forced text may be fed in without asking the model (``._jump``; unperturbed calls only)."""
        import torch

        ends = self.base_config.eos_token_id
        seed = settings.seed if config.do_sample else None
        with (
            perturbed(self, perturbation, inputs) as run,  # ballot i > 0: another numeric path
            call_settings(run.model, self.base_config, self.threads, seed),
            torch.inference_mode(),
        ):
            if stop is not None:
                stop.width = run.width
            out = generated(run.model, run.inputs, config, processors, stop=stop, streamer=streamer, tokenizer=self.tokenizer,
                            jump=jump and perturbation is None)
        new = until_end(out[0, run.width:].tolist(), ends)
        return new, str(run.model.dtype).removeprefix("torch.")

    def forced(self, prompt: Prompt, steps: Sequence[tuple[str, Any]]) -> list[tuple[str, dict[str, float]]]:
        """This model's logits along another deployment's tokens (``_forced``): per step, the
        token and ``{text: logit}`` of it and of each alternative listed beside it."""
        with self._guard():
            return forced_logits(self, prompt, steps, text_ids(self.tokenizer, self._token_ids))

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

    def prompt_tokens(self, prompt: Prompt) -> int:
        """How many tokens :meth:`encode` makes of the prompt (a server of these files counts the same)."""
        with self._guard():
            return int(self.encode(prompt)["input_ids"].shape[1])

    def generation_config(self, settings: Settings, max_new_tokens: int) -> Any:
        """Greedy (no filters at all) at ``temperature=0``; plain sampling, filters only if asked, above."""
        config = copy.deepcopy(self.base_config)
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

    def _finish(self, tokens: list[int], max_new: int, stop: Sequence[str] | None, written: int) -> tuple[str, str]:
        """The text and finish reason; ``written``: the tokens generated (a closed loop's trim
        took some out of ``tokens``)."""
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        ends = set(token_ids(self.base_config.eos_token_id))
        if tokens and tokens[-1] in ends:
            return text, "stop"
        cuts = [text.find(s) for s in stop or () if s and s in text]
        if cuts:
            return text[: min(cuts)], "stop"
        return text, "length" if written >= max_new else "stop"

    def __repr__(self) -> str:
        return f"TransformersBackend({self.model_id!r}, dtype={self.dtype}, device={self.device})"
