"""Contact channels (reference part 2 §2): a user's e-mail addresses, one of which may be primary.

Design: one source of truth
---------------------------
The user's `primary_email`, `primary_email_verified` and `primary_email_auth_enabled` are *derived from* the
primary channel in the original. Here the primary channel is stored in exactly those fields of the `User` record
(plus `primary_email_channel_id` and `primary_email_channel_created_at_millis`), and every other channel is a
`ContactChannel` record stored under its user (memory: `Tenant.channels`; Redis: one hash per user). Reading a
user's channels renders the primary from the user record (`records.primary_channel`) and the others from their
records (`channels_of`). So there is one copy of each fact: a user read (every existing route, token, sign-in)
sees the primary channel as it is, and no write can leave the user and "its primary channel" disagreeing.

Why this way round (rather than every channel in channel storage and the user's fields read from it): every
existing read and write of a user (sign-in scripts, token issue, PATCH /users, lists) already keeps the primary
e-mail in the user record, in one hash on Redis; moving it out would add a second read to each of them. Here only
the contact-channel routes pay, and PATCH /users `primary_email` *is* an update of the primary channel.

Moving the primary: making another channel primary moves that channel's data into the user record and the old
primary's out of it into channel storage under its id, in ONE atomic effect (`CreateContactChannel`,
`UpdateContactChannel`). `is_primary: false` on the primary, or deleting it, leaves the user with
`primary_email: null`. Each such write pins `primary_email_channel_id` to `next_primary_id`, a fresh id from the
flow, so a primary later set through /users never reuses the id of a channel now stored elsewhere.

Sign-in uniqueness: an address `used_for_auth` is unique across the project's users, over every channel. The
project's e-mail index (auth address -> user id) holds every auth channel's address, the primary's and the stored
ones' (except unverified claims, below), and every write here checks and changes it in the same atomic step.
`FindUserByAuthEmail` (the one lookup of OTP, password sign-in and password reset) therefore finds a user by any
of their auth channels that the index gives them. Whether that
address is verified (for the OTP rules) is the matched channel's `is_verified` (`auth_address_verified`).

Unverified claims (security; the original differs): an unverified auth channel written by a client (the
contact-channel routes with client access, create or update) does not take the index entry. It keeps
`used_for_auth` as the client set it, but signs nobody in until it is verified (`VerifyContactChannel`, or a
server setting `is_verified`) while the address is still free; so a client (an anonymous user too) that adds
someone else's address holds nothing against them: their code sign-in and password sign-up find the address free
and create an account of their own, which then holds it, and the claim never signs anyone in. It is the rule a
client's change of the primary e-mail follows (`flows.users`), and a client making such a claim its primary gets
it with `used_for_auth` off, as that rule has it, so a primary that is used for auth is always in the index. A
write by a server, a sign-up, and a channel already holding its address (the user's own sign-up address, say)
take or keep the entry as before: `claims_address`. A channel is therefore used for sign-in exactly when the
index gives its address to its user; deleting or changing one removes only entries that are its user's.

Within one user an address appears once: a second channel with the same value is refused (400 plain "Contact
channel already exists"), and so is `PATCH /users` setting `primary_email` to the value of one of the user's other
channels (409 USER_EMAIL_ALREADY_EXISTS: `UserWrite.EMAIL_TAKEN`), so one address is never two channels of one
user (whose index entry the first delete would drop).

Stores implement each effect below as one step: the memory store under its lock, Redis one Lua script per
effect (every key under the project's hash tag).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.codes import AttemptVerificationCode, CodeAttempt
from identity_proto.records import ContactChannel, User, primary_channel

__all__ = [
    "ChannelVerification",
    "ChannelWrite",
    "CreateContactChannel",
    "DeleteContactChannel",
    "ListContactChannels",
    "ListProjectContactChannels",
    "UpdateContactChannel",
    "UserChannels",
    "VerifyContactChannel",
    "auth_address_verified",
    "channels_of",
    "claims_address",
]


class ChannelWrite(Enum):
    """Why a contact-channel write did not happen (nothing written)."""

    #: No user with that id.
    USER_NOT_FOUND = "user_not_found"
    #: The user has no channel with that id.
    CHANNEL_NOT_FOUND = "channel_not_found"
    #: The user has another channel with that value already.
    ALREADY_EXISTS = "already_exists"
    #: The channel would be used for auth, and a channel of the project (another user's) signs in with its value.
    USED_FOR_AUTH = "used_for_auth"
    #: The user has `max_channels` channels already (creating).
    TOO_MANY = "too_many"


@dataclass(frozen=True, slots=True)
class UserChannels:
    """A user as stored and their stored (non-primary) channels, by (created_at, id); `channels` is all of them,
    the primary too."""

    user: User
    stored: tuple[ContactChannel, ...]

    @property
    def channels(self) -> tuple[ContactChannel, ...]:
        """Every channel of the user, in creation order (then id)."""
        return channels_of(self.user, self.stored)

    def find(self, channel_id: str) -> ContactChannel | None:
        """The user's channel with this id, or None."""
        return next((c for c in self.channels if c.id == channel_id), None)


def channels_of(user: User, stored: Iterable[ContactChannel]) -> tuple[ContactChannel, ...]:
    """The user's channels: the primary (from the user record) and the stored ones, by (created_at, id)."""
    primary = primary_channel(user)
    every = [*stored, *([primary] if primary is not None else [])]
    return tuple(sorted(every, key=lambda c: (c.created_at_millis, c.id)))


def auth_address_verified(user: User, stored: Iterable[ContactChannel], address: str) -> bool:
    """Whether the user's auth channel with this address is verified (False when they have none)."""
    if user.primary_email == address and user.primary_email_auth_enabled:
        return user.primary_email_verified
    return any(c.value == address and c.used_for_auth and c.is_verified for c in stored)


def claims_address(channel: ContactChannel, *, trusted: bool, holder: str | None) -> bool:
    """Whether a write leaving `channel` as it is takes (or keeps) the index entry of its address, `holder` being
    the user the index gives it to now: an auth channel written by a server, verified, or holding it already. The
    caller has refused a value held by another user (USED_FOR_AUTH)."""
    return channel.used_for_auth and (trusted or channel.is_verified or holder == channel.user_id)


@dataclass(frozen=True, slots=True)
class ListContactChannels(StorageEffect["UserChannels | None"]):
    """The user and their stored channels, read together; None when there is no such user."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class ListProjectContactChannels(StorageEffect[tuple[ContactChannel, ...]]):
    """Every channel of every user of the project (primaries included): users in ListUsers order, each user's
    channels in creation order."""

    project_id: str


@dataclass(frozen=True, slots=True)
class CreateContactChannel(StorageEffect["UserChannels | ChannelWrite"]):
    """Add `channel` (a fresh id; its `is_primary` ignored) to its user, atomically, checked in this order:
    USER_NOT_FOUND, ALREADY_EXISTS (the user has a channel with its value), USED_FOR_AUTH (it is used for auth and
    the index gives its value to another user), TOO_MANY (`max_channels`). With `make_primary` it becomes the
    primary: the old primary (if any) moves to channel storage. The index gains its value when it claims it
    (`claims_address`). Returns the user and channels afterwards."""

    project_id: str
    channel: ContactChannel
    make_primary: bool
    #: The id the user's next primary gets when the old primary moves away (`primary_email_channel_id`).
    next_primary_id: str
    #: A server's write (True) or a client's: see "Unverified claims" above.
    trusted: bool = True
    #: Refuse (TOO_MANY) when the user has this many channels already, the primary included (0: no cap).
    max_channels: int = 0


@dataclass(frozen=True, slots=True)
class UpdateContactChannel(StorageEffect["UserChannels | ChannelWrite"]):
    """Change one channel of a user, atomically (each None: unchanged), checked in this order: USER_NOT_FOUND,
    CHANNEL_NOT_FOUND, ALREADY_EXISTS (a new value another channel of the user has), USED_FOR_AUTH (the channel is
    or becomes used for auth with a value the index gives another user).

    A new `value` resets `is_verified` to false unless `is_verified` is given too. `is_primary` true makes it the
    primary (the old one moves to channel storage); false on the primary moves it to channel storage, leaving
    the user without a primary e-mail; false on another channel changes nothing. The index follows
    (`claims_address`)."""

    project_id: str
    user_id: str
    channel_id: str
    next_primary_id: str
    value: str | None = None
    used_for_auth: bool | None = None
    is_verified: bool | None = None
    is_primary: bool | None = None
    #: A server's write (True) or a client's: see "Unverified claims" above.
    trusted: bool = True


@dataclass(frozen=True, slots=True)
class DeleteContactChannel(StorageEffect["UserChannels | ChannelWrite"]):
    """Remove one channel of a user (USER_NOT_FOUND, CHANNEL_NOT_FOUND), and its index entry. Deleting the primary
    leaves the user without a primary e-mail (their sign-in methods stay: reference §2, e2e)."""

    project_id: str
    user_id: str
    channel_id: str
    next_primary_id: str


@dataclass(frozen=True, slots=True)
class ChannelVerification:
    """What `VerifyContactChannel` did: the code attempt, and on OK whether the channel was found (and verified)."""

    attempt: CodeAttempt
    channel_found: bool = False


@dataclass(frozen=True, slots=True)
class VerifyContactChannel(StorageEffect[ChannelVerification]):
    """Present a CONTACT_CHANNEL_VERIFICATION code (`attempt`, with `consume`) and, when it is OK, mark the
    channel it names (the code's `user_id`, with the value `email`) verified, in one atomic step. A code whose
    channel is gone is consumed all the same (reference §2: "consumed → channel missing → 400").

    A verified auth channel that did not hold its address (a client's unverified claim) takes the index entry
    when nobody holds it: the first verification wins; a holder already there keeps it."""

    attempt: AttemptVerificationCode

    def __post_init__(self) -> None:
        if not self.attempt.consume:
            raise ValueError("verifying a contact channel consumes its code")
