"""The memory store's typed reads: a record by id or through an index, and the listings (each a look-up in its
project's `Tenant`, under the store's lock)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from backends.memory.commit import index
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    FindApiKeyByHash,
    FindAuthAddressHolder,
    FindUserByIndex,
    ListApiKeys,
    ListContactChannels,
    ListMemberships,
    ListOutbox,
    ListProjectContactChannels,
    ListProjectPermissions,
    ListProjects,
    ListSessions,
    ListTeamInvitations,
    ListTeams,
    ListUsers,
    LoadApiKey,
    LoadMembership,
    LoadProject,
    LoadProviderTokens,
    LoadSession,
    LoadTeam,
    LoadTeamInvitation,
    LoadUser,
    LoadUserWithTeam,
    UserChannels,
    channels_of,
)
from identity_proto.records import (
    ApiKey,
    CodePurpose,
    ContactChannel,
    Email,
    Membership,
    Project,
    Session,
    Team,
    User,
    VerificationCode,
)

#: The reads of one record by its key: the `Tenant` dict it is in, and its key there.
_LOADS: dict[type[Any], tuple[str, Callable[[Any], Any]]] = {
    LoadUser: ("users", attrgetter("user_id")),
    LoadTeam: ("teams", attrgetter("team_id")),
    LoadSession: ("sessions", attrgetter("session_id")),
    LoadApiKey: ("api_keys", attrgetter("key_id")),
    LoadMembership: ("memberships", attrgetter("team_id", "user_id")),
    LoadProviderTokens: ("provider_tokens", attrgetter("account_row_id")),
}


def _load(held: str, key: Callable[[Any], Any]) -> Callable[[MemoryStore, Any], Any]:
    records = attrgetter(held)
    return lambda store, effect: records(store.tenant(effect.project_id)).get(key(effect))


for _type, (_held, _key) in _LOADS.items():
    _performs(_type)(_load(_held, _key))


@_performs(LoadProject)
def _load_project(store: MemoryStore, effect: LoadProject) -> Project | None:
    return store.projects.get(effect.project_id)


@_performs(ListProjects)
def _list_projects(store: MemoryStore, effect: ListProjects) -> tuple[Project, ...]:
    return tuple(sorted(store.projects.values(), key=lambda p: (p.created_at_millis, p.id)))


@_performs(LoadUserWithTeam)
def _load_user_with_team(store: MemoryStore, effect: LoadUserWithTeam) -> tuple[User, Team | None] | None:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return None
    team = tenant.teams.get(user.selected_team_id) if user.selected_team_id is not None else None
    return user, team


@_performs(FindUserByIndex)
def _find_user_by_index(store: MemoryStore, effect: FindUserByIndex) -> User | None:
    tenant = store.tenant(effect.project_id)
    user_id = index(tenant, effect.index).get(effect.key)
    return None if user_id is None else tenant.users.get(user_id)


@_performs(ListUsers)
def _list_users(store: MemoryStore, effect: ListUsers) -> tuple[User, ...]:
    tenant = store.tenant(effect.project_id)
    order = tenant.user_order
    if effect.cursor is not None:
        cursor_user = tenant.users.get(effect.cursor)
        if cursor_user is None:
            return ()
        at = bisect.bisect_left(order, (cursor_user.signed_up_at_millis, cursor_user.id))
    else:
        at = len(order) - 1 if effect.descending else 0
    step = -1 if effect.descending else 1
    out: list[User] = []
    while 0 <= at < len(order) and (effect.limit is None or len(out) < effect.limit):
        out.append(tenant.users[order[at][1]])
        at += step
    return tuple(out)


@_performs(ListSessions)
def _list_sessions(store: MemoryStore, effect: ListSessions) -> tuple[Session, ...]:
    tenant = store.tenant(effect.project_id)
    sessions = (tenant.sessions[sid] for sid in tenant.user_sessions.get(effect.user_id, ()))
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


@_performs(ListTeams)
def _list_teams(store: MemoryStore, effect: ListTeams) -> tuple[Team, ...]:
    tenant = store.tenant(effect.project_id)
    teams = [t for t in tenant.teams.values() if effect.user_id is None or (t.id, effect.user_id) in tenant.memberships]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_performs(ListMemberships)
def _list_memberships(store: MemoryStore, effect: ListMemberships) -> tuple[Membership, ...]:
    found = [
        m
        for m in store.tenant(effect.project_id).memberships.values()
        if (effect.team_id is None or m.team_id == effect.team_id)
        and (effect.user_id is None or m.user_id == effect.user_id)
    ]
    return tuple(found)  # the dict keeps insertion order, which is creation order


@_performs(FindApiKeyByHash)
def _find_api_key_by_hash(store: MemoryStore, effect: FindApiKeyByHash) -> ApiKey | None:
    tenant = store.tenant(effect.project_id)
    key_id = tenant.api_key_by_hash.get(effect.key_hash)
    return None if key_id is None else tenant.api_keys.get(key_id)


@_performs(ListApiKeys)
def _list_api_keys(store: MemoryStore, effect: ListApiKeys) -> tuple[ApiKey, ...]:
    tenant = store.tenant(effect.project_id)
    keys = [tenant.api_keys[i] for i in tenant.owner_api_keys.get((effect.type, effect.owner_id), ())]
    return tuple(sorted(keys, key=lambda k: (k.created_at_millis, k.id), reverse=True))


def _invitation(tenant: Tenant, invitation_id: str) -> VerificationCode | None:
    code_hash = tenant.team_invitations.get(invitation_id)
    code = None if code_hash is None else tenant.codes.get(code_hash)
    return code if code is not None and code.purpose == CodePurpose.TEAM_INVITATION else None


@_performs(LoadTeamInvitation)
def _load_team_invitation(store: MemoryStore, effect: LoadTeamInvitation) -> VerificationCode | None:
    return _invitation(store.tenant(effect.project_id), effect.invitation_id)


@_performs(ListTeamInvitations)
def _list_team_invitations(store: MemoryStore, effect: ListTeamInvitations) -> tuple[VerificationCode, ...]:
    tenant = store.tenant(effect.project_id)
    found = []
    for invitation_id in tenant.team_invitations:
        code = _invitation(tenant, invitation_id)
        if code is None:
            continue
        if code.team_id == effect.team_id if effect.team_id is not None else code.email in effect.emails:
            found.append(code)
    return tuple(sorted(found, key=lambda c: (c.created_at_millis, c.id or "")))


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


@_performs(FindAuthAddressHolder)
def _find_auth_address_holder(store: MemoryStore, effect: FindAuthAddressHolder) -> UserChannels | None:
    holder = store.tenant(effect.project_id).email_index.get(effect.email)
    if holder is None:
        return None
    found: UserChannels | None = _list_contact_channels(
        store, ListContactChannels(effect.project_id, holder, (effect.email,))
    )
    return found


@_performs(ListProjectPermissions)
def _list_project_permissions(
    store: MemoryStore, effect: ListProjectPermissions
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    grants = store.tenant(effect.project_id).project_grants
    users = sorted(grants) if effect.user_id is None else [effect.user_id] if effect.user_id in grants else []
    return tuple((user_id, tuple(sorted(grants[user_id]))) for user_id in users)


@_performs(ListOutbox)
def _list_outbox(store: MemoryStore, effect: ListOutbox) -> tuple[Email, ...]:
    found = (e for e in store.tenant(effect.project_id).outbox if effect.to is None or e.to == effect.to)
    out: list[Email] = []
    for email in found:
        if len(out) >= effect.limit:
            break
        out.append(email)
    return tuple(out)
