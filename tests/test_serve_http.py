"""The proxy's lean HTTP client (``accord.serve._http``) against a real loopback server that
closes idle connections, as every server does after its keep-alive timeout (uvicorn's is 5 s):
a kept connection the server closed is never used, so no ballot fails on one. (It did: after a
pause longer than the upstream's keep-alive timeout, the proxy's next request met its dead kept
connections one by one and counted each as a failed call, 8 calls for a 4-call vote.)
"""

from __future__ import annotations

import asyncio

import httpx

from accord.serve._http import LeanClient, Target

ANSWER = b'{"ok": true}'
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(ANSWER)


async def _serve(requests: list[bytes], linger: float, *, drop_first: bool = False) -> asyncio.Server:
    """Answers each request (keep-alive), then closes the connection ``linger`` seconds later;
    ``drop_first``: the first connection is closed as its request arrives, unanswered."""
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        first = connections == 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
            body = await reader.readexactly(length)
            if drop_first and first:
                return  # closed with the request unanswered: the server went away as it came
            requests.append(body)
            writer.write(HEAD + ANSWER)
            await writer.drain()
            await asyncio.sleep(linger)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def _kept_connections_the_server_closed() -> None:
    requests: list[bytes] = []
    server = await _serve(requests, linger=0.05)
    port = server.sockets[0].getsockname()[1]
    target = Target.of(f"http://127.0.0.1:{port}/v1/chat/completions")
    client = LeanClient(httpx)
    try:
        await asyncio.gather(*(client.post(target, [], b"first-%d" % i, 5.0) for i in range(4)))  # four connections kept
        await asyncio.sleep(0.3)  # the server has closed all four
        for i in range(4):  # one at a time: each would have met a dead kept connection
            answer = await client.post(target, [], b"second-%d" % i, 5.0)
            assert answer.status == 200 and answer.body == ANSWER
        assert sorted(requests) == sorted([b"first-%d" % i for i in range(4)] + [b"second-%d" % i for i in range(4)])  # each once
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def _closed_as_the_request_goes_out() -> None:
    requests: list[bytes] = []
    server = await _serve(requests, linger=0.05, drop_first=True)
    port = server.sockets[0].getsockname()[1]
    target = Target.of(f"http://127.0.0.1:{port}/v1/chat/completions")
    client = LeanClient(httpx)
    try:
        try:  # a new connection closed unanswered is the upstream's failure: not retried
            await client.post(target, [], b"lost", 5.0)
            raise AssertionError("a dropped request on a new connection must fail")
        except httpx.RemoteProtocolError:
            pass
        answer = await client.post(target, [], b"again", 5.0)
        assert answer.status == 200 and requests == [b"again"]
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


def test_a_kept_connection_the_server_closed_is_not_used() -> None:
    asyncio.run(_kept_connections_the_server_closed())


def test_a_request_dropped_on_a_new_connection_fails_once() -> None:
    asyncio.run(_closed_as_the_request_goes_out())
