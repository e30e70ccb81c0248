"""`Commit` on the memory store: guards checked, then writes applied and events recorded, all under the store's
lock (one step: no other effect sees it half done). No business rule lives here: the core decided."""

from __future__ import annotations

import bisect
from typing import Any

from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects.commit import (
    Announce,
    Commit,
    Conflict,
    DropIndex,
    FieldsAre,
    GrantPermissions,
    Guard,
    IndexIs,
    IndexName,
    IsAbsent,
    PatchTeam,
    PatchUser,
    PutMembership,
    PutSession,
    PutTeam,
    PutUser,
    RecordKind,
    SessionIsLive,
    SetIndex,
    Write,
)
from identity_proto.records import replaced


@_performs(Commit)
def _commit(store: MemoryStore, effect: Commit) -> Conflict | None:
    tenant = store.tenant(effect.project_id)
    for position, guard in enumerate(effect.guards):
        if not _holds(tenant, guard):
            return Conflict(position)
    for write in effect.writes:
        _apply(tenant, write)
    for event in effect.events:
        _record(tenant, event)
    return None


def _records(tenant: Tenant, kind: RecordKind) -> dict[str, Any]:
    return tenant.users if kind is RecordKind.USER else tenant.teams


def _index(tenant: Tenant, index: IndexName) -> dict[str, str]:
    return tenant.email_index if index is IndexName.EMAIL else tenant.oauth_index


def _holds(tenant: Tenant, guard: Guard) -> bool:
    match guard:
        case IsAbsent(kind, record_id):
            return record_id not in _records(tenant, kind)
        case FieldsAre(read, names):
            stored = _records(tenant, guard.kind).get(read.id)
            return stored is not None and all(getattr(stored, name) == getattr(read, name) for name in names)
        case IndexIs(index, key, value):
            return _index(tenant, index).get(key) == value
        case SessionIsLive(session_id, user_id, now_ms):
            session = tenant.sessions.get(session_id)
            return session is not None and session.user_id == user_id and now_ms < session.expires_at_millis
    raise TypeError(f"not a guard: {guard!r}")


def _apply(tenant: Tenant, write: Write) -> None:
    match write:
        case PutUser(user):
            tenant.users[user.id] = user
            bisect.insort(tenant.user_order, (user.signed_up_at_millis, user.id))
        case PutTeam(team):
            tenant.teams[team.id] = team
        case PutMembership(membership):
            tenant.memberships[(membership.team_id, membership.user_id)] = membership
        case PutSession(session):
            tenant.sessions[session.id] = session
            tenant.session_by_token[session.refresh_token_hash] = session.id
            tenant.user_sessions.setdefault(session.user_id, set()).add(session.id)
        case PatchUser(user_id, changes):
            before = tenant.users[user_id]
            after = tenant.users[user_id] = changes.apply(before)
            if after.signed_up_at_millis != before.signed_up_at_millis:  # the listing order follows
                tenant.user_order.remove((before.signed_up_at_millis, user_id))
                bisect.insort(tenant.user_order, (after.signed_up_at_millis, user_id))
        case PatchTeam(team_id, changes):
            tenant.teams[team_id] = changes.apply(tenant.teams[team_id])
        case GrantPermissions(user_id, permission_ids):
            if permission_ids:
                tenant.project_grants.setdefault(user_id, set()).update(permission_ids)
        case SetIndex(index, key, value):
            _index(tenant, index)[key] = value
        case DropIndex(index, key):
            _index(tenant, index).pop(key, None)
        case _:
            raise TypeError(f"not a write: {write!r}")


def _record(tenant: Tenant, event: Announce) -> None:
    record: Any = None
    team: Any = None
    if event.record is not None:
        kind, record_id = event.record
        record = _records(tenant, kind).get(record_id)
        if kind is RecordKind.USER and record is not None:
            if event.unselected:
                record = replaced(record, {"selected_team_id": None})
            elif event.with_team and record.selected_team_id is not None:
                team = tenant.teams.get(record.selected_team_id)
    tenant.record_event(event.type, record=record, team=team, ids=event.ids)
