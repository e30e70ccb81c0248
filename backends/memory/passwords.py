"""The memory store: the password flows' writes (a reset code sent, a password reset, changed or set)."""

from __future__ import annotations

from backends.memory.codes import _create_code
from backends.memory.outbox import _append_outbox
from backends.memory.sessions import _drop_session
from backends.memory.store import MemoryStore, Tenant, _performs
from backends.memory.users import _find_user_by_auth_email, record_user_updated
from identity_proto.effects import (
    AppendOutbox,
    ChangePassword,
    CreateVerificationCode,
    FindUserByAuthEmail,
    PasswordWrite,
    ResetPassword,
    SetPassword,
    StorePasswordResetCode,
    may_reset_through,
    password_fingerprint,
)
from identity_proto.records import CodePurpose, ContactChannel, User, replaced


@_performs(StorePasswordResetCode)
def _store_password_reset_code(store: MemoryStore, effect: StorePasswordResetCode) -> str | None:
    project_id, code = effect.project_id, effect.code
    # The one lookup of "the user this address signs in": FindUserByAuthEmail's own handler.
    email = code.email or ""
    user = _find_user_by_auth_email(store, FindUserByAuthEmail(project_id, email))
    if (
        user is None
        or user.password_hash != effect.password_hash
        or not may_reset_through(user, _stored_channels(store.tenant(project_id), user.id), email)
    ):
        return None
    _create_code(store, CreateVerificationCode(project_id, replaced(code, {"user_id": user.id})))
    if effect.outbox_mail is not None:
        _append_outbox(store, AppendOutbox(project_id, effect.outbox_mail, effect.keep))
    return str(user.id)


@_performs(ResetPassword)
def _reset_password(store: MemoryStore, effect: ResetPassword) -> PasswordWrite:
    tenant = store.tenant(effect.project_id)
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.purpose != CodePurpose.PASSWORD_RESET:
        return PasswordWrite.CODE_NOT_FOUND
    if effect.now_ms >= code.expires_at_millis:
        return PasswordWrite.CODE_EXPIRED
    if code.used:
        return PasswordWrite.CODE_USED
    user = tenant.users.get(code.user_id or "")
    if user is None:
        tenant.codes[code.code_hash] = replaced(code, {"used": True})
        return PasswordWrite.USER_NOT_FOUND
    old_hash = effect.old_password_hash
    if (
        code.password_fingerprint != password_fingerprint(old_hash)
        or user.password_hash != old_hash
        or not may_reset_through(user, _stored_channels(tenant, user.id), code.email or "")
    ):
        return PasswordWrite.CODE_NOT_FOUND
    tenant.codes[code.code_hash] = replaced(code, {"used": True})
    tenant.users[user.id] = replaced(user, {"password_hash": effect.password_hash})
    _verify_address(tenant, tenant.users[user.id], code.email or "")
    _drop_sessions(tenant, user.id, keep=None)
    record_user_updated(tenant, tenant.users[user.id])  # webhooks: a password reset announces the user
    return PasswordWrite.DONE


@_performs(ChangePassword)
def _change_password(store: MemoryStore, effect: ChangePassword) -> PasswordWrite:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return PasswordWrite.USER_NOT_FOUND
    if user.password_hash != effect.old_password_hash:
        return PasswordWrite.PASSWORD_CHANGED
    tenant.users[user.id] = replaced(user, {"password_hash": effect.new_password_hash})
    token_hash = effect.keep_refresh_token_hash
    keep = None if token_hash is None else tenant.session_by_token.get(token_hash)
    _drop_sessions(tenant, user.id, keep=keep)
    return PasswordWrite.DONE


@_performs(SetPassword)
def _set_password(store: MemoryStore, effect: SetPassword) -> PasswordWrite:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return PasswordWrite.USER_NOT_FOUND
    if user.password_hash is not None:
        return PasswordWrite.HAS_PASSWORD
    tenant.users[user.id] = replaced(user, {"password_hash": effect.password_hash})
    return PasswordWrite.DONE


def _stored_channels(tenant: Tenant, user_id: str) -> tuple[ContactChannel, ...]:
    return tuple(tenant.channels.get(user_id, {}).values())


def _verify_address(tenant: Tenant, user: User, address: str) -> None:
    """Mark the user's auth channel `address` verified (the primary's flag in the user record, another channel's in
    its record; `may_reset_through` has checked that it is one of theirs)."""
    if user.primary_email == address and user.primary_email_auth_enabled:
        tenant.users[user.id] = replaced(user, {"primary_email_verified": True})
        return
    stored = tenant.channels.get(user.id, {})
    for channel in list(stored.values()):
        if channel.value == address and channel.used_for_auth:
            stored[channel.id] = replaced(channel, {"is_verified": True})


def _drop_sessions(tenant: Tenant, user_id: str, *, keep: str | None) -> None:
    """Remove every session of the user but the one with id `keep` (None: all of them)."""
    for session_id in list(tenant.user_sessions.get(user_id, ())):
        if session_id != keep:
            _drop_session(tenant, session_id)
    if not tenant.user_sessions.get(user_id):
        tenant.user_sessions.pop(user_id, None)
