"""The memory store: teams and memberships."""

from __future__ import annotations

import dataclasses

from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    AddMembership,
    ChangePermission,
    CreateTeam,
    DeleteTeam,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    RemoveMembership,
    TeamWrite,
    UpdateMembership,
)
from identity_proto.records import ApiKeyType, Membership, Team, replaced


@_performs(CreateTeam)
def _create_team(store: MemoryStore, effect: CreateTeam) -> Team | TeamWrite:
    tenant = store.tenant(effect.project_id)
    if effect.creator is not None and effect.creator.user_id not in tenant.users:
        return TeamWrite.USER_NOT_FOUND
    tenant.teams[effect.team.id] = effect.team
    if effect.creator is not None:
        tenant.memberships[(effect.team.id, effect.creator.user_id)] = effect.creator
    tenant.record_event("team.created", record=effect.team)  # webhooks (the creator's membership: no event)
    return effect.team


@_performs(LoadTeam)
def _load_team(store: MemoryStore, effect: LoadTeam) -> Team | None:
    return store.tenant(effect.project_id).teams.get(effect.team_id)


@_performs(ListTeams)
def _list_teams(store: MemoryStore, effect: ListTeams) -> tuple[Team, ...]:
    tenant = store.tenant(effect.project_id)
    teams = [t for t in tenant.teams.values() if effect.user_id is None or (t.id, effect.user_id) in tenant.memberships]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_performs(DeleteTeam)
def _delete_team(store: MemoryStore, effect: DeleteTeam) -> bool:
    tenant = store.tenant(effect.project_id)
    if tenant.teams.pop(effect.team_id, None) is None:
        return False
    for key in [key for key in tenant.memberships if key[0] == effect.team_id]:
        _drop_membership(tenant, *key)
    tenant.drop_api_keys(ApiKeyType.TEAM, effect.team_id)  # API keys go with their team
    tenant.record_event("team.deleted", ids=(effect.team_id,))  # webhooks (the original: no membership events)
    return True


def _drop_membership(tenant: Tenant, team_id: str, user_id: str) -> bool:
    if tenant.memberships.pop((team_id, user_id), None) is None:
        return False
    user = tenant.users.get(user_id)
    if user is not None and user.selected_team_id == team_id:
        tenant.users[user_id] = replaced(user, {"selected_team_id": None})
    return True


@_performs(AddMembership)
def _add_membership(store: MemoryStore, effect: AddMembership) -> Membership | TeamWrite:
    tenant = store.tenant(effect.project_id)
    membership = effect.membership
    if membership.user_id not in tenant.users:
        return TeamWrite.USER_NOT_FOUND
    if membership.team_id not in tenant.teams:
        return TeamWrite.TEAM_NOT_FOUND
    key = (membership.team_id, membership.user_id)
    if key in tenant.memberships:
        return TeamWrite.MEMBERSHIP_EXISTS
    tenant.memberships[key] = membership
    record_membership_created(tenant, membership)  # webhooks
    return membership


# --- webhook events ---
def record_membership_created(tenant: Tenant, membership: Membership) -> None:
    """`team_membership.created`, then one `team_permission.created` per permission the membership got."""
    team_id, user_id = membership.team_id, membership.user_id
    tenant.record_event("team_membership.created", ids=(team_id, user_id))
    for permission_id in membership.permissions:
        tenant.record_event("team_permission.created", ids=(permission_id, team_id, user_id))


# --- end webhook events ---


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


@_performs(RemoveMembership)
def _remove_membership(store: MemoryStore, effect: RemoveMembership) -> bool:
    tenant = store.tenant(effect.project_id)
    if not _drop_membership(tenant, effect.team_id, effect.user_id):
        return False
    tenant.record_event("team_membership.deleted", ids=(effect.team_id, effect.user_id))  # webhooks
    return True


@_performs(UpdateMembership)
def _update_membership(store: MemoryStore, effect: UpdateMembership) -> Membership | None:
    tenant = store.tenant(effect.project_id)
    key = (effect.team_id, effect.user_id)
    membership = tenant.memberships.get(key)
    if membership is None:
        return None
    membership = effect.changes.apply(membership)
    tenant.memberships[key] = membership
    return membership


@_performs(ChangePermission)
def _change_permission(store: MemoryStore, effect: ChangePermission) -> Membership | None:
    tenant = store.tenant(effect.project_id)
    key = (effect.team_id, effect.user_id)
    membership = tenant.memberships.get(key)
    if membership is None:
        return None
    held = set(membership.permissions)
    # webhooks: a grant records team_permission.created even when held already (as the original's upsert); a
    # revoke records team_permission.deleted only when the permission was held
    event = "team_permission.created" if effect.granted else None
    if effect.granted:
        held.add(effect.permission_id)
    elif effect.permission_id in held:
        held.discard(effect.permission_id)
        event = "team_permission.deleted"
    membership = dataclasses.replace(membership, permissions=tuple(sorted(held)))
    tenant.memberships[key] = membership
    if event is not None:
        tenant.record_event(event, ids=(effect.permission_id, effect.team_id, effect.user_id))
    return membership
