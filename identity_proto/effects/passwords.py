"""Passwords: hashing and verifying (CPU-heavy: performed in a worker thread under the async driver), and the
password flows' writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from identity_proto.effects.base import ComputeEffect, StorageEffect
from identity_proto.records import CodePurpose, Email, VerificationCode


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


@dataclass(frozen=True, slots=True)
class StorePasswordResetCode(StorageEffect["str | None"]):
    """Send a password-reset code, as one atomic step whatever the address: find the user whose sign-in address
    is `code.email` (the lookup of `FindUserByAuthEmail`); when there is one, store `code` as theirs (its
    `user_id` set to theirs) and append `outbox_mail`, when given, to the project's outbox (keeping `keep`), and
    answer their id; when there is none, write nothing and answer None.

    The same step for a known and an unknown address, so that the request costs the same either way."""

    project_id: str
    code: VerificationCode
    outbox_mail: Email | None = field(default=None, repr=False)
    keep: int = 1000

    def __post_init__(self) -> None:
        if self.code.email is None or self.code.purpose != CodePurpose.PASSWORD_RESET:
            raise ValueError("a password-reset code names the address it is sent to, with its purpose")


@dataclass(frozen=True, slots=True)
class ResetPassword(StorageEffect[PasswordWrite]):
    """Use the password-reset code `code_hash` (presented and checked before by `AttemptVerificationCode`), at
    once: CODE_NOT_FOUND (no such code of the PASSWORD_RESET purpose), CODE_EXPIRED (`now_ms >=
    expires_at_millis`) or CODE_USED, writing nothing; else mark the code used, then USER_NOT_FOUND when its user
    is gone (the code stays used), else set the user's `password_hash` (replacing or creating the password) and
    remove every session of the user: DONE. Of concurrent resets with one code, exactly one is DONE."""

    project_id: str
    code_hash: str
    password_hash: str = field(repr=False)
    now_ms: int


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
