"""The APIs an OpenAI-compatible backend speaks to its servers (``models.openai(api=...)``), and
what an exchange (:mod:`._exchange`) needs of each: one exchange speaks both.

    chat        POST {base_url}/chat/completions   the wire: :mod:`._wire`       (the default)
    responses   POST {base_url}/responses          the wire: :mod:`._responses`

Each :class:`Api` names its operation (:class:`._ops.Chat`, :class:`._ops.Respond`), how a
request and the probe are built, how the answer is read, which parameters a server may refuse
and how its errors name them, and the parameters that carry the schema and ask for logprobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import _responses as responses
from . import _wire as wire
from ._caps import Known
from ._ops import Chat, Respond
from ._probe import probe_params


@dataclass(frozen=True)
class Api:
    """One API, as an exchange speaks it."""

    name: str  # "chat" or "responses"
    call: type[Chat]  # the operation that sends one request
    params: Callable[..., dict[str, Any]]  # (request, options, known, *, structured): one ballot's request
    probe: Callable[[str, Known], dict[str, Any] | None]  # (model, known): the response_format probe
    parse: Callable[[Any], wire.Parsed]  # the answer read
    answer: Callable[[Any], Any]  # its tokens as a chat choice holds them (``.logprobs.content``)
    rejected: Callable[[BaseException, Mapping[str, Any]], frozenset[str]]  # what a 400/422 refuses
    spell: Callable[[Mapping[str, Any]], dict[str, Any]]  # a chat request (a batch neighbour) in this API's words
    droppable: tuple[str, ...]  # the parameters a server may refuse
    format: str  # the parameter that carries the schema
    shown_format: str  # how a ballot's ``meta["structured"]`` names it
    logprobs: str  # the parameter that asks for logprobs
    path: str  # the endpoint under the base URL ("" for chat completions, see :meth:`endpoint`)

    def endpoint(self, base: str) -> str:
        """Where this API's calls go, as the capabilities and the ledger identity name it: the base
        URL itself for chat completions (as ever: keys and learned facts of chat runs stay
        the same), ``{base}/responses`` for the Responses API."""
        return f"{base.rstrip('/')}/{self.path}" if self.path else base


def _first_choice(response: Any) -> Any:
    return response.choices[0]


CHAT = Api("chat", Chat, wire.chat_params, probe_params, wire.parse, _first_choice, wire.rejected_params, dict, wire.DROPPABLE,
           "response_format", "response_format", "logprobs", "")
RESPONSES = Api("responses", Respond, responses.params, responses.probe_params, responses.parse, responses.answer,
                responses.rejected_params, responses.spelled, responses.DROPPABLE, "text", "text.format", "include", "responses")
APIS = {api.name: api for api in (CHAT, RESPONSES)}
