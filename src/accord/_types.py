"""The backend boundary: what accord asks a model for (Request) and what comes back (Completion)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import _check

if TYPE_CHECKING:
    from .schema._schema import Schema

Message = dict[str, Any]
Prompt = str | list[Message]


@dataclass(frozen=True)
class Usage:
    """Tokens, seconds and cost; token counts are None when the backend does not report them.

    ``prompt_tokens`` counts every input token; of them, ``cached_tokens`` were read from the
    provider's prompt cache and ``cache_write_tokens`` were written to it (Anthropic bills a write
    at 1.25x the input price and a read at 0.1x; OpenAI caches long prefixes by itself and bills
    reads at a fraction). Both are None when the provider does not say.

    ``cost`` is what the calls cost, in the currency of the prices given (``Stabilizer(prices=
    accord.Prices({...}))``, or a backend that reports it); None when no price is known.

    ``neighbour_requests`` and ``neighbour_tokens``: the batch neighbours the calls went out with
    (filler requests a self-hosted server computes beside a ballot, ``models.openai(spread=True)``),
    and the tokens those that finished reported (a neighbour cancelled when its ballot was answered
    reports none). Not in the token counts above; ``requests`` counts every request accord sent.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    seconds: float = 0.0
    calls: int = 0
    cost: float | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    neighbour_requests: int = 0
    neighbour_tokens: int | None = None

    @property
    def requests(self) -> int:
        """Every request the calls sent: the calls and their batch neighbours."""
        return self.calls + self.neighbour_requests

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    def __add__(self, other: Usage) -> Usage:
        cost = self.cost if other.cost is None else other.cost if self.cost is None else self.cost + other.cost
        return Usage(
            _add(self.prompt_tokens, other.prompt_tokens),
            _add(self.completion_tokens, other.completion_tokens),
            self.seconds + other.seconds,
            self.calls + other.calls,
            cost,
            _add(self.cached_tokens, other.cached_tokens),
            _add(self.cache_write_tokens, other.cache_write_tokens),
            self.neighbour_requests + other.neighbour_requests,
            _add(self.neighbour_tokens, other.neighbour_tokens),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "seconds": round(self.seconds, 6),
            "calls": self.calls,
        }
        # absent rather than null: rows written before costs and caches read the same
        for name in ("cost", "cached_tokens", "cache_write_tokens", "neighbour_tokens"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.neighbour_requests:
            out["neighbour_requests"] = self.neighbour_requests
        return out


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass(frozen=True)
class Settings:
    """Generation settings. ``temperature=0`` is greedy; accord adds no sampling filters."""

    max_tokens: int | None = None
    temperature: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    top_p: float | None = None
    top_k: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", _check.stop_strings(self.stop))  # "END" is one stop string
        _check.settings(self)


@dataclass(frozen=True)
class Feedback:
    """Why the previous attempt was rejected, kept as data; rendered to text only in ``_prompt``."""

    kind: str  # "extract" | "validate"
    errors: tuple[dict[str, Any], ...]
    excerpt: str = ""


@dataclass(frozen=True)
class Request:
    """One model call.

    ``prompt`` is what the user passed (a string or a list of chat messages; with ``system=`` or
    ``examples=``, the message list that puts them first). ``input`` is what a
    text backend should send: the prompt, plus a short rendering of the schema when the backend
    cannot constrain its output, plus one feedback block on a retry. It never grows with attempts.
    ``prose``: the paths the run treats as prose (``schema/_roles``: ``summary``,
    ``items[].note``), where a local backend closes a string that loops instead of ending the call;
    ``labels``: the items of the lists voted as sets of labels (``tags[]``), closed the same way.
    """

    prompt: Prompt
    input: Prompt
    schema: Schema[Any]
    settings: Settings = field(default_factory=Settings)
    ballot: int = 0
    attempt: int = 1
    feedback: Feedback | None = None
    perturbation: Any = None
    deadline: float | None = None  # seconds the run's budget has left when the call starts
    prose: frozenset[str] = frozenset()
    labels: frozenset[str] = frozenset()

    @property
    def messages(self) -> list[Message]:
        """``input`` as a chat message list."""
        if isinstance(self.input, str):
            return [{"role": "user", "content": self.input}]
        return list(self.input)

    def with_settings(self, **changes: Any) -> Request:
        return replace(self, settings=replace(self.settings, **changes))


@dataclass(frozen=True)
class TokenSteps:
    """What an OpenAI exchange sent and got for one answer, handed to its backend to compare with
    a reference (``models.openai(..., reference=...)``): the chat ``messages`` the server read,
    per generated token the token and ``{alternative: logprob}`` (``steps``), and the prompt's
    token count the server reported (``prompt_tokens``). Never serialized."""

    messages: list[Message]
    steps: list[tuple[str, dict[str, float]]]
    prompt_tokens: int | None = None


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one Request.

    ``finish_reason`` is "stop", "length" (truncated by ``max_tokens``) or what the backend says.
    ``margins`` is, per generated token, the gap between the best and second-best allowed logit
    (or log-probability over HTTP), when the backend can see it. ``pieces``, beside them, is the
    text each of those steps wrote (``""`` for an end-of-sequence token), so a step can be placed
    in the text: the margin gate reads only the steps up to the end of the last decisive value
    (``vote/_prefix``). ``score`` is an optional model score (mean token log-probability) used
    to break ties. ``model``: the model that answered, as the server named it (prices fall back
    to it); ``engine``: who constrained the decoding (a grammar engine, "openai-compatible");
    ``system_fingerprint``: the server's, when it sends one. ``meta`` is the backend's record
    (the same three, compile times, server, perturbation, ...), JSON-serializable: kept on the
    ballot for the reader. A Completion that names one of the three only in its ``meta`` (as a
    model function could before these fields) has the field filled from there.
    ``steps`` is what an OpenAI exchange hands its backend to learn from (:class:`TokenSteps`),
    taken off before the Completion leaves the backend; never serialized. ``closed_loops``: the
    values closed where they ran out, within the call or after it (``read/_close``,
    ``backends/local/_loops``), each as ``{"path", "stretch", ...}``; a ballot's
    ``meta["closed_loops"]``. ``load``: the requests the deployment had in flight while this one
    ran, where the backend knows (the learned margin gate holds only at loads it saw); ``server``:
    which of the backend's servers answered (the learned noise is kept per server). Both also in ``meta``.
    """

    text: str
    finish_reason: str | None = "stop"
    usage: Usage = field(default_factory=Usage)
    margins: tuple[float, ...] | None = None
    score: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    pieces: tuple[str, ...] | None = None
    model: str | None = None
    engine: str | None = None
    system_fingerprint: str | None = None
    steps: TokenSteps | None = field(default=None, repr=False, compare=False)
    closed_loops: tuple[dict[str, Any], ...] = ()
    load: int | None = None
    server: str | None = None

    def __post_init__(self) -> None:
        if not self.meta:
            return
        for name in _SAID_IN_META:  # a Completion a model function built: these named in its meta, as documented before
            said = self.meta.get(name) if getattr(self, name) is None else None
            if isinstance(said, str):
                object.__setattr__(self, name, said)


_SAID_IN_META = ("model", "engine", "system_fingerprint")
