"""The body limit over HTTP, against a real Hypercorn: a chunked body past the limit is answered 413 while the
client is still sending, and the server stops taking the rest (the connection closes), so a client cannot make it
read an endless body before authentication."""

from __future__ import annotations

import asyncio
import select
import socket
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.support import client_headers

pytestmark = pytest.mark.e2e

LIMIT = 64 * 1024
CHUNK = 16 * 1024
#: What the client offers: far more than the limit plus every buffer between it and the application.
OFFERED = 256 * 1024 * 1024


@pytest.fixture(scope="module")
def limited_server() -> Iterator[Server]:
    running = start_hypercorn({"IDENTITY_MAX_BODY_BYTES": str(LIMIT)})
    try:
        yield running
    finally:
        stop_server(running)


def _send_chunked(server: Server, path: str) -> tuple[bytes, int, bool]:
    """POST an endless chunked body; returns (what the server answered, bytes sent, whether the server closed)."""
    url = urlsplit(server.base_url)
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    sock.setblocking(False)
    head = [f"POST {path} HTTP/1.1", f"Host: {url.netloc}", "Content-Type: application/json"]
    head += [f"{name}: {value}" for name, value in client_headers().items()]
    head += ["Transfer-Encoding: chunked", "", ""]
    pending = memoryview("\r\n".join(head).encode())
    chunk = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    sent = 0
    answer = b""
    closed = False
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and not closed:
            if not pending and sent < OFFERED:
                pending = memoryview(chunk)
            readable, writable, _ = select.select([sock], [sock] if pending else [], [], 1.0)
            if readable:
                try:
                    data = sock.recv(65536)
                except ConnectionResetError:
                    data = b""
                if data:
                    answer += data
                else:
                    closed = True
            elif writable:
                try:
                    written = sock.send(pending)
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    continue
                sent += written
                pending = pending[written:]
            elif not pending:
                break
    finally:
        sock.close()
    return answer, sent, closed


def test_an_over_limit_chunked_body_is_413_without_the_server_reading_it_all(limited_server: Server) -> None:
    answer, sent, closed = _send_chunked(limited_server, "/api/v1/auth/password/sign-up")
    status_line = answer.split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"REQUEST_BODY_TOO_LARGE" in answer
    assert closed, "the server kept the connection open to read the rest of the body"
    # what got through before the server closed: the limit, and what the sockets' buffers held; never all of it
    assert sent < 64 * 1024 * 1024, f"the client sent {sent} bytes before the server stopped taking them"


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_async_client_uploading_ten_megabytes_receives_the_413(limited_server: Server, declared: bool) -> None:
    # httpx's AsyncClient reads the answer only once it has sent the whole body: a server that answers and closes
    # with the body unread resets the connection under it, and the client never sees the 413. The service reads
    # (and drops) an over-limit body up to a bound before answering, so that common clients receive the answer.
    body = b" " * (10 * 1024 * 1024)

    async def upload() -> httpx.Response:
        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), CHUNK):
                yield body[start : start + CHUNK]

        async with httpx.AsyncClient(base_url=limited_server.base_url, timeout=30.0) as http:
            content = body if declared else chunks()
            return await http.post(
                "/api/v1/auth/password/sign-up",
                headers={**client_headers(), "content-type": "application/json"},
                content=content,
            )

    answered = asyncio.run(upload())
    assert (answered.status_code, answered.json()["code"]) == (413, "REQUEST_BODY_TOO_LARGE")


@pytest.fixture(scope="module")
def impatient_server() -> Iterator[Server]:
    running = start_hypercorn({"IDENTITY_BODY_TIMEOUT_SECONDS": "1"})
    try:
        yield running
    finally:
        stop_server(running)


def test_a_body_that_does_not_arrive_in_time_is_408_and_the_connection_closes(impatient_server: Server) -> None:
    # Declares 100 bytes and sends 10: without a bound the connection (and what the worker holds for it) stays.
    url = urlsplit(impatient_server.base_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        head = ["POST /api/v1/auth/password/sign-up HTTP/1.1", f"Host: {url.netloc}", "Content-Length: 100"]
        head += [f"{name}: {value}" for name, value in client_headers().items()]
        sock.sendall(("\r\n".join([*head, "", ""])).encode() + b'{"email": ')
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(65536):  # until the server closes
            answer += chunk
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"did not arrive within 1 s" in answer
    assert waited < 10
