"""Users, their e-mail index and their order (ListUsers)."""

from __future__ import annotations

import functools

from backends.redis.codecs import _required, _team, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, Script, _plans
from backends.redis.read import FIRST, LAST, MEMBER, by_index, call, cat, each, encode, first, key, read, ref
from identity_proto.effects import (
    DropUser,
    Exists,
    FindUserByIndex,
    ListUsers,
    LoadUser,
    LoadUserWithTeam,
    RecordExists,
)
from identity_proto.effects.commit import RecordKind
from identity_proto.records import Team, User


@_plans(LoadUser)
def _load_user(keys: KeySpace, effect: LoadUser) -> Plan[User | None]:
    return _user((yield Call("HGETALL", keys.user(effect.project_id, effect.user_id))))


@functools.lru_cache(maxsize=256)
def _user_with_team_steps(keys: KeySpace, project_id: str) -> str:
    # The user, and the team its `selected_team_id` names (a JSON id, or null: no team): one document per project.
    steps = [
        call("HGETALL", key(1), t="r", need=1, out=1),
        call("HGET", key(1), "selected_team_id", t="j"),
        call("HGETALL", cat(keys.team(project_id, ""), ref(2)), out=1),
    ]
    return encode(steps)


@_plans(LoadUserWithTeam)
def _load_user_with_team(keys: KeySpace, effect: LoadUserWithTeam) -> Plan[tuple[User, Team | None] | None]:
    # One round trip for what rendering a user needs.
    user_key = keys.user(effect.project_id, effect.user_id)
    reply = yield Script("read", (user_key,), (_user_with_team_steps(keys, effect.project_id),))
    user = _user(reply[0]) if reply else None
    return None if user is None else (user, _team(reply[1]) if reply[1] else None)


@_plans(FindUserByIndex)
def _find_user_by_index(keys: KeySpace, effect: FindUserByIndex) -> Plan[User | None]:
    p = effect.project_id
    return _user(first((yield by_index(keys.user_index(p, effect.index), effect.key, keys.user(p, ""), "r"))))


def _exists(ops: Ops, position: int, guard: Exists | RecordExists) -> None:
    ops.guards.append([position, "exists", ops.record_key(guard.kind, guard.id), 1])


guards(Exists)(_exists)
guards(RecordExists)(_exists)


@writes(DropUser)
def _drop_user(ops: Ops, write: DropUser) -> None:
    ops.writes.append(["del", ops.record_key(RecordKind.USER, write.user_id)])
    ops.writes.append(["zrem", ops.key(ops.space.user_order(ops.project_id)), write.user_id])


@_plans(ListUsers)
def _list_users(keys: KeySpace, effect: ListUsers) -> Plan[tuple[User, ...]]:
    if effect.limit is not None and effect.limit <= 0:
        return ()
    p, rev = effect.project_id, ["REV"] if effect.descending else []
    # From the cursor's rank (O(log n)), then by rank a page at a time; members whose record is gone are skipped.
    steps = [call("ZREVRANK" if rev else "ZRANK", key(1), effect.cursor, need=1)] if effect.cursor is not None else []
    user = call("HGETALL", cat(keys.user(p, ""), MEMBER), t="r", need=1, out=1)
    paging = {"page": 256} if effect.limit is None else {"limit": effect.limit}
    steps.append(
        each("ZRANGE", key(1), FIRST, LAST, *rev, do=[user], out=1, **paging, **({"from": ref(1)} if steps else {}))
    )
    return tuple(_required(_user(item)) for item in first((yield read((keys.user_order(p),), steps))) or ())
