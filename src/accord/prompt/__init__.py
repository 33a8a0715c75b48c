"""Stage 1, prompt: what the model is sent.

    _prompt     the user's prompt plus the schema hint and the feedback of a retry
    _signature  the schema as a compact type signature, linear in the schema, with shorter fallbacks
    _examples   a system prompt and worked examples before the user's prompt
"""
