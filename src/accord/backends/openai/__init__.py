"""An OpenAI-compatible server as a backend (vLLM, SGLang, llama.cpp, Ollama, ``transformers serve``, OpenAI).

    _backend   OpenAIBackend: a thin adapter, what the core reads and the drivers
    _options   what models.openai takes: Margins, the client options, the checks
    _spread    spreading the ballots of one prompt: one at a time, with batch neighbours
    _referee   a reference deployment, asked as the server is asked
    _learning  the server's floor, learned against the reference
    _exchange  the exchange per ballot (no I/O): model, probe, chat completion, what is learned
    _api       the APIs an exchange speaks: chat completions, the Responses API
    _ops       the operations an exchange yields; _drivers: the sync and async clients send them
    _probe     the one question: does the server honour response_format?
    _wire      what goes over the wire and what comes back (no I/O)
    _responses the same for the Responses API (models.openai(api="responses"))
    _caps      what each server is known to do, per (server, model)
    _clients   the openai clients behind a backend
    _errors    the error boundary and credential scrubbing
"""
