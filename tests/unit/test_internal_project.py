"""The internal project (it creates, lists and deletes every project) admits admin access with its own key only:
client and server access, and endpoints that name a project without authentication headers, are refused by
authentication itself, before any flow runs, and change nothing."""

from __future__ import annotations

import copy

from identity_proto.flows.sessions import PUBLIC_CLIENT_SECRET
from tests.support import Harness, internal_headers

INTERNAL = "internal"
SIGN_UP = {"email": "mallory@example.com", "password": "correct horse battery"}
SEND_CODE = {"email": "victim@example.com", "callback_url": "http://localhost:3000/handler/magic-link-callback"}


def _client(**extra: str) -> dict[str, str]:
    return {"x-service-access-type": "client", "x-service-project-id": INTERNAL, **extra}


def _server(**extra: str) -> dict[str, str]:
    return {"x-service-access-type": "server", "x-service-project-id": INTERNAL, **extra}


def test_internal_project_refuses_client_and_server_access() -> None:
    harness = Harness()
    before = copy.deepcopy(harness.store.tenant(INTERNAL))
    refused = [
        # client access, with and without a key: no sign-up, no code sent to any address, no project read
        harness.request("POST", "/api/v1/auth/password/sign-up", _client(), json=SIGN_UP),
        harness.request("POST", "/api/v1/auth/password/sign-in", _client(), json=SIGN_UP),
        harness.request("POST", "/api/v1/auth/otp/send-sign-in-code", _client(), json=SEND_CODE),
        harness.request(
            "POST",
            "/api/v1/auth/otp/send-sign-in-code",
            _client(**{"x-service-publishable-client-key": "pck_guessed_guessed_guessed"}),
            json=SEND_CODE,
        ),
        harness.request("GET", "/api/v1/projects/current", _client()),
        harness.request("GET", "/api/v1/users/me", _client()),
        # server access, even with the internal admin key in the server key's place
        harness.request("GET", "/api/v1/users", _server(**{"x-service-secret-server-key": "ssk_guessed_guessed"})),
        harness.request("POST", "/api/v1/users", _server(), json={"primary_email": "x@example.com"}),
        harness.request("GET", "/api/v1/emails/outbox", _server()),
        # no authentication headers, naming the internal project: the SDK's refresh grant, the JWKS path
        harness.request(
            "POST",
            "/api/v1/auth/oauth/token",
            {"content-type": "application/x-www-form-urlencoded"},
            body=(
                f"grant_type=refresh_token&refresh_token=anything&client_id={INTERNAL}"
                f"&client_secret={PUBLIC_CLIENT_SECRET}"
            ).encode(),
        ),
        harness.request("GET", f"/api/v1/projects/{INTERNAL}/.well-known/jwks.json"),
    ]
    for reply in refused:
        assert (reply.status, reply.known_error) == (401, "INSUFFICIENT_ACCESS_TYPE"), reply.body
        assert reply.json["details"]["allowed_access_types"] == ["admin"]
    assert refused[0].json["details"]["actual_access_type"] == "client"
    assert refused[6].json["details"]["actual_access_type"] == "server"
    assert refused[-1].json["details"]["actual_access_type"] is None
    assert harness.store.tenant(INTERNAL) == before, "a refused request changed the internal project's data"

    # admin access with the internal key still manages projects; a wrong admin key is still a wrong key
    assert harness.request("GET", "/api/v1/internal/projects", internal_headers()).status == 200
    wrong = harness.request(
        "GET", "/api/v1/internal/projects", internal_headers(**{"x-service-super-secret-admin-key": "sak_wrong_wrong"})
    )
    assert (wrong.status, wrong.known_error) == (401, "INVALID_SUPER_SECRET_ADMIN_KEY")
