"""Team invitations: one-time codes (`<p>code:<hash>`) found by id (`<p>invitation:<id>`) and listed by team and by
address (two ZSETs scored by expiry).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _code, _flat, _json, _json_fields, _text
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import _CREATE_CODE, _EMIT_EVENT, _EMIT_MEMBERSHIP_CREATED, _EXTEND_EXPIRY, _FIELDS, _SEQ
from backends.redis.plan import Arg, Plan, Script, _plans, script
from identity_proto.effects import (
    AcceptTeamInvitation,
    CreateTeamInvitation,
    InvitationAcceptance,
    ListTeamInvitations,
    LoadTeamInvitation,
    RevokeTeamInvitation,
)
from identity_proto.records import CodePurpose, VerificationCode

# KEYS: team, code, nonce counter, invitation, the team's invitation index, the address's invitation index.
# ARGV: expiry of the keys (expires_at_millis + grace), invitation id, code hash, expires_at_millis (the index
# score), drop-before (index members whose score is below it expired more than the grace ago: their keys are gone),
# then field, value, ... of the code. Returns 1 if stored, 0 if the team is missing (nothing written).
script(
    "create_team_invitation",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
create_code(KEYS[2], KEYS[3], ARGV[1], {unpack(ARGV, 6)})
redis.call('SET', KEYS[4], ARGV[3])
redis.call('PEXPIREAT', KEYS[4], ARGV[1])
for i = 5, 6 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[5])
  redis.call('ZADD', KEYS[i], ARGV[4], ARGV[2])
  extend_expiry(KEYS[i], ARGV[1])
end
return 1
""",
)


@_plans(CreateTeamInvitation)
def _create_team_invitation(keys: KeySpace, effect: CreateTeamInvitation) -> Plan[bool]:
    code, project_id = effect.code, effect.project_id
    if code.id is None or code.team_id is None or code.email is None:
        return False  # not an invitation: nothing to store (the memory store refuses it alike)
    args: tuple[Arg, ...] = (
        code.expires_at_millis + GRACE_MS,
        code.id,
        code.code_hash,
        code.expires_at_millis,
        code.created_at_millis - GRACE_MS,
        *_flat(_json_fields(dataclasses.asdict(code))),
    )
    created = yield Script(
        "create_team_invitation",
        (
            keys.team(project_id, code.team_id),
            keys.code(project_id, code.code_hash),
            keys.nonce(project_id, code.nonce_hash),
            keys.invitation(project_id, code.id),
            keys.team_invitations(project_id, code.team_id),
            keys.invitations_to(project_id, code.email),
        ),
        args,
    )
    return bool(created)


def _invitation(reply: object) -> VerificationCode | None:
    code = _code(reply)
    return code if code is not None and code.purpose == CodePurpose.TEAM_INVITATION else None


# KEYS: invitation. ARGV: code key prefix. Returns the code's record, or nil.
script(
    "load_team_invitation",
    """
local code_hash = redis.call('GET', KEYS[1])
if not code_hash then return false end
return redis.call('HGETALL', ARGV[1] .. code_hash)
""",
)


@_plans(LoadTeamInvitation)
def _load_team_invitation(keys: KeySpace, effect: LoadTeamInvitation) -> Plan[VerificationCode | None]:
    project_id = effect.project_id
    reply = yield Script(
        "load_team_invitation", (keys.invitation(project_id, effect.invitation_id),), (keys.code(project_id, ""),)
    )
    return _invitation(reply)


# KEYS: invitation indexes (a team's, or addresses'). ARGV: invitation key prefix, code key prefix. Returns the
# records of the invitations they list (each once; those whose keys are gone skipped).
script(
    "list_team_invitations",
    """
local out, seen = {}, {}
for _, index in ipairs(KEYS) do
  for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    if not seen[id] then
      seen[id] = true
      local code_hash = redis.call('GET', ARGV[1] .. id)
      if code_hash then
        local code = redis.call('HGETALL', ARGV[2] .. code_hash)
        if #code > 0 then out[#out + 1] = code end
      end
    end
  end
end
return out
""",
)


@_plans(ListTeamInvitations)
def _list_team_invitations(keys: KeySpace, effect: ListTeamInvitations) -> Plan[tuple[VerificationCode, ...]]:
    project_id, team_id = effect.project_id, effect.team_id
    indexes: tuple[str, ...]
    if team_id is not None:
        indexes = (keys.team_invitations(project_id, team_id),)
    else:
        indexes = tuple(keys.invitations_to(project_id, email) for email in dict.fromkeys(effect.emails))
    if not indexes:
        return ()
    reply = yield Script("list_team_invitations", indexes, (keys.invitation(project_id), keys.code(project_id, "")))
    found = [code for code in map(_invitation, reply) if code is not None]
    if team_id is not None:
        found = [code for code in found if code.team_id == team_id]
    else:
        found = [code for code in found if code.email in effect.emails]
    return tuple(sorted(found, key=lambda c: (c.created_at_millis, c.id or "")))


# KEYS: invitation, the team's invitation index. ARGV: invitation id, team id (JSON), code key prefix, address
# index prefix. Returns 1 if the invitation was the team's (and is gone, with its index entries), else 0.
script(
    "revoke_team_invitation",
    """
local code_hash = redis.call('GET', KEYS[1])
if not code_hash then return 0 end
local code_key = ARGV[3] .. code_hash
if redis.call('HGET', code_key, 'team_id') ~= ARGV[2] then return 0 end
local email = redis.call('HGET', code_key, 'email')
redis.call('DEL', code_key, KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if email then
  local address = cjson.decode(email)
  if type(address) == 'string' then redis.call('ZREM', ARGV[4] .. address, ARGV[1]) end
end
return 1
""",
)


@_plans(RevokeTeamInvitation)
def _revoke_team_invitation(keys: KeySpace, effect: RevokeTeamInvitation) -> Plan[bool]:
    project_id = effect.project_id
    revoked = yield Script(
        "revoke_team_invitation",
        (keys.invitation(project_id, effect.invitation_id), keys.team_invitations(project_id, effect.team_id)),
        (effect.invitation_id, _json(effect.team_id), keys.code(project_id, ""), keys.invitations_to(project_id)),
    )
    return bool(revoked)


# KEYS: code, user, team, the team's member index, the user's team index, membership order, membership sequence,
# the events stream (as add_membership: `team_membership.created`, then its permissions'). ARGV: now_ms, team id
# (JSON), purpose (JSON), user id, team id, membership key prefix, then field, value, ... of the membership.
# Returns the `InvitationAcceptance` value. The membership is added exactly as the add_membership script of
# `backends.redis.teams` adds one (the same keys, seq and indexes).
script(
    "accept_team_invitation",
    _FIELDS
    + _SEQ
    + _EMIT_EVENT
    + _EMIT_MEMBERSHIP_CREATED
    + """
local f = fields(redis.call('HGETALL', KEYS[1]))
if f['purpose'] ~= ARGV[3] or f['team_id'] ~= ARGV[2] then return 'not_found' end
if tonumber(ARGV[1]) >= tonumber(f['expires_at_millis']) then return 'expired' end
if f['used'] == 'true' then return 'already_used' end
if redis.call('EXISTS', KEYS[2]) == 0 then return 'user_not_found' end
if redis.call('EXISTS', KEYS[3]) == 0 then return 'team_not_found' end
redis.call('HSET', KEYS[1], 'used', 'true')
if redis.call('ZSCORE', KEYS[4], ARGV[4]) then return 'already_member' end
local seq = seq_text(redis.call('INCR', KEYS[7]))
redis.call('HSET', ARGV[6] .. seq, unpack(ARGV, 7))
redis.call('ZADD', KEYS[4], seq, ARGV[4])
redis.call('ZADD', KEYS[5], seq, ARGV[5])
redis.call('ZADD', KEYS[6], seq, seq)
emit_membership_created(KEYS[8], ARGV[5], ARGV[4], cjson.decode(redis.call('HGET', ARGV[6] .. seq, 'permissions')))
return 'accepted'
""",
)


@_plans(AcceptTeamInvitation)
def _accept_team_invitation(keys: KeySpace, effect: AcceptTeamInvitation) -> Plan[InvitationAcceptance]:
    membership, project_id = effect.membership, effect.project_id
    team_id, user_id = membership.team_id, membership.user_id
    reply = yield Script(
        "accept_team_invitation",
        (
            keys.code(project_id, effect.code_hash),
            keys.user(project_id, user_id),
            keys.team(project_id, team_id),
            keys.team_members(project_id, team_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
            keys.events(project_id),
        ),
        (
            effect.now_ms,
            _json(team_id),
            _json(CodePurpose.TEAM_INVITATION),
            user_id,
            team_id,
            keys.membership(project_id),
            *_flat(_json_fields(dataclasses.asdict(membership))),
        ),
    )
    return InvitationAcceptance(_text(reply))
