"""Passkeys in the in-process fake, as a user's test suite meets them: the plugin's `identity_passkey_authenticator`
(passkeys on, a software authenticator) registers a passkey for a signed-in user and signs in with it in a few
lines, and the backend under test verifies the tokens it gives with the fake's JWKS. No browser."""

from __future__ import annotations

import jwt
import pytest

from identity_testing import PasskeyAuthenticator, TestProject


def test_a_user_registers_a_passkey_and_signs_in_with_it(
    identity_project: TestProject, identity_passkey_authenticator: PasskeyAuthenticator
) -> None:
    user = identity_project.create_user("ada@example.com")
    tokens = identity_project.sign_in(user["id"])
    with identity_project.client("client", access_token=tokens["access_token"]) as http:
        identity_passkey_authenticator.register(http)
        assert http.get("/api/v1/users/me").json()["passkey_auth_enabled"] is True

    with identity_project.client("client") as http:
        signed_in = identity_passkey_authenticator.sign_in(http)

    token = signed_in["access_token"]
    claims = jwt.decode(
        token,
        identity_project.jwk_client().get_signing_key_from_jwt(token),
        algorithms=["ES256"],
        audience=identity_project.audience,
        issuer=identity_project.issuer,
    )
    assert claims["sub"] == signed_in["user_id"] == user["id"]


def test_the_authenticator_answers_in_the_page_it_is_given(identity_project: TestProject) -> None:
    # a suite testing its own trusted domain: the project trusts it, the authenticator sits in a page there
    with identity_project.client("admin") as http:
        config = {"passkey_enabled": True, "domains": [{"domain": "https://shop.example.com", "handler_path": "/"}]}
        assert http.patch("/api/v1/projects/current", json={"config": config}).status_code == 200
    user = identity_project.create_user("ada@example.com")
    authenticator = identity_project.passkey_authenticator("https://shop.example.com")
    with identity_project.client("client", access_token=identity_project.sign_in(user["id"])["access_token"]) as http:
        authenticator.register(http)
    with identity_project.client("client") as http:
        assert authenticator.sign_in(http)["user_id"] == user["id"]
        with pytest.raises(AssertionError, match="origin is not allowed"):
            authenticator.sign_in(http, origin="https://other.example.com")
