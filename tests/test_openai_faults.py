"""Faults and bad input over HTTP: each ends in a valid result or a typed error, within budget.

Faults are injected with an httpx mock transport (one line per fault) or, where the socket itself
misbehaves (a reset mid-body, a read timeout, a server that never answers), a loopback server.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
import tenacity
from pydantic import BaseModel

import accord
from accord import Budget, Retry, Stabilizer, Vote, models
from accord.backends.openai._caps import Capabilities
from accord.backends.openai._errors import parse_retry_after, to_backend_error

GOOD = '{"name": "Alice", "age": 30}'
FAST = Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=4)


class Person(BaseModel):
    name: str
    age: int


def chat(content: Any = GOOD, finish: str = "stop", **extra: Any) -> dict[str, Any]:
    body = {
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }  # fmt: skip
    body.update(extra)
    return body


class Script:
    """A mock transport handler answering from a list (the last answer repeats); records calls."""

    def __init__(self, *answers: Callable[[httpx.Request], httpx.Response] | httpx.Response | dict[str, Any]):
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content or b"{}"))
        self.times.append(time.monotonic())
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if callable(answer):
            return answer(request)
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)


def backend(handler: Callable[[httpx.Request], httpx.Response], **options: Any) -> Any:
    client = openai.OpenAI(
        api_key="sk-test-0123456789", base_url="http://mock.test/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )  # fmt: skip
    options = {"model": "m", "structured": False, "capabilities": Capabilities(), **options}
    return models.openai(client, **options)


def decide(model: Any, **options: Any) -> accord.Result[Any]:
    options = {"vote": Vote(k=1, gate=None), "retry": FAST, "budget": Budget(max_seconds=20), **options}
    return Stabilizer(model, schema=Person, **options).run("Alice is 30.")


def raising(exc: type[Exception], message: str) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc(message, request=request)

    return handler


# -- 429 -----------------------------------------------------------------------------------------


def test_429_with_retry_after_waits_as_told_then_succeeds():
    script = Script(httpx.Response(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "0.5"}), chat())
    result = decide(backend(script))
    assert result.value == Person(name="Alice", age=30)
    assert [b.status for b in result.ballots] == ["error", "valid"]
    assert result.ballots[0].error["retryable"] and "HTTP 429" in result.ballots[0].error["message"]
    assert script.times[1] - script.times[0] >= 0.45  # the fixed wait is 0.01 s: the server's hint won


def test_429_without_retry_after_backs_off_then_succeeds():
    script = Script(httpx.Response(429, json={"error": {"message": "rate limited"}}), chat())
    result = decide(backend(script))
    assert result.value.age == 30 and [b.status for b in result.ballots] == ["error", "valid"]
    error = to_backend_error(_status_error(429, {}), server="s")
    assert error.retryable and error.retry_after is None and error.status == 429


def test_retry_after_forms():
    assert parse_retry_after(httpx.Headers({"Retry-After": "2"})) == 2.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert parse_retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0  # in the past
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert parse_retry_after(httpx.Headers({})) is None


# -- 5xx -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried_then_succeeds(status):
    script = Script(httpx.Response(status, text="upstream trouble"), chat())
    result = decide(backend(script))
    assert result.value.name == "Alice"
    assert result.ballots[0].status == "error" and f"HTTP {status}" in result.ballots[0].error["message"]


def test_5xx_that_persists_ends_in_a_typed_error_after_the_retry_budget():
    script = Script(httpx.Response(503, text="down", headers={"Retry-After": "0"}))
    with pytest.raises(accord.BackendError) as caught:
        decide(backend(script), retry=Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=3))
    assert len(script.requests) == 3 and caught.value.status == 503
    assert [b.status for b in caught.value.result.ballots] == ["error"] * 3


# -- timeouts ------------------------------------------------------------------------------------


def test_connect_timeout_is_retried():
    script = Script(raising(httpx.ConnectTimeout, "connect timed out"), chat())
    result = decide(backend(script))
    assert result.value.age == 30
    assert "timed out (ConnectTimeout)" in result.ballots[0].error["message"]


def test_read_timeout_on_a_slow_server_ends_in_a_typed_error():
    with LoopbackServer(lambda conn: time.sleep(3)) as server:
        started = time.monotonic()
        with pytest.raises(accord.BackendError) as caught:
            decide(models.openai(base_url=server.url, model="m", timeout=0.3, structured=False), retry=Retry(
                wait=tenacity.wait_fixed(0.01), transport_attempts=2))
        assert time.monotonic() - started < 2.5
    messages = [b.error["message"] for b in caught.value.result.ballots]
    assert len(messages) == 2 and all("timed out (ReadTimeout)" in m for m in messages)


# -- broken bodies -------------------------------------------------------------------------------


def test_connection_reset_mid_body_is_retried():
    def reset_then_answer(conn: socket.socket, calls: list[int] = []) -> None:  # noqa: B006 - call counter
        calls.append(1)
        if len(calls) == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"id\": \"c")
            time.sleep(0.05)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
            return
        LoopbackServer.answer(conn, 200, json.dumps(chat()).encode())

    with LoopbackServer(reset_then_answer) as server:
        result = decide(models.openai(base_url=server.url, model="m", structured=False))
    assert result.value.name == "Alice"
    assert "connection failed (ReadError" in result.ballots[0].error["message"]


def test_a_body_that_is_not_json_ends_in_a_typed_error():
    script = Script(httpx.Response(200, text="<html>proxy error</html>", headers={"content-type": "text/html"}))
    with pytest.raises(accord.BackendError) as caught:
        decide(backend(script), retry=Retry(wait=tenacity.wait_fixed(0.01), transport_attempts=2))
    assert "expected a chat completion, got str" in str(caught.value.result.ballots[0].error["message"])
    script = Script(httpx.Response(200, text="{not json", headers={"content-type": "application/json"}), chat())
    assert decide(backend(script)).value.age == 30  # the same fault once, then a good answer


def test_a_completion_with_no_choices_is_retried():
    script = Script(chat() | {"choices": []}, chat())
    result = decide(backend(script))
    assert result.value.age == 30 and "no choices" in result.ballots[0].error["message"]


# -- bad content ---------------------------------------------------------------------------------


def test_finish_reason_length_is_retried_with_more_tokens():
    script = Script(chat('{"name": "Ali', finish="length"), chat())
    result = decide(backend(script, max_tokens=16))
    assert result.value.age == 30
    assert [r["max_tokens"] for r in script.requests] == [16, 32]
    assert result.ballots[0].finish_reason == "length"


def test_an_empty_message_is_an_invalid_ballot_then_retried():
    script = Script(chat(None), chat(""), chat())
    result = decide(backend(script))
    assert [b.status for b in result.ballots] == ["invalid", "invalid", "valid"]
    assert result.value.name == "Alice"


def test_an_empty_message_every_time_is_invalid_output():
    with pytest.raises(accord.InvalidOutput):
        decide(backend(Script(chat(""))))


def test_a_10_mb_message_fails_fast_and_is_retried():
    huge = "x" * (10 * 1024 * 1024)
    script = Script(chat(huge), chat())
    started = time.monotonic()
    result = decide(backend(script))
    assert time.monotonic() - started < 10
    assert [b.status for b in result.ballots] == ["invalid", "valid"]
    assert "too long" in result.ballots[0].error["message"]


# -- a server that never answers -----------------------------------------------------------------


def test_a_server_that_never_answers_is_ended_by_the_budget():
    with LoopbackServer(LoopbackServer.hang) as server:
        model = models.openai(base_url=server.url, model="m", structured=False)  # default 120 s read timeout
        started = time.monotonic()
        with pytest.raises(accord.BudgetExceeded) as caught:
            decide(model, budget=Budget(max_seconds=1.0))
        assert time.monotonic() - started < 3
    assert caught.value.result.stopped_because == "budget"


def test_a_server_that_never_answers_is_ended_by_the_budget_async():
    with LoopbackServer(LoopbackServer.hang) as server:
        model = models.openai(base_url=server.url, model="m", structured=False)
        stab = Stabilizer(model, schema=Person, vote=Vote(k=3, gate=None), budget=Budget(max_seconds=1.0))
        started = time.monotonic()
        with pytest.raises(accord.BudgetExceeded):
            asyncio.run(stab.arun("Alice is 30."))
        assert time.monotonic() - started < 3
        deadline = time.monotonic() + 2
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.open_connections == 0  # the cancelled requests closed their sockets


# -- helpers -------------------------------------------------------------------------------------


def _status_error(status: int, headers: dict[str, str]) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://mock.test/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    return openai.APIStatusError("Error", response=response, body=None)


class LoopbackServer:
    """A raw HTTP/1.1 server on 127.0.0.1: reads each request, then runs ``behaviour(conn)``; a
    ``GET /metrics`` (the load poller, which reads any self-hosted server) gets a 404 instead."""

    def __init__(self, behaviour: Callable[[socket.socket], None]) -> None:
        self.behaviour = behaviour
        self.stop = threading.Event()
        self.open_connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def __enter__(self) -> LoopbackServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        self.open_connections += 1
        try:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            conn.settimeout(None)
            if head.split(b" ", 2)[:1] == [b"GET"] and b"/metrics" in head.split(b"\r\n", 1)[0]:
                self.answer(conn, 404, b"{}")  # the load poller's read of a self-hosted server: not the fault under test
                return
            self.behaviour(conn)
        except OSError:
            pass
        finally:
            self.open_connections -= 1
            conn.close()

    @staticmethod
    def answer(conn: socket.socket, status: int, body: bytes) -> None:
        head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        conn.sendall(head.encode() + body)

    @staticmethod
    def hang(conn: socket.socket) -> None:
        """Never answer; return once the client closes its end."""
        conn.settimeout(0.05)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if conn.recv(1) == b"":
                    return
            except TimeoutError:
                continue
