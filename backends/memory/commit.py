"""`Commit` on the memory store: guards checked, then writes applied and events recorded, all under the store's
lock (one step: no other effect sees it half done). No business rule lives here: the core decided.

How each guard is checked and each write applied is registered by type (`checks`, `applies`): the generic ones
here, a resource's own in `writes.py`."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any, TypeVar

from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects.commit import (
    Announce,
    Commit,
    CommitGuard,
    Committed,
    CommitWrite,
    Conflict,
    DropIndex,
    FieldsAre,
    GrantPermissions,
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
    ReferencedBy,
    Returned,
    SessionIsLive,
    SetIndex,
)
from identity_proto.records import replaced

G = TypeVar("G", bound=CommitGuard)
W = TypeVar("W", bound=CommitWrite)

_GUARDS: dict[type[Any], Callable[[Tenant, Any], bool]] = {}
_WRITES: dict[type[Any], Callable[[Tenant, Any], None]] = {}

# Bound once: reading a member off an enum class is several times slower than a global (EnumType.__getattr__).
_USER, _TEAM = RecordKind.USER, RecordKind.TEAM


def checks(guard_type: type[G]) -> Callable[[Callable[[Tenant, G], bool]], Callable[[Tenant, G], bool]]:
    """Register the function below as how this store checks `guard_type` (True: it holds)."""

    def register(check: Callable[[Tenant, G], bool]) -> Callable[[Tenant, G], bool]:
        _GUARDS[guard_type] = check
        return check

    return register


def applies(write_type: type[W]) -> Callable[[Callable[[Tenant, W], None]], Callable[[Tenant, W], None]]:
    """Register the function below as how this store applies `write_type`."""

    def register(apply: Callable[[Tenant, W], None]) -> Callable[[Tenant, W], None]:
        _WRITES[write_type] = apply
        return apply

    return register


#: The answer of a commit asked to return nothing (most): one shared instance, not one built per commit.
_NOTHING_RETURNED = Committed(())


@_performs(Commit)
def _commit(store: MemoryStore, effect: Commit) -> Conflict | Committed:
    # The hot path of every write, kept lean: no position kept per guard (on a conflict, the first guard equal to
    # the one that failed is the one that failed: they are checked in order, and equal guards check the same).
    tenant = store.tenant(effect.project_id)
    guards = effect.guards
    for guard in guards:
        if not _GUARDS[type(guard)](tenant, guard):
            return Conflict(guards.index(guard))
    for write in effect.writes:
        _WRITES[type(write)](tenant, write)
    if tenant.webhook_endpoints or store.keeps_every_event:  # else no endpoint is owed them: nothing to keep
        for event in effect.events:
            _record(tenant, event)
    returns = effect.returns
    if not returns:
        return _NOTHING_RETURNED
    found = []
    for named in returns:
        if type(named) is tuple:  # (kind, id): a user, most often (answering a PATCH, a sign-in)
            kind, record_id = named
            found.append((tenant.users if kind is _USER else records(tenant, kind)).get(record_id))
        else:
            found.append(_returned(tenant, named))
    return Committed(tuple(found))


def _returned(tenant: Tenant, named: Returned) -> Any:
    if isinstance(named, ReferencedBy):
        kind, record_id = named.of
        holder = (tenant.users if kind is _USER else records(tenant, kind)).get(record_id)
        referenced = None if holder is None else getattr(holder, named.field)
        if referenced is None:
            return None
        return (tenant.teams if named.kind is _TEAM else records(tenant, named.kind)).get(referenced)
    kind, record_id = named  # a user, most often (answering a PATCH, a sign-in)
    return (tenant.users if kind is _USER else records(tenant, kind)).get(record_id)


def records(tenant: Tenant, kind: RecordKind) -> dict[str, Any]:
    """The records of one kind, by id."""
    if kind is _USER:
        return tenant.users
    if kind is _TEAM:
        return tenant.teams
    return tenant.store.projects  # type: ignore[no-any-return]


def index(tenant: Tenant, name: IndexName) -> dict[str, str]:
    """One of the project's unique indexes."""
    if name is IndexName.EMAIL:
        return tenant.email_index
    return tenant.oauth_index if name is IndexName.OAUTH else tenant.passkey_index


# ---------------------------------------------------------------------------------------------------------------
# Guards


@checks(IsAbsent)
def _is_absent(tenant: Tenant, guard: IsAbsent) -> bool:
    return guard.id not in records(tenant, guard.kind)


@checks(FieldsAre)
def _fields_are(tenant: Tenant, guard: FieldsAre) -> bool:
    stored = records(tenant, guard.kind).get(guard.record.id)
    if stored is None:
        return False
    # Records are immutable: the very record the flow read holds every field it held (the usual case here).
    return stored is guard.record or all(getattr(stored, name) == getattr(guard.record, name) for name in guard.names)


@checks(IndexIs)
def _index_is(tenant: Tenant, guard: IndexIs) -> bool:
    return index(tenant, guard.index).get(guard.key) == guard.value


@checks(SessionIsLive)
def _session_is_live(tenant: Tenant, guard: SessionIsLive) -> bool:
    session = tenant.sessions.get(guard.session_id)
    return session is not None and session.user_id == guard.user_id and guard.now_ms < session.expires_at_millis


# ---------------------------------------------------------------------------------------------------------------
# Writes


@applies(PutUser)
def _put_user(tenant: Tenant, write: PutUser) -> None:
    user = write.user
    tenant.users[user.id] = user
    bisect.insort(tenant.user_order, (user.signed_up_at_millis, user.id))


@applies(PatchUser)
def _patch_user(tenant: Tenant, write: PatchUser) -> None:
    before = tenant.users[write.user_id]
    after = tenant.users[write.user_id] = write.changes.apply(before)
    if after.signed_up_at_millis != before.signed_up_at_millis:  # the listing order follows
        tenant.user_order.remove((before.signed_up_at_millis, write.user_id))
        bisect.insort(tenant.user_order, (after.signed_up_at_millis, write.user_id))


@applies(PutTeam)
def _put_team(tenant: Tenant, write: PutTeam) -> None:
    tenant.teams[write.team.id] = write.team


@applies(PatchTeam)
def _patch_team(tenant: Tenant, write: PatchTeam) -> None:
    tenant.teams[write.team_id] = write.changes.apply(tenant.teams[write.team_id])


@applies(PutMembership)
def _put_membership(tenant: Tenant, write: PutMembership) -> None:
    membership = write.membership
    tenant.memberships[(membership.team_id, membership.user_id)] = membership


@applies(PutSession)
def _put_session(tenant: Tenant, write: PutSession) -> None:
    session = write.session
    tenant.sessions[session.id] = session
    tenant.session_by_token[session.refresh_token_hash] = session.id
    tenant.user_sessions.setdefault(session.user_id, set()).add(session.id)
    tenant.sessions_created += 1
    if tenant.sessions_created % _SESSIONS_SWEEP_EVERY == 0:
        gone = session.created_at_millis - _SESSIONS_GRACE_MS
        for session_id in [i for i, s in tenant.sessions.items() if s.expires_at_millis <= gone]:
            tenant.drop_session(session_id)


#: Sessions past their expiry by more than a day (as long as Redis keeps one: `backends.redis.keys.GRACE_MS`) are
#: swept every this many new sessions. The core refuses an expired session either way; this only frees memory, so
#: that what the store holds is bounded by the live sessions, not by every sign-in since the start.
_SESSIONS_SWEEP_EVERY = 1024
_SESSIONS_GRACE_MS = 24 * 3_600_000


@applies(GrantPermissions)
def _grant_permissions(tenant: Tenant, write: GrantPermissions) -> None:
    if write.permission_ids:
        tenant.project_grants.setdefault(write.user_id, set()).update(write.permission_ids)


@applies(SetIndex)
def _set_index(tenant: Tenant, write: SetIndex) -> None:
    index(tenant, write.index)[write.key] = write.value


@applies(DropIndex)
def _drop_index(tenant: Tenant, write: DropIndex) -> None:
    index(tenant, write.index).pop(write.key, None)


# ---------------------------------------------------------------------------------------------------------------
# Events


def _record(tenant: Tenant, event: Announce) -> None:
    named = event.record
    if named is None:
        tenant.record_event(event.type, ids=event.ids)
        return
    kind, record_id = named
    if kind is not _USER:
        tenant.record_event(event.type, record=records(tenant, kind).get(record_id), ids=event.ids)
        return
    record = tenant.users.get(record_id)
    team: Any = None
    if record is not None:
        if event.unselected:
            record = replaced(record, {"selected_team_id": None})
        elif event.with_team and record.selected_team_id is not None:
            team = tenant.teams.get(record.selected_team_id)
    tenant.record_event(event.type, record=record, team=team, ids=event.ids)
