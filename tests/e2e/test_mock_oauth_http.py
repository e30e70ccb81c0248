"""The mock OAuth provider over HTTP, served by a real Hypercorn: in dev mode its discovery document, JWKS and login
page answer under the service's own URL, and a client that signs in on its page gets a code it exchanges (PKCE)
for an ID token that verifies against the JWKS (PyJWT) and an access token its userinfo accepts; a production-mode
service has no `/mock-oauth` routes at all."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from tests.contract.test_production_start_contract import PRODUCTION_ENV
from tests.e2e.conftest import Server, start_hypercorn, stop_server

pytestmark = pytest.mark.e2e

VERIFIER = base64.urlsafe_b64encode(b"an e2e verifier of thirty-two b").rstrip(b"=").decode()
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
REDIRECT = "http://localhost:3000/callback"


def test_the_discovery_document_names_endpoints_under_the_services_url(server: Server, http: httpx.Client) -> None:
    answer = http.get("/mock-oauth/.well-known/openid-configuration")
    assert answer.status_code == 200
    document = answer.json()
    issuer = f"{server.base_url}/mock-oauth"
    assert document["issuer"] == issuer
    assert (document["authorization_endpoint"], document["token_endpoint"], document["jwks_uri"]) == (
        f"{issuer}/authorize",
        f"{issuer}/token",
        f"{issuer}/jwks",
    )
    assert set(document["id_token_signing_alg_values_supported"]) == {"ES256", "RS256"}
    assert "S256" in document["code_challenge_methods_supported"]


def test_the_jwks_holds_public_keys_only(http: httpx.Client) -> None:
    keys = http.get("/mock-oauth/jwks").json()["keys"]
    assert sorted(key["alg"] for key in keys) == ["ES256", "RS256"]
    assert all(not {"d", "p", "q"} & set(key) for key in keys)


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_a_sign_in_on_the_login_page_gives_an_id_token_the_jwks_verifies(
    server: Server, http: httpx.Client, alg: str
) -> None:
    authorize = {
        "client_id": "e2e-client",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "openid email profile",
        "state": "st",
        "nonce": "nn",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "alg": alg,
    }
    page = http.get("/mock-oauth/authorize", params=authorize)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert 'name="email"' in page.text
    signed_in = http.post(
        "/mock-oauth/authorize", data={**authorize, "email": "ada@example.com", "display_name": "Ada", "action": "x"}
    )
    assert signed_in.status_code == 303
    back = urlsplit(signed_in.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == REDIRECT
    code = parse_qs(back.query)["code"][0]
    tokens = http.post(
        "/mock-oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": "e2e-client",
            "client_secret": "anything",
            "code_verifier": VERIFIER,
        },
    )
    assert tokens.status_code == 200, tokens.text
    id_token = tokens.json()["id_token"]
    keys = jwt.PyJWKClient(f"{server.base_url}/mock-oauth/jwks")
    claims = jwt.decode(
        id_token,
        keys.get_signing_key_from_jwt(id_token),
        algorithms=[alg],
        audience="e2e-client",
        issuer=f"{server.base_url}/mock-oauth",
    )
    assert (claims["sub"], claims["email"], claims["name"], claims["nonce"]) == (
        "ada@example.com",
        "ada@example.com",
        "Ada",
        "nn",
    )
    userinfo = http.get("/mock-oauth/userinfo", headers={"authorization": f"Bearer {tokens.json()['access_token']}"})
    assert (userinfo.status_code, userinfo.json()["email"]) == (200, "ada@example.com")


def test_a_production_service_has_no_mock_oauth_routes() -> None:
    production = start_hypercorn(PRODUCTION_ENV)
    try:
        with httpx.Client(base_url=production.base_url, timeout=10.0) as http:
            for method, path in (
                ("GET", "/mock-oauth/.well-known/openid-configuration"),
                ("GET", "/mock-oauth/jwks"),
                ("GET", "/mock-oauth/authorize?client_id=x&redirect_uri=http://localhost/cb&response_type=code"),
                ("POST", "/mock-oauth/token"),
                ("GET", "/mock-oauth/userinfo"),
                ("POST", "/mock-oauth/hooks/fail-next"),
                ("POST", "/mock-oauth/hooks/revoke"),
            ):
                answer = http.request(method, path)
                assert answer.status_code == 404, (method, path, answer.status_code)
            assert http.get("/api/v1").status_code == 200  # the service itself answers
    finally:
        stop_server(production)
