"""The request body limit of both hosts, in process: a malformed or negative Content-Length is refused before the
body is read, and no host ever reads more than the limit plus one byte (plus, on ASGI, the one chunk the server
handed over that crossed it), whatever the request declares.

The WSGI server's `wsgi.input` and the ASGI server's `receive` are boundaries we do not own: here they are
stand-ins that count what the host takes from them."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

import asgi_app
from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.settings import Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import SeededEntropy
from tests.support import client_headers

LIMIT = 2048
#: A password sign-up: if a refused request's body were processed anyway, a user would exist afterwards.
SIGN_UP = b'{"email": "limit@example.com", "password": "correct horse battery"}'
MALFORMED_LENGTHS = ["-1", "-0", "+5", "abc", "1.5", "1_0", "0x10", " ", "5, 5"]


class CountingStream:
    """A `wsgi.input` of `size` bytes (SIGN_UP, then padding) that counts the bytes it hands out."""

    def __init__(self, size: int) -> None:
        self._data = io.BytesIO(SIGN_UP + b" " * max(0, size - len(SIGN_UP)))
        self.bytes_read = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self._data.read(size)
        self.bytes_read += len(chunk)
        return chunk


def _wsgi() -> tuple[IdentityWSGI, MemoryStore]:
    store = MemoryStore()
    return IdentityWSGI(Settings(max_body_bytes=LIMIT), store=store, entropy=SeededEntropy(1)), store


def _call_wsgi(app: IdentityWSGI, stream: CountingStream, **environ: Any) -> tuple[int, dict[str, str], bytes]:
    headers = {"HTTP_" + name.upper().replace("-", "_"): value for name, value in client_headers().items()}
    base = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/auth/password/sign-up",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "wsgi.input": stream,
        **headers,
    }
    answer: dict[str, Any] = {}

    def start_response(status: str, response_headers: list[tuple[str, str]]) -> None:
        answer["status"] = int(status.split()[0])
        answer["headers"] = dict(response_headers)

    body = b"".join(app({**base, **environ}, start_response))
    return answer["status"], answer["headers"], body


def _users(store: MemoryStore) -> int:
    return sum(len(tenant.users) for tenant in store.tenants.values())


@pytest.mark.parametrize("length", MALFORMED_LENGTHS)
def test_wsgi_refuses_negative_content_length(length: str) -> None:
    app, store = _wsgi()
    stream = CountingStream(8 * LIMIT)
    status, headers, body = _call_wsgi(app, stream, CONTENT_LENGTH=length)
    assert (status, headers["x-service-known-error"]) == (400, "MALFORMED_REQUEST"), body
    assert b"Content-Length" in body
    assert stream.bytes_read == 0
    assert _users(store) == 0


def test_wsgi_never_reads_past_the_limit() -> None:
    app, store = _wsgi()
    # declared over the limit: refused by its length, nothing read
    declared = CountingStream(8 * LIMIT)
    status, headers, _ = _call_wsgi(app, declared, CONTENT_LENGTH=str(8 * LIMIT))
    assert (status, headers["x-service-known-error"], declared.bytes_read) == (413, "REQUEST_BODY_TOO_LARGE", 0)
    # no length, a stream the server says ends with the body (chunked): at most the limit plus one byte is read
    endless = CountingStream(8 * LIMIT)
    status, headers, _ = _call_wsgi(app, endless, CONTENT_LENGTH="", **{"wsgi.input_terminated": True})
    assert (status, headers["x-service-known-error"]) == (413, "REQUEST_BODY_TOO_LARGE")
    assert endless.bytes_read == LIMIT + 1
    # a length within the limit, a longer stream: exactly the declared bytes are read
    longer = CountingStream(8 * LIMIT)
    status, _, body = _call_wsgi(app, longer, CONTENT_LENGTH=str(len(SIGN_UP)))
    assert status == 200, body
    assert longer.bytes_read == len(SIGN_UP)
    assert _users(store) == 1
    # no length and no end marked by the server: there is no body (PEP 3333), nothing is read
    unmarked = CountingStream(8 * LIMIT)
    status, headers, _ = _call_wsgi(app, unmarked)
    assert (status, headers["x-service-known-error"], unmarked.bytes_read) == (400, "SCHEMA_ERROR", 0)


def test_wsgi_refuses_a_body_shorter_than_its_content_length() -> None:
    app, store = _wsgi()
    stream = CountingStream(len(SIGN_UP))  # the client went away before the rest
    status, headers, _ = _call_wsgi(app, stream, CONTENT_LENGTH=str(len(SIGN_UP) + 100))
    assert (status, headers["x-service-known-error"]) == (400, "MALFORMED_REQUEST")
    assert _users(store) == 0


class CountingReceive:
    """An ASGI `receive` handing over `chunks` chunks of `chunk_size` bytes (SIGN_UP first), counting them."""

    def __init__(self, chunks: int, chunk_size: int = 1024, *, disconnect_after: int | None = None) -> None:
        self._chunks = chunks
        self._chunk_size = chunk_size
        self._disconnect_after = disconnect_after
        self.bytes_received = 0
        self.calls = 0

    async def __call__(self) -> dict[str, Any]:
        self.calls += 1
        if self._disconnect_after is not None and self.calls > self._disconnect_after:
            return {"type": "http.disconnect"}
        if self.calls > self._chunks:
            return {"type": "http.request", "body": b"", "more_body": False}
        chunk = SIGN_UP if self.calls == 1 else b" " * self._chunk_size
        self.bytes_received += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": self.calls < self._chunks}


def _call_asgi(
    receive: CountingReceive, headers: list[tuple[bytes, bytes]]
) -> tuple[list[dict[str, Any]], AsyncMemoryStore]:
    store = AsyncMemoryStore()
    app = IdentityASGI(Settings(max_body_bytes=LIMIT), store=store, entropy=SeededEntropy(1))
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/auth/password/sign-up",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            *((name.encode(), value.encode()) for name, value in client_headers().items()),
            *headers,
        ],
    }
    asyncio.run(app(scope, receive, send))
    return sent, store


def _status_and_code(sent: list[dict[str, Any]]) -> tuple[int, str | None]:
    start = sent[0]
    headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], headers.get("x-service-known-error")


def _asgi_users(store: AsyncMemoryStore) -> int:
    return sum(len(tenant.users) for tenant in store.sync.tenants.values())


@pytest.mark.parametrize("length", MALFORMED_LENGTHS)
def test_asgi_refuses_negative_content_length(length: str) -> None:
    receive = CountingReceive(chunks=1)
    sent, store = _call_asgi(receive, [(b"content-length", length.encode())])
    assert _status_and_code(sent) == (400, "MALFORMED_REQUEST")
    assert receive.bytes_received == 0
    assert _asgi_users(store) == 0


def test_asgi_refuses_content_lengths_that_disagree() -> None:
    receive = CountingReceive(chunks=1)
    sent, _ = _call_asgi(receive, [(b"content-length", b"10"), (b"content-length", b"20")])
    assert _status_and_code(sent) == (400, "MALFORMED_REQUEST")
    assert receive.bytes_received == 0


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param([], id="chunked"),
        pytest.param([(b"content-length", b"100")], id="a lying length"),
    ],
)
def test_asgi_drops_an_over_limit_body_and_reads_it_only_up_to_the_drain_bound(
    headers: list[tuple[bytes, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An over-limit body is read to its end and dropped (so that a client that reads the answer only after sending
    # everything receives the 413), but only up to the drain bound: past it the host stops reading (an endless
    # body costs a bounded read). Nothing of it is acted on.
    monkeypatch.setattr(asgi_app, "_DRAIN_BYTES", 64 * 1024)
    within = CountingReceive(chunks=50)  # about 50 KB on offer: read to its end
    sent, store = _call_asgi(within, headers)
    assert _status_and_code(sent) == (413, "REQUEST_BODY_TOO_LARGE")
    assert within.calls == 50
    assert _asgi_users(store) == 0

    endless = CountingReceive(chunks=10_000)  # about 10 MB on offer: cut off at the bound
    sent, store = _call_asgi(endless, headers)
    assert _status_and_code(sent) == (413, "REQUEST_BODY_TOO_LARGE")
    assert endless.bytes_received <= 64 * 1024 + 1024  # the bound, and the one chunk that crossed it
    assert _asgi_users(store) == 0


def test_asgi_drops_a_request_whose_client_left_mid_body() -> None:
    receive = CountingReceive(chunks=3, disconnect_after=1)  # SIGN_UP arrives, then the client is gone
    sent, store = _call_asgi(receive, [])
    assert sent == []  # nobody to answer
    assert _asgi_users(store) == 0  # and the part that arrived is not acted on


@pytest.mark.parametrize(
    ("http_version", "headers", "bodiless"),
    [
        ("1.1", [(b"accept", b"*/*")], True),
        ("1.0", [], True),
        ("1.1", [(b"content-length", b"0")], False),
        ("1.1", [(b"transfer-encoding", b"chunked")], False),
        ("2", [(b"accept", b"*/*")], False),  # HTTP/2 may stream a body without declaring its length
    ],
)
def test_only_a_request_without_a_body_by_its_framing_is_read_without_the_body_timeout(
    http_version: str, headers: list[tuple[bytes, bytes]], bodiless: bool
) -> None:
    scope = {"type": "http", "http_version": http_version, "headers": headers}
    assert asgi_app._bodiless(scope) is bodiless
