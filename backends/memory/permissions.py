"""The memory store: project permission grants (reads, and the guard and write a `Commit` of them uses) and
permission definition changes."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ChangePermissionDefinitions,
    DefinitionsWrite,
    ListProjectPermissions,
    ProjectGrantIs,
    RevokePermission,
)
from identity_proto.effects.permissions import DropProjectGrants
from identity_proto.records import Project, replaced


@checks(ProjectGrantIs)
def _project_grant_is(tenant: Tenant, guard: ProjectGrantIs) -> bool:
    held = tenant.project_grants.get(guard.user_id, set())
    return guard.permission_id in held and len(held) == guard.held


@applies(RevokePermission)
def _revoke_permission(tenant: Tenant, write: RevokePermission) -> None:
    held = tenant.project_grants[write.user_id]
    held.discard(write.permission_id)
    if write.last:
        del tenant.project_grants[write.user_id]


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
