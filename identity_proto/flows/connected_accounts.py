"""Connected accounts (reference part 2 §7.6): a user's linked accounts that allow connected accounts, and the
provider's API access token for one of them.

The tokens a provider granted are stored sealed per account row (`identity_proto.provider_tokens`,
`LoadProviderTokens`, `flows.oauth_accounts.save_provider_tokens`). An access-token request answers, in this order:
1. a stored access token valid for more than 5 more minutes, holding every scope asked for, that the provider
   still accepts (`CheckProviderAccessToken`; one it refuses is forgotten);
2. else a new access token for a stored refresh token holding those scopes (`RefreshProviderToken`): the new tokens
   are stored, a rotated refresh token replacing the old one; a refresh token the provider refuses is forgotten;
3. else 400 OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE (the user must link the account again).
A provider that cannot be reached while refreshing answers 503 OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE and keeps
what is stored (inferred: the original forgets the refresh token then too). Choices: see
`identity_proto.flows.oauth_accounts`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, TypeVar

from identity_proto.auth import AccessType
from identity_proto.context import RequestContext
from identity_proto.effects import Effect, Flow, perform
from identity_proto.effects.oauth import LoadProviderTokens
from identity_proto.effects.oauth_provider import (
    CheckProviderAccessToken,
    DiscoverProvider,
    ProviderFailure,
    ProviderSpec,
    ProviderTokens,
    RefreshProviderToken,
)
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows.oauth_accounts import find_provider, load_user_or_404, save_provider_tokens
from identity_proto.http import Response
from identity_proto.oauth import spec_for
from identity_proto.records import OAuthAccount, OAuthProviderConfig, User
from identity_proto.render import json_response

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ConnectedAccessTokenBody,
        ConnectedAccessTokenParams,
        ConnectedAccountsParams,
        DeprecatedConnectedAccessTokenParams,
        LegacyConnectedAccessTokenParams,
    )

__all__ = [
    "MIN_REMAINING_MS",
    "connected_account_access_token",
    "deprecated_connected_account_access_token",
    "legacy_connected_account_access_token",
    "list_connected_accounts",
    "provider_spec_for",
]

T = TypeVar("T")

#: A stored access token is handed out only while it has more than this left (the original's 5 minutes).
MIN_REMAINING_MS = 5 * 60 * 1000
_SCOPE_SEPARATORS = re.compile(r"[\s,]+")


def _scopes(value: str | None) -> frozenset[str]:
    return frozenset(s for s in _SCOPE_SEPARATORS.split(value or "") if s)


def provider_spec_for(ctx: RequestContext, provider: OAuthProviderConfig) -> Flow[ProviderSpec]:
    """The spec the host's provider client needs: the same as sign-in's (`identity_proto.oauth.spec_for`), so the
    mock sees the client its tokens were issued to."""
    return (yield from spec_for(provider, ctx.base_url, lambda issuer: _provider_call(DiscoverProvider(issuer))))


def _provider_call(effect: Effect[T]) -> Flow[T]:
    """Perform a provider effect; a provider that cannot be reached is 503 OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE,
    other failures go to the caller."""
    try:
        return (yield from perform(effect))
    except ProviderFailure as failure:
        if failure.kind == "unavailable":
            raise KnownError(ErrorCode.OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE) from None
        raise


def list_connected_accounts(ctx: RequestContext[None, None, ConnectedAccountsParams]) -> Flow[Response]:
    """GET /connected-accounts/{user_id}: the user's accounts that allow connected accounts, in creation order."""
    auth = ctx.require_auth()
    user_id: str = ctx.params.user_id
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if user_id not in ("me", auth.user_id):
            raise PlainError(403, "Client can only list connected accounts for their own user.")
    user = yield from load_user_or_404(auth.project.id, ctx.resolve_user_id(user_id))
    items = [
        {"user_id": user.id, "provider": a.provider_config_id, "provider_account_id": a.account_id}
        for a in user.oauth_accounts
        if a.allow_connected_accounts
    ]
    return json_response(200, {"items": items, "is_paginated": False})


def connected_account_access_token(
    ctx: RequestContext[ConnectedAccessTokenBody, None, ConnectedAccessTokenParams],
) -> Flow[Response]:
    """POST /connected-accounts/{user_id}/{provider_id}/{provider_account_id}/access-token {scope?} -> 201."""
    params = ctx.params
    return (yield from _access_token(ctx, params.user_id, params.provider_id, params.provider_account_id))


def legacy_connected_account_access_token(
    ctx: RequestContext[ConnectedAccessTokenBody, None, LegacyConnectedAccessTokenParams],
) -> Flow[Response]:
    """POST /connected-accounts/{user_id}/{provider_id}/access-token {scope?} -> 201: any of the user's accounts
    of that provider."""
    params = ctx.params
    return (yield from _access_token(ctx, params.user_id, params.provider_id, None))


def deprecated_connected_account_access_token(
    ctx: RequestContext[ConnectedAccessTokenBody, None, DeprecatedConnectedAccessTokenParams],
) -> Flow[Response]:
    """POST /auth/oauth/connected-accounts/{provider_id}/access-token {scope?}: the legacy route for `me`."""
    return (yield from _access_token(ctx, "me", ctx.params.provider_id, None))


def _access_token(
    ctx: RequestContext[ConnectedAccessTokenBody | None],
    user_id: str,
    provider_id: str,
    provider_account_id: str | None,
) -> Flow[Response]:
    auth = ctx.require_auth()
    body: ConnectedAccessTokenBody | None = ctx.body
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None and user_id == "me":
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if user_id not in ("me", auth.user_id):
            raise PlainError(403, "Client can only access its own connected accounts")
    provider = find_provider(auth.project.config, provider_id)
    if provider is None or not provider.allow_connected_accounts:
        raise KnownError(ErrorCode.OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED)
    user = yield from load_user_or_404(auth.project.id, ctx.resolve_user_id(user_id))
    accounts = [
        a
        for a in user.oauth_accounts
        if a.provider_config_id == provider_id
        and a.allow_connected_accounts
        and (provider_account_id is None or a.account_id == provider_account_id)
    ]
    if not accounts:
        raise KnownError(ErrorCode.OAUTH_CONNECTION_NOT_CONNECTED_TO_USER)
    wanted = _scopes(body.scope if body is not None else None)
    access_token = yield from _token_for(ctx, provider, user, accounts, wanted)
    if access_token is None:
        raise KnownError(ErrorCode.OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE)
    return json_response(201, {"access_token": access_token})


def _token_for(
    ctx: RequestContext,
    provider: OAuthProviderConfig,
    user: User,
    accounts: list[OAuthAccount],
    wanted: frozenset[str],
) -> Flow[str | None]:
    """An access token holding `wanted` for one of `accounts`, or None (the steps of the module docstring)."""
    # Imported here: AES-GCM (cryptography) is loaded by the first request that needs it, not at start-up.
    from identity_proto.provider_tokens import SealedTokens, seal, token_key, unseal

    key = token_key(ctx.options)
    if key is None:  # no key: no provider token was ever stored
        return None
    project_id = ctx.require_auth().project.id
    stored: list[tuple[OAuthAccount, ProviderTokens]] = []
    for account in accounts:
        sealed = yield from perform(LoadProviderTokens(project_id, account.id))
        if sealed is None:
            continue
        try:
            tokens = unseal(sealed, key, project_id=project_id, account_row_id=account.id)
        except SealedTokens:  # sealed with another key (rotated): as good as none
            continue
        if wanted <= _scopes(tokens.scope):
            stored.append((account, tokens))
    if not stored:
        return None
    spec = yield from provider_spec_for(ctx, provider)

    def save(account: OAuthAccount, tokens: ProviderTokens) -> Flow[bool]:
        sealed = seal(tokens, tokens.scope, key, project_id=project_id, account_row_id=account.id, entropy=ctx.entropy)
        return (yield from save_provider_tokens(project_id, user, account.id, sealed))

    for index, (account, tokens) in enumerate(stored):
        fresh = tokens.expires_at_millis is None or tokens.expires_at_millis > ctx.now_ms + MIN_REMAINING_MS
        if not tokens.access_token or not fresh:
            continue
        try:
            accepted = yield from perform(CheckProviderAccessToken(spec, tokens.access_token))
        except ProviderFailure:
            accepted = None  # the provider could not say: try the refresh token rather than answer a doubtful token
        if accepted:
            return tokens.access_token
        if accepted is False:  # refused: forget it (the refresh token stays)
            tokens = dataclasses.replace(tokens, access_token="", expires_at_millis=0)
            stored[index] = (account, tokens)
            yield from save(account, tokens)

    for account, tokens in stored:
        if not tokens.refresh_token:
            continue
        try:
            granted = yield from _provider_call(RefreshProviderToken(spec, tokens.refresh_token, tokens.scope))
        except ProviderFailure:  # refused (invalid_grant, access_denied, invalid_token): forget the refresh token
            yield from save(account, dataclasses.replace(tokens, access_token="", refresh_token=None))
            continue
        renewed = ProviderTokens(
            access_token=granted.access_token,
            refresh_token=granted.refresh_token or tokens.refresh_token,
            expires_at_millis=granted.expires_at_millis,
            scope=tokens.scope,
        )
        yield from save(account, renewed)
        return renewed.access_token
    return None
