"""The memory store: the outbox (sent e-mail, newest first)."""

from __future__ import annotations

from backends.memory.store import MemoryStore, _performs
from identity_proto.effects import ListOutbox
from identity_proto.records import Email


@_performs(ListOutbox)
def _list_outbox(store: MemoryStore, effect: ListOutbox) -> tuple[Email, ...]:
    found = (e for e in store.tenant(effect.project_id).outbox if effect.to is None or e.to == effect.to)
    out: list[Email] = []
    for email in found:
        if len(out) >= effect.limit:
            break
        out.append(email)
    return tuple(out)
