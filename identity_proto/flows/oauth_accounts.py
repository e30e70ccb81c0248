"""OAuth accounts (reference part 2 §7.1, §7.6): a project's provider configuration, a user's linked provider
accounts (`/oauth-providers`) and connected accounts (`/connected-accounts`: the provider's API tokens).

Linked accounts live on the user record (`User.oauth_accounts`); every write of them is one commit
(`commit_accounts`: guarded on the list as read, the project's OAuth index kept in step, the tokens of removed rows
deleted): a write that lost a race reads again and decides again. Who may act on whose accounts: a client only on
its own user's (another user: 403 plain), a server or admin on anyone's.

Choices where the reference infers or leaves it open (each said where it is made):
- the third create/update check ("an account with that account id already signs someone in") looks at sign-in
  accounts *of the same provider* (the OAuth index), where the original looks at every provider's (and, on an
  update without `account_id`, at every sign-in account of the project, a filter left undefined): account ids of
  two providers are unrelated, so "123" at GitHub must not block "123" at Discord;
- the access-token routes, the legacy one included, hand out tokens only of accounts with
  `allow_connected_accounts`, and only for providers whose config allows connected accounts (else
  OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED): the original's legacy route ignores the account's flag;
- a provider that cannot be reached while refreshing answers 503 OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE and keeps
  the refresh token (the original forgets it, as for a refused refresh);
- the provider config: a client secret left out of an update is kept only while the client id stays the same (a
  new client id needs its own secret); `mock` providers (or client id "MOCK") and `http` issuers (localhost only)
  are accepted in dev mode only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.changes import ProjectConfigChanges
from identity_proto.context import RequestContext
from identity_proto.effects import Flow, ListUsers, LoadUser, perform
from identity_proto.effects.commit import (
    CommitConflict,
    DropIndex,
    FieldsAre,
    Guard,
    IndexIs,
    IndexName,
    RecordKind,
    SetIndex,
    Write,
    commit,
)
from identity_proto.effects.oauth import (
    DropProviderTokens,
    PutProviderTokens,
    SetOAuthAccounts,
    find_user_by_oauth_account,
    oauth_index_key,
)
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.http import Response
from identity_proto.oauth import PROVIDER_TYPES, uses_mock
from identity_proto.records import OAuthAccount, OAuthProviderConfig, ProjectConfig, User
from identity_proto.render import json_response
from identity_proto.schemas import schema_error
from identity_proto.tokens import new_uuid
from identity_proto.urls import parse_web_url

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ClientOAuthProviderUpdateBody,
        ListOAuthProvidersQuery,
        OAuthProviderCreateBody,
        OAuthProviderParams,
    )

__all__ = [
    "commit_accounts",
    "configured_providers",
    "create_oauth_provider",
    "delete_oauth_provider",
    "get_oauth_provider",
    "list_oauth_providers",
    "provider_type_of",
    "save_provider_tokens",
    "update_oauth_provider",
]

_SUCCESS = {"success": True}
#: How often a linked-account write that lost a race (CONFLICT) is tried again with what is stored now.
_WRITE_TRIES = 8
#: Types a row of a provider the project no longer configures still resolves to (the original's `allProviders`).
_WELL_KNOWN_TYPES = frozenset(PROVIDER_TYPES) - {"oidc", "mock"}
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


# --------------------------------------------------------------------------------------------------------------
# Provider configuration (PATCH /projects/current, POST /internal/projects)


def configured_providers(
    ctx: RequestContext, current: ProjectConfig | None, changes: ProjectConfigChanges
) -> ProjectConfigChanges:
    """`changes` with `oauth_providers` completed from `current` (a provider that keeps its id and client id and
    sends no `client_secret` keeps its stored secret) and checked against what the schema cannot know: whether
    this service is in dev mode (mock providers, `http` issuers on localhost) and the stored secrets (every
    provider not served by the mock needs a client id and a secret). Raises SCHEMA_ERROR, writing nothing."""
    values = changes.as_dict()
    providers: tuple[OAuthProviderConfig, ...] | None = values.get("oauth_providers")
    if providers is None:
        return changes
    stored = {p.id: p for p in current.oauth_providers} if current is not None else {}
    merged: list[OAuthProviderConfig] = []
    problems: list[str] = []
    for index, provider in enumerate(providers):
        where = f"body.config.oauth_providers[{index}]"
        before = stored.get(provider.id)
        if provider.client_secret is None and before is not None and before.client_id == provider.client_id:
            provider = dataclasses.replace(provider, client_secret=before.client_secret)
        problems.extend(_provider_problems(ctx, provider, where))
        merged.append(provider)
    if problems:
        raise schema_error(ctx.request.method, ctx.request.path, problems)
    completed: ProjectConfigChanges = ProjectConfigChanges.of({**values, "oauth_providers": tuple(merged)}.items())
    return completed


def _provider_problems(ctx: RequestContext, provider: OAuthProviderConfig, where: str) -> list[str]:
    dev_mode = ctx.options.dev_mode
    if uses_mock(provider):
        if not dev_mode:
            return [
                f"{where} is served by the mock provider (type mock or client_id MOCK), which exists only in dev mode"
            ]
    else:
        missing = [name for name in ("client_id", "client_secret") if not getattr(provider, name)]
        if missing:
            return [f"{where}.{name} must be defined for type {provider.type}" for name in missing]
    if provider.type == "oidc":
        if provider.issuer_url is None:
            return [f"{where}.issuer_url must be defined for type oidc"]
        origin = parse_web_url(provider.issuer_url).origin  # the schema parsed it
        if origin.scheme != "https" and not (dev_mode and origin.host in _LOCAL_HOSTS):
            return [f"{where}.issuer_url must use https (http only for localhost, in dev mode)"]
    elif provider.issuer_url is not None:
        return [f"{where}.issuer_url is only for type oidc"]
    if provider.microsoft_tenant_id is not None and provider.type != "microsoft":
        return [f"{where}.microsoft_tenant_id is only for type microsoft"]
    return []


# --------------------------------------------------------------------------------------------------------------
# Shared


def provider_type_of(config: ProjectConfig, provider_config_id: str) -> str | None:
    """The type of the provider a linked account names: its configured type; for a provider the project no longer
    configures, its id when that is a well-known type's name (the original still lists such rows), else None
    (the row is skipped by lists, and reading it is a 404)."""
    for provider in config.oauth_providers:
        if provider.id == provider_config_id:
            return provider.type
    return provider_config_id if provider_config_id in _WELL_KNOWN_TYPES else None


def find_provider(config: ProjectConfig, provider_config_id: str) -> OAuthProviderConfig | None:
    """The project's provider with this id, or None."""
    return next((p for p in config.oauth_providers if p.id == provider_config_id), None)


def _owner(ctx: RequestContext, user_id: str | None, verb: str) -> str:
    """The id of the user whose accounts the caller acts on (`verb`: list, read, update, delete)."""
    auth = ctx.require_auth()
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if user_id not in ("me", auth.user_id):  # None too: a client lists its own accounts only
            raise PlainError(403, f"Client can only {verb} OAuth providers for their own user.")
        return auth.user_id
    if user_id is None:
        raise AssertionError("server requests name their user here")
    return ctx.resolve_user_id(user_id)


def load_user_or_404(project_id: str, user_id: str) -> Flow[User]:
    """The user, or 404 USER_NOT_FOUND."""
    user = yield from perform(LoadUser(project_id, user_id))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return user


def _row(user: User, row_id: str) -> OAuthAccount:
    found = next((a for a in user.oauth_accounts if a.id == row_id), None)
    if found is None:
        raise PlainError(404, f"OAuth provider {row_id} for user {user.id} not found")
    return found


def render_oauth_account(user_id: str, account: OAuthAccount, type_: str, *, server: bool) -> dict[str, Any]:
    """An `/oauth-providers` object: the client's, plus `account_id` for server and admin."""
    out: dict[str, Any] = {"user_id": user_id, "id": account.id}
    if account.email is not None:
        out["email"] = account.email
    out |= {
        "provider_config_id": account.provider_config_id,
        "type": type_,
        "allow_sign_in": account.allow_sign_in,
        "allow_connected_accounts": account.allow_connected_accounts,
    }
    if server:
        out["account_id"] = account.account_id
    return out


def _render(ctx: RequestContext, config: ProjectConfig, user_id: str, account: OAuthAccount) -> dict[str, Any]:
    type_ = provider_type_of(config, account.provider_config_id)
    if type_ is None:
        raise PlainError(404, f"OAuth provider {account.provider_config_id} not found or not configured")
    return render_oauth_account(user_id, account, type_, server=ctx.access_type is not AccessType.CLIENT)


def _check_accounts(
    project_id: str, user: User, candidate: OAuthAccount, *, sign_in_requested: bool, account_id_given: bool
) -> Flow[None]:
    """The original's create/update checks, in its order (reference §7.6), for `candidate` (the row as it would
    be) among the user's other rows."""
    others = [a for a in user.oauth_accounts if a.id != candidate.id]
    same_provider = [a for a in others if a.provider_config_id == candidate.provider_config_id]
    if sign_in_requested and any(a.allow_sign_in for a in same_provider):
        raise PlainError(400, "The same provider type with sign-in enabled already exists for this user.")
    if account_id_given and any(a.account_id == candidate.account_id for a in same_provider):
        raise PlainError(400, "The same provider type with the same account ID already exists for this user.")
    if sign_in_requested:
        holder = yield from perform(
            find_user_by_oauth_account(project_id, candidate.provider_config_id, candidate.account_id)
        )
        if holder is not None and holder.id != user.id:
            raise KnownError(ErrorCode.OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN)


def sign_in_keys(accounts: tuple[OAuthAccount, ...]) -> dict[str, None]:
    """The OAuth index keys of the sign-in accounts among `accounts`, each once, in order."""
    return dict.fromkeys(oauth_index_key(a.provider_config_id, a.account_id) for a in accounts if a.allow_sign_in)


def account_claims(user_id: str, keys: Iterable[str]) -> tuple[tuple[Guard, ...], tuple[Write, ...]]:
    """OAuth index entries naming `user_id`, each guarded on its being free."""
    keys = tuple(keys)
    return (
        tuple(IndexIs(IndexName.OAUTH, key, None) for key in keys),
        tuple(SetIndex(IndexName.OAUTH, key, user_id) for key in keys),
    )


def commit_accounts(project_id: str, user: User, accounts: tuple[OAuthAccount, ...]) -> Flow[User]:
    """The user's linked accounts become `accounts`, in one commit guarded on the list `user` holds: the OAuth index
    follows (entries of sign-in accounts gone or no longer sign-in dropped, new ones claimed while free), and the
    provider tokens of rows no longer present are dropped. Returns the user as stored; `CommitConflict` when the
    list changed or the user is gone (the guard on `user`), or a new sign-in account is held (an `IndexIs`)."""
    old, new = sign_in_keys(user.oauth_accounts), sign_in_keys(accounts)
    claim_guards, claims = account_claims(user.id, (key for key in new if key not in old))
    guards: list[Guard] = [FieldsAre(user, ("oauth_accounts",)), *claim_guards]
    writes: list[Write] = [SetOAuthAccounts(user.id, accounts), *claims]
    for key in old:
        if key not in new:
            guards.append(IndexIs(IndexName.OAUTH, key, user.id))
            writes.append(DropIndex(IndexName.OAUTH, key))
    kept = {a.id for a in accounts}
    writes += [DropProviderTokens(a.id) for a in user.oauth_accounts if a.id not in kept]
    (stored,) = yield from commit(project_id, tuple(guards), tuple(writes), returns=((RecordKind.USER, user.id),))
    assert isinstance(stored, User)
    return stored


def save_provider_tokens(project_id: str, user: User | None, account_row_id: str, sealed: str) -> Flow[bool]:
    """Store `sealed` (provider tokens sealed for the row) for the user's account row `account_row_id`, replacing
    what was there, in a commit guarded on the user's accounts as read (read again while they change); False,
    nothing stored, when the user is gone or no longer has the row."""
    for _ in range(_WRITE_TRIES):
        if user is None or not any(a.id == account_row_id for a in user.oauth_accounts):
            return False
        try:
            yield from commit(
                project_id, (FieldsAre(user, ("oauth_accounts",)),), (PutProviderTokens(account_row_id, sealed),)
            )
            return True
        except CommitConflict:
            user = yield from perform(LoadUser(project_id, user.id))
    raise RuntimeError(
        f"the linked accounts of user {user.id if user else ''} kept changing under {_WRITE_TRIES} writes"
    )


def change_accounts(
    project_id: str,
    user_id: str,
    change: Callable[[User], Flow[tuple[OAuthAccount, ...]]],
) -> Flow[User]:
    """Replace the user's accounts by `change(user)` (which may raise to refuse) with `commit_accounts`: when another
    write came first, read again and decide again. 404 USER_NOT_FOUND for a missing user; a sign-in account held
    by another user (a concurrent write won it) is OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN."""
    for _ in range(_WRITE_TRIES):
        user = yield from load_user_or_404(project_id, user_id)
        accounts = yield from change(user)
        try:
            return (yield from commit_accounts(project_id, user, accounts))
        except CommitConflict as conflict:
            if isinstance(conflict.guard, IndexIs) and conflict.guard.value is None:
                raise KnownError(ErrorCode.OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN) from None
    raise RuntimeError(f"the linked accounts of user {user_id} kept changing under {_WRITE_TRIES} writes")


# --------------------------------------------------------------------------------------------------------------
# /oauth-providers


def list_oauth_providers(ctx: RequestContext[None, ListOAuthProvidersQuery]) -> Flow[Response]:
    """GET /oauth-providers?user_id=: the user's linked accounts in creation order (a server without `user_id`:
    every account of the project, oldest first); rows of providers that resolve to no type are skipped."""
    auth = ctx.require_auth()
    query: ListOAuthProvidersQuery = ctx.query
    config = auth.project.config
    server = auth.access_type is not AccessType.CLIENT
    rows: list[tuple[str, OAuthAccount]]
    if query.user_id is None and server:
        users = yield from perform(ListUsers(auth.project.id))
        rows = [(u.id, a) for u in users for a in u.oauth_accounts]
        rows.sort(key=lambda row: (row[1].created_at_millis, row[1].id))
    else:
        user = yield from load_user_or_404(auth.project.id, _owner(ctx, query.user_id, "list"))
        rows = [(user.id, a) for a in user.oauth_accounts]
    items = []
    for user_id, account in rows:
        type_ = provider_type_of(config, account.provider_config_id)
        if type_ is not None:
            items.append(render_oauth_account(user_id, account, type_, server=server))
    return json_response(200, {"items": items, "is_paginated": False})


def create_oauth_provider(ctx: RequestContext[OAuthProviderCreateBody]) -> Flow[Response]:
    """POST /oauth-providers (server, admin) -> 201: link a provider account to a user."""
    auth = ctx.require_auth()
    body: OAuthProviderCreateBody = ctx.body
    provider = find_provider(auth.project.config, body.provider_config_id)
    if provider is None:
        raise PlainError(404, f"OAuth provider {body.provider_config_id} not found or not configured")
    user_id = ctx.resolve_user_id(body.user_id)
    new = OAuthAccount(
        id=new_uuid(ctx.entropy),
        provider_config_id=provider.id,
        account_id=body.account_id,
        email=body.email,
        allow_sign_in=body.allow_sign_in,
        allow_connected_accounts=body.allow_connected_accounts,
        created_at_millis=ctx.now_ms,
    )

    def add(user: User) -> Flow[tuple[OAuthAccount, ...]]:
        yield from _check_accounts(
            auth.project.id, user, new, sign_in_requested=new.allow_sign_in, account_id_given=True
        )
        return (*user.oauth_accounts, new)

    updated = yield from change_accounts(auth.project.id, user_id, add)
    return json_response(201, render_oauth_account(updated.id, new, provider.type, server=True))


def get_oauth_provider(ctx: RequestContext[None, None, OAuthProviderParams]) -> Flow[Response]:
    """GET /oauth-providers/{user_id}/{provider_id}."""
    auth = ctx.require_auth()
    params: OAuthProviderParams = ctx.params
    user = yield from load_user_or_404(auth.project.id, _owner(ctx, params.user_id, "read"))
    account = _row(user, params.provider_id)
    return json_response(200, _render(ctx, auth.project.config, user.id, account))


def update_oauth_provider(
    ctx: RequestContext[ClientOAuthProviderUpdateBody, None, OAuthProviderParams],
) -> Flow[Response]:
    """PATCH /oauth-providers/{user_id}/{provider_id}: the flags (client), also `email` and `account_id` (server);
    turning sign-in on or off adds or removes the account from the project's OAuth index (its sign-in method)."""
    auth = ctx.require_auth()
    params: OAuthProviderParams = ctx.params
    body = ctx.body
    user_id = _owner(ctx, params.user_id, "update")
    email = getattr(body, "email", None)
    account_id = getattr(body, "account_id", None)

    def edit(user: User) -> Flow[tuple[OAuthAccount, ...]]:
        before = _row(user, params.provider_id)
        after = dataclasses.replace(
            before,
            allow_sign_in=before.allow_sign_in if body.allow_sign_in is None else body.allow_sign_in,
            allow_connected_accounts=(
                before.allow_connected_accounts
                if body.allow_connected_accounts is None
                else body.allow_connected_accounts
            ),
            email=before.email if email is None else email,
            account_id=before.account_id if account_id is None else account_id,
        )
        yield from _check_accounts(
            auth.project.id,
            user,
            after,
            sign_in_requested=bool(body.allow_sign_in),
            account_id_given=account_id is not None,
        )
        return tuple(after if a.id == before.id else a for a in user.oauth_accounts)

    updated = yield from change_accounts(auth.project.id, user_id, edit)
    return json_response(200, _render(ctx, auth.project.config, updated.id, _row(updated, params.provider_id)))


def delete_oauth_provider(ctx: RequestContext[None, None, OAuthProviderParams]) -> Flow[Response]:
    """DELETE /oauth-providers/{user_id}/{provider_id}: the row, its sign-in method and its provider tokens."""
    auth = ctx.require_auth()
    params: OAuthProviderParams = ctx.params
    user_id = _owner(ctx, params.user_id, "delete")

    def remove(user: User) -> Flow[tuple[OAuthAccount, ...]]:
        _row(user, params.provider_id)
        return tuple(a for a in user.oauth_accounts if a.id != params.provider_id)
        yield  # a flow, though deciding needs no effect

    yield from change_accounts(auth.project.id, user_id, remove)
    return json_response(200, _SUCCESS)
