"""The memory store: contact channels (identity_proto.effects.contact_channels has the design and every rule): the
primary from the user record, the others in `Tenant.channels`, their auth addresses in the e-mail index."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ChannelsAre,
    CodeIsUnused,
    DropChannel,
    InvitationIsUnused,
    ListContactChannels,
    ListProjectContactChannels,
    PutChannel,
    UseCode,
    UseInvitation,
    UserChannels,
    channels_of,
)
from identity_proto.records import ContactChannel, replaced


def _stored(tenant: Tenant, user_id: str) -> tuple[ContactChannel, ...]:
    return tuple(sorted(tenant.channels.get(user_id, {}).values(), key=lambda c: (c.created_at_millis, c.id)))


@_performs(ListContactChannels)
def _list_contact_channels(store: MemoryStore, effect: ListContactChannels) -> UserChannels | None:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return None
    stored = _stored(tenant, user.id)
    # Every channel's address: the stored ones' and the primary e-mail (its channel need not be built for that).
    addresses = {*effect.addresses, *(c.value for c in stored)}
    if user.primary_email is not None:
        addresses.add(user.primary_email)
    return UserChannels(user, stored, {a: tenant.email_index.get(a) for a in sorted(addresses)})


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


@checks(ChannelsAre)
def _channels_are(tenant: Tenant, guard: ChannelsAre) -> bool:
    return tenant.channels.get(guard.user_id, {}) == {c.id: c for c in guard.stored}


@applies(PutChannel)
def _put_channel(tenant: Tenant, write: PutChannel) -> None:
    channel = replaced(write.channel, {"is_primary": False})
    tenant.channels.setdefault(channel.user_id, {})[channel.id] = channel


@applies(DropChannel)
def _drop_channel(tenant: Tenant, write: DropChannel) -> None:
    stored = tenant.channels.get(write.user_id, {})
    stored.pop(write.channel_id, None)
    if not stored:
        tenant.channels.pop(write.user_id, None)


def _code_is_unused(tenant: Tenant, guard: CodeIsUnused | InvitationIsUnused) -> bool:
    code = tenant.codes.get(guard.code_hash)
    return code is not None and not code.used


checks(CodeIsUnused)(_code_is_unused)
checks(InvitationIsUnused)(_code_is_unused)


def _use_code(tenant: Tenant, write: UseCode | UseInvitation) -> None:
    tenant.codes[write.code_hash] = replaced(tenant.codes[write.code_hash], {"used": True})


applies(UseCode)(_use_code)
applies(UseInvitation)(_use_code)
