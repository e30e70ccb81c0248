"""The memory store: project permission grants (reads, and the guard and write a `Commit` of them uses)."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    ListProjectPermissions,
    ProjectGrantIs,
    RevokePermission,
)
from identity_proto.effects.permissions import DropProjectGrants


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


@applies(DropProjectGrants)
def _drop_project_grants(tenant: Tenant, write: DropProjectGrants) -> None:
    tenant.project_grants.pop(write.user_id, None)
