"""A fake OpenAI-compatible upstream for the proxy's tests and benchmark: a real HTTP server
(Starlette on uvicorn, its own process), whose answers a test scripts from the prompt itself.

    python tests/fake_upstream.py --port 8123

The last user message may end in ``FAKE:{json}``, a directive:

    say         texts to answer in turn: call i of this prompt answers say[i % len(say)]
                (messy on purpose: fences, prose, single quotes, "4" for 4, a wrong value now
                and then, so a test sees the vote decide, not a pass-through)
    delay       seconds to wait before answering (a slow upstream; a batch to kill mid-way)
    status      an HTTP status to answer instead (429, 500, ...), for the first ``times`` calls
                (default: every call), with ``retry_after`` as its Retry-After
    gap         the logprob gap between the chosen token and the next (default 8.0)
    tool_call   answer with this tool call ({"name", "arguments"}) instead of content
    chunk_delay seconds between the chunks of a streamed answer
    loop        a stretch the answer repeats after ``prefix`` (default ""): streamed, forever (at
                most ``loop_seconds``, default 60) until the caller closes the stream; whole,
                repeated to ``max_tokens`` (4 characters a token) with ``finish_reason="length"``

Started with ``--responses`` it also serves ``POST /v1/responses`` (as vLLM and OpenAI do): a
text answer in the Responses shape (``Hello from the fake's /responses.``, or ``say[0]``),
streamed when asked; without it that route is a 404, as on servers that have only chat completions.
Started with ``--messages`` it also serves Anthropic's ``POST /v1/messages`` (as vLLM does): the
same directives (``say``, ``status``, ``retry_after``) and answers (``output_config.format``'s
or a forced tool's schema: its smallest instance), as a ``tool_use`` block for a forced tool when
the text is a JSON object, streamed when asked; a prefix marked ``cache_control`` is billed as a
cache write on its prompt's first call and a cache read after.

Without a directive it answers at once: accord's ``response_format`` probe with
``{"probe": 1}``, a batch neighbour (accord's filler text) with a short text, a request with a
``json_schema`` with the smallest instance of it, anything else with a greeting. It streams
when asked (``stream: true``), and returns logprobs when asked.

``GET /_stats`` says what it was asked (calls per prompt, probes, neighbours, the most calls in
flight at once, the Authorization headers seen, the tokens billed, the last body per prompt, the
``/v1/responses`` requests it had no route for, and per prompt the looping streams the caller
closed: chunks sent and seconds open);
``POST /_reset`` forgets it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

FILLER_START = ("The committee met again", "Rain had fallen all night", "Our records show that")  # accord's batch neighbours
MODEL = "fake-model"


class Book:
    """What the fake was asked."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls: dict[str, int] = {}
        self.answered: dict[str, int] = {}  # calls of each prompt answered 2xx
        self.abandoned: dict[str, int] = {}  # calls of each prompt whose caller left while it waited
        self.billed: dict[str, dict[str, int]] = {}  # tokens each prompt's calls were billed
        self.bodies: dict[str, Any] = {}
        self.probes = 0
        self.neighbours = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.auth: set[str] = set()
        self.hosts: dict[str, int] = {}  # Host headers of the prompts' calls (several upstream URLs, one fake)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.started = 0
        self.finished = 0
        self.no_responses = 0  # POST /v1/responses answered 404 (started without --responses)
        self.loops_closed: dict[str, list[dict[str, float]]] = {}  # looping streams the caller closed

    def stats(self) -> dict[str, Any]:
        return {"calls": self.calls, "answered": self.answered, "abandoned": self.abandoned, "bodies": self.bodies, "probes": self.probes, "neighbours": self.neighbours,
                "max_in_flight": self.max_in_flight, "in_flight": self.in_flight, "auth": sorted(self.auth), "hosts": self.hosts,
                "billed": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}, "billed_by_prompt": self.billed,
                "started": self.started, "finished": self.finished, "no_responses": self.no_responses,
                "loops_closed": self.loops_closed}  # fmt: skip


BOOK = Book()
RESPONSES = False  # whether POST /v1/responses is served (--responses)
MESSAGES = False  # whether POST /v1/messages is served (--messages)


def prompt_of(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The prompt's key and its directive: the last user message with ``FAKE:``, up to the end of
    its directive (a schema hint or a feedback block accord adds after it does not change the
    key), else the last user message."""
    texts = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    for text in reversed(texts):
        if "FAKE:" in text:
            head, raw = text.rsplit("FAKE:", 1)
            try:
                found, end = json.JSONDecoder().raw_decode(raw.lstrip())
            except ValueError:
                return text, {}
            skipped = len(raw) - len(raw.lstrip())
            return head + "FAKE:" + raw[: skipped + end], found if isinstance(found, dict) else {}
    return (texts[-1] if texts else ""), {}


def instance(schema: Any, root: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """The smallest value of a JSON Schema (enough for the schemas the tests send)."""
    root = root if root is not None else schema
    if not isinstance(schema, dict) or depth > 20:
        return None
    if "$ref" in schema:
        ref = schema["$ref"].split("/")[-1]
        return instance((root.get("$defs") or root.get("definitions") or {}).get(ref, {}), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return instance(schema[key][0], root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: instance(sub, root, depth + 1) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [instance(schema.get("items", {}), root, depth + 1)] * max(1, schema.get("minItems", 1))
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "x" * max(1, int(schema.get("minLength", 1)))


def answer_text(body: dict[str, Any], said: dict[str, Any], turn: int) -> str:
    fmt = body.get("response_format") or {}
    spec = fmt.get("json_schema") or {}
    if spec.get("name") == "accord_probe":
        return '{"probe": 1}'
    if said.get("say"):
        texts = said["say"]
        return str(texts[turn % len(texts)])
    if spec.get("schema") is not None:
        return json.dumps(instance(spec["schema"]))
    return "Hello from the fake upstream."


def logprobs_of(text: str, gap: float, top: int) -> dict[str, Any]:
    tokens = [text[i : i + 4] for i in range(0, len(text), 4)] or [""]
    content = []
    for token in tokens:
        alternatives = [{"token": token, "logprob": -0.01, "bytes": None}]
        alternatives += [{"token": f"~{i}", "logprob": -0.01 - gap - i, "bytes": None} for i in range(max(1, top - 1))]
        content.append({"token": token, "logprob": -0.01, "bytes": None, "top_logprobs": alternatives[: max(top, 2)]})
    return {"content": content}


async def chat(request: Request) -> Response:
    body = await request.json()
    messages = body.get("messages") or []
    text, said = prompt_of(messages)
    if request.headers.get("authorization"):
        BOOK.auth.add(request.headers["authorization"])
    fmt_name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    BOOK.started += 1
    if fmt_name == "accord_probe":
        BOOK.probes += 1
        turn = 0
    elif text.startswith(FILLER_START):
        BOOK.neighbours += 1
        turn = 0
    else:
        turn = BOOK.calls.get(text, 0)
        BOOK.calls[text] = turn + 1
        host = request.headers.get("host", "")
        BOOK.hosts[host] = BOOK.hosts.get(host, 0) + 1
        BOOK.bodies[text] = body
    said = said if fmt_name != "accord_probe" else {}
    BOOK.in_flight += 1
    BOOK.max_in_flight = max(BOOK.max_in_flight, BOOK.in_flight)
    try:
        if said.get("delay") and not await _waited(request, float(said["delay"])):
            BOOK.abandoned[text] = BOOK.abandoned.get(text, 0) + 1  # the caller left: the call is given up
            return Response(status_code=499)
        status = said.get("status")
        if status and turn < int(said.get("times", 10**9)):
            headers = {"retry-after": str(said["retry_after"])} if "retry_after" in said else {}
            error = {"error": {"message": f"fake upstream says {status}", "type": "fake_error", "param": None, "code": None}}
            return JSONResponse(error, status_code=int(status), headers=headers)
        if said.get("loop") and body.get("stream"):
            return StreamingResponse(_looping(body, said, text), media_type="text/event-stream")
        content = answer_text(body, said, turn)
        if said.get("loop"):
            room = 4 * int(body.get("max_completion_tokens") or body.get("max_tokens") or 256)
            content = (str(said.get("prefix", "")) + str(said["loop"]) * room)[:room]
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 1
        completion_tokens = len(content) // 4 + 1
        BOOK.prompt_tokens += prompt_tokens
        if fmt_name != "accord_probe" and not text.startswith(FILLER_START):
            BOOK.answered[text] = BOOK.answered.get(text, 0) + 1
            billed = BOOK.billed.setdefault(text, {"prompt_tokens": 0, "completion_tokens": 0})
            billed["prompt_tokens"] += prompt_tokens
            billed["completion_tokens"] += completion_tokens
        BOOK.completion_tokens += completion_tokens
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
        logprobs = logprobs_of(content, float(said.get("gap", 8.0)), int(body.get("top_logprobs") or 2)) if body.get("logprobs") else None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        finish = "length" if said.get("loop") else "stop"
        if said.get("tool_call"):
            call = said["tool_call"]
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_fake", "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]}
            finish = "tool_calls"
        if body.get("stream"):
            return StreamingResponse(_sse(body, message, finish, usage, float(said.get("chunk_delay", 0))), media_type="text/event-stream")
        return JSONResponse({
            "id": f"chatcmpl-fake{BOOK.started}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model") or MODEL, "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}], "usage": usage,
        })  # fmt: skip
    finally:
        BOOK.in_flight -= 1
        BOOK.finished += 1


async def _waited(request: Request, seconds: float) -> bool:
    """Wait ``seconds``; False as soon as the caller disconnects."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if await request.is_disconnected():
            return False
        await asyncio.sleep(min(0.02, max(0.0, end - time.monotonic())))
    return True


async def _sse(body: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, int], delay: float = 0.0) -> Any:
    base = {"id": "chatcmpl-fakestream", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model") or MODEL, "system_fingerprint": "fp_fake"}  # fmt: skip

    def event(delta: dict[str, Any], reason: str | None = None) -> bytes:
        return b"data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}).encode() + b"\n\n"

    yield event({"role": "assistant", "content": ""})
    content = message.get("content") or ""
    for i in range(0, len(content), 5):
        yield event({"content": content[i : i + 5]})
        await asyncio.sleep(delay)
    if message.get("tool_calls"):
        yield event({"tool_calls": [{"index": 0, **message["tool_calls"][0]}]})
    yield event({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield b"data: " + json.dumps({**base, "choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


async def responses(request: Request) -> Response:
    """``POST /v1/responses``, served only with ``--responses`` (else the 404 of a server without it)."""
    if not RESPONSES:
        BOOK.no_responses += 1
        return Response("Not Found", status_code=404, media_type="text/plain")
    body = await request.json()
    given = body.get("input")
    text = given if isinstance(given, str) else json.dumps(given)
    key, said = prompt_of([{"role": "user", "content": text}])
    BOOK.calls[key] = BOOK.calls.get(key, 0) + 1
    BOOK.bodies[key] = body
    if request.headers.get("authorization"):
        BOOK.auth.add(request.headers["authorization"])
    content = str((said.get("say") or ["Hello from the fake's /responses."])[0])
    usage = {"input_tokens": len(text) // 4 + 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": len(content) // 4 + 1,
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    item = {"id": "msg_fake", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}]}  # fmt: skip
    answer = {"id": "resp_fake", "object": "response", "created_at": int(time.time()), "status": "completed", "model": body.get("model"),
              "output": [item], "usage": usage, "tools": [], "tool_choice": "auto", "parallel_tool_calls": True}  # fmt: skip
    if not body.get("stream"):
        return JSONResponse(answer)

    async def events() -> Any:
        for n, (kind, fields) in enumerate([("response.created", {"response": {**answer, "status": "in_progress", "output": []}}),
                                            ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
                                            ("response.output_text.delta", {"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": content}),
                                            ("response.completed", {"response": answer})]):  # fmt: skip
            yield f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, **fields})}\n\n".encode()

    return StreamingResponse(events(), media_type="text/event-stream")


async def messages(request: Request) -> Response:
    """``POST /v1/messages``, served only with ``--messages`` (see the module docstring)."""
    if not MESSAGES:
        return Response("Not Found", status_code=404, media_type="text/plain")
    body = await request.json()
    for name in ("authorization", "x-api-key"):  # the anthropic SDK sends its key as a Bearer token
        if request.headers.get(name):
            BOOK.auth.add(f"{name}: {request.headers[name]}")
    blocks = [{"type": "text", "text": body["system"]}] if isinstance(body.get("system"), str) else list(body.get("system") or [])
    turns = []
    for turn in body.get("messages") or []:
        given = [{"type": "text", "text": turn["content"]}] if isinstance(turn.get("content"), str) else list(turn.get("content") or [])
        blocks += given
        turns.append({"role": turn.get("role"), "content": "".join(str(b.get("text", "")) for b in given if b.get("type") == "text")})
    text, said = prompt_of(turns)
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema")
    tool = next((t for t in body.get("tools") or [] if t.get("name") == (body.get("tool_choice") or {}).get("name")), None)
    probe = isinstance(schema, dict) and list(schema.get("properties") or {}) == ["probe"]
    turn = 0 if probe else BOOK.calls.get(text, 0)
    if probe:
        BOOK.probes += 1
    else:
        BOOK.calls[text], BOOK.bodies[text] = turn + 1, body
    status = said.get("status")
    if status and not probe and turn < int(said.get("times", 10**9)):
        headers = {"retry-after": str(said["retry_after"])} if "retry_after" in said else {}
        error = {"type": "error", "error": {"type": "api_error", "message": f"fake upstream says {status}"}}
        return JSONResponse(error, status_code=int(status), headers=headers)
    shape = schema if schema is not None else (tool or {}).get("input_schema")
    content = '{"probe": 1}' if probe else answer_text({"response_format": {"json_schema": {"schema": shape}}}, said, turn)
    value = _object(content) if tool is not None else None
    block = {"type": "tool_use", "id": "toolu_fake", "name": tool["name"], "input": value} if tool and value is not None else {"type": "text", "text": content}
    chars = [len(str(b.get("text", ""))) for b in blocks]
    marked = max((i + 1 for i, b in enumerate(blocks) if b.get("cache_control")), default=0)
    cached, rest = sum(chars[:marked]) // 4, sum(chars[marked:]) // 4 + 1
    usage = {"input_tokens": rest, "output_tokens": len(content) // 4 + 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if cached:
        usage["cache_read_input_tokens" if turn else "cache_creation_input_tokens"] = cached
    if not probe:
        billed = BOOK.billed.setdefault(text, {"prompt_tokens": 0, "completion_tokens": 0})
        billed["prompt_tokens"] += rest + cached
        billed["completion_tokens"] += usage["output_tokens"]
    answer = {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model") or MODEL, "content": [block],
              "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn", "stop_sequence": None, "usage": usage}  # fmt: skip
    if not body.get("stream"):
        return JSONResponse(answer)
    return StreamingResponse(_message_events(answer), media_type="text/event-stream")


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _message_events(answer: dict[str, Any]) -> Any:
    def event(kind: str, **fields: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()

    [block] = answer["content"]
    yield event("message_start", message={**answer, "content": [], "stop_reason": None})
    if block["type"] == "tool_use":
        yield event("content_block_start", index=0, content_block={**block, "input": {}})
        yield event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": json.dumps(block["input"])})
    else:
        yield event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        yield event("content_block_delta", index=0, delta={"type": "text_delta", "text": block["text"]})
    yield event("content_block_stop", index=0)
    yield event("message_delta", delta={"stop_reason": answer["stop_reason"], "stop_sequence": None}, usage=answer["usage"])
    yield event("message_stop")


async def _looping(body: dict[str, Any], said: dict[str, Any], prompt: str) -> Any:
    """A streamed answer that repeats ``said["loop"]`` until the caller closes the stream (or
    ``loop_seconds`` pass); a closed stream is recorded with its chunks and seconds."""
    base = {"id": "chatcmpl-fakeloop", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model") or MODEL, "system_fingerprint": "fp_fake"}  # fmt: skip

    def event(delta: dict[str, Any], reason: str | None = None) -> bytes:
        return b"data: " + json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason}]}).encode() + b"\n\n"

    start, sent, ended = time.monotonic(), 0, False
    try:
        yield event({"role": "assistant", "content": str(said.get("prefix", ""))})
        while time.monotonic() - start < float(said.get("loop_seconds", 60)):
            yield event({"content": str(said["loop"])})
            sent += 1
            await asyncio.sleep(float(said.get("chunk_delay", 0.005)))
        yield event({}, "length")
        yield b"data: [DONE]\n\n"
        ended = True
    finally:
        if not ended:
            BOOK.loops_closed.setdefault(prompt, []).append({"chunks": sent, "seconds": round(time.monotonic() - start, 3)})


async def models(request: Request) -> Response:
    return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "tests"}]})


async def stats(request: Request) -> Response:
    return JSONResponse(BOOK.stats())


async def reset(request: Request) -> Response:
    BOOK.reset()
    return JSONResponse({"ok": True})


app = Starlette(routes=[
    Route("/v1/chat/completions", chat, methods=["POST"]),
    Route("/v1/responses", responses, methods=["POST"]),
    Route("/v1/messages", messages, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/_stats", stats, methods=["GET"]),
    Route("/_reset", reset, methods=["POST"]),
])  # fmt: skip


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--responses", action="store_true", help="serve POST /v1/responses too")
    parser.add_argument("--messages", action="store_true", help="serve POST /v1/messages too (Anthropic's Messages API)")
    args = parser.parse_args()
    global RESPONSES, MESSAGES  # set once, before serving
    RESPONSES, MESSAGES = args.responses, args.messages
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
