"""OAuth provider configuration (the admin's `config.oauth_providers`), a user's linked accounts
(`/oauth-providers`, reference part 2 §7.6) and connected accounts (`/connected-accounts`).

The config rules that depend on the host (mock providers and `http` issuers only in dev mode) and on what is
stored (a client secret left out of an update keeps the stored one) are checked by the flow
(`identity_proto.flows.oauth_accounts.configured_providers`), not here.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import Field, field_validator

from identity_proto.records import OAUTH_MERGE_STRATEGIES, OAUTH_PROVIDER_TYPES, OAuthProviderConfig
from identity_proto.schemas.base import (
    UUID_OR_ME_PATTERN,
    WEB_URL_PATTERN,
    Body,
    Query,
    _email,
    _uuid_or_me,
    documented,
)
from identity_proto.schemas.teams import _uuid_only
from identity_proto.urls import UnsafeURL, parse_web_url

__all__ = [
    "ClientOAuthProviderUpdateBody",
    "ConnectedAccessTokenBody",
    "ConnectedAccessTokenParams",
    "ConnectedAccountsParams",
    "DeprecatedConnectedAccessTokenParams",
    "LegacyConnectedAccessTokenParams",
    "ListOAuthProvidersQuery",
    "MergeStrategy",
    "OAuthProviderCreateBody",
    "OAuthProviderIn",
    "OAuthProviderParams",
    "ServerOAuthProviderUpdateBody",
    "unique_provider_ids",
]

_PROVIDER_ID = re.compile(r"^[a-z0-9_-]{1,64}$")

ProviderTypeName = Literal["google", "github", "microsoft", "discord", "gitlab", "bitbucket", "spotify", "oidc", "mock"]
MergeStrategy = Literal["link_method", "raise_error", "allow_duplicates"]
if set(get_args(ProviderTypeName)) != set(OAUTH_PROVIDER_TYPES) or set(get_args(MergeStrategy)) != set(
    OAUTH_MERGE_STRATEGIES
):
    raise AssertionError("the schema's provider types and merge strategies are the records' ones")


@documented({"pattern": _PROVIDER_ID.pattern})
def _provider_id(value: str) -> str:
    if not _PROVIDER_ID.match(value):
        raise ValueError("must be 1 to 64 characters of a-z, 0-9, _ and -")
    return value


@documented({"pattern": WEB_URL_PATTERN})
def _issuer(value: str | None) -> str | None:
    """An OpenID Connect issuer: an http(s) URL every parser reads alike (`http` is refused outside dev mode by
    the flow), without query or fragment (discovery appends `/.well-known/openid-configuration` to it)."""
    if value is None:
        return None
    try:
        url = parse_web_url(value)
    except UnsafeURL:
        raise ValueError("is not a valid URL") from None
    if "?" in url.rest or "#" in url.rest:
        raise ValueError("must not have a query or a fragment")
    return url.href.rstrip("/")


class OAuthProviderIn(Body):
    """One provider of `config.oauth_providers`. `client_secret` is write-only: left out, the provider with this
    id keeps the secret it has."""

    id: str
    type: ProviderTypeName
    client_id: str | None = Field(default=None, min_length=1, max_length=512)
    client_secret: str | None = Field(default=None, min_length=1, max_length=2048)
    issuer_url: str | None = Field(default=None, max_length=2048)
    microsoft_tenant_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,128}$")
    allow_sign_in: bool = True
    allow_connected_accounts: bool = True

    _id = field_validator("id")(_provider_id)
    _issuer_url = field_validator("issuer_url")(_issuer)

    def record(self) -> OAuthProviderConfig:
        """The stored form (its secret still to be merged with the stored one by the flow)."""
        return OAuthProviderConfig(
            id=self.id,
            type=self.type,
            client_id=self.client_id,
            client_secret=self.client_secret,
            issuer_url=self.issuer_url,
            microsoft_tenant_id=self.microsoft_tenant_id,
            allow_sign_in=self.allow_sign_in,
            allow_connected_accounts=self.allow_connected_accounts,
        )


def unique_provider_ids(value: list[OAuthProviderIn] | None) -> list[OAuthProviderIn] | None:
    """`config.oauth_providers`: every id once."""
    if value is None:
        return None
    seen: set[str] = set()
    for provider in value:
        if provider.id in seen:
            raise ValueError(f"has the provider id {provider.id!r} more than once")
        seen.add(provider.id)
    return value


# --------------------------------------------------------------------------------------------------------------
# /oauth-providers


class ListOAuthProvidersQuery(Query):
    """GET /oauth-providers?user_id= (a server may leave it out: every account of the project)."""

    user_id: str | None = None

    @field_validator("user_id")
    @classmethod
    @documented({"pattern": UUID_OR_ME_PATTERN})
    def _user(cls, value: str | None) -> str | None:
        return None if value is None else _uuid_or_me(value)


class OAuthProviderParams(Query):
    """Path parameters naming one linked account: its user (or `me`) and its row id (a UUID)."""

    user_id: str
    provider_id: str
    _user = field_validator("user_id")(_uuid_or_me)
    _row = field_validator("provider_id")(_uuid_only)


class OAuthProviderCreateBody(Body):
    """POST /oauth-providers (server): link a provider account to a user."""

    user_id: str
    provider_config_id: str = Field(min_length=1, max_length=64)
    account_id: str = Field(min_length=1, max_length=512)
    email: str | None = None
    allow_sign_in: bool
    allow_connected_accounts: bool
    _user = field_validator("user_id")(_uuid_or_me)
    _email_rule = field_validator("email")(_email)


class ClientOAuthProviderUpdateBody(Body):
    """PATCH /oauth-providers/{user_id}/{provider_id} from a client."""

    allow_sign_in: bool | None = None
    allow_connected_accounts: bool | None = None


class ServerOAuthProviderUpdateBody(ClientOAuthProviderUpdateBody):
    """PATCH /oauth-providers/{user_id}/{provider_id} from a server or admin: also the e-mail and account id."""

    email: str | None = None
    account_id: str | None = Field(default=None, min_length=1, max_length=512)
    _email_rule = field_validator("email")(_email)


# --------------------------------------------------------------------------------------------------------------
# /connected-accounts


class ConnectedAccountsParams(Query):
    """GET /connected-accounts/{user_id}."""

    user_id: str
    _user = field_validator("user_id")(_uuid_or_me)


class LegacyConnectedAccessTokenParams(Query):
    """POST /connected-accounts/{user_id}/{provider_id}/access-token (any account of that provider)."""

    user_id: str
    provider_id: str = Field(max_length=64)
    _user = field_validator("user_id")(_uuid_or_me)


class ConnectedAccessTokenParams(LegacyConnectedAccessTokenParams):
    """POST /connected-accounts/{user_id}/{provider_id}/{provider_account_id}/access-token."""

    provider_account_id: str = Field(max_length=512)


class DeprecatedConnectedAccessTokenParams(Query):
    """POST /auth/oauth/connected-accounts/{provider_id}/access-token (the signed-in user's)."""

    provider_id: str = Field(max_length=64)


class ConnectedAccessTokenBody(Body):
    """The access-token routes' body: the scopes the token must hold (space-separated), beyond the sign-in's."""

    scope: str | None = Field(default=None, max_length=2048)
