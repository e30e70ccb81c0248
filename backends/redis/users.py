"""Users, their e-mail index and their order (ListUsers).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

from backends.redis.codecs import _required, _team, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.lua import (
    _RECORD_JSON,
)
from backends.redis.plan import Call, Plan, Script, _plans, script
from identity_proto.effects import (
    DropUser,
    Exists,
    FindUserByAuthEmail,
    ListUsers,
    LoadUser,
    LoadUserWithTeam,
)
from identity_proto.effects.commit import RecordKind
from identity_proto.records import Team, User


@_plans(LoadUser)
def _load_user(keys: KeySpace, effect: LoadUser) -> Plan[User | None]:
    return _user((yield Call("HGETALL", keys.user(effect.project_id, effect.user_id))))


# KEYS: user. ARGV: team key prefix. Returns {user record as JSON, team fields} ({} when none), or false.
script(
    "load_user_with_team",
    _RECORD_JSON
    + """
local user = redis.call('HGETALL', KEYS[1])
if #user == 0 then return false end
local selected = redis.call('HGET', KEYS[1], 'selected_team_id')
local team = {}
if selected and selected ~= 'null' then team = redis.call('HGETALL', ARGV[1] .. cjson.decode(selected)) end
return {record_json(user), team}
""",
)


@_plans(LoadUserWithTeam)
def _load_user_with_team(keys: KeySpace, effect: LoadUserWithTeam) -> Plan[tuple[User, Team | None] | None]:
    # One round trip for what rendering a user needs (the team key is built in the script: same project slot).
    reply = yield Script(
        "load_user_with_team", (keys.user(effect.project_id, effect.user_id),), (keys.team(effect.project_id),)
    )
    if not reply:
        return None
    user = _user(reply[0])
    return None if user is None else (user, _team(reply[1]) if reply[1] else None)


# KEYS: e-mail index. ARGV: e-mail, user key prefix. Returns the user's record, or nil.
script(
    "find_user_by_email",
    """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
return redis.call('HGETALL', ARGV[2] .. id)
""",
)


@_plans(FindUserByAuthEmail)
def _find_user_by_auth_email(keys: KeySpace, effect: FindUserByAuthEmail) -> Plan[User | None]:
    project_id = effect.project_id
    reply = yield Script(
        "find_user_by_email", (keys.users_by_email(project_id),), (effect.email, keys.user(project_id))
    )
    return _user(reply)


@guards(Exists)
def _exists(ops: Ops, position: int, guard: Exists) -> None:
    ops.guards.append([position, "exists", ops.record_key(guard.kind, guard.id)])


@writes(DropUser)
def _drop_user(ops: Ops, write: DropUser) -> None:
    ops.writes.append(["del", ops.record_key(RecordKind.USER, write.user_id)])
    ops.writes.append(["zrem", ops.key(ops.space.user_order(ops.project_id)), write.user_id])


# KEYS: user order. ARGV: user key prefix, cursor id, has cursor (1/0), descending (1/0), limit (> 0; -1: all).
# Returns the users' records in (signed_up_at_millis, id) order from the cursor's rank on (O(log n) to find it,
# then one ZRANGE by rank per page); members whose record is missing are skipped, never counted.
script(
    "list_users",
    """
local order, prefix, limit = KEYS[1], ARGV[1], tonumber(ARGV[5])
local rev = ARGV[4] == '1'
local start = 0
if ARGV[3] == '1' then
  local rank
  if rev then rank = redis.call('ZREVRANK', order, ARGV[2]) else rank = redis.call('ZRANK', order, ARGV[2]) end
  if not rank then return {} end
  start = rank
end
local out = {}
while limit < 0 or #out < limit do
  local want = 256
  if limit >= 0 then want = limit - #out end
  local ids
  if rev then
    ids = redis.call('ZRANGE', order, start, start + want - 1, 'REV')
  else
    ids = redis.call('ZRANGE', order, start, start + want - 1)
  end
  for _, id in ipairs(ids) do
    local user = redis.call('HGETALL', prefix .. id)
    if #user > 0 then out[#out + 1] = user end
  end
  if #ids < want then break end
  start = start + want
end
return out
""",
)


@_plans(ListUsers)
def _list_users(keys: KeySpace, effect: ListUsers) -> Plan[tuple[User, ...]]:
    if effect.limit is not None and effect.limit <= 0:
        return ()
    project_id = effect.project_id
    reply = yield Script(
        "list_users",
        (keys.user_order(project_id),),
        (
            keys.user(project_id),
            effect.cursor or "",
            0 if effect.cursor is None else 1,
            1 if effect.descending else 0,
            -1 if effect.limit is None else effect.limit,
        ),
    )
    return tuple(_required(_user(item)) for item in reply)
