"""The memory store: project permission grants and permission definition changes."""

from __future__ import annotations

from backends.memory.commit import applies
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ChangePermissionDefinitions,
    DefinitionsWrite,
    GrantProjectPermissions,
    ListProjectPermissions,
    RevokeProjectPermission,
)
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.records import Project, replaced


@_performs(GrantProjectPermissions)
def _grant_project_permissions(store: MemoryStore, effect: GrantProjectPermissions) -> bool:
    tenant = store.tenant(effect.project_id)
    if effect.user_id not in tenant.users:
        return False
    if effect.permission_ids:
        tenant.project_grants.setdefault(effect.user_id, set()).update(effect.permission_ids)
    if effect.records_events:  # webhooks: an explicit grant (held already or not)
        for permission_id in effect.permission_ids:
            tenant.record_event("project_permission.created", ids=(permission_id, effect.user_id))
    return True


@_performs(RevokeProjectPermission)
def _revoke_project_permission(store: MemoryStore, effect: RevokeProjectPermission) -> bool:
    grants = store.tenant(effect.project_id).project_grants
    held = grants.get(effect.user_id)
    if held is None or effect.permission_id not in held:
        return False
    held.discard(effect.permission_id)
    if not held:
        del grants[effect.user_id]
    store.tenant(effect.project_id).record_event(  # webhooks
        "project_permission.deleted", ids=(effect.permission_id, effect.user_id)
    )
    return True


@_performs(ListProjectPermissions)
def _list_project_permissions(
    store: MemoryStore, effect: ListProjectPermissions
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    grants = store.tenant(effect.project_id).project_grants
    users = sorted(grants) if effect.user_id is None else [effect.user_id] if effect.user_id in grants else []
    return tuple((user_id, tuple(sorted(grants[user_id]))) for user_id in users)


@_performs(ChangePermissionDefinitions)
def _change_permission_definitions(
    store: MemoryStore, effect: ChangePermissionDefinitions
) -> Project | DefinitionsWrite:
    stored = store.projects.get(effect.project_id)
    if stored is None:
        return DefinitionsWrite.PROJECT_NOT_FOUND
    if any(getattr(stored.config, name) != value for name, value in effect.expected):
        return DefinitionsWrite.CONFLICT
    updated = replaced(stored, {"config": effect.config.apply(stored.config)})
    store.projects[updated.id] = updated
    tenant = store.tenant(effect.project_id)
    old, new = effect.renamed if effect.renamed is not None else (effect.removed, None)
    if old is None:
        return updated
    for user_id in list(tenant.project_grants):
        held = tenant.project_grants[user_id]
        if old in held:
            held.discard(old)
            if new is not None:
                held.add(new)
            if not held:
                del tenant.project_grants[user_id]
    for key, membership in tenant.memberships.items():
        if old in membership.permissions:
            kept = {p for p in membership.permissions if p != old} | ({new} if new is not None else set())
            tenant.memberships[key] = replaced(membership, {"permissions": tuple(sorted(kept))})
    return updated


@applies(DropProjectGrants)
def _drop_project_grants(tenant: Tenant, write: DropProjectGrants) -> None:
    tenant.project_grants.pop(write.user_id, None)
