# ruff: noqa: S105, S106  (endpoint and method names, not passwords)
"""OAuth provider types: where each well-known provider's endpoints are, what it is asked for, and how a project's
`OAuthProviderConfig` becomes the `ProviderSpec` a host's provider client is given.

The endpoints are the providers' documented ones. `oidc` has none here: they come from its issuer's discovery
document (`DiscoverProvider`, cached by the host). `mock` is the service's own dev/test provider, served under
`MOCK_OAUTH_PATH` of this very service (dev mode only); a provider of any type whose `client_id` is "MOCK" is
served by it too (the original's shared "MOCK" credentials, reference §7.7).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from identity_proto.effects.oauth_provider import ProviderEndpoints, ProviderSpec
from identity_proto.records import OAuthProviderConfig

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "MOCK_CLIENT_ID",
    "MOCK_OAUTH_PATH",
    "PROVIDER_TYPES",
    "ProviderType",
    "mock_endpoints",
    "mock_issuer",
    "provider_spec",
    "spec_for",
    "uses_mock",
]

#: Where the mock provider is served, below the service's base URL (dev mode only).
MOCK_OAUTH_PATH = "/mock-oauth"
#: A provider configured with this client id is served by the mock provider (dev mode only).
MOCK_CLIENT_ID = "MOCK"


@dataclass(frozen=True, slots=True)
class ProviderType:
    """A well-known provider type."""

    name: str
    #: None for `oidc` and `mock`: discovered.
    endpoints: ProviderEndpoints | None
    #: The scopes every sign-in asks for (the project's `provider_scope` adds to them).
    base_scope: str
    #: Whether the provider speaks OpenID Connect (an ID token comes back and is verified against its JWKS).
    openid: bool
    token_auth_method: str = "client_secret_post"
    #: Extra authorize parameters the provider needs for a refresh token (Google: offline access).
    extra_authorize_params: tuple[tuple[str, str], ...] = ()


def _microsoft(tenant: str) -> ProviderEndpoints:
    base = f"https://login.microsoftonline.com/{tenant}"
    return ProviderEndpoints(
        authorization_endpoint=f"{base}/oauth2/v2.0/authorize",
        token_endpoint=f"{base}/oauth2/v2.0/token",
        userinfo_endpoint="https://graph.microsoft.com/oidc/userinfo",
    )


PROVIDER_TYPES: dict[str, ProviderType] = {
    "google": ProviderType(
        "google",
        ProviderEndpoints(
            authorization_endpoint="https://accounts.google.com/o/oauth2/v2/auth",
            token_endpoint="https://oauth2.googleapis.com/token",
            userinfo_endpoint="https://openidconnect.googleapis.com/v1/userinfo",
            jwks_uri="https://www.googleapis.com/oauth2/v3/certs",
            issuer="https://accounts.google.com",
        ),
        "openid email profile",
        openid=True,
        extra_authorize_params=(("access_type", "offline"), ("prompt", "consent")),
    ),
    "github": ProviderType(
        "github",
        ProviderEndpoints(
            authorization_endpoint="https://github.com/login/oauth/authorize",
            token_endpoint="https://github.com/login/oauth/access_token",
            userinfo_endpoint="https://api.github.com/user",
        ),
        "user:email",
        openid=False,
    ),
    # Microsoft's ID tokens name the tenant in `iss`; with the multi-tenant "common" endpoint the issuer cannot
    # be checked up front, so identity comes from its OIDC userinfo endpoint instead.
    "microsoft": ProviderType("microsoft", _microsoft("common"), "openid email profile offline_access", openid=False),
    "discord": ProviderType(
        "discord",
        ProviderEndpoints(
            authorization_endpoint="https://discord.com/oauth2/authorize",
            token_endpoint="https://discord.com/api/oauth2/token",
            userinfo_endpoint="https://discord.com/api/users/@me",
        ),
        "identify email",
        openid=False,
    ),
    "gitlab": ProviderType(
        "gitlab",
        ProviderEndpoints(
            authorization_endpoint="https://gitlab.com/oauth/authorize",
            token_endpoint="https://gitlab.com/oauth/token",
            userinfo_endpoint="https://gitlab.com/oauth/userinfo",
            jwks_uri="https://gitlab.com/oauth/discovery/keys",
            issuer="https://gitlab.com",
        ),
        "openid email profile",
        openid=True,
    ),
    "bitbucket": ProviderType(
        "bitbucket",
        ProviderEndpoints(
            authorization_endpoint="https://bitbucket.org/site/oauth2/authorize",
            token_endpoint="https://bitbucket.org/site/oauth2/access_token",
            userinfo_endpoint="https://api.bitbucket.org/2.0/user",
        ),
        "account email",
        openid=False,
        token_auth_method="client_secret_basic",
    ),
    "spotify": ProviderType(
        "spotify",
        ProviderEndpoints(
            authorization_endpoint="https://accounts.spotify.com/authorize",
            token_endpoint="https://accounts.spotify.com/api/token",
            userinfo_endpoint="https://api.spotify.com/v1/me",
        ),
        "user-read-email user-read-private",
        openid=False,
        token_auth_method="client_secret_basic",
    ),
    "oidc": ProviderType("oidc", None, "openid email profile", openid=True),
    # The mock asks for what the original's mock client asks for (reference §7.7).
    "mock": ProviderType("mock", None, "openid email profile offline_access", openid=True),
}


def mock_issuer(base_url: str) -> str:
    """The mock provider's issuer for a service whose public base URL is `base_url` (scheme, host, mount point)."""
    return base_url.rstrip("/") + MOCK_OAUTH_PATH


def mock_endpoints(base_url: str) -> ProviderEndpoints:
    """The mock provider's endpoints (the same its discovery document names)."""
    issuer = mock_issuer(base_url)
    return ProviderEndpoints(
        authorization_endpoint=f"{issuer}/authorize",
        token_endpoint=f"{issuer}/token",
        userinfo_endpoint=f"{issuer}/userinfo",
        jwks_uri=f"{issuer}/jwks",
        issuer=issuer,
    )


def uses_mock(config: OAuthProviderConfig) -> bool:
    """Whether `config` is served by the mock provider (its type, or the shared "MOCK" client id)."""
    return config.type == "mock" or config.client_id == MOCK_CLIENT_ID


def provider_spec(config: OAuthProviderConfig, endpoints: ProviderEndpoints | None = None) -> ProviderSpec:
    """The spec of `config` for a provider client. `endpoints` must be given for `oidc` and mock providers (their
    discovered ones); the well-known types have theirs here."""
    kind = PROVIDER_TYPES[config.type]
    if endpoints is None:
        if kind.endpoints is None:
            raise ValueError(f"provider {config.id!r} ({config.type}) needs its discovered endpoints")
        endpoints = kind.endpoints
        if config.type == "microsoft" and config.microsoft_tenant_id:
            endpoints = _microsoft(config.microsoft_tenant_id)
    return ProviderSpec(
        provider_id=config.id,
        type=config.type,
        client_id=config.client_id or "",
        client_secret=config.client_secret,
        endpoints=endpoints,
        token_auth_method=kind.token_auth_method,
    )


def spec_for(
    config: OAuthProviderConfig,
    base_url: str,
    discover: Callable[[str], Generator[Any, Any, ProviderEndpoints]],
) -> Generator[Any, Any, ProviderSpec]:
    """A flow: the spec of `config` as every caller needs it (sign-in, token refresh, token checks), so that a
    provider is always the same client to its provider. A mock-served provider is the mock type, under this service
    (`base_url`), with the provider id as its client id (the mock binds codes and tokens to it); an `oidc` issuer's
    endpoints come from `discover(issuer_url)` (the caller's `DiscoverProvider`, its failures mapped its way)."""
    if uses_mock(config):
        mock = OAuthProviderConfig(
            id=config.id, type="mock", client_id=config.id, client_secret=config.client_secret or MOCK_CLIENT_ID
        )
        return provider_spec(mock, mock_endpoints(base_url))
    endpoints: ProviderEndpoints | None = None
    if config.type == "oidc":
        endpoints = yield from discover(config.issuer_url or "")
    return provider_spec(config, endpoints)
