"""The raw ASGI host, in process: lifespan, lazy start, body limit, malformed requests, failures, mounting."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore
from identity_hosting.settings import Settings
from identity_proto import SeededEntropy, StorageUnavailable
from identity_proto.effects import StorageEffect
from tests.support import client_headers, server_headers


def _app(**settings: Any) -> IdentityASGI:
    return IdentityASGI(Settings(**settings), entropy=SeededEntropy(1))


async def _get(app: Any, path: str, headers: dict[str, str] | None = None, root_path: str = "") -> httpx.Response:
    transport = httpx.ASGITransport(app=app, root_path=root_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path, headers=headers)


def test_the_first_request_starts_the_service_without_lifespan() -> None:
    response = asyncio.run(_get(_app(), "/api/v1/projects/current", client_headers()))
    assert response.status_code == 200
    assert response.json()["display_name"] == "Dev project"


def test_every_answer_says_the_length_of_its_body() -> None:
    async def main() -> list[httpx.Response]:
        app = _app()
        return [
            await _get(app, "/api/v1/projects/current", client_headers()),
            await _get(app, "/api/v1/users/me", client_headers()),  # an error
            await _get(app, "/dashboard"),  # a static file
        ]

    for response in asyncio.run(main()):
        assert response.headers["content-length"] == str(len(response.content))
        assert "transfer-encoding" not in response.headers


def test_lifespan_starts_and_stops() -> None:
    async def main() -> list[str]:
        app = _app()
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sent: list[str] = []
        for kind in ("lifespan.startup", "lifespan.shutdown"):
            inbox.put_nowait({"type": kind})

        async def send(message: dict[str, Any]) -> None:
            sent.append(message["type"])

        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
        return sent

    assert asyncio.run(main()) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_a_failed_start_is_reported_through_lifespan() -> None:
    async def main() -> list[dict[str, Any]]:
        app = IdentityASGI(Settings(backend="nosuch"))
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        inbox.put_nowait({"type": "lifespan.startup"})
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app({"type": "lifespan"}, inbox.get, send)
        return sent

    (message,) = asyncio.run(main())
    assert message["type"] == "lifespan.startup.failed"
    assert "nosuch" in message["message"]


async def _raw(app: IdentityASGI, scope: dict[str, Any], chunks: list[bytes]) -> tuple[int, dict[str, str], bytes]:
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    received: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        received.append(message)

    base = {"type": "http", "method": "GET", "path": "/api/v1", "query_string": b"", "headers": [], "root_path": ""}
    await app({**base, **scope}, receive, send)
    start, body = received
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, body["body"]


def test_a_body_over_the_limit_is_refused_by_its_declared_length() -> None:
    app = _app(max_body_bytes=2048)
    scope = {"method": "PATCH", "headers": [(b"content-length", b"4096"), (b"content-type", b"application/json")]}
    status, headers, body = asyncio.run(_raw(app, scope, [b"{}"]))
    assert (status, headers["x-service-known-error"]) == (413, "REQUEST_BODY_TOO_LARGE")
    assert b"2048 bytes" in body


def test_a_streamed_body_over_the_limit_is_refused() -> None:
    app = _app(max_body_bytes=2048)
    scope = {"method": "PATCH", "headers": [(b"content-type", b"application/json")]}
    status, headers, _ = asyncio.run(_raw(app, scope, [b"x" * 1500, b"x" * 1500]))
    assert (status, headers["x-service-known-error"]) == (413, "REQUEST_BODY_TOO_LARGE")
    assert len(headers["x-service-request-id"]) == 16


def test_a_header_with_control_characters_is_a_client_error() -> None:
    scope = {"headers": [(b"x-service-access-type", b"client\x00")]}
    status, headers, body = asyncio.run(_raw(_app(), scope, [b""]))
    assert (status, headers["x-service-known-error"]) == (400, "MALFORMED_REQUEST")
    assert b"control characters" in body


class _DownStore(AsyncMemoryStore):
    async def apply(self, effect: StorageEffect[Any]) -> Any:
        raise StorageUnavailable("Error 111 connecting to 127.0.0.1:6390. Connection refused.")


def test_an_unreachable_store_gives_503_with_a_known_error() -> None:
    app = IdentityASGI(Settings(), store=_DownStore(), entropy=SeededEntropy(1))
    app._started = True  # the store is "down" from the start; skip bootstrapping through it
    response = asyncio.run(_get(app, "/api/v1/projects/current", server_headers()))
    assert response.status_code == 503
    assert response.headers["x-service-known-error"] == "STORAGE_UNAVAILABLE"
    assert "6390" not in response.text


class _BrokenService:
    def handle(self, *args: Any) -> Any:
        raise RuntimeError("internal detail")

    def error_response(self, error: Any, request_id: str) -> Any:
        from identity_proto import Service

        return Service().error_response(error, request_id)


def test_a_host_failure_is_a_500_body_never_a_dropped_connection() -> None:
    app = IdentityASGI(Settings(), service=_BrokenService(), entropy=SeededEntropy(1))  # type: ignore[arg-type]
    response = asyncio.run(_get(app, "/api/v1"))
    assert response.status_code == 500
    assert response.json()["code"] == "INTERNAL_ERROR"
    assert response.headers["x-service-request-id"] in response.json()["error"]
    assert "internal detail" not in response.text


def test_mounted_under_a_prefix() -> None:
    response = asyncio.run(_get(_app(), "/auth/api/v1", root_path="/auth"))
    assert response.status_code == 200
    assert response.text.startswith("Welcome")


@pytest.mark.parametrize("path", ["/api/v1/", "/api/v1/projects/current/"])
def test_a_trailing_slash_is_ignored(path: str) -> None:
    assert asyncio.run(_get(_app(), path, client_headers())).status_code == 200
