"""Sessions, their refresh-token entries and each user's set of sessions."""

from __future__ import annotations

from backends.redis.codecs import _required, _session, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, Script, _plans, script
from backends.redis.read import MEMBER, call, cat, each, key, read
from identity_proto.effects import (
    DropSession,
    EndSession,
    ListSessions,
    LoadSession,
    SessionExists,
    UseRefreshToken,
)
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.records import Session, User

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
        (keys.session(project_id, ""), keys.user(project_id, ""), effect.now_ms),
    )
    if not reply:
        return None
    return _required(_session(reply[0])), _required(_user(reply[1]))


@_plans(LoadSession)
def _load_session(keys: KeySpace, effect: LoadSession) -> Plan[Session | None]:
    return _session((yield Call("HGETALL", keys.session(effect.project_id, effect.session_id))))


@_plans(ListSessions)
def _list_sessions(keys: KeySpace, effect: ListSessions) -> Plan[tuple[Session, ...]]:
    project_id = effect.project_id
    # The ids of sessions gone (by TTL) are removed from the set.
    gone = ["SREM", key(1), MEMBER]
    session = call("HGETALL", cat(keys.session(project_id, ""), MEMBER), need=1, miss=gone, out=1)
    reply = yield read(
        (keys.user_sessions(project_id, effect.user_id),), [each("SMEMBERS", key(1), do=[session], out=1)]
    )
    sessions = [_required(_session(item)) for item in reply[0]]
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


@writes(DropSession)
def _drop_session(ops: Ops, write: DropSession) -> None:
    space, p, session = ops.space, ops.project_id, write.session
    ops.writes.append(["del", ops.key(space.session(p, session.id))])
    ops.writes.append(["del", ops.key(space.session_by_token(p, session.refresh_token_hash))])
    ops.writes.append(["srem", ops.key(space.user_sessions(p, session.user_id)), session.id])


@guards(UserSessionsAre)
def _user_sessions_are(ops: Ops, position: int, guard: UserSessionsAre) -> None:
    # The set may hold ids of sessions gone by TTL (ListSessions prunes them): the set is what is guarded.
    ops.exactly(position, ops.space.user_sessions(ops.project_id, guard.user_id), guard.session_ids, "s")


@writes(EndSession)
def _end_session(ops: Ops, write: EndSession) -> None:
    # The token entry and the user's set are named by the session's own fields, read (JSON-decoded) in the script.
    space, p = ops.space, ops.project_id
    session_key = ops.key(space.session(p, write.session_id))
    ops.writes.append(["hget", session_key, "refresh_token_hash", "token", "json"])
    ops.writes.append(["hget", session_key, "user_id", "owner", "json"])
    ops.writes.append(["del", session_key])
    ops.writes.append(["del", {"p": space.session_by_token(p, ""), "v": "token"}])
    ops.writes.append(["srem", {"p": space.user_sessions(p, ""), "v": "owner"}, write.session_id])


@guards(SessionExists)
def _session_exists(ops: Ops, position: int, guard: SessionExists) -> None:
    ops.guards.append([position, "exists", ops.key(ops.space.session(ops.project_id, guard.session_id)), 1])
