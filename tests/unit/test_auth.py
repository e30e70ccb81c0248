"""Request authentication in process: the §1.2 matrix, signed access tokens, and how keys are kept."""

from __future__ import annotations

from typing import Any

import pytest

from identity_proto import run, tokens
from identity_proto.records import Session
from identity_proto.tokens import SigningKey, hash_secret
from tests.auth_cases import AUTH_CASES, AuthCase
from tests.contract.factories import putting_session
from tests.support import KEYS, PROJECT_ID, Harness, admin_headers, client_headers, internal_headers


@pytest.mark.parametrize("case", AUTH_CASES, ids=lambda case: case.name)
def test_authentication_matrix(case: AuthCase) -> None:
    harness = Harness()
    headers = dict(case.headers)
    if case.content_type:
        headers["content-type"] = case.content_type
    reply = harness.request(case.method, case.path, headers, body=case.body)
    assert reply.status == case.status, reply.body
    assert reply.known_error == case.code
    if case.code is not None:
        assert reply.json["code"] == case.code
        assert reply.json["error"]
        for key, value in case.details.items():
            assert reply.json["details"][key] == value


def test_known_error_body_omits_details_when_there_are_none() -> None:
    reply = Harness().request("GET", "/api/v1/projects/current")
    assert reply.json == {"code": "ACCESS_TYPE_REQUIRED", "error": reply.json["error"]}
    assert "x-service-access-type" in reply.json["error"]


def test_keys_are_stored_only_as_hashes() -> None:
    harness = Harness()
    stored = repr(harness.store.projects)
    for key in (KEYS.publishable_client_key, KEYS.secret_server_key, KEYS.super_secret_admin_key):
        assert key not in stored
        assert hash_secret(key) in stored


def test_keys_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[str, str]] = []
    real = tokens.hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(tokens.hmac, "compare_digest", spy)
    reply = Harness().request("GET", "/api/v1/projects/current", admin_headers())
    assert reply.status == 200
    assert compared == [(hash_secret(KEYS.super_secret_admin_key), hash_secret(KEYS.super_secret_admin_key))]


def test_a_project_can_require_the_publishable_key() -> None:
    harness = Harness()
    reply = harness.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"require_publishable_client_key": True}}
    )
    assert reply.status == 200
    keyless = {k: v for k, v in client_headers().items() if k != "x-service-publishable-client-key"}
    reply = harness.request("GET", "/api/v1/projects/current", keyless)
    assert (reply.status, reply.known_error) == (401, "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT")
    assert reply.json["details"] == {"project_id": PROJECT_ID}
    assert harness.request("GET", "/api/v1/projects/current", client_headers()).status == 200


def test_keys_of_one_project_do_not_open_another() -> None:
    harness = Harness()
    created = harness.request(
        "POST", "/api/v1/internal/projects", internal_headers(), json={"display_name": "Other"}
    ).json
    reply = harness.request(
        "GET", "/api/v1/projects/current", {**admin_headers(), "x-service-project-id": created["id"]}
    )
    assert (reply.status, reply.known_error) == (401, "INVALID_SUPER_SECRET_ADMIN_KEY")
    own = {
        **admin_headers(),
        "x-service-project-id": created["id"],
        "x-service-super-secret-admin-key": created["super_secret_admin_key"],
    }
    assert harness.request("GET", "/api/v1/projects/current", own).json["display_name"] == "Other"


# --- access tokens -------------------------------------------------------------------------------------------


def _token(harness: Harness, project_id: str = PROJECT_ID, **claims: Any) -> str:
    base = {
        "sub": "22222222-2222-4222-8222-222222222222",
        "aud": project_id,
        "iat": harness.now_ms // 1000,
        "exp": harness.now_ms // 1000 + 600,
        "refresh_token_id": "session-1",
    }
    token_claims = {**base, **claims}
    # A token is only as good as its session: the one it names exists (for as long as the token lives).
    session = Session(
        id=str(token_claims["refresh_token_id"]),
        user_id=str(token_claims["sub"]),
        refresh_token_hash=hash_secret("refresh-token"),
        created_at_millis=harness.now_ms,
        last_used_at_millis=harness.now_ms,
        expires_at_millis=harness.now_ms + 3_600_000,
    )
    run(putting_session(project_id, session), harness.store)
    return SigningKey.from_scalar(harness.project(project_id).signing_key).sign(token_claims)


def test_a_valid_access_token_names_the_user() -> None:
    harness = Harness()
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": _token(harness)}))
    assert reply.status == 200
    assert b"User: 22222222-2222-4222-8222-222222222222" in reply.body


def test_an_access_token_without_access_type_is_ignored() -> None:
    harness = Harness()
    reply = harness.request("GET", "/api/v1", {"x-service-access-token": "garbage"})
    assert reply.status == 200
    assert b"Authentication: None" in reply.body


def test_access_token_expires_exactly_at_exp() -> None:
    harness = Harness()
    token = _token(harness)
    expires_ms = (harness.now_ms // 1000 + 600) * 1000
    harness.now_ms = expires_ms - 1
    assert harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token})).status == 200
    harness.now_ms = expires_ms
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token}))
    assert (reply.status, reply.known_error) == (401, "ACCESS_TOKEN_EXPIRED")
    assert reply.json["details"] == {
        "expired_at_millis": expires_ms,
        "project_id": PROJECT_ID,
        "user_id": "22222222-2222-4222-8222-222222222222",
        "refresh_token_id": "session-1",
    }


def test_a_token_of_another_project_is_refused() -> None:
    harness = Harness()
    other = harness.request("POST", "/api/v1/internal/projects", internal_headers(), json={"display_name": "B"}).json
    reply = harness.request(
        "GET", "/api/v1", client_headers(**{"x-service-access-token": _token(harness, other["id"])})
    )
    assert (reply.status, reply.known_error) == (401, "INVALID_PROJECT_FOR_ACCESS_TOKEN")
    assert reply.json["details"] == {"expected_project_id": PROJECT_ID, "actual_project_id": other["id"]}


def test_a_forged_token_is_unparsable() -> None:
    harness = Harness()
    forged = SigningKey.from_scalar("1" * 64).sign({"sub": "x", "aud": PROJECT_ID, "exp": harness.now_ms // 1000 + 60})
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": forged}))
    assert (reply.status, reply.known_error) == (401, "UNPARSABLE_ACCESS_TOKEN")


def test_anonymous_tokens_need_the_opt_in_header() -> None:
    harness = Harness()
    token = _token(harness, is_anonymous=True, restricted_reason={"type": "anonymous"})
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token}))
    assert (reply.status, reply.known_error) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")
    opted_in = client_headers(**{"x-service-access-token": token, "x-service-allow-anonymous-user": "true"})
    assert harness.request("GET", "/api/v1", opted_in).status == 200


def test_restricted_tokens_need_the_opt_in_header() -> None:
    harness = Harness()
    token = _token(harness, restricted_reason={"type": "email_not_verified"})
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token}))
    assert (reply.status, reply.known_error) == (403, "RESTRICTED_USER_NOT_ALLOWED")
    assert reply.json["details"] == {"restricted_reason": {"type": "email_not_verified"}}
    opted_in = client_headers(**{"x-service-access-token": token, "x-service-allow-restricted-user": "true"})
    assert harness.request("GET", "/api/v1", opted_in).status == 200


def test_verified_signatures_are_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = Harness()
    token = _token(harness)
    calls = 0
    real_verify = SigningKey.verify

    def counting_verify(self: SigningKey, value: str) -> Any:
        nonlocal calls
        calls += 1
        return real_verify(self, value)

    monkeypatch.setattr(SigningKey, "verify", counting_verify)
    for _ in range(3):
        assert harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token})).status == 200
    assert calls == 1
