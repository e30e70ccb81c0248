"""The memory store: contact channels (identity_proto.effects.contact_channels has the design).

Each write reads the user's channels (the primary from the user record, the others from `Tenant.channels`), makes
its change on that list, and writes the list back (`_store_channels`): the primary into the user's fields, the
others into channel storage, and the e-mail index from the auth channels before and after. All under the store's
lock, so each is one atomic step.
"""

from __future__ import annotations

from typing import Any

from backends.memory.codes import _attempt_code
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ChannelVerification,
    ChannelWrite,
    CodeOutcome,
    CreateContactChannel,
    DeleteContactChannel,
    ListContactChannels,
    ListProjectContactChannels,
    UpdateContactChannel,
    UserChannels,
    VerifyContactChannel,
    auth_address_verified,
    channels_of,
    claims_address,
)
from identity_proto.records import ContactChannel, User, replaced


def _user_channels(tenant: Tenant, user_id: str) -> UserChannels | None:
    user = tenant.users.get(user_id)
    if user is None:
        return None
    stored = sorted(tenant.channels.get(user_id, {}).values(), key=lambda c: (c.created_at_millis, c.id))
    return UserChannels(user, tuple(stored))


def _auth_values(channels: tuple[ContactChannel, ...]) -> set[str]:
    return {c.value for c in channels if c.used_for_auth}


def _store_channels(
    tenant: Tenant, before: UserChannels, channels: list[ContactChannel], next_primary_id: str, claim: str | None
) -> UserChannels:
    """Write the user's channels `channels` (at most one primary) in place of `before`'s: the primary into the
    user's fields, the others into channel storage. The index loses the user's entries of addresses no longer
    used for auth and gains `claim` (the written channel's address when it claims it: `claims_address`). The
    caller has checked that no auth address of `channels` is another user's."""
    user = before.user
    primary = next((c for c in channels if c.is_primary), None)
    fields: dict[str, Any]
    if primary is not None:
        fields = {
            "primary_email": primary.value,
            "primary_email_verified": primary.is_verified,
            "primary_email_auth_enabled": primary.used_for_auth,
            "primary_email_channel_id": primary.id,
            "primary_email_channel_created_at_millis": primary.created_at_millis,
        }
    else:
        fields = {
            "primary_email": None,
            "primary_email_verified": False,
            "primary_email_auth_enabled": False,
            "primary_email_channel_id": next_primary_id,
            "primary_email_channel_created_at_millis": None,
        }
    if primary is None and user.primary_email is None:
        fields = {}  # no primary before or after: the user record is left as it is
    updated = tenant.users[user.id] = replaced(user, fields) if fields else user
    stored = [replaced(c, {"is_primary": False}) for c in channels if not c.is_primary]
    if stored:
        tenant.channels[user.id] = {c.id: c for c in stored}
    else:
        tenant.channels.pop(user.id, None)
    old, new = _auth_values(before.channels), _auth_values(tuple(channels))
    for value in old - new:
        if tenant.email_index.get(value) == user.id:
            del tenant.email_index[value]
    if claim is not None:
        tenant.email_index[claim] = user.id
    return UserChannels(updated, tuple(sorted(stored, key=lambda c: (c.created_at_millis, c.id))))


def _taken(tenant: Tenant, user_id: str, channel: ContactChannel) -> bool:
    """Whether `channel` signs in with an address the index gives another user."""
    return channel.used_for_auth and tenant.email_index.get(channel.value, user_id) != user_id


def _promoted(channels: list[ContactChannel], channel_id: str) -> list[ContactChannel]:
    return [replaced(c, {"is_primary": c.id == channel_id}) for c in channels]


def _claimed(
    tenant: Tenant, channels: list[ContactChannel], channel_id: str, trusted: bool
) -> tuple[list[ContactChannel], str | None]:
    """The written channel's claim (`claims_address`): its address when it takes the index entry; an unverified
    claim by a client that ends up primary is not used for auth (the rule of a client's primary change)."""
    written = next(c for c in channels if c.id == channel_id)
    if claims_address(written, trusted=trusted, holder=tenant.email_index.get(written.value)):
        return channels, written.value
    if written.used_for_auth and written.is_primary:
        off = replaced(written, {"used_for_auth": False})
        return [off if c.id == channel_id else c for c in channels], None
    return channels, None


@_performs(ListContactChannels)
def _list_contact_channels(store: MemoryStore, effect: ListContactChannels) -> UserChannels | None:
    return _user_channels(store.tenant(effect.project_id), effect.user_id)


@_performs(ListProjectContactChannels)
def _list_project_contact_channels(
    store: MemoryStore, effect: ListProjectContactChannels
) -> tuple[ContactChannel, ...]:
    tenant = store.tenant(effect.project_id)
    out: list[ContactChannel] = []
    for _signed_up, user_id in tenant.user_order:
        user = tenant.users[user_id]
        out.extend(channels_of(user, tenant.channels.get(user_id, {}).values()))
    return tuple(out)


@_performs(CreateContactChannel)
def _create_contact_channel(store: MemoryStore, effect: CreateContactChannel) -> UserChannels | ChannelWrite:
    tenant = store.tenant(effect.project_id)
    new = replaced(effect.channel, {"is_primary": False})
    before = _user_channels(tenant, new.user_id)
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    channels = list(before.channels)
    if any(c.value == new.value for c in channels):
        return ChannelWrite.ALREADY_EXISTS
    if _taken(tenant, new.user_id, new):
        return ChannelWrite.USED_FOR_AUTH
    if effect.max_channels and len(channels) >= effect.max_channels:
        return ChannelWrite.TOO_MANY
    channels.append(new)
    if effect.make_primary:
        channels = _promoted(channels, new.id)
    channels, claim = _claimed(tenant, channels, new.id, effect.trusted)
    return _store_channels(tenant, before, channels, effect.next_primary_id, claim)


@_performs(UpdateContactChannel)
def _update_contact_channel(store: MemoryStore, effect: UpdateContactChannel) -> UserChannels | ChannelWrite:
    tenant = store.tenant(effect.project_id)
    before = _user_channels(tenant, effect.user_id)
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    channels = list(before.channels)
    found = next((c for c in channels if c.id == effect.channel_id), None)
    if found is None:
        return ChannelWrite.CHANNEL_NOT_FOUND
    changes: dict[str, Any] = {}
    if effect.value is not None and effect.value != found.value:
        if any(c.value == effect.value for c in channels):
            return ChannelWrite.ALREADY_EXISTS
        changes.update(value=effect.value, is_verified=False)
    if effect.used_for_auth is not None:
        changes["used_for_auth"] = effect.used_for_auth
    if effect.is_verified is not None:
        changes["is_verified"] = effect.is_verified
    changed = replaced(found, changes)
    if _taken(tenant, effect.user_id, changed):
        return ChannelWrite.USED_FOR_AUTH
    channels = [changed if c.id == found.id else c for c in channels]
    if effect.is_primary is True:
        channels = _promoted(channels, found.id)
    elif effect.is_primary is False and found.is_primary:
        channels = _promoted(channels, "")
    channels, claim = _claimed(tenant, channels, found.id, effect.trusted)
    return _store_channels(tenant, before, channels, effect.next_primary_id, claim)


@_performs(DeleteContactChannel)
def _delete_contact_channel(store: MemoryStore, effect: DeleteContactChannel) -> UserChannels | ChannelWrite:
    tenant = store.tenant(effect.project_id)
    before = _user_channels(tenant, effect.user_id)
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    channels = list(before.channels)
    if not any(c.id == effect.channel_id for c in channels):
        return ChannelWrite.CHANNEL_NOT_FOUND
    remaining = [c for c in channels if c.id != effect.channel_id]
    return _store_channels(tenant, before, remaining, effect.next_primary_id, None)


@_performs(VerifyContactChannel)
def _verify_contact_channel(store: MemoryStore, effect: VerifyContactChannel) -> ChannelVerification:
    attempt = _attempt_code(store, effect.attempt)
    code = attempt.code
    if attempt.outcome is not CodeOutcome.OK or code is None:
        return ChannelVerification(attempt)
    tenant = store.tenant(effect.attempt.project_id)
    before = _user_channels(tenant, code.user_id or "")
    found = None if before is None else next((c for c in before.channels if c.value == code.email), None)
    if before is None or found is None:
        return ChannelVerification(attempt, channel_found=False)
    # Only the flag changes (the primary's in the user record, another channel's in its record), as on Redis.
    if found.is_primary:
        tenant.users[before.user.id] = replaced(before.user, {"primary_email_verified": True})
    else:
        tenant.channels[before.user.id][found.id] = replaced(found, {"is_verified": True})
        # The first verification wins: an unverified claim takes its address if nobody holds it.
        if found.used_for_auth and found.value not in tenant.email_index:
            tenant.email_index[found.value] = before.user.id
    return ChannelVerification(attempt, channel_found=True)


def drop_user_channels(tenant: Tenant, user: User) -> None:
    """Remove the stored channels of a user being deleted, and their index entries (DeleteUser)."""
    for channel in tenant.channels.pop(user.id, {}).values():
        if channel.used_for_auth and tenant.email_index.get(channel.value) == user.id:
            del tenant.email_index[channel.value]


def holds_stored_value(tenant: Tenant, user_id: str, value: str) -> bool:
    """Whether one of the user's stored (non-primary) channels has this address (UpdateUser's check)."""
    return any(c.value == value for c in tenant.channels.get(user_id, {}).values())


def auth_address_is_verified(tenant: Tenant, user: User, address: str) -> bool:
    """Whether the user's auth channel `address` (the one the index matched) is verified (sign-in by code)."""
    return auth_address_verified(user, tenant.channels.get(user.id, {}).values(), address)
