"""Talking to an OAuth provider, as effects: the core says *what* it needs from the provider (a code exchanged, a
token refreshed, an access token checked, an issuer's endpoints discovered) and a host's `ProviderClient` does it
over HTTP with a well-kept OAuth/OIDC client library (`identity_hosting.oauth_client`). The core stays sans-io; the
host owns sockets, timeouts, TLS and the JWKS cache.

Failures come back as `ProviderFailure` thrown into the flow at the `yield` (as the drivers do with every effect's
exception); the flow maps each `ProviderFailure.kind` to the reference's error (§7.3 step 4):

- `access_denied`  -> 400 OAUTH_PROVIDER_ACCESS_DENIED
- `invalid_grant`  -> 400 plain "Inner OAuth callback failed due to invalid grant. Please try again."
- `unavailable`    -> 503 OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE (connection refused, timeout, 5xx, bad answer)
- `invalid_token`  -> (refresh / check) the stored token is no good: the flow forgets it
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal, Protocol

from identity_proto.effects.base import Effect, R

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "AsyncProviderClient",
    "CheckProviderAccessToken",
    "DiscoverProvider",
    "ExchangeProviderCode",
    "ProviderClient",
    "ProviderEffect",
    "ProviderEndpoints",
    "ProviderFailure",
    "ProviderGrant",
    "ProviderIdentity",
    "ProviderSpec",
    "ProviderTokens",
    "RefreshProviderToken",
]

FailureKind = Literal["access_denied", "invalid_grant", "unavailable", "invalid_token"]


class ProviderFailure(Exception):
    """The provider said no, or could not be reached. `kind` is one of the four above; `detail` is for logs only
    (never rendered: it may quote the provider)."""

    def __init__(self, kind: FailureKind, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind: FailureKind = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ProviderEndpoints:
    """Where a provider's endpoints are. Static for the well-known types (`identity_proto.oauth.PROVIDER_TYPES`),
    discovered from the issuer for `oidc` (`DiscoverProvider`)."""

    authorization_endpoint: str
    token_endpoint: str
    #: OpenID Connect userinfo, or the provider's own profile API (GitHub's `/user`).
    userinfo_endpoint: str | None = None
    #: Set for OpenID Connect providers: ID tokens are verified against it (and the issuer and client id).
    jwks_uri: str | None = None
    issuer: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """Everything the host needs to talk to one configured provider for one request."""

    #: The project's provider id (`github`, `my-oidc`, ...): for logs and the host's caches.
    provider_id: str
    #: `OAuthProviderConfig.type` (for the mock provider: the type it stands in for, or "mock").
    type: str
    client_id: str
    client_secret: str | None = field(repr=False)
    endpoints: ProviderEndpoints
    #: How the client authenticates at the token endpoint (RFC 6749 §2.3.1): `client_secret_post` or
    #: `client_secret_basic`.
    token_auth_method: str = "client_secret_post"  # noqa: S105 (a method name)


@dataclass(frozen=True, slots=True)
class ProviderTokens:
    """What the provider's token endpoint granted."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    #: Milliseconds since the epoch (host clock), None when the provider did not say.
    expires_at_millis: int | None = None
    #: The scopes granted (space-separated, as the provider said; the requested ones when it did not).
    scope: str = ""


@dataclass(frozen=True, slots=True)
class ProviderIdentity:
    """Who signed in at the provider (reference §7.4 "provider info")."""

    account_id: str
    email: str | None = None
    email_verified: bool = False
    display_name: str | None = None
    profile_image_url: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderGrant:
    tokens: ProviderTokens
    identity: ProviderIdentity


class ProviderEffect(Effect[R]):
    """An exchange with an OAuth provider, performed by the host's `ProviderClient`."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class DiscoverProvider(ProviderEffect[ProviderEndpoints]):
    """The endpoints an OpenID Connect issuer's `/.well-known/openid-configuration` names (hosts cache them)."""

    issuer_url: str


@dataclass(frozen=True, slots=True)
class ExchangeProviderCode(ProviderEffect[ProviderGrant]):
    """Exchange the provider's authorization `code` (with our PKCE verifier) for tokens, then learn who signed in:
    from the ID token (verified against the provider's JWKS, issuer, audience and `nonce`) where there is one,
    else from the userinfo endpoint (GitHub: also its verified primary e-mail)."""

    provider: ProviderSpec
    code: str = field(repr=False)
    redirect_uri: str
    code_verifier: str = field(repr=False)
    #: The scopes asked for (space-separated): the host asks userinfo only for what they allow.
    scope: str
    nonce: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class RefreshProviderToken(ProviderEffect[ProviderTokens]):
    """A new access token for a stored refresh token (`ProviderTokens.refresh_token` is None when the provider did
    not rotate it: keep the old one)."""

    provider: ProviderSpec
    refresh_token: str = field(repr=False)
    scope: str


@dataclass(frozen=True, slots=True)
class CheckProviderAccessToken(ProviderEffect[bool]):
    """Whether the provider still accepts `access_token` (one userinfo call): False when it refuses the token;
    `ProviderFailure("unavailable")` when it cannot say."""

    provider: ProviderSpec
    access_token: str = field(repr=False)


class ProviderClient(Protocol):
    """Performs provider effects for sync hosts (raises `ProviderFailure`, never anything else on a provider's
    answer)."""

    def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` and return its result."""
        ...


class AsyncProviderClient(Protocol):
    """The asyncio twin of `ProviderClient`."""

    async def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` and return its result."""
        ...
