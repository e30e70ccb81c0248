"""The memory store: the sign-in code (stored unless its address cannot sign in with it), one step under the lock."""

from __future__ import annotations

from backends.memory.codes import _create_code
from backends.memory.contact_channels import auth_address_is_verified
from backends.memory.store import MemoryStore, _performs
from backends.memory.users import _find_user_by_auth_email
from identity_proto.effects import CreateSignInCode, CreateVerificationCode, EmailRefusal, FindUserByAuthEmail


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
