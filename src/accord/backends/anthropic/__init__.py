"""Claude's Messages API as a backend, on the official ``anthropic`` SDK (``accord.models.anthropic``).

    _backend   AnthropicBackend: what the core reads, and the drivers
    _exchange  the exchange per ballot (no I/O): model, probe, messages.create, what is learned
    _ops       the operations an exchange yields (the OpenAI backend's drivers send them)
    _wire      what goes over the wire and what comes back (no I/O)
    _turns     the prompt as a system prompt and user/assistant turns
    _cache     the shared prefix marked cacheable, when it is long enough
    _caps      how the schema travels to each server, per (server, model)
    _clients   the anthropic clients behind a backend
    _errors    the error boundary

Shared with the OpenAI backend, by import: the response format of a schema and its unwrapping
(``openai._wire``), the probe's verdict (``openai._probe``), spreading the ballots
(``openai._spread``), the drivers (``openai._drivers``) and credential scrubbing (``openai._errors``).
"""
