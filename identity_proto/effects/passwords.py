"""Passwords: hashing and verifying (CPU-heavy: performed in a worker thread under the async driver), the rules of
a password reset, and what the password flows' commits guard and write."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.effects.base import ComputeEffect, StorageEffect
from identity_proto.effects.commit import CommitWrite
from identity_proto.effects.contact_channels import UserChannels, channels_of  # noqa: F401 (a quoted type)
from identity_proto.records import ContactChannel, Email, User, VerificationCode, primary_channel
from identity_proto.tokens import hash_secret

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


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
# Password flows (reference part 2 §1): forgotten passwords, changing and setting one. The core decides
# (`identity_proto.flows.passwords`) and writes with one `Commit` guarded on what it read; hashing (above) runs
# before it, never inside it. No store knows a password rule.


class PasswordWrite(Enum):
    """What a password flow's decision came to (every outcome but DONE wrote nothing, except where its doc says)."""

    #: Written.
    DONE = "done"
    #: No user with that id (a reset: the code was used all the same).
    USER_NOT_FOUND = "user_not_found"
    #: Setting: the user has a password already.
    HAS_PASSWORD = "has_password"  # noqa: S105 (an outcome, not a password)
    #: Changing: the stored hash is no longer the one the old password was checked against.
    PASSWORD_CHANGED = "password_changed"  # noqa: S105 (an outcome)
    #: Resetting: no password-reset code with that hash, or one that no longer holds (`reset_code_holds`).
    CODE_NOT_FOUND = "code_not_found"
    #: Resetting: the code's lifetime is over.
    CODE_EXPIRED = "code_expired"
    #: Resetting: the code was used before.
    CODE_USED = "code_used"


# Who may reset through an address, and what a reset code stays bound to
def password_fingerprint(password_hash: str | None) -> str:
    """What a reset code keeps of the password it may replace (`VerificationCode.password_fingerprint`): the
    SHA-256 hex digest of the stored hash ('' for no password). Every stored hash is salted, so every password
    write (an update, a reset, an admin's PATCH) changes it. Computed only here."""
    return "" if password_hash is None else hash_secret(password_hash)


def reset_primary(user: User) -> str:
    """What a reset code keeps of the user's primary e-mail (`VerificationCode.primary_channel_id`): the id of
    their primary channel ('' for none). Moving the primary (a new address, none, or another of their channels
    promoted) changes it, while the old address stays one of their channels (as the original keeps it): a code
    mailed there before dies then. Computed only here."""
    primary = primary_channel(user)
    return "" if primary is None else primary.id


#: The user's fields a reset's rules read (`may_reset_through`, `reset_code_holds`): what its commit guards.
RESET_FIELDS = (
    "password_hash",
    "primary_email",
    "primary_email_verified",
    "primary_email_auth_enabled",
    "primary_email_channel_id",
    "oauth_accounts",
)


def may_reset_through(user: User, stored: Iterable[ContactChannel], address: str) -> bool:
    """Whether a password reset may go through `address` (the user's stored channels `stored`): it is one of the
    user's auth channels, and either it is verified or it is the only way into the account (no other auth
    channel, no OAuth account), so that whoever reads that mailbox and resets ends up in an account nobody else
    can still enter (the reset replaces the password and ends every session). Decided here only."""
    auth = [c for c in channels_of(user, stored) if c.used_for_auth]
    match = next((c for c in auth if c.value == address), None)
    if match is None:
        return False
    return match.is_verified or (len(auth) == 1 and not user.oauth_accounts)


def reset_code_holds(user: User, stored: Iterable[ContactChannel], code: VerificationCode) -> bool:
    """Whether the password-reset `code` of `user` may still reset: its address may (`may_reset_through`), the
    user's password is still the one it was sent for (`password_fingerprint`), and their primary e-mail channel is
    still the one it was stored under (`reset_primary`)."""
    return (
        code.email is not None
        and code.password_fingerprint == password_fingerprint(user.password_hash)
        and code.primary_channel_id == reset_primary(user)
        and may_reset_through(user, stored, code.email)
    )


# A reset's read, and the commit's guards and writes of the password flows
@dataclass(frozen=True, slots=True)
class FindAuthAddressHolder(StorageEffect["UserChannels | None"]):
    """The user the e-mail index gives `email` to, read as `ListContactChannels` reads a user (their stored
    channels, and the index entries of their addresses and of `email`), in one step; None when the index gives it
    to nobody, or to a user who is gone."""

    project_id: str
    email: str


@dataclass(frozen=True, slots=True)
class PutCode(CommitWrite):
    """Store a one-time code (in place of one with its hash), creating its nonce's attempt counter once."""

    code: VerificationCode


@dataclass(frozen=True, slots=True)
class PutMail(CommitWrite):
    """Append a mail to the project's outbox, keeping the newest `keep` (`effects.outbox.append_outbox`)."""

    mail: Email = field(repr=False)
    keep: int = 1000
