"""The memory store: OAuth sign-in's short-lived records (states, outer codes), linked accounts (on the user record,
with the project's OAuth index) and provider tokens, each one step under the lock."""

from __future__ import annotations

from collections.abc import Iterable

from backends.memory.commit import applies
from backends.memory.store import MemoryStore, Tenant, _performs
from backends.memory.teams import store_personal_team
from backends.memory.users import insert_user, record_user_created
from identity_proto.effects import (
    AccountsWrite,
    ChangeOAuthAccounts,
    ConsumeOuterCode,
    CreateUser,
    FindUserByOAuthAccount,
    LoadProviderTokens,
    OAuthState,
    OuterCode,
    SaveOAuthState,
    SaveOuterCode,
    SaveProviderTokens,
    SignUpWithOAuth,
    SignUpWithOAuthRefusal,
    TakeOAuthState,
    oauth_index_key,
)
from identity_proto.effects.oauth import DropProviderTokens, SetOAuthAccounts
from identity_proto.records import OAuthAccount, User, replaced


def sign_in_keys(accounts: Iterable[OAuthAccount]) -> set[str]:
    """The OAuth index keys of the sign-in accounts among `accounts`."""
    return {oauth_index_key(a.provider_config_id, a.account_id) for a in accounts if a.allow_sign_in}


def _held_by_another(tenant: Tenant, keys: Iterable[str], user_id: str) -> bool:
    """Whether one of the index `keys` maps to a user other than `user_id` who exists (an entry pointing at
    nobody is free: the index holds none such, but a key is never refused for one)."""
    for key in keys:
        holder = tenant.oauth_index.get(key)
        if holder is not None and holder != user_id and holder in tenant.users:
            return True
    return False


@_performs(SaveOAuthState)
def _save_oauth_state(store: MemoryStore, effect: SaveOAuthState) -> None:
    store.oauth_states[effect.state_hash] = effect.state


@_performs(TakeOAuthState)
def _take_oauth_state(store: MemoryStore, effect: TakeOAuthState) -> OAuthState | None:
    return store.oauth_states.pop(effect.state_hash, None)


@_performs(SaveOuterCode)
def _save_outer_code(store: MemoryStore, effect: SaveOuterCode) -> None:
    store.tenant(effect.code.project_id).outer_codes[effect.code_hash] = effect.code


@_performs(ConsumeOuterCode)
def _consume_outer_code(store: MemoryStore, effect: ConsumeOuterCode) -> OuterCode | None:
    return store.tenant(effect.project_id).outer_codes.pop(effect.code_hash, None)


@_performs(FindUserByOAuthAccount)
def _find_user_by_oauth_account(store: MemoryStore, effect: FindUserByOAuthAccount) -> User | None:
    tenant = store.tenant(effect.project_id)
    user_id = tenant.oauth_index.get(oauth_index_key(effect.provider_config_id, effect.account_id))
    return None if user_id is None else tenant.users.get(user_id)


@_performs(ChangeOAuthAccounts)
def _change_oauth_accounts(store: MemoryStore, effect: ChangeOAuthAccounts) -> tuple[AccountsWrite, User | None]:
    tenant = store.tenant(effect.project_id)
    stored = tenant.users.get(effect.user_id)
    if stored is None:
        return AccountsWrite.USER_NOT_FOUND, None
    if stored.oauth_accounts != tuple(effect.expected):
        return AccountsWrite.CONFLICT, None
    old_keys, new_keys = sign_in_keys(stored.oauth_accounts), sign_in_keys(effect.accounts)
    if _held_by_another(tenant, new_keys - old_keys, stored.id):
        return AccountsWrite.ACCOUNT_TAKEN, None
    for key in old_keys - new_keys:
        if tenant.oauth_index.get(key) == stored.id:
            del tenant.oauth_index[key]
    for key in new_keys:
        tenant.oauth_index[key] = stored.id
    kept_rows = {account.id for account in effect.accounts}
    for account in stored.oauth_accounts:
        if account.id not in kept_rows:
            tenant.provider_tokens.pop(account.id, None)
    updated = tenant.users[stored.id] = replaced(stored, {"oauth_accounts": tuple(effect.accounts)})
    return AccountsWrite.DONE, updated


@_performs(SaveProviderTokens)
def _save_provider_tokens(store: MemoryStore, effect: SaveProviderTokens) -> bool:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None or not any(account.id == effect.account_row_id for account in user.oauth_accounts):
        return False
    tenant.provider_tokens[effect.account_row_id] = effect.sealed
    return True


@applies(DropProviderTokens)
def _drop_provider_tokens(tenant: Tenant, write: DropProviderTokens) -> None:
    tenant.provider_tokens.pop(write.account_row_id, None)


@_performs(LoadProviderTokens)
def _load_provider_tokens(store: MemoryStore, effect: LoadProviderTokens) -> str | None:
    return store.tenant(effect.project_id).provider_tokens.get(effect.account_row_id)


@_performs(SignUpWithOAuth)
def _sign_up_with_oauth(store: MemoryStore, effect: SignUpWithOAuth) -> User | SignUpWithOAuthRefusal:
    tenant, project_id, new_user = store.tenant(effect.project_id), effect.project_id, effect.new_user
    if new_user.id in tenant.users:
        return SignUpWithOAuthRefusal.ID_TAKEN
    email = new_user.auth_email
    if email is not None:
        holder = tenant.email_index.get(email)
        if holder is not None and holder in tenant.users:
            return SignUpWithOAuthRefusal.EMAIL_TAKEN
        tenant.email_index.pop(email, None)  # an entry pointing at nobody (the index holds none such)
    keys = sign_in_keys(new_user.oauth_accounts)
    if _held_by_another(tenant, keys, new_user.id):
        return SignUpWithOAuthRefusal.ACCOUNT_TAKEN
    created = insert_user(store, CreateUser(project_id, new_user))
    assert created == new_user  # both refusals were checked above, under the same lock
    record_user_created(tenant, new_user)  # webhooks: before its team's team.created
    for key in keys:
        tenant.oauth_index[key] = new_user.id
    if effect.personal_team is not None:
        store_personal_team(store.tenant(project_id), *effect.personal_team)
    return new_user


@applies(SetOAuthAccounts)
def _set_oauth_accounts(tenant: Tenant, write: SetOAuthAccounts) -> None:
    tenant.users[write.user_id] = replaced(tenant.users[write.user_id], {"oauth_accounts": write.accounts})
