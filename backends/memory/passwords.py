"""The memory store: what the password flows read and commit (the core decides: `identity_proto.flows.passwords`):
a reset's read (the holder of an address, with their channels), a one-time code stored, a mail in the outbox."""

from __future__ import annotations

from backends.memory.codes import put_code
from backends.memory.commit import applies
from backends.memory.contact_channels import _list_contact_channels
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    FindAuthAddressHolder,
    ListContactChannels,
    PutCode,
    PutMail,
    UserChannels,
)


@_performs(FindAuthAddressHolder)
def _find_auth_address_holder(store: MemoryStore, effect: FindAuthAddressHolder) -> UserChannels | None:
    holder = store.tenant(effect.project_id).email_index.get(effect.email)
    if holder is None:
        return None
    found: UserChannels | None = _list_contact_channels(
        store, ListContactChannels(effect.project_id, holder, (effect.email,))
    )
    return found


@applies(PutCode)
def _put_code(tenant: Tenant, write: PutCode) -> None:
    put_code(tenant, write.code)


@applies(PutMail)
def _put_mail(tenant: Tenant, write: PutMail) -> None:
    tenant.outbox.appendleft(write.mail)
    while len(tenant.outbox) > write.keep:
        tenant.outbox.pop()
