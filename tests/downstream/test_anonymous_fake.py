"""Anonymous users in the in-process fake, as a user's test suite meets them: `project.sign_up_anonymous()`, the
opt-in header, a backend verifying tokens with the fake's JWKS (which refuses anonymous users' tokens), and a
sign-up that keeps the anonymous user's id."""

from __future__ import annotations

import jwt
import pytest

from identity_testing import TestProject

ALLOW = {"x-service-allow-anonymous-user": "true"}


def test_the_fake_signs_up_an_anonymous_user(identity_project: TestProject) -> None:
    tokens = identity_project.sign_up_anonymous()
    assert set(tokens) == {"access_token", "refresh_token", "user_id"}
    with identity_project.client("client", access_token=tokens["access_token"]) as http:
        refused = http.get("/api/v1/users/me")
        me = http.get("/api/v1/users/me", headers=ALLOW)
    assert refused.headers["x-service-known-error"] == "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED"
    assert (me.json()["id"], me.json()["is_anonymous"]) == (tokens["user_id"], True)


def test_a_backend_verifying_with_the_fakes_jwks_refuses_an_anonymous_token(identity_project: TestProject) -> None:
    token = identity_project.sign_up_anonymous()["access_token"]
    with pytest.raises(jwt.PyJWKClientError):
        identity_project.jwk_client().get_signing_key_from_jwt(token)


def test_a_password_sign_up_in_the_fake_keeps_the_anonymous_users_id(identity_project: TestProject) -> None:
    tokens = identity_project.sign_up_anonymous()
    with identity_project.client("client", access_token=tokens["access_token"]) as http:
        signed_up = http.post(
            "/api/v1/auth/password/sign-up",
            headers=ALLOW,
            json={"email": "ada@example.com", "password": "correct horse"},
        )
    assert signed_up.status_code == 200, signed_up.text
    assert signed_up.json()["user_id"] == tokens["user_id"]
    # Now an ordinary user: the fake's own JWKS verifies its new token.
    claims = jwt.decode(
        signed_up.json()["access_token"],
        identity_project.jwk_client().get_signing_key_from_jwt(signed_up.json()["access_token"]),
        algorithms=["ES256"],
        audience=identity_project.audience,
        issuer=identity_project.issuer,
    )
    assert (claims["sub"], claims["is_anonymous"], claims["email"]) == (tokens["user_id"], False, "ada@example.com")
