"""Users, their e-mail index and their order (ListUsers).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import functools

from backends.redis.codecs import _change_fields, _flat, _json_fields, _required, _team, _text, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.lua import (
    _AUTH_EMAIL,
    _EMIT_EVENT,
    _EMIT_USER_EVENT,
    _RECORD_JSON,
)
from backends.redis.plan import Call, Plan, Script, _plans, script
from backends.redis.read import FIRST, LAST, MEMBER, by_index, call, cat, each, encode, first, key, read, ref
from identity_proto.effects import (
    CreateUser,
    DropUser,
    Exists,
    FindUserByAuthEmail,
    ListUsers,
    LoadUser,
    LoadUserWithTeam,
    UpdateUser,
    UserWrite,
)
from identity_proto.effects.commit import RecordKind
from identity_proto.records import Team, User, user_to_json


@_plans(LoadUser)
def _load_user(keys: KeySpace, effect: LoadUser) -> Plan[User | None]:
    return _user((yield Call("HGETALL", keys.user(effect.project_id, effect.user_id))))


@functools.lru_cache(maxsize=256)
def _user_with_team_steps(keys: KeySpace, project_id: str) -> str:
    # The user, and the team its `selected_team_id` names (a JSON id, or null: no team): one document per project.
    steps = [
        call("HGETALL", key(1), t="r", need=1, out=1),
        call("HGET", key(1), "selected_team_id", t="j"),
        call("HGETALL", cat(keys.team(project_id), ref(2)), out=1),
    ]
    return encode(steps)


@_plans(LoadUserWithTeam)
def _load_user_with_team(keys: KeySpace, effect: LoadUserWithTeam) -> Plan[tuple[User, Team | None] | None]:
    # One round trip for what rendering a user needs.
    user_key = keys.user(effect.project_id, effect.user_id)
    reply = yield Script("read", (user_key,), (_user_with_team_steps(keys, effect.project_id),))
    user = _user(reply[0]) if reply else None
    return None if user is None else (user, _team(reply[1]) if reply[1] else None)


@_plans(FindUserByAuthEmail)
def _find_user_by_auth_email(keys: KeySpace, effect: FindUserByAuthEmail) -> Plan[User | None]:
    p = effect.project_id
    return _user(first((yield by_index(keys.users_by_email(p), effect.email, keys.user(p), "r"))))


# KEYS: user, e-mail index, user order, the events stream (`user.created`). ARGV: user id, has auth e-mail (1/0),
# auth e-mail, signed_up_at_millis, then field, value, ... Returns 1 if stored, 0 if the auth e-mail is another
# user's, -1 if the id is taken (nothing written).
script(
    "create_user",
    _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_USER_EVENT
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
emit_user_event(KEYS[4], 'user.created', KEYS[1], '', false)
return 1
""",
)


@_plans(CreateUser)
def _create_user(keys: KeySpace, effect: CreateUser) -> Plan[User | UserWrite]:
    user, project_id = effect.user, effect.project_id
    email = user.auth_email
    args = (
        user.id,
        0 if email is None else 1,
        email or "",
        user.signed_up_at_millis,
        *_flat(_json_fields(user_to_json(user))),
    )
    created = yield Script(
        "create_user",
        (
            keys.user(project_id, user.id),
            keys.users_by_email(project_id),
            keys.user_order(project_id),
            keys.events(project_id),
        ),
        args,
    )
    if created == -1:
        return UserWrite.ID_TAKEN
    return user if created else UserWrite.EMAIL_TAKEN


@guards(Exists)
def _exists(ops: Ops, position: int, guard: Exists) -> None:
    ops.guards.append([position, "exists", ops.record_key(guard.kind, guard.id)])


# KEYS: user, e-mail index, user order, user's contact channels.
# ARGV: user id, then field, value, ... (JSON values; maybe none).
# Returns {'ok', record as JSON}, {'not_found'} or {'email_taken'} (the last two: nothing written).
script(
    "update_user",
    _AUTH_EMAIL
    + _RECORD_JSON
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local stored = redis.call('HMGET', KEYS[1], 'primary_email_auth_enabled', 'primary_email')
local enabled, email = stored[1], stored[2]
local old = auth_email(enabled, email)
local signed_up = false
for i = 2, #ARGV, 2 do
  if ARGV[i] == 'primary_email_auth_enabled' then enabled = ARGV[i + 1]
  elseif ARGV[i] == 'primary_email' then email = ARGV[i + 1]
  elseif ARGV[i] == 'signed_up_at_millis' then signed_up = ARGV[i + 1] end
end
local new = auth_email(enabled, email)
-- contact channels: one address is never two channels of one user (identity_proto.effects.contact_channels)
if email and email ~= stored[2] and email ~= 'null' then
  local value = cjson.decode(email)
  for _, text in ipairs(redis.call('HVALS', KEYS[4])) do
    if cjson.decode(text).value == value then return {'email_taken'} end
  end
end
if new ~= old then
  if new then
    local owner = redis.call('HGET', KEYS[2], new)
    if owner and owner ~= ARGV[1] then return {'email_taken'} end
  end
  if old and redis.call('HGET', KEYS[2], old) == ARGV[1] then redis.call('HDEL', KEYS[2], old) end
  if new then redis.call('HSET', KEYS[2], new, ARGV[1]) end
end
if #ARGV > 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 2)) end
if signed_up then redis.call('ZADD', KEYS[3], signed_up, ARGV[1]) end
return {'ok', record_json(redis.call('HGETALL', KEYS[1]))}
""",
)


@_plans(UpdateUser)
def _update_user(keys: KeySpace, effect: UpdateUser) -> Plan[User | UserWrite]:
    project_id, user_id = effect.project_id, effect.user_id
    reply = yield Script(
        "update_user",
        (
            keys.user(project_id, user_id),
            keys.users_by_email(project_id),
            keys.user_order(project_id),
            keys.user_channels(project_id, user_id),
        ),
        (user_id, *_flat(_change_fields(effect.changes))),
    )
    status = _text(reply[0])
    if status == "not_found":
        return UserWrite.NOT_FOUND
    if status == "email_taken":
        return UserWrite.EMAIL_TAKEN
    return _required(_user(reply[1]))


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
    user = call("HGETALL", cat(keys.user(p), MEMBER), t="r", need=1, out=1)
    paging = {"page": 256} if effect.limit is None else {"limit": effect.limit}
    steps.append(
        each("ZRANGE", key(1), FIRST, LAST, *rev, do=[user], out=1, **paging, **({"from": ref(1)} if steps else {}))
    )
    return tuple(_required(_user(item)) for item in first((yield read((keys.user_order(p),), steps))) or ())
