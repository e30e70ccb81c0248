"""CORS headers as a browser sees them: every kind of response to a cross-origin request carries each CORS header
exactly once (a header sent twice, `*, *`, makes the browser refuse the response), with the values a browser app
needs. Over a real Hypercorn for what it can be made to answer, and in process through both hosts for the rest
(a store that is down, a host failure, malformed headers)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asgi_app import IdentityASGI
from backends.memory import MemoryStore
from identity_hosting.settings import Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import SeededEntropy, StorageUnavailable
from identity_proto.effects import StorageEffect
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

ORIGIN = {"origin": "http://127.0.0.1:5173"}
CORS_HEADERS = (
    "access-control-allow-origin",
    "access-control-expose-headers",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-max-age",
)
#: What the SDK and a browser app must be able to read from a cross-origin response.
EXPOSED = ("content-type", "x-service-known-error", "x-service-request-id", "retry-after")
#: What a browser app sends, so a preflight must allow it.
SENT = (
    "content-type",
    "authorization",
    "x-service-access-type",
    "x-service-project-id",
    "x-service-publishable-client-key",
    "x-service-secret-server-key",
    "x-service-super-secret-admin-key",
    "x-service-access-token",
    "x-service-refresh-token",
    "x-service-branch-id",
)


def assert_cors_once(response: httpx.Response, *, preflight: bool = False) -> None:
    """Each CORS header at most once, the two every cross-origin response needs exactly once, and right."""
    for name in CORS_HEADERS:
        values = response.headers.get_list(name)
        assert len(values) <= 1, f"{response.status_code}: {name} sent {len(values)} times: {values}"
    assert response.headers.get_list("access-control-allow-origin") == ["*"], response.headers
    exposed = {item.strip() for item in response.headers["access-control-expose-headers"].split(",")}
    assert set(EXPOSED) <= exposed, exposed
    if preflight:
        allowed = {item.strip() for item in response.headers["access-control-allow-headers"].split(",")}
        assert set(SENT) <= allowed, allowed
        assert "*" not in allowed  # a wildcard never covers Authorization
        assert int(response.headers["access-control-max-age"]) > 0
    else:
        assert "access-control-allow-headers" not in response.headers


def test_every_response_kind_carries_each_cors_header_once_over_http(server: Server, http: httpx.Client) -> None:
    preflight = http.options(
        "/api/v1/users/me",
        headers={
            **ORIGIN,
            "access-control-request-method": "PATCH",
            "access-control-request-headers": ",".join(SENT),
        },
    )
    assert preflight.status_code == 200
    assert {m.strip() for m in preflight.headers["access-control-allow-methods"].split(",")} >= {"GET", "PATCH"}
    assert_cors_once(preflight, preflight=True)
    answers = {
        200: http.get("/api/v1/projects/current", headers={**client_headers(), **ORIGIN}),
        400: http.get("/api/v1/users/me", headers={**client_headers(), **ORIGIN}),  # a known error
        401: http.get("/api/v1/users", headers={**server_headers(), **ORIGIN, "x-service-secret-server-key": "ssk_x"}),
        404: http.get("/api/v1/nowhere", headers=ORIGIN),
        405: http.delete("/api/v1", headers=ORIGIN),
        # the host's own early answer: a body declared over the limit, refused before it is read
        413: http.post(
            "/api/v1/users",
            headers={**server_headers(), **ORIGIN, "content-type": "application/json"},
            content=b" " * (1024 * 1024 + 1),
        ),
    }
    for status, response in answers.items():
        assert response.status_code == status, response.text
        assert_cors_once(response)
    assert answers[413].headers["x-service-known-error"] == "REQUEST_BODY_TOO_LARGE"


class _DownStore:
    async def apply(self, effect: StorageEffect[Any]) -> Any:
        raise StorageUnavailable("connection refused")

    async def aclose(self) -> None:
        pass


class _BrokenService:
    def handle(self, *args: Any) -> Any:
        raise RuntimeError("a bug")

    def error_response(self, error: Any, request_id: str) -> Any:
        from identity_proto import Service

        return Service().error_response(error, request_id)


def test_every_host_answer_carries_each_cors_header_once_in_process() -> None:
    down = IdentityASGI(Settings(), store=_DownStore(), entropy=SeededEntropy(1))
    down._started = True  # the store is down from the start: skip bootstrapping through it
    broken = IdentityASGI(Settings(), service=_BrokenService(), entropy=SeededEntropy(1))  # type: ignore[arg-type]
    limits = IdentityASGI(Settings(max_body_bytes=2048, rate_limits=True), entropy=SeededEntropy(1))

    async def asgi() -> dict[str, httpx.Response]:
        answers = {}
        for name, app, method, headers, body in (
            ("503", down, "GET", {**server_headers(), **ORIGIN}, b""),
            ("500", broken, "GET", ORIGIN, b""),
            ("malformed header", limits, "GET", {**ORIGIN, "x-service-access-type": "client\x01"}, b""),
            ("malformed length", limits, "POST", {**ORIGIN, "content-length": "-1"}, b""),
            ("413 streamed", limits, "POST", {**ORIGIN, "content-type": "application/json"}, b"x" * 4096),
        ):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://asgi.test") as client:
                answers[name] = await client.request(method, "/api/v1/users", headers=headers, content=body)
        return answers

    answers = asyncio.run(asgi())
    with httpx.Client(
        transport=httpx.WSGITransport(app=IdentityWSGI(Settings(max_body_bytes=2048), store=MemoryStore())),
        base_url="http://wsgi.test",
    ) as wsgi:
        answers["wsgi 200"] = wsgi.get("/api/v1/projects/current", headers={**client_headers(), **ORIGIN})
        answers["wsgi 413"] = wsgi.post("/api/v1/users", headers=ORIGIN, content=b"x" * 4096)
        answers["wsgi preflight"] = wsgi.options("/api/v1/users", headers=ORIGIN)
    expected = {
        "503": (503, "STORAGE_UNAVAILABLE"),
        "500": (500, "INTERNAL_ERROR"),
        "malformed header": (400, "MALFORMED_REQUEST"),
        "malformed length": (400, "MALFORMED_REQUEST"),
        "413 streamed": (413, "REQUEST_BODY_TOO_LARGE"),
        "wsgi 200": (200, None),
        "wsgi 413": (413, "REQUEST_BODY_TOO_LARGE"),
        "wsgi preflight": (200, None),
    }
    for name, (status, code) in expected.items():
        response = answers[name]
        assert (response.status_code, response.headers.get("x-service-known-error")) == (status, code), name
        assert_cors_once(response, preflight=name == "wsgi preflight")


def test_a_rate_limited_answer_exposes_its_retry_headers() -> None:
    from tests.support import Harness

    harness = Harness()  # rate limits on: an address gets 5 codes per 10 minutes
    answers = [
        harness.request("POST", "/api/v1/auth/otp/send-sign-in-code", {**client_headers(), **ORIGIN}, json=body)
        for body in [{"email": "a@example.com", "callback_url": "http://localhost:3000/cb"}] * 6
    ]
    limited = answers[-1]
    assert limited.status == 429
    exposed = {item.strip() for item in limited.headers["access-control-expose-headers"].split(",")}
    assert {"retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"} <= exposed
    assert {"retry-after", "ratelimit-reset"} <= set(limited.headers)


# ------------------------------------------------------------------------------------------------------------
# The preflight's lists, as the original's backend answers them (its `proxy.tsx`), in both modes.

#: The original's `corsAllowedRequestHeaders`, verbatim: what its SDK and the proxies in front of browser apps send.
ORIGINAL_ALLOWED = (
    "content-type",
    "authorization",
    "x-stack-project-id",
    "x-stack-branch-id",
    "x-stack-override-error-status",
    "x-stack-random-nonce",
    "x-stack-client-version",
    "x-stack-disable-artificial-development-delay",
    "x-stack-access-type",
    "x-stack-publishable-client-key",
    "x-stack-secret-server-key",
    "x-stack-super-secret-admin-key",
    "x-stack-admin-access-token",
    "x-stack-refresh-token",
    "x-stack-access-token",
    "x-stack-allow-anonymous-user",
    "baggage",
    "sentry-trace",
    "x-vercel-protection-bypass",
    "ngrok-skip-browser-warning",
)
#: The original's `corsAllowedResponseHeaders`: what its SDK reads from a response.
ORIGINAL_EXPOSED = ("content-type", "x-stack-actual-status", "x-stack-known-error")


def _listed(response: httpx.Response, name: str) -> list[str]:
    return [item.strip() for item in response.headers[name].split(",")]


@pytest.fixture(scope="module")
def compat_server() -> Iterator[Server]:
    """The service in compat mode (`IDENTITY_COMPAT=stack`), as the official SDK meets it."""
    running = start_hypercorn({"IDENTITY_COMPAT": "stack"})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.mark.parametrize("mode", ["default", "compat"])
def test_the_preflight_allows_exactly_the_originals_request_headers(
    mode: str, server: Server, compat_server: Server
) -> None:
    """Exactly the original's list (no wildcard, nothing more): in compat mode with its `x-stack-` names and ours,
    in the default mode with ours in their place. The SDK's `ngrok-skip-browser-warning` among them: without it,
    Chromium blocks every call the SDK makes from a page."""
    base_url = compat_server.base_url if mode == "compat" else server.base_url
    prefixes = ("x-service-", "x-stack-") if mode == "compat" else ("x-service-",)
    expected: list[str] = []
    for name in ORIGINAL_ALLOWED:
        if name.startswith("x-stack-"):
            expected += [prefix + name.removeprefix("x-stack-") for prefix in prefixes]
        else:
            expected.append(name)
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        preflight = http.options(
            "/api/v1/users/me",
            headers={
                **ORIGIN,
                "access-control-request-method": "PATCH",
                "access-control-request-headers": "ngrok-skip-browser-warning,x-stack-client-version",
            },
        )
        answer = http.get("/api/v1/projects/current", headers={**client_headers(), **ORIGIN})
    assert preflight.status_code == 200
    allowed = _listed(preflight, "access-control-allow-headers")
    assert sorted(allowed) == sorted(expected)
    assert len(allowed) == len(set(allowed))
    assert preflight.headers["access-control-allow-origin"] == "*"
    # What the SDK reads from an answer (the known error, the actual status, Retry-After) is exposed to its script.
    exposed = set(_listed(answer, "access-control-expose-headers"))
    needed = {"content-type", "retry-after", "x-service-known-error", "x-service-actual-status"}
    if mode == "compat":
        needed |= set(ORIGINAL_EXPOSED)
    assert needed <= exposed, exposed
    if mode == "default":
        assert not any(name.startswith("x-stack-") for name in allowed + sorted(exposed))


@pytest.mark.parametrize("mode", ["default", "compat"])
def test_the_sdks_probes_are_answered_as_the_original_answers_them(
    mode: str, server: Server, compat_server: Server
) -> None:
    """After a network error the SDK fetches `/health` (from a page: a cross-origin GET); on every page load without
    an explicit base URL it fetches `/api/v1/internal/backend-urls`."""
    base_url = compat_server.base_url if mode == "compat" else server.base_url
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        health = http.get("/health", headers=ORIGIN)
        with_store = http.get("/health", params={"db": "1"}, headers=ORIGIN)
        urls = http.get("/api/v1/internal/backend-urls", headers=ORIGIN)
    for response in (health, with_store):
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "ok"}
        assert response.headers["access-control-allow-origin"] == "*"
    assert urls.status_code == 200, urls.text
    assert urls.json() == {"urls": [base_url]}
    assert urls.headers["access-control-allow-origin"] == "*"
