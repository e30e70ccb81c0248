"""Project permission grants (a set per user, and the set of users holding any: reads, and how a `Commit`'s guard
and write of them become the commit script's ops; the grant itself is the commit's `GrantPermissions`). A change
of the permission definitions is a commit of the core's (`flows.permissions.change_definitions`)."""

from __future__ import annotations

from backends.redis.codecs import _text
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, _plans
from backends.redis.read import MEMBER, call, cat, each, key, read
from identity_proto.effects import (
    ListProjectPermissions,
    ProjectGrantIs,
    RevokePermission,
)
from identity_proto.effects.permissions import DropProjectGrants


@guards(ProjectGrantIs)
def _project_grant_is(ops: Ops, position: int, guard: ProjectGrantIs) -> None:
    grants = ops.key(ops.space.user_permissions(ops.project_id, guard.user_id))
    ops.guards.append([position, "sismember", grants, guard.permission_id, 1])
    ops.guards.append([position, "scard", grants, guard.held])


@writes(RevokePermission)
def _revoke_permission(ops: Ops, write: RevokePermission) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["srem", ops.key(space.user_permissions(p, write.user_id)), write.permission_id])
    if write.last:
        ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])


@_plans(ListProjectPermissions)
def _list_project_permissions(
    keys: KeySpace, effect: ListProjectPermissions
) -> Plan[tuple[tuple[str, tuple[str, ...]], ...]]:
    project_id, user_id = effect.project_id, effect.user_id
    if user_id is not None:
        held = yield Call("SMEMBERS", keys.user_permissions(project_id, user_id))
        return ((user_id, tuple(sorted(map(_text, held)))),) if held else ()
    # {user id, their permission ids} per user holding any.
    held = call("SMEMBERS", cat(keys.user_permissions(project_id, ""), MEMBER), need=1, out=1)
    reply = yield read(
        (keys.permission_users(project_id),), [each("SMEMBERS", key(1), do=[{"v": MEMBER, "out": 1}, held], out=1)]
    )
    items = iter(reply[0])
    found = [(_text(uid), tuple(sorted(map(_text, held)))) for uid, held in zip(items, items, strict=True)]
    return tuple(sorted(found))


@writes(DropProjectGrants)
def _drop_project_grants(ops: Ops, write: DropProjectGrants) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["del", ops.key(space.user_permissions(p, write.user_id))])
    ops.writes.append(["srem", ops.key(space.permission_users(p)), write.user_id])
