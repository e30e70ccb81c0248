"""Over real HTTP against a real Hypercorn process: start-up, the authentication matrix, projects."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.auth_cases import AUTH_CASES, AuthCase
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import RedisServer, answers_ping, free_port, stop
from tests.support import PROJECT_ID, client_headers, internal_headers, server_headers

pytestmark = pytest.mark.e2e


def test_the_service_answers_on_its_embedded_defaults(server: Server, http: httpx.Client) -> None:
    response = http.get("/api/v1")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "Authentication: None" in response.text
    # Reported, not asserted on timing (shared machines are noisy); the benchmark prints it too.
    print(f"hypercorn process start to first 200: {server.seconds_to_first_200:.3f} s")


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.name)
def test_authentication_matrix_over_http(case: AuthCase, http: httpx.Client) -> None:
    headers = dict(case.headers)
    if case.content_type:
        headers["content-type"] = case.content_type
    response = http.request(case.method, case.path, headers=headers, content=case.body)
    assert response.status_code == case.status, response.text
    assert response.headers.get("x-service-known-error") == case.code
    if case.code is not None:
        body = response.json()
        assert body["code"] == case.code
        for key, value in case.details.items():
            assert body["details"][key] == value


def test_header_names_are_case_insensitive(http: httpx.Client) -> None:
    headers = {name.title(): value for name, value in server_headers().items()}
    response = http.get("/api/v1/projects/current", headers=headers)
    assert response.status_code == 200
    assert response.json()["id"] == PROJECT_ID


def test_a_project_lives_and_dies_over_http(http: httpx.Client) -> None:
    created = http.post("/api/v1/internal/projects", headers=internal_headers(), json={"display_name": "Over HTTP"})
    assert created.status_code == 201
    project = created.json()
    headers = {
        **client_headers(),
        "x-service-project-id": project["id"],
        "x-service-publishable-client-key": project["publishable_client_key"],
    }
    assert http.get("/api/v1/projects/current", headers=headers).json()["display_name"] == "Over HTTP"
    assert http.delete(f"/api/v1/internal/projects/{project['id']}", headers=internal_headers()).json() == {
        "success": True
    }
    gone = http.get("/api/v1/projects/current", headers=headers)
    assert (gone.status_code, gone.headers["x-service-known-error"]) == (400, "CURRENT_PROJECT_NOT_FOUND")


def test_an_oversized_body_is_413_over_http(http: httpx.Client) -> None:
    response = http.post(
        "/api/v1/internal/projects",
        headers={**internal_headers(), "content-type": "application/json"},
        content=b'{"display_name": "' + b"x" * (1024 * 1024 + 10) + b'"}',
    )
    assert response.status_code == 413
    assert response.json()["code"] == "REQUEST_BODY_TOO_LARGE"


_DOCS = (
    "\n\nFor more information, see the docs on REST API authentication: "
    "https://docs.stack-auth.com/rest-api/overview#authentication"
)


def _errors_name_the_originals_headers(base_url: str, stack: dict[str, str]) -> None:
    """Compatibility mode: error texts that name request headers are the original's, naming `x-stack-` headers."""

    def error(method: str, path: str, headers: dict[str, str]) -> tuple[str, str]:
        reply = httpx.request(method, f"{base_url}/api/v1{path}", headers=headers)
        return reply.headers["x-stack-known-error"], reply.json()["error"]

    assert error("GET", "/users/me", {}) == (
        "ACCESS_TYPE_REQUIRED",
        "You must specify an access level for this Stack project. Make sure project API keys are provided (eg. "
        "x-stack-publishable-client-key) and you set the x-stack-access-type header to 'client', 'server', or "
        "'admin'." + _DOCS,
    )
    assert error("GET", "/users/me", {"x-stack-access-type": "client"}) == (
        "ACCESS_TYPE_WITHOUT_PROJECT_ID",
        "The x-stack-access-type header was 'client', but the x-stack-project-id header was not provided." + _DOCS,
    )
    client = {name.replace("x-service-", "x-stack-"): value for name, value in client_headers().items()}
    assert error("POST", f"/team-memberships/{uuid.uuid4()}/{uuid.uuid4()}", client) == (
        "INSUFFICIENT_ACCESS_TYPE",
        "The x-stack-access-type header must be 'server' or 'admin', but was 'client'.",
    )
    assert error("GET", "/users/me", {**stack, "x-stack-project-id": "invalid"}) == (
        "CURRENT_PROJECT_NOT_FOUND",
        "The current project with ID invalid was not found. Please check the value of the x-stack-project-id header.",
    )
    refresh = httpx.post(f"{base_url}/api/v1/auth/sessions/current/refresh", headers=client).json()
    assert refresh["code"] == "SCHEMA_ERROR"
    assert "headers.x-stack-refresh-token must be defined" in refresh["error"] == refresh["details"]["message"]


@pytest.mark.redis
def test_two_processes_share_one_redis(redis_server: RedisServer) -> None:
    """IDENTITY_BACKEND=redis: a project created through one Hypercorn process is served by another."""
    env = {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url}
    first = start_hypercorn(env)
    try:
        second = start_hypercorn(env)
        try:
            created = httpx.post(
                f"{first.base_url}/api/v1/internal/projects",
                headers=internal_headers(),
                json={"display_name": "Shared", "config": {"sign_up_enabled": False}},
            )
            assert created.status_code == 201
            project = created.json()
            headers = {
                **server_headers(),
                "x-service-project-id": project["id"],
                "x-service-secret-server-key": project["secret_server_key"],
            }
            seen = httpx.get(f"{second.base_url}/api/v1/projects/current", headers=headers)
            assert seen.status_code == 200
            assert seen.json()["display_name"] == "Shared"
            assert seen.json()["config"]["sign_up_enabled"] is False
        finally:
            stop_server(second)
    finally:
        stop_server(first)


@pytest.mark.redis
def test_redis_down_gives_503_then_recovers(tmp_path: Path) -> None:
    """The store goes away under a running service: 503 with a known error, then 200 again, no restart."""
    port = free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)]
    redis_process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not answers_ping(port):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)
        service = start_hypercorn({"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": f"redis://127.0.0.1:{port}/0"})
        try:
            url = f"{service.base_url}/api/v1/projects/current"
            assert httpx.get(url, headers=server_headers()).status_code == 200
            stop(redis_process)
            down = httpx.get(url, headers=server_headers(), timeout=10)
            assert down.status_code == 503
            assert down.headers["x-service-known-error"] == "STORAGE_UNAVAILABLE"
            assert "Traceback" not in down.text
            redis_process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while not answers_ping(port):
                assert time.monotonic() < deadline, "redis-server did not restart"
                time.sleep(0.02)
            # The restarted Redis is empty (no persistence here) and the service talks to it without a restart:
            # once its circuit breaker's next probe (every half second while Redis is down) has found Redis back,
            # the user list answers (empty), and once the worker's one-second project cache has expired, the dev
            # project it no longer finds is made again, as a restart would (dev mode; it answered
            # CURRENT_PROJECT_NOT_FOUND until a restart).
            deadline = time.monotonic() + 10
            while (users := httpx.get(f"{service.base_url}/api/v1/users", headers=server_headers())).status_code == 503:
                assert users.headers["x-service-known-error"] == "STORAGE_UNAVAILABLE"
                assert time.monotonic() < deadline, "the service did not see Redis back"
                time.sleep(0.05)
            assert (users.status_code, users.json()["items"]) == (200, [])
            time.sleep(1.1)
            back = httpx.get(url, headers=server_headers())
            assert back.status_code == 200, back.text
            assert back.json()["id"] == server_headers()["x-service-project-id"]
        finally:
            stop_server(service)
    finally:
        stop(redis_process)


def test_compat_mode_over_http() -> None:
    """IDENTITY_COMPAT=stack: X-Stack-* names work and X-Service-* names still do; off, X-Stack-* are unknown."""
    stack = {name.replace("x-service-", "x-stack-"): value for name, value in server_headers().items()}
    compat = start_hypercorn({"IDENTITY_COMPAT": "stack"})
    try:
        ok = httpx.get(f"{compat.base_url}/api/v1/projects/current", headers=stack)
        assert ok.status_code == 200
        assert httpx.get(f"{compat.base_url}/api/v1/projects/current", headers=server_headers()).status_code == 200
        bad = httpx.get(
            f"{compat.base_url}/api/v1/projects/current", headers={**stack, "x-stack-secret-server-key": "ssk_x"}
        )
        assert bad.headers["x-stack-known-error"] == bad.headers["x-service-known-error"] == "INVALID_SECRET_SERVER_KEY"
        _errors_name_the_originals_headers(compat.base_url, stack)
    finally:
        stop_server(compat)
    plain = start_hypercorn()
    try:
        off = httpx.get(f"{plain.base_url}/api/v1/projects/current", headers=stack)
        assert (off.status_code, off.headers["x-service-known-error"]) == (400, "ACCESS_TYPE_REQUIRED")
        assert "x-service-access-type header" in off.json()["error"]  # our words outside compat mode
    finally:
        stop_server(plain)


@pytest.mark.redis
def test_two_workers_serve_one_client_interchangeably(redis_server: RedisServer) -> None:
    """Sign in on one process, read the mail, refresh and update on the other: tokens of one verify on the other,
    and a sign-out on one ends the session's access tokens on both at once."""
    env = {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url}
    first, second = start_hypercorn(env), start_hypercorn(env)
    try:
        a, b = first.base_url, second.base_url
        email = "both-workers@example.com"
        sent = httpx.post(
            f"{a}/api/v1/auth/otp/send-sign-in-code",
            headers=client_headers(),
            json={"email": email, "callback_url": "http://localhost/cb"},
        )
        mail = httpx.get(f"{b}/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"][0]
        otp = mail["subject"].rsplit(" ", 1)[-1]
        tokens = httpx.post(
            f"{b}/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": otp + sent.json()["nonce"]}
        ).json()
        me_on_a = client_headers(**{"x-service-access-token": tokens["access_token"]})
        assert (
            httpx.patch(f"{a}/api/v1/users/me", headers=me_on_a, json={"display_name": "Both"}).json()["display_name"]
            == "Both"
        )
        refreshed = httpx.post(
            f"{b}/api/v1/auth/sessions/current/refresh",
            headers=client_headers(**{"x-service-refresh-token": tokens["refresh_token"]}),
        )
        assert refreshed.status_code == 200
        me_on_b = client_headers(**{"x-service-access-token": refreshed.json()["access_token"]})
        assert httpx.get(f"{a}/api/v1/users/me", headers=me_on_b).json()["display_name"] == "Both"
        assert httpx.get(f"{b}/api/v1/users/me", headers=me_on_a).json()["id"] == tokens["user_id"]
        # Signed out on one worker, the (still unexpired, cached as verified) token is refused on both at once.
        assert httpx.delete(f"{a}/api/v1/auth/sessions/current", headers=me_on_b).status_code == 200
        for base in (a, b):
            for token_headers in (me_on_a, me_on_b):
                refused = httpx.get(f"{base}/api/v1/users/me", headers=token_headers)
                assert (refused.status_code, refused.headers["x-service-known-error"]) == (401, "ACCESS_TOKEN_EXPIRED")
    finally:
        stop_server(first)
        stop_server(second)
