"""The memory store: teams and memberships (reads, and the guards and writes of a `Commit` of them)."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    DropMembership,
    DropTeam,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PatchMembership,
    TeamApiKeysAre,
    TeamMembersAre,
)
from identity_proto.effects.teams import UserTeamsAre
from identity_proto.records import ApiKeyType, Membership, Team


@_performs(LoadTeam)
def _load_team(store: MemoryStore, effect: LoadTeam) -> Team | None:
    return store.tenant(effect.project_id).teams.get(effect.team_id)


@_performs(ListTeams)
def _list_teams(store: MemoryStore, effect: ListTeams) -> tuple[Team, ...]:
    tenant = store.tenant(effect.project_id)
    teams = [t for t in tenant.teams.values() if effect.user_id is None or (t.id, effect.user_id) in tenant.memberships]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_performs(LoadMembership)
def _load_membership(store: MemoryStore, effect: LoadMembership) -> Membership | None:
    return store.tenant(effect.project_id).memberships.get((effect.team_id, effect.user_id))


@_performs(ListMemberships)
def _list_memberships(store: MemoryStore, effect: ListMemberships) -> tuple[Membership, ...]:
    found = [
        m
        for m in store.tenant(effect.project_id).memberships.values()
        if (effect.team_id is None or m.team_id == effect.team_id)
        and (effect.user_id is None or m.user_id == effect.user_id)
    ]
    return tuple(found)  # the dict keeps insertion order, which is creation order


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes


@checks(MembershipIsAbsent)
def _membership_is_absent(tenant: Tenant, guard: MembershipIsAbsent) -> bool:
    return (guard.team_id, guard.user_id) not in tenant.memberships


@checks(MembershipFieldsAre)
def _membership_fields_are(tenant: Tenant, guard: MembershipFieldsAre) -> bool:
    read = guard.record
    stored = tenant.memberships.get((read.team_id, read.user_id))
    return stored is not None and all(getattr(stored, name) == getattr(read, name) for name in guard.names)


@checks(TeamMembersAre)
def _team_members_are(tenant: Tenant, guard: TeamMembersAre) -> bool:
    members = {user_id for team_id, user_id in tenant.memberships if team_id == guard.team_id}
    return members == set(guard.user_ids) and len(guard.user_ids) == len(members)


@checks(TeamApiKeysAre)
def _team_api_keys_are(tenant: Tenant, guard: TeamApiKeysAre) -> bool:
    held = tenant.owner_api_keys.get((ApiKeyType.TEAM, guard.team_id), set())
    return held == set(guard.key_ids) and len(guard.key_ids) == len(held)


@checks(UserTeamsAre)
def _user_teams_are(tenant: Tenant, guard: UserTeamsAre) -> bool:
    teams = {team_id for team_id, user_id in tenant.memberships if user_id == guard.user_id}
    return teams == set(guard.team_ids) and len(guard.team_ids) == len(teams)


@applies(PatchMembership)
def _patch_membership(tenant: Tenant, write: PatchMembership) -> None:
    key = (write.team_id, write.user_id)
    tenant.memberships[key] = write.changes.apply(tenant.memberships[key])


@applies(DropMembership)
def _drop_membership(tenant: Tenant, write: DropMembership) -> None:
    del tenant.memberships[(write.team_id, write.user_id)]


@applies(DropTeam)
def _drop_team(tenant: Tenant, write: DropTeam) -> None:
    del tenant.teams[write.team_id]
    tenant.drop_api_keys(ApiKeyType.TEAM, write.team_id)  # exactly `write.api_keys`: guarded by TeamApiKeysAre
