"""Anonymous users over real HTTP against a real Hypercorn process (reference part 2, §4): the sign-up, the
opt-in header, the upgrade in place by password sign-up and by code sign-in (same user id), the 409 of a taken
address, the list filter, and a backend verifying tokens with PyJWT's JWKS client: the plain key set refuses an
anonymous user's token, the one with `include_anonymous=true` verifies it."""

from __future__ import annotations

from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.conftest import Server
from tests.e2e.test_sign_in_http import _code, _new_email
from tests.support import PROJECT_ID, admin_headers, client_headers, server_headers

pytestmark = pytest.mark.e2e

ALLOW = {"x-service-allow-anonymous-user": "true"}


def _sign_up(http: httpx.Client) -> dict[str, Any]:
    reply = http.post("/api/v1/auth/anonymous/sign-up", headers=client_headers())
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _as(tokens: dict[str, Any], **extra: str) -> dict[str, str]:
    return client_headers(**{"x-service-access-token": tokens["access_token"]}, **extra)


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


def test_an_anonymous_user_is_signed_up_and_needs_the_opt_in_header(http: httpx.Client) -> None:
    tokens = _sign_up(http)
    assert set(tokens) == {"access_token", "refresh_token", "user_id"}
    assert _error(http.get("/api/v1/users/me", headers=_as(tokens))) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")
    me = http.get("/api/v1/users/me", headers=_as(tokens, **ALLOW))
    assert me.status_code == 200, me.text
    assert (me.json()["id"], me.json()["is_anonymous"], me.json()["restricted_reason"]) == (
        tokens["user_id"],
        True,
        {"type": "anonymous"},
    )
    listed = http.get("/api/v1/users", headers=server_headers(), params={"include_anonymous": "true", "limit": "200"})
    assert tokens["user_id"] in {u["id"] for u in listed.json()["items"]}
    hidden = http.get("/api/v1/users", headers=server_headers(), params={"limit": "200"})
    assert tokens["user_id"] not in {u["id"] for u in hidden.json()["items"]}


def test_a_password_sign_up_keeps_the_anonymous_users_id(http: httpx.Client) -> None:
    tokens = _sign_up(http)
    http.patch("/api/v1/users/me", headers=_as(tokens, **ALLOW), json={"display_name": "Ada"})
    email = _new_email()
    reply = http.post(
        "/api/v1/auth/password/sign-up",
        headers=_as(tokens, **ALLOW),
        json={"email": email, "password": "correct horse"},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["user_id"] == tokens["user_id"]
    me = http.get(
        "/api/v1/users/me", headers=client_headers(**{"x-service-access-token": reply.json()["access_token"]})
    )
    assert (me.json()["is_anonymous"], me.json()["primary_email"], me.json()["display_name"]) == (False, email, "Ada")
    # A second anonymous user cannot take the address now: 409, and it stays anonymous.
    other = _sign_up(http)
    taken = http.post(
        "/api/v1/auth/password/sign-up", headers=_as(other, **ALLOW), json={"email": email, "password": "whatever1"}
    )
    assert _error(taken) == (409, "USER_EMAIL_ALREADY_EXISTS")
    assert http.get("/api/v1/users/me", headers=_as(other, **ALLOW)).json()["is_anonymous"] is True


def test_a_code_sign_in_of_a_new_address_keeps_the_anonymous_users_id(http: httpx.Client) -> None:
    tokens = _sign_up(http)
    email = _new_email()
    reply = http.post("/api/v1/auth/otp/sign-in", headers=_as(tokens, **ALLOW), json={"code": _code(http, email)})
    assert reply.status_code == 200, reply.text
    assert (reply.json()["user_id"], reply.json()["is_new_user"]) == (tokens["user_id"], True)
    # Signing in to that account again while anonymous (another anonymous user) returns the account.
    other = _sign_up(http)
    again = http.post("/api/v1/auth/otp/sign-in", headers=_as(other, **ALLOW), json={"code": _code(http, email)})
    assert (again.json()["user_id"], again.json()["is_new_user"]) == (tokens["user_id"], False)
    assert http.get("/api/v1/users/me", headers=_as(other, **ALLOW)).json()["is_anonymous"] is True


def test_a_backend_verifies_anonymous_tokens_only_with_the_anonymous_key_set(
    http: httpx.Client, server: Server
) -> None:
    tokens = _sign_up(http)
    issuer = f"{server.base_url}/api/v1/projects/{PROJECT_ID}"
    plain = jwt.PyJWKClient(f"{issuer}/.well-known/jwks.json")
    with pytest.raises(jwt.PyJWKClientError):
        plain.get_signing_key_from_jwt(tokens["access_token"])
    with_anonymous = jwt.PyJWKClient(f"{issuer}/.well-known/jwks.json?include_anonymous=true")
    key = with_anonymous.get_signing_key_from_jwt(tokens["access_token"])
    claims = jwt.decode(
        tokens["access_token"],
        key,
        algorithms=["ES256"],
        audience=f"{PROJECT_ID}:anon",
        issuer=f"{server.base_url}/api/v1/projects-anonymous-users/{PROJECT_ID}",
    )
    assert (claims["sub"], claims["is_anonymous"]) == (tokens["user_id"], True)


def test_with_sign_up_disabled_anonymous_users_still_sign_up_but_cannot_upgrade(http: httpx.Client) -> None:
    def sign_up_enabled(enabled: bool) -> None:
        patched = http.patch(
            "/api/v1/projects/current", headers=admin_headers(), json={"config": {"sign_up_enabled": enabled}}
        )
        assert patched.status_code == 200, patched.text

    sign_up_enabled(False)
    try:
        tokens = _sign_up(http)  # reference part 2 §4: allowed even with sign-up disabled
        refused = http.post(
            "/api/v1/auth/password/sign-up",
            headers=_as(tokens, **ALLOW),
            json={"email": _new_email(), "password": "correct horse"},
        )
        assert _error(refused) == (400, "SIGN_UP_NOT_ENABLED")
        assert http.get("/api/v1/users/me", headers=_as(tokens, **ALLOW)).json()["is_anonymous"] is True
    finally:
        sign_up_enabled(True)
