"""The memory store: users."""

from __future__ import annotations

import bisect

from backends.memory.commit import applies, checks, index, records
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    DropUser,
    Exists,
    FindUserByIndex,
    ListUsers,
    LoadUser,
    LoadUserWithTeam,
    RecordExists,
)
from identity_proto.records import Team, User


@_performs(LoadUser)
def _load_user(store: MemoryStore, effect: LoadUser) -> User | None:
    return store.tenant(effect.project_id).users.get(effect.user_id)


@_performs(LoadUserWithTeam)
def _load_user_with_team(store: MemoryStore, effect: LoadUserWithTeam) -> tuple[User, Team | None] | None:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return None
    team = tenant.teams.get(user.selected_team_id) if user.selected_team_id is not None else None
    return user, team


def _exists(tenant: Tenant, guard: Exists | RecordExists) -> bool:
    return guard.id in records(tenant, guard.kind)


checks(Exists)(_exists)
checks(RecordExists)(_exists)


@_performs(FindUserByIndex)
def _find_user_by_index(store: MemoryStore, effect: FindUserByIndex) -> User | None:
    tenant = store.tenant(effect.project_id)
    user_id = index(tenant, effect.index).get(effect.key)
    return None if user_id is None else tenant.users.get(user_id)


@applies(DropUser)
def _drop_user(tenant: Tenant, write: DropUser) -> None:
    user = tenant.users.pop(write.user_id)
    tenant.user_order.remove((user.signed_up_at_millis, user.id))


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
