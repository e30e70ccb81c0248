"""The WSGI host through httpx.WSGITransport: the same service, the sync driver, the same answers as ASGI."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.settings import Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import SeededEntropy
from tests.auth_cases import AUTH_CASES, AuthCase


def _wsgi(**settings: object) -> httpx.Client:
    app = IdentityWSGI(Settings(**settings), store=MemoryStore(), entropy=SeededEntropy(1))  # type: ignore[arg-type]
    return httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://wsgi.test")


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.name)
def test_authentication_matrix_through_wsgi(case: AuthCase) -> None:
    headers = dict(case.headers)
    if case.content_type:
        headers["content-type"] = case.content_type
    with _wsgi() as http:
        response = http.request(case.method, case.path, headers=headers, content=case.body)
    assert response.status_code == case.status, response.text
    assert response.headers.get("x-service-known-error") == case.code


def test_wsgi_and_asgi_answer_alike() -> None:
    requests = [("GET", "/api/v1"), ("GET", "/api/v1/projects/current"), ("GET", "/api/v1/nowhere")]
    headers = {"x-service-access-type": "client", "x-service-project-id": "00000000-0000-4000-8000-000000000000"}
    with _wsgi() as http:
        wsgi = [
            (r.status_code, r.headers.get("content-type"), r.content)
            for r in (http.request(m, p, headers=headers) for m, p in requests)
        ]

    async def asgi_answers() -> list[tuple[int, str | None, bytes]]:
        app = IdentityASGI(Settings(), store=AsyncMemoryStore(), entropy=SeededEntropy(1))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://asgi.test") as http:
            out = []
            for method, path in requests:
                r = await http.request(method, path, headers=headers)
                out.append((r.status_code, r.headers.get("content-type"), r.content))
            return out

    assert wsgi == asyncio.run(asgi_answers())


def test_a_body_over_the_limit_is_413_through_wsgi() -> None:
    with _wsgi(max_body_bytes=2048) as http:
        response = http.post(
            "/api/v1/internal/projects", content=b"x" * 4096, headers={"content-type": "application/json"}
        )
    assert (response.status_code, response.headers["x-service-known-error"]) == (413, "REQUEST_BODY_TOO_LARGE")


def test_mounted_under_a_script_name() -> None:
    app = IdentityWSGI(Settings(), store=MemoryStore(), entropy=SeededEntropy(1))
    with httpx.Client(transport=httpx.WSGITransport(app=app, script_name="/auth"), base_url="http://wsgi.test") as http:
        response = http.get("/auth/api/v1")
    assert response.status_code == 200
    assert response.text.startswith("Welcome")
