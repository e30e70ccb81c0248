"""The hosts' OAuth provider clients (`identity_hosting.oauth_client`) against providers answering as they document
(an `httpx.MockTransport`: the providers are a boundary we do not own): ID tokens verified against the provider's
JWKS (a tampered one refused; the JWKS fetched once for many sign-ins, and again when a token names a key it does
not hold), the identity each provider type's API gives (GitHub `/user` + `/user/emails`, Discord, Bitbucket,
Spotify), the async client doing the same, provider failures mapped to `ProviderFailure` kinds, a provider that
accepts the connection and never answers (a local socket) ending in `unavailable` after the timeout, and the hosts
building the client with the configured timeout and closing it with themselves."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from asgi_app import IdentityASGI
from identity_hosting.egress import GuardedTransport
from identity_hosting.oauth_client import AsyncProviderHttpClient, ProviderHttpClient, local_mock_mount
from identity_hosting.settings import ConfigurationError, Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto.effects.oauth_provider import (
    CheckProviderAccessToken,
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderEndpoints,
    ProviderFailure,
    ProviderGrant,
    ProviderSpec,
    RefreshProviderToken,
)
from identity_proto.oauth import provider_spec
from identity_proto.records import OAuthProviderConfig

ISSUER = "https://id.provider.example"
CLIENT_ID = "our-client"
NONCE = "nonce-1"
OIDC = ProviderSpec(
    "corp",
    "oidc",
    CLIENT_ID,
    "our-secret",
    ProviderEndpoints(
        authorization_endpoint=f"{ISSUER}/authorize",
        token_endpoint=f"{ISSUER}/token",
        userinfo_endpoint=f"{ISSUER}/userinfo",
        jwks_uri=f"{ISSUER}/jwks",
        issuer=ISSUER,
    ),
)


def exchange(spec: ProviderSpec, nonce: str | None = None) -> ExchangeProviderCode:
    return ExchangeProviderCode(
        spec, code="the-code", redirect_uri="https://us.example/cb", code_verifier="v" * 43, scope="x", nonce=nonce
    )


class OidcProvider:
    """An OpenID Connect provider as it answers: a token endpoint giving a signed ID token, and its JWKS. Counts
    the requests each path gets."""

    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256", parameters={"kid": "k1"})
        self.published = [self.key]
        self.hits: Counter[str] = Counter()
        self.claims: dict[str, Any] = {}
        self.tamper: Callable[[str], str] = lambda token: token

    def id_token(self, **changes: Any) -> str:
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "aud": CLIENT_ID,
            "sub": "user-1",
            "email": "ada@example.com",
            "email_verified": True,
            "name": "Ada",
            "iat": now,
            "exp": now + 300,
            "nonce": NONCE,
            **self.claims,
            **changes,
        }
        return self.tamper(jwt.encode({"alg": "ES256", "kid": self.key.kid}, claims, self.key))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.hits[request.url.path] += 1
        if request.url.path == "/token":
            return httpx.Response(
                200, json={"access_token": "at", "token_type": "Bearer", "expires_in": 60, "id_token": self.id_token()}
            )
        if request.url.path == "/jwks":
            return httpx.Response(200, json=KeySet(self.published).as_dict(private=False))
        return httpx.Response(404)


@pytest.fixture
def oidc() -> OidcProvider:
    return OidcProvider()


@pytest.fixture
def client(oidc: OidcProvider) -> Iterator[ProviderHttpClient]:
    provider = ProviderHttpClient(network=httpx.MockTransport(oidc), timeout_s=5)
    yield provider
    provider.close()


def test_a_verified_id_token_gives_the_identity(client: ProviderHttpClient) -> None:
    grant = client.perform(exchange(OIDC, NONCE))
    assert isinstance(grant, ProviderGrant)
    identity = grant.identity
    assert (identity.account_id, identity.email, identity.email_verified, identity.display_name) == (
        "user-1",
        "ada@example.com",
        True,
        "Ada",
    )
    assert grant.tokens.access_token == "at"


def test_a_tampered_id_token_is_refused(oidc: OidcProvider, client: ProviderHttpClient) -> None:
    def other_subject(token: str) -> str:
        header, payload, signature = token.split(".")
        claims = json.loads(_b64decode(payload))
        claims["sub"] = "someone-else"
        return ".".join((header, _b64encode(json.dumps(claims).encode()), signature))

    oidc.tamper = other_subject
    with pytest.raises(ProviderFailure) as refused:
        client.perform(exchange(OIDC, NONCE))
    assert refused.value.kind == "unavailable"


@pytest.mark.parametrize(
    ("claims", "nonce"),
    [
        ({"aud": "another-client"}, NONCE),
        ({"iss": "https://evil.example"}, NONCE),
        ({"exp": int(time.time()) - 3600}, NONCE),
        ({}, "another-nonce"),
    ],
    ids=["audience", "issuer", "expired", "nonce"],
)
def test_an_id_token_for_someone_else_is_refused(
    oidc: OidcProvider, client: ProviderHttpClient, claims: dict[str, Any], nonce: str
) -> None:
    oidc.claims = claims
    with pytest.raises(ProviderFailure) as refused:
        client.perform(exchange(OIDC, nonce))
    assert refused.value.kind == "unavailable"


def test_an_id_token_signed_by_a_key_not_in_the_jwks_is_refused(oidc: OidcProvider, client: ProviderHttpClient) -> None:
    oidc.published = [ECKey.generate_key("P-256", parameters={"kid": "k1"})]  # same kid, another key
    with pytest.raises(ProviderFailure):
        client.perform(exchange(OIDC, NONCE))


def test_the_jwks_is_fetched_once_for_many_sign_ins(oidc: OidcProvider, client: ProviderHttpClient) -> None:
    for _ in range(5):
        client.perform(exchange(OIDC, NONCE))
    assert (oidc.hits["/token"], oidc.hits["/jwks"]) == (5, 1)


def test_an_unknown_kid_fetches_the_jwks_again_once(oidc: OidcProvider, client: ProviderHttpClient) -> None:
    client.perform(exchange(OIDC, NONCE))
    rotated = ECKey.generate_key("P-256", parameters={"kid": "k2"})
    oidc.key, oidc.published = rotated, [rotated]  # the provider rotated its key
    client.perform(exchange(OIDC, NONCE))
    client.perform(exchange(OIDC, NONCE))
    assert oidc.hits["/jwks"] == 2


def test_a_kid_unknown_even_after_a_refetch_is_refused(oidc: OidcProvider, client: ProviderHttpClient) -> None:
    client.perform(exchange(OIDC, NONCE))
    oidc.key = ECKey.generate_key("P-256", parameters={"kid": "never-published"})
    with pytest.raises(ProviderFailure):
        client.perform(exchange(OIDC, NONCE))
    assert oidc.hits["/jwks"] == 2


def test_the_async_client_verifies_and_caches_alike(oidc: OidcProvider) -> None:
    async def main() -> list[ProviderGrant]:
        provider = AsyncProviderHttpClient(network=httpx.MockTransport(oidc), timeout_s=5)
        try:
            grants = [await provider.perform(exchange(OIDC, NONCE)) for _ in range(3)]
            oidc.tamper = lambda token: token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            with pytest.raises(ProviderFailure):
                await provider.perform(exchange(OIDC, NONCE))
        finally:
            await provider.aclose()
        return grants  # type: ignore[return-value]

    grants = asyncio.run(main())
    assert [g.identity.account_id for g in grants] == ["user-1"] * 3
    assert oidc.hits["/jwks"] == 1


# --------------------------------------------------------------------------------------------------------------
# The providers without OpenID Connect: identity from their APIs, as each documents its answers


def api_provider(routes: dict[str, Any], seen: list[httpx.Request] | None = None) -> httpx.MockTransport:
    """A provider answering `routes` (host + path -> JSON) and its token endpoint (any path ending in token)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        where = request.url.host + request.url.path
        if request.method == "POST":
            return httpx.Response(200, json={"access_token": "provider-at", "token_type": "bearer", "scope": "granted"})
        if request.headers.get("authorization") != "Bearer provider-at":
            return httpx.Response(401, json={"message": "Bad credentials"})
        if where in routes:
            return httpx.Response(200, json=routes[where])
        return httpx.Response(404, json={"message": "Not Found"})

    return httpx.MockTransport(answer)


def identity_of(provider_type: str, routes: dict[str, Any], seen: list[httpx.Request] | None = None) -> Any:
    spec = provider_spec(OAuthProviderConfig(id=provider_type, type=provider_type, client_id="id", client_secret="s"))
    provider = ProviderHttpClient(network=api_provider(routes, seen))
    try:
        grant = provider.perform(exchange(spec))
    finally:
        provider.close()
    assert isinstance(grant, ProviderGrant)
    return grant.identity


def test_github_identity_is_its_user_and_its_primary_verified_email() -> None:
    seen: list[httpx.Request] = []
    identity = identity_of(
        "github",
        {
            # https://docs.github.com/en/rest/users/users#get-the-authenticated-user (the public e-mail may be any)
            "api.github.com/user": {
                "login": "octocat",
                "id": 583231,
                "avatar_url": "https://avatars.githubusercontent.com/u/583231?v=4",
                "name": "The Octocat",
                "email": "public@example.com",
            },
            # https://docs.github.com/en/rest/users/emails#list-email-addresses-for-the-authenticated-user
            "api.github.com/user/emails": [
                {"email": "old@example.com", "verified": True, "primary": False, "visibility": None},
                {"email": "octocat@github.com", "verified": True, "primary": True, "visibility": "public"},
            ],
        },
        seen,
    )
    assert (identity.account_id, identity.email, identity.email_verified) == ("583231", "octocat@github.com", True)
    assert (identity.display_name, identity.profile_image_url) == (
        "The Octocat",
        "https://avatars.githubusercontent.com/u/583231?v=4",
    )
    token_request = seen[0]
    assert str(token_request.url) == "https://github.com/login/oauth/access_token"
    form = parse_qs(token_request.content.decode())
    assert (form["code"], form["code_verifier"], form["client_id"]) == (["the-code"], ["v" * 43], ["id"])


def test_github_without_a_verified_primary_email_gives_an_unverified_one() -> None:
    identity = identity_of(
        "github",
        {
            "api.github.com/user": {"login": "octocat", "id": 1, "name": None, "email": "public@example.com"},
            "api.github.com/user/emails": [{"email": "new@example.com", "verified": False, "primary": True}],
        },
    )
    assert (identity.email, identity.email_verified, identity.display_name) == (
        "public@example.com",
        False,
        "octocat",
    )


def test_discord_identity() -> None:
    # https://discord.com/developers/docs/resources/user#user-object
    identity = identity_of(
        "discord",
        {
            "discord.com/api/users/@me": {
                "id": "80351110224678912",
                "username": "nelly",
                "global_name": "Nelly",
                "avatar": "8342729096ea3675442027381ff50dfe",
                "verified": True,
                "email": "nelly@discord.com",
            }
        },
    )
    assert (identity.account_id, identity.email, identity.email_verified, identity.display_name) == (
        "80351110224678912",
        "nelly@discord.com",
        True,
        "Nelly",
    )
    assert identity.profile_image_url == (
        "https://cdn.discordapp.com/avatars/80351110224678912/8342729096ea3675442027381ff50dfe.png"
    )


def test_bitbucket_identity_is_its_user_and_its_primary_email() -> None:
    # https://developer.atlassian.com/cloud/bitbucket/rest/api-group-users/
    identity = identity_of(
        "bitbucket",
        {
            "api.bitbucket.org/2.0/user": {
                "uuid": "{d301aafa-d676-4ee0-88be-962be7417567}",
                "display_name": "Evan Bee",
                "links": {"avatar": {"href": "https://bitbucket.org/account/evanbee/avatar/"}},
            },
            "api.bitbucket.org/2.0/user/emails": {
                "values": [
                    {"email": "other@example.com", "is_primary": False, "is_confirmed": True},
                    {"email": "evan@example.com", "is_primary": True, "is_confirmed": True},
                ]
            },
        },
    )
    assert (identity.account_id, identity.email, identity.email_verified, identity.display_name) == (
        "{d301aafa-d676-4ee0-88be-962be7417567}",
        "evan@example.com",
        True,
        "Evan Bee",
    )
    assert identity.profile_image_url == "https://bitbucket.org/account/evanbee/avatar/"


def test_spotify_identity_never_claims_a_verified_email() -> None:
    # https://developer.spotify.com/documentation/web-api/reference/get-current-users-profile
    identity = identity_of(
        "spotify",
        {
            "api.spotify.com/v1/me": {
                "id": "smedjan",
                "display_name": "JM Wizzler",
                "email": "email@example.com",
                "images": [{"url": "https://i.scdn.co/image/ab67616d00001e02", "height": 300, "width": 300}],
            }
        },
    )
    assert (identity.account_id, identity.email, identity.email_verified, identity.display_name) == (
        "smedjan",
        "email@example.com",
        False,
        "JM Wizzler",
    )
    assert identity.profile_image_url == "https://i.scdn.co/image/ab67616d00001e02"


def test_a_user_api_that_refuses_the_token_is_unavailable() -> None:
    with pytest.raises(ProviderFailure) as refused:
        identity_of("discord", {})  # 404 for /users/@me
    assert refused.value.kind == "unavailable"


# --------------------------------------------------------------------------------------------------------------
# Failures


def failing_token_endpoint(status: int, body: Any) -> ProviderHttpClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body) if body is not None else httpx.Response(status, text="<html>")

    return ProviderHttpClient(network=httpx.MockTransport(answer))


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (400, {"error": "access_denied"}, "access_denied"),
        (400, {"error": "invalid_grant", "error_description": "bad code"}, "invalid_grant"),
        (401, {"error": "invalid_client"}, "unavailable"),
        (503, None, "unavailable"),
        (200, None, "unavailable"),
    ],
    ids=["access-denied", "invalid-grant", "other-oauth-error", "down", "not-json"],
)
def test_token_endpoint_failures_map_to_their_kinds(status: int, body: Any, kind: str) -> None:
    provider = failing_token_endpoint(status, body)
    try:
        with pytest.raises(ProviderFailure) as failed:
            provider.perform(exchange(OIDC, NONCE))
    finally:
        provider.close()
    assert failed.value.kind == kind


def test_a_refused_refresh_token_is_invalid_token() -> None:
    provider = failing_token_endpoint(400, {"error": "invalid_grant"})
    try:
        with pytest.raises(ProviderFailure) as failed:
            provider.perform(RefreshProviderToken(OIDC, refresh_token="rt", scope="x"))
    finally:
        provider.close()
    assert failed.value.kind == "invalid_token"


@pytest.fixture
def silent_provider() -> Iterator[str]:
    """A provider on loopback that accepts connections and never answers: its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(connection)  # held open, never read from or answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for connection in accepted:
            connection.close()


def silent_spec(base: str) -> ProviderSpec:
    return ProviderSpec(
        "silent", "oidc", "id", "s", ProviderEndpoints(authorization_endpoint=f"{base}/a", token_endpoint=f"{base}/t")
    )


def test_a_provider_that_never_answers_is_unavailable_after_the_timeout(silent_provider: str) -> None:
    provider = ProviderHttpClient(timeout_s=1, allow_private=True, require_https=False)  # a local provider
    started = time.monotonic()
    try:
        with pytest.raises(ProviderFailure) as failed:
            provider.perform(exchange(silent_spec(silent_provider)))
    finally:
        provider.close()
    assert failed.value.kind == "unavailable"
    assert 0.9 <= time.monotonic() - started < 5


def test_the_async_client_times_out_alike(silent_provider: str) -> None:
    async def main() -> ProviderFailure:
        provider = AsyncProviderHttpClient(timeout_s=1, allow_private=True, require_https=False)
        try:
            with pytest.raises(ProviderFailure) as failed:
                await provider.perform(exchange(silent_spec(silent_provider)))
        finally:
            await provider.aclose()
        return failed.value

    started = time.monotonic()
    assert asyncio.run(main()).kind == "unavailable"
    assert 0.9 <= time.monotonic() - started < 5


# --------------------------------------------------------------------------------------------------------------
# The hosts' clients


def test_the_timeout_setting_is_read_and_checked() -> None:
    assert Settings.from_env({}).oauth_timeout_s == 10
    assert Settings.from_env({"IDENTITY_OAUTH_TIMEOUT_SECONDS": "2.5"}).oauth_timeout_s == 2.5
    for bad in ("soon", "0", "-1", "nan", "inf", "121"):
        with pytest.raises(ConfigurationError, match="IDENTITY_OAUTH_TIMEOUT_SECONDS"):
            Settings.from_env({"IDENTITY_OAUTH_TIMEOUT_SECONDS": bad})


def test_the_wsgi_host_closes_its_provider_client() -> None:
    host = IdentityWSGI(Settings(oauth_timeout_s=3))
    provider = host.provider_client()
    assert provider is host.provider_client()
    assert provider._http.timeout.read == 3
    host.close()
    assert provider._http.is_closed


def test_the_asgi_host_closes_its_provider_client_at_shutdown() -> None:
    async def main() -> AsyncProviderHttpClient:
        host = IdentityASGI(Settings(oauth_timeout_s=3))
        await host.startup()
        provider = host.provider_client()
        assert provider._http.timeout.read == 3
        await host.shutdown()
        return provider

    assert asyncio.run(main())._http.is_closed


@pytest.mark.parametrize(
    ("url", "base", "mount"),
    [
        ("http://shop.test/auth/mock-oauth/token", "http://shop.test/auth", "/auth"),
        ("http://shop.test/mock-oauth/token", "http://shop.test", ""),
        ("http://SHOP.test/mock-oauth/jwks", "http://shop.test/", ""),
        ("http://other.test/auth/mock-oauth/token", "http://shop.test/auth", None),
        ("https://shop.test/auth/mock-oauth/token", "http://shop.test/auth", None),
        ("http://shop.test/mock-oauth/token", "http://shop.test/auth", None),
        ("http://shop.test/auth/mock-oauthx/token", "http://shop.test/auth", None),
        ("http://anywhere.test/mock-oauth/token", "", ""),
    ],
)
def test_only_the_services_own_mock_urls_are_served_in_process(url: str, base: str, mount: str | None) -> None:
    assert local_mock_mount(url, base) == mount


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# --------------------------------------------------------------------------------------------------------------
# The address rule (`identity_proto.egress`): every URL the client calls, as written and as resolved


@pytest.fixture
def loopback_named_idp(monkeypatch: pytest.MonkeyPatch, silent_provider: str) -> str:
    """`idp.example.com` resolves to the loopback listener (the resolver patched at its boundary,
    `socket.getaddrinfo`, which asyncio's resolver calls too); its port is the silent provider's."""
    resolve = socket.getaddrinfo

    def hosts(host: str | bytes, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ("idp.example.com", b"idp.example.com"):  # anyio passes the IDNA-encoded bytes
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", int(port)))]
        return resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hosts)
    return silent_provider.rsplit(":", 1)[1]


def _every_call(base: str) -> list[Any]:
    """One provider effect per outbound URL: discovery, the token endpoint (exchange and refresh), userinfo."""
    endpoints = ProviderEndpoints(
        authorization_endpoint=f"{base}/a", token_endpoint=f"{base}/t", userinfo_endpoint=f"{base}/u"
    )
    spec = ProviderSpec("corp", "oidc", "id", "s", endpoints)
    return [
        DiscoverProvider(base),
        exchange(spec),
        RefreshProviderToken(spec, refresh_token="r", scope="openid"),
        CheckProviderAccessToken(spec, access_token="a"),
    ]


@pytest.mark.parametrize(
    "base",
    [
        "https://idp.example.com:{port}",  # a name resolving to loopback
        "https://127.0.0.1:{port}",
        "https://localhost:{port}",
        "http://idp.example.com:{port}",  # production: https only
    ],
)
def test_in_production_no_provider_call_reaches_a_non_global_address(
    loopback_named_idp: str, silent_provider: str, base: str
) -> None:
    """The listener behind `silent_provider` would hold any connection until the timeout: a refusal is immediate
    and `unavailable`, whatever the call."""
    url = base.format(port=loopback_named_idp)
    started = time.monotonic()
    provider = ProviderHttpClient(timeout_s=3, allow_private=False, require_https=True)
    try:
        for effect in _every_call(url):
            with pytest.raises(ProviderFailure) as failed:
                provider.perform(effect)
            assert failed.value.kind == "unavailable"
    finally:
        provider.close()

    async def main() -> None:
        client = AsyncProviderHttpClient(timeout_s=3, allow_private=False, require_https=True)
        try:
            for effect in _every_call(url):
                with pytest.raises(ProviderFailure) as failed:
                    await client.perform(effect)
                assert failed.value.kind == "unavailable"
        finally:
            await client.aclose()

    asyncio.run(main())
    assert time.monotonic() - started < 2.5


def test_an_id_tokens_jwks_on_a_non_global_address_is_not_fetched(loopback_named_idp: str) -> None:
    """The JWKS URL (from a discovery document) goes through the same rule: the exchange's token answer comes from
    a public provider (a mock transport behind the guard), its `jwks_uri` names loopback."""
    jwks_uri = f"https://idp.example.com:{loopback_named_idp}/jwks"
    seen: list[str] = []

    def public(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"access_token": "a", "token_type": "Bearer", "id_token": "x.y.z"})

    endpoints = ProviderEndpoints(
        authorization_endpoint="https://id.provider.example/a",
        token_endpoint="https://id.provider.example/t",
        jwks_uri=jwks_uri,
        issuer="https://id.provider.example",
    )

    class PublicProviderOrTheNetwork(httpx.BaseTransport):
        """The public provider as a mock; any other host through the real, guarded network."""

        def __init__(self) -> None:
            self.mock = httpx.MockTransport(public)
            self.network = GuardedTransport(allow_private=False, require_https=True)

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.host == "id.provider.example":
                return self.mock.handle_request(request)
            return self.network.handle_request(request)

    provider = ProviderHttpClient(timeout_s=3, network=PublicProviderOrTheNetwork())
    started = time.monotonic()
    try:
        with pytest.raises(ProviderFailure) as failed:
            provider.perform(exchange(ProviderSpec("corp", "oidc", "id", "s", endpoints)))
    finally:
        provider.close()
    assert failed.value.kind == "unavailable"
    assert seen == ["https://id.provider.example/t"]
    assert time.monotonic() - started < 2.5
