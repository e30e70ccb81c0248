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
existing read and write of a user (sign-in, token issue, PATCH /users, lists) already keeps the primary
e-mail in the user record, in one hash on Redis; moving it out would add a second read to each of them. Here only
the contact-channel routes pay, and PATCH /users `primary_email` *is* an update of the primary channel.

Moving the primary: making another channel primary moves that channel's data into the user record and the old
primary's out of it into channel storage under its id, in ONE commit (`channel_commit`). `is_primary: false` on the
primary, or deleting it, leaves the user with `primary_email: null`. Each such write pins `primary_email_channel_id`
to `next_primary_id`, a fresh id from the flow, so a primary later set through /users never reuses the id of a
channel now stored elsewhere.

Sign-in uniqueness: an address `used_for_auth` is unique across the project's users, over every channel. The
project's e-mail index (auth address -> user id) holds every auth channel's address, the primary's and the stored
ones' (except unverified claims, below), and every write here reads it, decides (`address_taken`,
`claims_address`), and changes it in a commit guarded on the entries it read (`channel_commit`).
`find_user_by_email` (the one lookup of OTP, password sign-in and password reset) therefore finds a user by any
of their auth channels that the index gives them. Whether that
address is verified (for the OTP rules) is the matched channel's `is_verified` (`auth_address_verified`, read by
`matched_address_verified`), never the primary's when another channel matched.

Unverified claims (security; the original differs): an unverified auth channel written by a client (the contact-
channel routes with client access, create or update) does not take the index entry. It keeps `used_for_auth` as the
client set it, but signs nobody in until it is verified (`verify_channel`, or a server setting `is_verified`)
while the address is still free (`verified_channel`: the first verification wins); so a client (an anonymous user
too) that adds someone else's address holds nothing against them: their code sign-in and password sign-up find the
address free and create an account of their own, which then holds it, and the claim never signs anyone in. It is the
rule a client's change of the primary e-mail follows (`flows.users`), and a client making such a claim its primary
gets it with `used_for_auth` off, as that rule has it (`claimed`), so a primary that is used for auth is always in
the index. A write by a server, a sign-up, and a channel already holding its address (the user's own sign-up
address, say) take or keep the entry as before: `claims_address`. A channel is therefore used for sign-in exactly
when the index gives its address to its user; deleting or changing one removes only entries that are its user's.

Within one user an address appears once: a second channel with the same value is refused (400 plain "Contact
channel already exists"), and `PATCH /users` setting `primary_email` to the value of one of the user's other
channels promotes that channel (`flows.users`), so one address is never two channels of one user (whose index
entry the first delete would drop).

The decisions are plain functions of this module (`created_channels`, `updated_channels`, `deleted_channels`,
`verified_channel`, and the rules above); the flows (`identity_proto.flows.contact_channels`) read
(`ListContactChannels`: the user, their stored channels and the index entries of their addresses, in one step),
decide, and write with one `Commit` guarded on exactly what they read (`channel_commit`): the user's primary
fields, their stored channels (`ChannelsAre`), the index entries consulted. A concurrent change is a conflict, and
the service re-runs the flow. Stored channels are written by `PutChannel` / `DropChannel`, a code used by
`UseCode` under `CodeIsUnused`; no store knows a channel rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from enum import Enum
from typing import TYPE_CHECKING, Any

from identity_proto.changes import UserChanges
from identity_proto.effects.base import Flow, StorageEffect, perform
from identity_proto.effects.codes import CodeAttempt
from identity_proto.effects.commit import (
    CommitGuard,
    CommitWrite,
    DropIndex,
    FieldsAre,
    IndexIs,
    IndexName,
    PatchUser,
    SetIndex,
)
from identity_proto.records import ContactChannel, User, primary_channel, replaced

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "PRIMARY_FIELDS",
    "ChannelVerification",
    "ChannelWrite",
    "ChannelsAre",
    "CodeIsUnused",
    "DropChannel",
    "ListContactChannels",
    "ListProjectContactChannels",
    "PutChannel",
    "UseCode",
    "UserChannels",
    "address_taken",
    "auth_address_verified",
    "channel_commit",
    "channels_of",
    "claimed",
    "claims_address",
    "created_channels",
    "deleted_channels",
    "matched_address_verified",
    "updated_channels",
    "verified_channel",
]

#: The user's fields that hold the primary channel (every channel write guards them as read).
PRIMARY_FIELDS = (
    "primary_email",
    "primary_email_verified",
    "primary_email_auth_enabled",
    "primary_email_channel_id",
    "primary_email_channel_created_at_millis",
)


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
    the primary too. `holders`: the e-mail index entry (the user id it names, or None) of every address of the
    user's channels and of the addresses the read asked for, as read with them (by address)."""

    user: User
    stored: tuple[ContactChannel, ...]
    holders: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def channels(self) -> tuple[ContactChannel, ...]:
        """Every channel of the user, in creation order (then id)."""
        return channels_of(self.user, self.stored)

    def find(self, channel_id: str) -> ContactChannel | None:
        """The user's channel with this id, or None."""
        return next((c for c in self.channels if c.id == channel_id), None)

    def holder(self, address: str) -> str | None:
        """The user the index gives `address` to, as read (the read must have covered it)."""
        if address not in self.holders:
            raise KeyError(f"the read did not cover the index entry of {address!r}")
        return self.holders[address]


def channels_of(user: User, stored: Iterable[ContactChannel]) -> tuple[ContactChannel, ...]:
    """The user's channels: the primary (from the user record) and the stored ones, by (created_at, id)."""
    primary = primary_channel(user)
    every = [*stored, *([primary] if primary is not None else [])]
    return tuple(sorted(every, key=lambda c: (c.created_at_millis, c.id)))


# ---------------------------------------------------------------------------------------------------------------
# The rules (each decided here, once)


def auth_address_verified(user: User, stored: Iterable[ContactChannel], address: str) -> bool:
    """Whether the user's auth channel with this address is verified (False when they have none): the matched
    address's flag, never the primary's when another channel matched."""
    if user.primary_email == address and user.primary_email_auth_enabled:
        return user.primary_email_verified
    return any(c.value == address and c.used_for_auth and c.is_verified for c in stored)


def matched_address_verified(project_id: str, user: User | None, address: str) -> Flow[bool]:
    """`auth_address_verified` for the user an index lookup of `address` found (False for nobody); reads their
    stored channels only when the address is not their primary."""
    if user is None:
        return False
    if user.primary_email == address and user.primary_email_auth_enabled:
        return user.primary_email_verified
    found = yield from perform(ListContactChannels(project_id, user.id))
    return found is not None and auth_address_verified(found.user, found.stored, address)


def address_taken(channel: ContactChannel, holder: str | None) -> bool:
    """Whether `channel` would sign in with an address the index gives another user (USED_FOR_AUTH)."""
    return channel.used_for_auth and holder is not None and holder != channel.user_id


def claims_address(channel: ContactChannel, *, trusted: bool, holder: str | None) -> bool:
    """Whether a write leaving `channel` as it is takes (or keeps) the index entry of its address, `holder` being
    the user the index gives it to now: an auth channel written by a server, verified, or holding it already. The
    caller has refused a value held by another user (USED_FOR_AUTH)."""
    return channel.used_for_auth and (trusted or channel.is_verified or holder == channel.user_id)


def claimed(
    before: UserChannels, channels: list[ContactChannel], channel_id: str, *, trusted: bool
) -> tuple[list[ContactChannel], str | None]:
    """The written channel's claim (`claims_address`): its address when it takes the index entry; an unverified
    claim by a client that ends up primary is not used for auth (the rule of a client's primary change)."""
    written = next(c for c in channels if c.id == channel_id)
    if claims_address(written, trusted=trusted, holder=before.holder(written.value)):
        return channels, written.value
    if written.used_for_auth and written.is_primary:
        off = replaced(written, {"used_for_auth": False})
        return [off if c.id == channel_id else c for c in channels], None
    return channels, None


def _promoted(channels: list[ContactChannel], channel_id: str) -> list[ContactChannel]:
    return [replaced(c, {"is_primary": c.id == channel_id}) for c in channels]


def created_channels(
    before: UserChannels, new: ContactChannel, *, make_primary: bool, trusted: bool, max_channels: int = 0
) -> tuple[list[ContactChannel], str | None] | ChannelWrite:
    """The user's channels once `new` (its `is_primary` ignored) is added, and the address it claims; or why not,
    checked in this order: ALREADY_EXISTS (the user has a channel with its value), USED_FOR_AUTH (it is used for
    auth and the index gives its value to another user), TOO_MANY (`max_channels`, 0: no cap). With
    `make_primary` it becomes the primary (the old primary moves to channel storage). The read must cover
    `new.value`'s index entry."""
    new = replaced(new, {"is_primary": False})
    channels = list(before.channels)
    if any(c.value == new.value for c in channels):
        return ChannelWrite.ALREADY_EXISTS
    if address_taken(new, before.holder(new.value)):
        return ChannelWrite.USED_FOR_AUTH
    if max_channels and len(channels) >= max_channels:
        return ChannelWrite.TOO_MANY
    channels.append(new)
    if make_primary:
        channels = _promoted(channels, new.id)
    return claimed(before, channels, new.id, trusted=trusted)


def updated_channels(
    before: UserChannels,
    channel_id: str,
    *,
    value: str | None = None,
    used_for_auth: bool | None = None,
    is_verified: bool | None = None,
    is_primary: bool | None = None,
    trusted: bool = True,
) -> tuple[list[ContactChannel], str | None] | ChannelWrite:
    """The user's channels once one is changed (each None: unchanged), and the address it claims; or why not, in
    this order: CHANNEL_NOT_FOUND, ALREADY_EXISTS (a new value another channel of the user has), USED_FOR_AUTH
    (the channel is or becomes used for auth with a value the index gives another user).

    A new `value` resets `is_verified` to false unless `is_verified` is given too. `is_primary` true makes it the
    primary (the old one moves to channel storage); false on the primary moves it to channel storage, leaving
    the user without a primary e-mail; false on another channel changes nothing. The read must cover `value`'s
    index entry."""
    channels = list(before.channels)
    found = next((c for c in channels if c.id == channel_id), None)
    if found is None:
        return ChannelWrite.CHANNEL_NOT_FOUND
    changes: dict[str, Any] = {}
    if value is not None and value != found.value:
        if any(c.value == value for c in channels):
            return ChannelWrite.ALREADY_EXISTS
        changes.update(value=value, is_verified=False)
    if used_for_auth is not None:
        changes["used_for_auth"] = used_for_auth
    if is_verified is not None:
        changes["is_verified"] = is_verified
    changed = replaced(found, changes)
    if address_taken(changed, before.holder(changed.value)):
        return ChannelWrite.USED_FOR_AUTH
    channels = [changed if c.id == found.id else c for c in channels]
    if is_primary is True:
        channels = _promoted(channels, found.id)
    elif is_primary is False and found.is_primary:
        channels = _promoted(channels, "")
    return claimed(before, channels, found.id, trusted=trusted)


def deleted_channels(before: UserChannels, channel_id: str) -> list[ContactChannel] | ChannelWrite:
    """The user's channels without the one with this id (CHANNEL_NOT_FOUND when they have none such)."""
    if not any(c.id == channel_id for c in before.channels):
        return ChannelWrite.CHANNEL_NOT_FOUND
    return [c for c in before.channels if c.id != channel_id]


def verified_channel(before: UserChannels, address: str) -> tuple[list[ContactChannel], str | None] | None:
    """The user's channels once their channel with this address is verified (None: they have none), and the
    address it claims: a verified auth channel that does not hold its address (a client's unverified claim) takes
    the index entry when nobody holds it (the first verification wins); a holder already there keeps it. Only the
    flag changes (the primary's in the user record, another channel's in its record)."""
    found = next((c for c in before.channels if c.value == address), None)
    if found is None:
        return None
    channels = [replaced(c, {"is_verified": True}) if c.id == found.id else c for c in before.channels]
    takes = not found.is_primary and found.used_for_auth and before.holder(address) is None
    return channels, address if takes else None


@dataclass(frozen=True, slots=True)
class ChannelVerification:
    """What presenting a CONTACT_CHANNEL_VERIFICATION code did: the code attempt, and on OK whether the channel it
    names was found (and verified)."""

    attempt: CodeAttempt
    channel_found: bool = False


# ---------------------------------------------------------------------------------------------------------------
# Writing the decision: one commit guarded on what it read


@dataclass(frozen=True, slots=True)
class ChannelsAre(CommitGuard):
    """The user's stored (non-primary) channels are exactly `stored` (as read; none when there are none)."""

    user_id: str
    stored: tuple[ContactChannel, ...]


@dataclass(frozen=True, slots=True)
class PutChannel(CommitWrite):
    """Store one non-primary channel of its user (a new one, or in place of the one with its id)."""

    channel: ContactChannel


@dataclass(frozen=True, slots=True)
class DropChannel(CommitWrite):
    """Remove one stored channel of a user (one already gone is no error)."""

    user_id: str
    channel_id: str


@dataclass(frozen=True, slots=True)
class CodeIsUnused(CommitGuard):
    """The one-time code with this hash exists and is not used (its expiry and attempts are the caller's)."""

    code_hash: str


@dataclass(frozen=True, slots=True)
class UseCode(CommitWrite):
    """Mark a one-time code used (guard it with `CodeIsUnused`)."""

    code_hash: str


def _primary_fields(primary: ContactChannel | None, next_primary_id: str) -> dict[str, Any]:
    if primary is None:
        return {
            "primary_email": None,
            "primary_email_verified": False,
            "primary_email_auth_enabled": False,
            "primary_email_channel_id": next_primary_id,
            "primary_email_channel_created_at_millis": None,
        }
    return {
        "primary_email": primary.value,
        "primary_email_verified": primary.is_verified,
        "primary_email_auth_enabled": primary.used_for_auth,
        "primary_email_channel_id": primary.id,
        "primary_email_channel_created_at_millis": primary.created_at_millis,
    }


def channel_commit(
    before: UserChannels,
    channels: list[ContactChannel],
    next_primary_id: str,
    claim: str | None,
    *,
    pin_primary: bool = True,
) -> tuple[tuple[CommitGuard, ...], tuple[CommitWrite, ...], UserChannels]:
    """The guards and writes that leave the user with `channels` (at most one primary) in place of `before`'s, and
    the user's channels afterwards: the primary into the user's fields, the others into channel storage. The index
    loses the user's entries of addresses no longer used for auth (only entries that name them) and gains `claim`.
    Guarded on what the decision read: the primary fields, the stored channels, the index entries consulted.

    `next_primary_id` pins `primary_email_channel_id` when the primary moves away, so a primary later set through
    /users never reuses the id of a channel now stored elsewhere; a primary that stays where it is keeps a derived
    id and creation time unpinned when `pin_primary` is False (a verification changes only the flag)."""
    user = before.user
    primary = next((c for c in channels if c.is_primary), None)
    fields = _primary_fields(primary, next_primary_id)
    if primary is None and user.primary_email is None:
        fields = {}  # no primary before or after: the user record is left as it is
    if not pin_primary:
        for name in ("primary_email_channel_id", "primary_email_channel_created_at_millis"):
            if getattr(user, name) is None:
                fields.pop(name, None)
    fields = {name: value for name, value in fields.items() if getattr(user, name) != value}
    guards: list[CommitGuard] = [FieldsAre(user, PRIMARY_FIELDS), ChannelsAre(user.id, before.stored)]
    writes: list[CommitWrite] = []
    if fields:
        writes.append(PatchUser(user.id, UserChanges.of(fields.items())))
    stored = [replaced(c, {"is_primary": False}) for c in channels if not c.is_primary]
    old_stored = {c.id: c for c in before.stored}
    writes += [PutChannel(c) for c in stored if old_stored.get(c.id) != c]
    kept = {c.id for c in stored}
    writes += [DropChannel(user.id, c.id) for c in before.stored if c.id not in kept]
    old = {c.value for c in before.channels if c.used_for_auth}
    new = {c.value for c in channels if c.used_for_auth}
    consulted = {v for v in before.holders if v in old - new or v == claim or v in new}
    for value in sorted(consulted):
        guards.append(IndexIs(IndexName.EMAIL, value, before.holders[value]))
    for value in sorted(old - new):
        if before.holder(value) == user.id:
            writes.append(DropIndex(IndexName.EMAIL, value))
    if claim is not None and before.holder(claim) != user.id:
        writes.append(SetIndex(IndexName.EMAIL, claim, user.id))
    after = UserChannels(
        replaced(user, fields) if fields else user,
        tuple(sorted(stored, key=lambda c: (c.created_at_millis, c.id))),
    )
    return tuple(guards), tuple(writes), after


# ---------------------------------------------------------------------------------------------------------------
# Reads


@dataclass(frozen=True, slots=True)
class ListContactChannels(StorageEffect["UserChannels | None"]):
    """The user, their stored channels and the e-mail index entries (`UserChannels.holders`) of the addresses of
    all their channels and of `addresses`, read together; None when there is no such user."""

    project_id: str
    user_id: str
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListProjectContactChannels(StorageEffect[tuple[ContactChannel, ...]]):
    """Every channel of every user of the project (primaries included): users in ListUsers order, each user's
    channels in creation order."""

    project_id: str
