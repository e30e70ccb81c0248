"""Sessions, their refresh-token entries and each user's set of sessions.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _flat, _json_fields, _required, _session, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import _CREATE_SESSION, _EXTEND_EXPIRY, _REVOKE_SESSIONS
from backends.redis.plan import Call, Plan, Script, _plans, script
from identity_proto.effects import (
    CreateSession,
    DeleteSession,
    DropSession,
    ListSessions,
    LoadSession,
    RevokeUserSessions,
    UseRefreshToken,
)
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.records import Session, User

# KEYS: session, token entry, user's session set. ARGV: session id, expires_at_millis, field, value, ...
script(
    "create_session",
    _EXTEND_EXPIRY
    + _CREATE_SESSION
    + """
create_session(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], {unpack(ARGV, 3)})
return 1
""",
)


@_plans(CreateSession)
def _create_session(keys: KeySpace, effect: CreateSession) -> Plan[None]:
    session, project_id = effect.session, effect.project_id
    yield Script(
        "create_session",
        (
            keys.session(project_id, session.id),
            keys.session_by_token(project_id, session.refresh_token_hash),
            keys.user_sessions(project_id, session.user_id),
        ),
        (session.id, session.expires_at_millis + GRACE_MS, *_flat(_json_fields(dataclasses.asdict(session)))),
    )


# KEYS: token entry. ARGV: session key prefix, user key prefix, now_ms.
# Returns {session, user} after recording now_ms as the session's last use and, if later, the user's last
# activity; or nil.
script(
    "use_refresh_token",
    """
local sid = redis.call('GET', KEYS[1])
if not sid then return false end
local skey = ARGV[1] .. sid
local uid = redis.call('HGET', skey, 'user_id')
if not uid then return false end
local ukey = ARGV[2] .. cjson.decode(uid)
if redis.call('EXISTS', ukey) == 0 then return false end
redis.call('HSET', skey, 'last_used_at_millis', ARGV[3])
local active = redis.call('HGET', ukey, 'last_active_at_millis')
if not active or tonumber(active) < tonumber(ARGV[3]) then
  redis.call('HSET', ukey, 'last_active_at_millis', ARGV[3])
end
return {redis.call('HGETALL', skey), redis.call('HGETALL', ukey)}
""",
)


@_plans(UseRefreshToken)
def _use_refresh_token(keys: KeySpace, effect: UseRefreshToken) -> Plan[tuple[Session, User] | None]:
    project_id = effect.project_id
    reply = yield Script(
        "use_refresh_token",
        (keys.session_by_token(project_id, effect.refresh_token_hash),),
        (keys.session(project_id), keys.user(project_id), effect.now_ms),
    )
    if not reply:
        return None
    return _required(_session(reply[0])), _required(_user(reply[1]))


@_plans(LoadSession)
def _load_session(keys: KeySpace, effect: LoadSession) -> Plan[Session | None]:
    return _session((yield Call("HGETALL", keys.session(effect.project_id, effect.session_id))))


# KEYS: user's session set. ARGV: session key prefix. Returns the sessions' records (unordered); removes
# the ids of sessions gone (by TTL) from the set.
script(
    "list_sessions",
    """
local out = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local s = redis.call('HGETALL', ARGV[1] .. sid)
  if #s == 0 then redis.call('SREM', KEYS[1], sid) else out[#out + 1] = s end
end
return out
""",
)


@_plans(ListSessions)
def _list_sessions(keys: KeySpace, effect: ListSessions) -> Plan[tuple[Session, ...]]:
    project_id = effect.project_id
    reply = yield Script(
        "list_sessions", (keys.user_sessions(project_id, effect.user_id),), (keys.session(project_id),)
    )
    sessions = [_required(_session(item)) for item in reply]
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


# KEYS: session. ARGV: session id, token entry prefix, session set prefix. Returns 1 if it existed, else 0.
script(
    "delete_session",
    """
local f = redis.call('HMGET', KEYS[1], 'user_id', 'refresh_token_hash')
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if f[2] then
  local tkey = ARGV[2] .. cjson.decode(f[2])
  if redis.call('GET', tkey) == ARGV[1] then redis.call('DEL', tkey) end
end
if f[1] then redis.call('SREM', ARGV[3] .. cjson.decode(f[1]), ARGV[1]) end
return 1
""",
)


@_plans(DeleteSession)
def _delete_session(keys: KeySpace, effect: DeleteSession) -> Plan[bool]:
    project_id = effect.project_id
    existed = yield Script(
        "delete_session",
        (keys.session(project_id, effect.session_id),),
        (effect.session_id, keys.session_by_token(project_id), keys.user_sessions(project_id)),
    )
    return bool(existed)


# KEYS: user's session set. ARGV: session key prefix, token entry prefix. Returns how many sessions existed.
script(
    "revoke_user_sessions",
    _REVOKE_SESSIONS
    + """
return revoke_sessions(KEYS[1], ARGV[1], ARGV[2])
""",
)


@_plans(RevokeUserSessions)
def _revoke_user_sessions(keys: KeySpace, effect: RevokeUserSessions) -> Plan[int]:
    project_id = effect.project_id
    count = yield Script(
        "revoke_user_sessions",
        (keys.user_sessions(project_id, effect.user_id),),
        (keys.session(project_id), keys.session_by_token(project_id)),
    )
    return int(count)


@writes(DropSession)
def _drop_session(ops: Ops, write: DropSession) -> None:
    space, p, session = ops.space, ops.project_id, write.session
    ops.writes.append(["del", ops.key(space.session(p, session.id))])
    ops.writes.append(["del", ops.key(space.session_by_token(p, session.refresh_token_hash))])
    ops.writes.append(["srem", ops.key(space.user_sessions(p, session.user_id)), session.id])


@guards(UserSessionsAre)
def _user_sessions_are(ops: Ops, position: int, guard: UserSessionsAre) -> None:
    # The set may hold ids of sessions gone by TTL (ListSessions prunes them): the set is what is guarded.
    user_sessions = ops.key(ops.space.user_sessions(ops.project_id, guard.user_id))
    ops.guards.append([position, "scard", user_sessions, len(set(guard.session_ids))])
    ops.guards += [[position, "sismember", user_sessions, session_id, True] for session_id in guard.session_ids]
