"""The mock OAuth provider, in process (the fake's WSGI app), driven by the hosts' provider client: discovery, the
login page, the code exchange with PKCE, ID tokens (ES256, RS256) verified against the JWKS, userinfo, refresh,
every failure hook, revocation; and that only dev mode has it."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from identity_hosting.oauth_client import ProviderHttpClient
from identity_proto import Service
from identity_proto.context import ServiceOptions
from identity_proto.effects import (
    CheckProviderAccessToken,
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderFailure,
    RefreshProviderToken,
)
from identity_proto.effects.oauth_provider import ProviderSpec
from identity_proto.routes import MOCK_OAUTH_ROUTES
from identity_testing.fake import BASE_URL, IdentityFake

MOCK = BASE_URL.rstrip("/") + "/mock-oauth"
REDIRECT = "http://localhost:3000/api/v1/auth/oauth/callback/github"
VERIFIER = "a-verifier-that-is-long-enough-for-pkce-0123456789"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()


@pytest.fixture
def fake() -> IdentityFake:
    return IdentityFake()


@pytest.fixture
def http(fake: IdentityFake) -> Iterator[httpx.Client]:
    with httpx.Client(transport=fake.transport(), base_url=BASE_URL) as client:
        yield client


@pytest.fixture
def provider(fake: IdentityFake) -> Iterator[ProviderHttpClient]:
    client = ProviderHttpClient(base_url=BASE_URL, local_app=fake.wsgi, timeout_s=5)
    yield client
    client.close()


def spec(provider: ProviderHttpClient, client_id: str = "github", provider_type: str = "mock") -> ProviderSpec:
    endpoints = provider.perform(DiscoverProvider(MOCK))
    return ProviderSpec("github", provider_type, client_id, "secret", endpoints)  # type: ignore[arg-type]


def sign_in(http: httpx.Client, email: str = "ada@example.com", **extra: str) -> str:
    """The login page's form, posted as a browser would; returns the code the redirect carries."""
    query = {
        "client_id": "github",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "state": "s-1",
        "scope": "openid email profile",
        "nonce": "n-1",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        **extra,
    }
    page = http.get(f"{MOCK}/authorize", params=query)
    assert page.status_code == 200, page.text
    assert 'name="email"' in page.text
    assert "Sign in" in page.text
    assert "Cancel" in page.text
    form = {**query, "email": email, "display_name": "Ada", "action": "sign_in"}
    answer = http.post(
        f"{MOCK}/authorize", content=urlencode(form), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert answer.status_code == 303
    location = urlsplit(answer.headers["location"])
    params = parse_qs(location.query)
    assert params["state"] == ["s-1"]
    return params["code"][0]


def exchange(provider: ProviderHttpClient, signed_in_code: str, **changes: str) -> object:
    fields = {
        "code": signed_in_code,
        "redirect_uri": REDIRECT,
        "code_verifier": VERIFIER,
        "scope": "openid email",
        "nonce": "n-1",
    }
    fields.update(changes)
    return provider.perform(ExchangeProviderCode(spec(provider), **fields))  # type: ignore[arg-type]


def test_discovery_names_the_mock_endpoints(provider: ProviderHttpClient) -> None:
    endpoints = spec(provider).endpoints
    assert endpoints.issuer == MOCK
    assert endpoints.token_endpoint == f"{MOCK}/token"
    assert endpoints.jwks_uri == f"{MOCK}/jwks"


@pytest.mark.parametrize("alg", ["ES256", "RS256"])
def test_the_whole_exchange_gives_tokens_and_a_verified_identity(
    http: httpx.Client, provider: ProviderHttpClient, alg: str
) -> None:
    grant = exchange(provider, sign_in(http, alg=alg))
    identity = grant.identity  # type: ignore[attr-defined]
    assert (identity.account_id, identity.email, identity.email_verified, identity.display_name) == (
        "ada@example.com",
        "ada@example.com",
        True,
        "Ada",
    )
    tokens = grant.tokens  # type: ignore[attr-defined]
    assert tokens.access_token
    assert tokens.refresh_token
    assert tokens.expires_at_millis
    assert provider.perform(CheckProviderAccessToken(spec(provider), tokens.access_token)) is True


def test_a_code_works_once(http: httpx.Client, provider: ProviderHttpClient) -> None:
    code = sign_in(http)
    exchange(provider, code)
    with pytest.raises(ProviderFailure) as failure:
        exchange(provider, code)
    assert failure.value.kind == "invalid_grant"


@pytest.mark.parametrize(
    "changes",
    [{"code_verifier": "wrong-verifier"}, {"redirect_uri": "http://localhost:3000/other"}, {"code": "made-up"}],
    ids=["pkce", "redirect_uri", "unknown_code"],
)
def test_a_mismatched_exchange_is_invalid_grant(
    http: httpx.Client, provider: ProviderHttpClient, changes: dict[str, str]
) -> None:
    code = sign_in(http)
    with pytest.raises(ProviderFailure) as failure:
        exchange(provider, code, **changes)
    assert failure.value.kind == "invalid_grant"


def test_plain_pkce_is_checked_too(http: httpx.Client, provider: ProviderHttpClient) -> None:
    code = sign_in(http, code_challenge="plain-challenge", code_challenge_method="plain")
    with pytest.raises(ProviderFailure):
        exchange(provider, code, code_verifier="other")
    code = sign_in(http, code_challenge="plain-challenge", code_challenge_method="plain")
    assert exchange(provider, code, code_verifier="plain-challenge").identity.email == "ada@example.com"  # type: ignore[attr-defined]


def test_a_wrong_nonce_is_refused(http: httpx.Client, provider: ProviderHttpClient) -> None:
    with pytest.raises(ProviderFailure) as failure:
        exchange(provider, sign_in(http), nonce="another-nonce")
    assert failure.value.kind == "unavailable"


@pytest.mark.parametrize("kind", ["access_denied", "invalid_grant", "unavailable"])
def test_the_fail_next_hook_fails_the_next_exchange_only(
    http: httpx.Client, provider: ProviderHttpClient, kind: str
) -> None:
    assert http.post(f"{MOCK}/hooks/fail-next", json={"kind": kind, "client_id": "github"}).status_code == 200
    with pytest.raises(ProviderFailure) as failure:
        exchange(provider, sign_in(http))
    assert failure.value.kind == kind
    assert exchange(provider, sign_in(http)).identity.email == "ada@example.com"  # type: ignore[attr-defined]


def test_refresh_and_revocation(http: httpx.Client, provider: ProviderHttpClient) -> None:
    tokens = exchange(provider, sign_in(http)).tokens  # type: ignore[attr-defined]
    fresh = provider.perform(RefreshProviderToken(spec(provider), tokens.refresh_token, "openid email"))
    assert fresh.access_token != tokens.access_token  # type: ignore[attr-defined]
    assert fresh.refresh_token is None  # type: ignore[attr-defined]
    assert http.post(f"{MOCK}/hooks/revoke", json={"token": tokens.access_token}).json() == {"revoked": True}
    assert provider.perform(CheckProviderAccessToken(spec(provider), tokens.access_token)) is False
    assert http.post(f"{MOCK}/hooks/revoke", json={"token": tokens.refresh_token}).json() == {"revoked": True}
    with pytest.raises(ProviderFailure) as failure:
        provider.perform(RefreshProviderToken(spec(provider), tokens.refresh_token, "openid email"))
    assert failure.value.kind == "invalid_token"


def test_cancel_redirects_with_access_denied(http: httpx.Client) -> None:
    form = {"client_id": "github", "redirect_uri": REDIRECT, "response_type": "code", "state": "s", "action": "cancel"}
    answer = http.post(
        f"{MOCK}/authorize", content=urlencode(form), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert answer.status_code == 303
    assert parse_qs(urlsplit(answer.headers["location"]).query) == {"error": ["access_denied"], "state": ["s"]}


def test_a_bad_redirect_uri_is_refused_on_the_page_not_redirected(http: httpx.Client) -> None:
    answer = http.get(
        f"{MOCK}/authorize", params={"client_id": "github", "redirect_uri": "not a url", "response_type": "code"}
    )
    assert answer.status_code == 400


def test_the_jwks_holds_public_keys_only(http: httpx.Client) -> None:
    keys = http.get(f"{MOCK}/jwks").json()["keys"]
    assert sorted(key["alg"] for key in keys) == ["ES256", "RS256"]
    assert not any("d" in key for key in keys)


def test_a_production_service_has_no_mock_routes() -> None:
    production = Service(ServiceOptions(dev_mode=False))
    dev = Service(ServiceOptions(dev_mode=True))
    mock = {(route.method, route.pattern) for route in MOCK_OAUTH_ROUTES}
    assert not mock & {(route.method, route.pattern) for route in production._router.routes}
    assert mock <= {(route.method, route.pattern) for route in dev._router.routes}
