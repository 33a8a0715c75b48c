"""An OpenAI-compatible server as a backend (vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, OpenAI).

    _backend   OpenAIBackend: the exchange per ballot, driven by the sync and the async client
    _wire      what goes over the wire and what comes back (no I/O)
    _caps      what each server is known to do, per (server, model)
    _clients   the openai clients behind a backend
    _errors    the error boundary and credential scrubbing
"""
