"""The memory store: signing in by e-mail (each one step under the lock, made of the handlers of codes, users, teams
and sessions)."""

from __future__ import annotations

from typing import Any

from backends.memory.codes import _create_code
from backends.memory.contact_channels import auth_address_is_verified
from backends.memory.sessions import _create_session
from backends.memory.store import MemoryStore, _performs
from backends.memory.teams import store_personal_team
from backends.memory.users import _find_user_by_auth_email, insert_user, record_user_created
from identity_proto.effects import (
    CreateSession,
    CreateSignInCode,
    CreateUser,
    CreateVerificationCode,
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
    FindUserByAuthEmail,
    SignInByEmail,
)
from identity_proto.records import replaced


@_performs(CreateSignInCode)
def _create_sign_in_code(store: MemoryStore, effect: CreateSignInCode) -> EmailRefusal | None:
    email = effect.code.email or ""
    user = _find_user_by_auth_email(store, FindUserByAuthEmail(effect.project_id, email))
    if user is not None and not auth_address_is_verified(store.tenant(effect.project_id), user, email):
        return EmailRefusal.UNVERIFIED
    if user is None and not effect.sign_up_enabled:
        return EmailRefusal.SIGN_UP_DISABLED
    _create_code(store, CreateVerificationCode(effect.project_id, effect.code))
    return None


@_performs(SignInByEmail)
def _sign_in_by_email(store: MemoryStore, effect: SignInByEmail) -> EmailSignIn:
    tenant, project_id = store.tenant(effect.project_id), effect.project_id
    user = _find_user_by_auth_email(store, FindUserByAuthEmail(project_id, effect.email))
    if user is not None:
        if not auth_address_is_verified(tenant, user, effect.email):
            return EmailSignIn(EmailSignInOutcome.UNVERIFIED, user)
        changes: dict[str, Any] = {}
        if not user.otp_auth_enabled:
            changes["otp_auth_enabled"] = True
        if user.totp_secret_base64 is None and user.last_active_at_millis < effect.now_ms:
            changes["last_active_at_millis"] = effect.now_ms
        if changes:  # neither field is indexed: the record alone changes
            user = tenant.users[user.id] = replaced(user, changes)
        if user.totp_secret_base64 is not None:
            return EmailSignIn(EmailSignInOutcome.MFA_REQUIRED, user)
        _create_session(store, CreateSession(project_id, replaced(effect.session, {"user_id": user.id})))
        return EmailSignIn(EmailSignInOutcome.SIGNED_IN, user)
    if not effect.sign_up_enabled:
        return EmailSignIn(EmailSignInOutcome.SIGN_UP_DISABLED)
    new_user = effect.new_user
    if new_user.id in tenant.users:
        return EmailSignIn(EmailSignInOutcome.ID_TAKEN)
    tenant.email_index.pop(effect.email, None)  # an entry pointing at nobody (the index holds none such)
    insert_user(store, CreateUser(project_id, new_user))
    record_user_created(tenant, new_user)  # webhooks: before its team's team.created
    if effect.personal_team is not None:
        store_personal_team(store.tenant(project_id), *effect.personal_team)
    _create_session(store, CreateSession(project_id, replaced(effect.session, {"user_id": new_user.id})))
    return EmailSignIn(EmailSignInOutcome.SIGNED_UP, new_user)
