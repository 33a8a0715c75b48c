"""``accord serve``: a stabilizing OpenAI-compatible proxy, for programs in any language.

Any OpenAI client points its ``base_url`` at the proxy; a request with a ``response_format``
json_schema (or a ``tool_choice`` naming one function) gets accord's validated, voted answer as
an ordinary ``chat.completion``, with an ``accord`` summary beside it, a Responses API
request (``POST /v1/responses``, a ``text.format`` json_schema) as a ``response``, and an
Anthropic Messages API request (``POST /v1/messages``, an ``output_config.format`` json_schema
or a forced tool) as a ``message``; other requests pass through unchanged. The request's
``model`` may pick its upstreams (routing by model), which speak chat completions or Messages.
See docs/serve.md. The modules, by job:

    _command    the ``accord serve`` command line (imports the server only when it runs)
    _config     the settings: flags, config file, ACCORD_API_KEYS; checked once
    _routes     the models routed to (``--model``, ``[models]``), each checked once
    _server     uvicorn, and the drain on SIGTERM
    _app        the routes, and what every request goes through; _handling: the body, a client gone
    _auth       client keys
    _router     a request's ``model`` -> its Deployment (upstreams, default policy, caps)
    _translate  a chat request -> a Job (schema, tool, free-text vote, or pass-through)
    _responses_api  a Responses request -> the chat request it asks for, and its Job
    _messages_api   a Messages request -> the chat request it asks for, and its Job
    _policy     the ``accord`` request field, within the server's caps
    _decide     a Job -> its Stabilizer's Result (a ledger claims it first)
    _backend    the upstreams as one accord backend
    _upstream   the connection pool, the openai (anthropic) clients, the backends per model, the pass-through
    _wire       the HTTP transport under them: the concurrency bound, forwarded fields, what came back
    _responses  a Result -> chat.completion; _stream: -> chat.completion.chunk events
    _responses_out  -> a Responses ``response`` object; _responses_events: -> its stream events
    _messages_out   -> a Messages ``message``; _messages_events: -> its stream events (and a chat stream's, translated)
    _errors     OpenAI's (and Anthropic's) error shape, and a failed run's status
    _metrics    /metrics;  _observe: the server span and the log line

It uses accord's public API and the declared backend surface only; nothing in accord imports it.
"""

from __future__ import annotations

from typing import Any

from ._config import Config, build

__all__ = ["Config", "build", "create_app"]


def create_app(config: Config, *, tracer_provider: Any = None) -> Any:
    """The ASGI app (Starlette) of ``accord serve`` for ``config``; run it with any ASGI server."""
    from ._app import create_app as make

    return make(config, tracer_provider=tracer_provider)
