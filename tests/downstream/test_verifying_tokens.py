"""Verifying the fake's access tokens the way a user's own backend does, with PyJWT and no port: the fake gives
the issuer, the audience, the JWKS URL and document, and a `PyJWKClient` that fetches the JWKS in process.

The fake's clock moves the service, not PyJWT: PyJWT checks `exp` against the real time. A backend's expiry test
therefore mints its token at a fake time in the past (or freezes its own clock), as shown here."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest

from identity_testing import FakeClock, TestProject
from tests.downstream.apps import create_verifying_flask_app


def _sign_in_by_code(project: TestProject, email: str) -> dict[str, str]:
    with project.client("client") as identity:
        sent = identity.post(
            "/api/v1/auth/otp/send-sign-in-code", json={"email": email, "callback_url": "http://localhost:5000/cb"}
        )
        assert sent.status_code == 200
        signed_in = identity.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code(email)})
    assert signed_in.status_code == 200, signed_in.text
    return dict(signed_in.json())


def _decode(project: TestProject, token: str, **options: object) -> dict[str, object]:
    key = project.jwk_client().get_signing_key_from_jwt(token)
    claims: dict[str, object] = jwt.decode(
        token, key, algorithms=["ES256"], audience=project.audience, issuer=project.issuer, **options
    )
    return claims


def test_a_code_sign_in_token_verifies_with_pyjwt_through_the_fakes_jwk_client(identity_project: TestProject) -> None:
    tokens = _sign_in_by_code(identity_project, "ada@example.com")

    claims = _decode(identity_project, tokens["access_token"])

    assert claims["sub"] == tokens["user_id"]
    assert claims["iss"] == identity_project.issuer == f"http://identity.test/api/v1/projects/{identity_project.id}"
    assert claims["aud"] == identity_project.audience == identity_project.id
    assert identity_project.jwks_url == claims["iss"] + "/.well-known/jwks.json"
    assert claims["email"] == "ada@example.com"


def test_the_jwks_document_and_the_transport_verify_a_token_without_a_port(identity_project: TestProject) -> None:
    token = identity_project.sign_in(identity_project.create_user("bob@example.com")["id"])["access_token"]
    kid = jwt.get_unverified_header(token)["kid"]

    from_document = jwt.PyJWKSet.from_dict(identity_project.jwks())[kid]
    with httpx.Client(transport=identity_project.fake.transport()) as own_http_client:
        fetched = own_http_client.get(identity_project.jwks_url)
    from_transport = jwt.PyJWKSet.from_dict(fetched.json())[kid]

    for key in (from_document, from_transport):
        claims = jwt.decode(
            token, key, algorithms=["ES256"], audience=identity_project.audience, issuer=identity_project.issuer
        )
        assert claims["email"] == "bob@example.com"


def test_a_token_of_another_project_is_refused_by_pyjwt(identity_project: TestProject) -> None:
    other = identity_project.fake.create_project()
    token = other.sign_in(other.create_user("eve@example.com")["id"])["access_token"]

    with pytest.raises(jwt.PyJWKClientError, match="Unable to find a signing key"):
        identity_project.jwk_client().get_signing_key_from_jwt(token)
    own_key = jwt.PyJWKSet.from_dict(identity_project.jwks()).keys[0]
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, own_key, algorithms=["ES256"], audience=other.audience, issuer=other.issuer)
    their_key = other.jwk_client().get_signing_key_from_jwt(token)
    with pytest.raises(jwt.InvalidAudienceError):
        jwt.decode(token, their_key, algorithms=["ES256"], audience=identity_project.audience)


def test_a_token_minted_at_a_fake_time_in_the_past_is_expired_for_pyjwt(
    identity_project: TestProject, identity_clock: FakeClock
) -> None:
    user = identity_project.create_user("late@example.com")
    identity_clock.freeze(at_ms=(int(time.time()) - 3600) * 1000)  # an hour ago: the token expired 50 minutes ago
    token = identity_project.sign_in(user["id"])["access_token"]
    identity_clock.reset()

    with pytest.raises(jwt.ExpiredSignatureError):
        _decode(identity_project, token)
    assert _decode(identity_project, token, leeway=3600)["sub"] == user["id"]


def test_the_fakes_clock_moves_the_service_not_pyjwt(identity_project: TestProject, identity_clock: FakeClock) -> None:
    user = identity_project.create_user("now@example.com")
    token = identity_project.sign_in(user["id"])["access_token"]
    identity_clock.advance(minutes=11)

    with identity_project.client("client", access_token=token) as http:
        assert http.get("/api/v1/users/me").json()["code"] == "ACCESS_TOKEN_EXPIRED"
    assert _decode(identity_project, token)["sub"] == user["id"]  # PyJWT reads the real time


def test_a_backend_verifying_tokens_itself_accepts_fresh_and_refuses_expired_ones(
    identity_project: TestProject, identity_clock: FakeClock
) -> None:
    fresh = _sign_in_by_code(identity_project, "reader@example.com")
    identity_clock.freeze(at_ms=(int(time.time()) - 3600) * 1000)
    stale = _sign_in_by_code(identity_project, "reader@example.com")
    identity_clock.reset()
    app = create_verifying_flask_app(identity_project.jwk_client(), identity_project.issuer, identity_project.audience)
    reports = app.test_client()

    ok = reports.get("/reports", headers={"Authorization": f"Bearer {fresh['access_token']}"})
    assert ok.json == {"user_id": fresh["user_id"], "email": "reader@example.com"}
    expired = reports.get("/reports", headers={"Authorization": f"Bearer {stale['access_token']}"})
    assert (expired.status_code, expired.json) == (401, {"error": "expired"})
    forged = reports.get("/reports", headers={"Authorization": f"Bearer {fresh['access_token'][:-4]}AAAA"})
    assert forged.status_code == 401
