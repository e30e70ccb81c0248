"""Passwords: hashing and verifying (CPU-heavy: performed in a worker thread under the async driver), and the
password flows' writes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from identity_proto.effects.base import ComputeEffect, StorageEffect
from identity_proto.effects.contact_channels import channels_of
from identity_proto.records import CodePurpose, ContactChannel, Email, User, VerificationCode
from identity_proto.tokens import hash_secret


@dataclass(frozen=True, slots=True)
class HashPassword(ComputeEffect[str]):
    """bcrypt hash of `password` with 2**`rounds` iterations, in Modular Crypt Format."""

    password: str = field(repr=False)
    rounds: int = 10

    def compute(self) -> str:
        """Hash with libpass (bcrypt)."""
        from identity_proto.passwords import load_hashing

        load_hashing()  # once per process: libpass's backend loading is not thread-safe
        from passlib.hash import bcrypt

        return str(bcrypt.using(rounds=self.rounds).hash(self.password))


@dataclass(frozen=True, slots=True)
class VerifyPassword(ComputeEffect[bool]):
    """Whether `password` matches `password_hash` (bcrypt or argon2, Modular Crypt Format)."""

    password: str = field(repr=False)
    password_hash: str = field(repr=False)

    def compute(self) -> bool:
        """Verify with libpass; an unknown or malformed hash never matches."""
        from identity_proto.passwords import load_hashing, password_context

        load_hashing()  # once per process: libpass's backend loading is not thread-safe

        try:
            return bool(password_context().verify(self.password, self.password_hash))
        except (ValueError, TypeError):
            return False


# --------------------------------------------------------------------------------------------------------------
# Password flows (reference part 2 §1): forgotten passwords, changing and setting one. Each write is one atomic
# step; hashing (above) runs before it, never inside it.


class PasswordWrite(Enum):
    """What a password write did (every outcome but DONE wrote nothing, except where its doc says)."""

    #: Written.
    DONE = "done"
    #: No user with that id (a reset: the code was consumed all the same).
    USER_NOT_FOUND = "user_not_found"
    #: SetPassword: the user has a password already.
    HAS_PASSWORD = "has_password"  # noqa: S105 (an outcome, not a password)
    #: ChangePassword: the stored hash is no longer the one the old password was checked against.
    PASSWORD_CHANGED = "password_changed"  # noqa: S105 (an outcome)
    #: ResetPassword: no password-reset code with that hash.
    CODE_NOT_FOUND = "code_not_found"
    #: ResetPassword: the code's lifetime is over.
    CODE_EXPIRED = "code_expired"
    #: ResetPassword: the code was consumed before.
    CODE_USED = "code_used"


# --- who may reset through an address, and what a reset code stays bound to ---
def password_fingerprint(password_hash: str | None) -> str:
    """What a reset code keeps of the password it may replace (`VerificationCode.password_fingerprint`): the
    SHA-256 hex digest of the stored hash ('' for no password). Every stored hash is salted, so every password
    write (an update, a reset, an admin's PATCH) changes it. Computed only here: the stores compare it as text and
    compare the hash it was made from with the stored one (`StorePasswordResetCode`, `ResetPassword`)."""
    return "" if password_hash is None else hash_secret(password_hash)


def may_reset_through(user: User, stored: Iterable[ContactChannel], address: str) -> bool:
    """Whether a password reset may go through `address` (the user's stored channels `stored`): it is one of the
    user's auth channels, and either it is verified or it is the only way into the account (no other auth
    channel, no OAuth account), so that whoever reads that mailbox and resets ends up in an account nobody else
    can still enter (the reset replaces the password and ends every session). Both stores apply it (Redis in
    Lua: `backends.redis.passwords`)."""
    auth = [c for c in channels_of(user, stored) if c.used_for_auth]
    match = next((c for c in auth if c.value == address), None)
    if match is None:
        return False
    return match.is_verified or (len(auth) == 1 and not user.oauth_accounts)


def reset_code_holds(user: User, stored: Iterable[ContactChannel], code: VerificationCode) -> bool:
    """Whether the password-reset `code` of `user` may still reset: its address may (`may_reset_through`), and the
    user's password is still the one it was sent for (`password_fingerprint`). What `ResetPassword` checks in its
    atomic step, for a caller that read the user and the code before."""
    return (
        code.email is not None
        and code.password_fingerprint == password_fingerprint(user.password_hash)
        and may_reset_through(user, stored, code.email)
    )


@dataclass(frozen=True, slots=True)
class StorePasswordResetCode(StorageEffect["str | None"]):
    """Send a password-reset code, as one atomic step whatever the address: find the user whose sign-in address
    is `code.email` (the lookup of `FindUserByAuthEmail`); when there is one, a reset may go through that address
    (`may_reset_through`) and their stored password hash is still `password_hash` (what the caller read before,
    and made `code.password_fingerprint` of), store `code` as theirs (its `user_id` set to theirs) and append
    `outbox_mail`, when given, to the project's outbox (keeping `keep`), and answer their id; else write nothing
    and answer None.

    The same step for a known, a refused and an unknown address, so that the request costs the same either way."""

    project_id: str
    code: VerificationCode
    outbox_mail: Email | None = field(default=None, repr=False)
    keep: int = 1000
    #: The password hash of the address's user as the caller read it (None: no password, or no user).
    password_hash: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.code.email is None or self.code.purpose != CodePurpose.PASSWORD_RESET:
            raise ValueError("a password-reset code names the address it is sent to, with its purpose")
        if self.code.password_fingerprint != password_fingerprint(self.password_hash):
            raise ValueError("a password-reset code carries the fingerprint of the password it is sent for")


@dataclass(frozen=True, slots=True)
class ResetPassword(StorageEffect[PasswordWrite]):
    """Use the password-reset code `code_hash` (presented and checked before by `AttemptVerificationCode`), at
    once: CODE_NOT_FOUND (no such code of the PASSWORD_RESET purpose), CODE_EXPIRED (`now_ms >=
    expires_at_millis`) or CODE_USED, writing nothing; else USER_NOT_FOUND when its user is gone (the code is
    marked used); else CODE_NOT_FOUND, writing nothing, when the code no longer holds: its fingerprint is not
    `password_fingerprint(old_password_hash)`, or the user's stored hash is not `old_password_hash` (the password
    changed since the code was sent, or since the caller read it), or a reset may no longer go through the code's
    address (`may_reset_through`); else mark the code used, set the user's `password_hash` (replacing or
    creating the password), mark the channel of the code's address verified and remove every session of the
    user: DONE. Of concurrent resets with one code, exactly one is DONE."""

    project_id: str
    code_hash: str
    password_hash: str = field(repr=False)
    now_ms: int
    #: The user's password hash as the caller read it (None: no password), whose fingerprint the code must carry.
    old_password_hash: str | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class ChangePassword(StorageEffect[PasswordWrite]):
    """Replace a user's password, at once: USER_NOT_FOUND, or PASSWORD_CHANGED when their stored hash is not
    `old_password_hash` (changed since the old password was checked against it; nothing written); else store
    `new_password_hash` and remove every session of the user but the one whose refresh token hashes to
    `keep_refresh_token_hash` (when it is one of theirs; None: remove them all): DONE."""

    project_id: str
    user_id: str
    old_password_hash: str = field(repr=False)
    new_password_hash: str = field(repr=False)
    keep_refresh_token_hash: str | None = None


@dataclass(frozen=True, slots=True)
class SetPassword(StorageEffect[PasswordWrite]):
    """Give a user without a password the password `password_hash`: USER_NOT_FOUND, HAS_PASSWORD (nothing
    written), or DONE. Sessions are left as they are."""

    project_id: str
    user_id: str
    password_hash: str = field(repr=False)
