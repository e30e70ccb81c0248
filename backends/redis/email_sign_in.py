"""Signing in by e-mail: the sign-in code (refused for an unverified holder or a closed sign-up) and the code's
one write (a session for the holder, or a new user with their personal team and a session).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _flat, _json_fields, _text, _user
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import (
    _ADDRESS_VERIFIED,
    _CREATE_CODE,
    _CREATE_SESSION,
    _CREATE_TEAM,
    _EMIT_EVENT,
    _EMIT_TEAM_EVENT,
    _EMIT_USER_EVENT,
    _EXTEND_EXPIRY,
    _RECORD_JSON,
    _SEQ,
)
from backends.redis.plan import Plan, Script, _plans, script
from backends.redis.teams import personal_team_parts
from identity_proto.effects import CreateSignInCode, EmailRefusal, EmailSignIn, EmailSignInOutcome, SignInByEmail
from identity_proto.records import user_to_json

# KEYS: code, nonce counter, e-mail index. ARGV: expires_at_millis, the code's e-mail, user key prefix,
# sign-up enabled (1/0), contact channels key prefix, then field, value, ... of the code. Whether the address is
# verified is its channel's (the primary, or another auth channel of the user). Returns 'ok' (stored), or 'unverified' /
# 'sign_up_disabled' (nothing written).
script(
    "create_sign_in_code",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + _ADDRESS_VERIFIED
    + """
local uid = redis.call('HGET', KEYS[3], ARGV[2])
if uid and redis.call('EXISTS', ARGV[3] .. uid) == 1 then
  if not address_verified(ARGV[3] .. uid, ARGV[5] .. uid, ARGV[2]) then return 'unverified' end
elseif ARGV[4] ~= '1' then
  return 'sign_up_disabled'
end
create_code(KEYS[1], KEYS[2], ARGV[1], {unpack(ARGV, 6)})
return 'ok'
""",
)


@_plans(CreateSignInCode)
def _create_sign_in_code(keys: KeySpace, effect: CreateSignInCode) -> Plan[EmailRefusal | None]:
    code, project_id = effect.code, effect.project_id
    reply = yield Script(
        "create_sign_in_code",
        (
            keys.code(project_id, code.code_hash),
            keys.nonce(project_id, code.nonce_hash),
            keys.users_by_email(project_id),
        ),
        (
            code.expires_at_millis + GRACE_MS,
            code.email or "",
            keys.user(project_id),
            1 if effect.sign_up_enabled else 0,
            keys.user_channels(project_id),
            *_flat(_json_fields(dataclasses.asdict(code))),
        ),
    )
    outcome = _text(reply)
    return None if outcome == "ok" else EmailRefusal(outcome)


# KEYS: e-mail index, user order, session, token entry, the events stream, and with a personal team: team, team
# order, the team's member index, the new user's team index, membership order, membership sequence.
# ARGV: e-mail, user key prefix, session set prefix, now_ms, sign-up enabled (1/0), new user's id, its
# signed_up_at_millis, session id, session expiry, membership key prefix, team id, team created_at_millis,
# then the counts nu, ns, nt, the contact channels key prefix, and nu items field, value, ... of the new user,
# ns of the session (without user_id), nt of the team, and the rest: the creator's membership. Whether the address
# is verified is its channel's (the primary, or another auth channel of the user).
# Returns {outcome, user record} or {outcome}; the outcomes of SignInByEmail, checked in its order.
script(
    "sign_in_by_email",
    _ADDRESS_VERIFIED
    + _EXTEND_EXPIRY
    + _SEQ
    + _CREATE_SESSION
    + _CREATE_TEAM
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_TEAM_EVENT
    + _EMIT_USER_EVENT
    + """
local nu, ns, nt = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local user_items = {unpack(ARGV, 17, 16 + nu)}
local session_items = {unpack(ARGV, 17 + nu, 16 + nu + ns)}
local team_items = {unpack(ARGV, 17 + nu + ns, 16 + nu + ns + nt)}
local membership_items = {unpack(ARGV, 17 + nu + ns + nt)}
local function start_session(uid, id_json)
  session_items[#session_items + 1] = 'user_id'
  session_items[#session_items + 1] = id_json
  create_session(KEYS[3], KEYS[4], ARGV[3] .. uid, ARGV[8], ARGV[9], session_items)
end
local uid = redis.call('HGET', KEYS[1], ARGV[1])
if uid then
  local ukey = ARGV[2] .. uid
  local u = redis.call('HMGET', ukey, 'id', 'primary_email_verified', 'otp_auth_enabled', 'totp_secret_base64',
    'last_active_at_millis')
  if u[1] then
    if not address_verified(ukey, ARGV[16] .. uid, ARGV[1]) then return {'unverified', redis.call('HGETALL', ukey)} end
    if u[3] ~= 'true' then redis.call('HSET', ukey, 'otp_auth_enabled', 'true') end
    if u[4] and u[4] ~= 'null' then return {'mfa_required', redis.call('HGETALL', ukey)} end
    if not u[5] or tonumber(u[5]) < tonumber(ARGV[4]) then
      redis.call('HSET', ukey, 'last_active_at_millis', ARGV[4])
    end
    start_session(uid, u[1])
    return {'signed_in', redis.call('HGETALL', ukey)}
  end
end
if ARGV[5] ~= '1' then return {'sign_up_disabled'} end
local nkey = ARGV[2] .. ARGV[6]
if redis.call('EXISTS', nkey) == 1 then return {'id_taken'} end
redis.call('HSET', nkey, unpack(user_items))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[6])
emit_user_event(KEYS[5], 'user.created', nkey, '', true)
if #KEYS > 5 then
  create_team(KEYS[6], KEYS[7], ARGV[11], ARGV[12], team_items)
  add_creator(KEYS[8], KEYS[9], KEYS[10], KEYS[11], ARGV[10], ARGV[11], ARGV[6], membership_items)
  emit_team_event(KEYS[5], 'team.created', KEYS[6])
end
start_session(ARGV[6], redis.call('HGET', nkey, 'id'))
return {'signed_up', redis.call('HGETALL', nkey)}
""",
)


@_plans(SignInByEmail)
def _sign_in_by_email(keys: KeySpace, effect: SignInByEmail) -> Plan[EmailSignIn]:
    p, user, session = effect.project_id, effect.new_user, effect.session
    user_items = _flat(_json_fields(user_to_json(user)))
    session_items = _flat(pair for pair in _json_fields(dataclasses.asdict(session)) if pair[0] != "user_id")
    script_keys = [
        keys.users_by_email(p),
        keys.user_order(p),
        keys.session(p, session.id),
        keys.session_by_token(p, session.refresh_token_hash),
        keys.events(p),
    ]
    team_id, team_created_at, team_items, membership_items, team_keys = personal_team_parts(
        keys, p, user.id, effect.personal_team
    )
    script_keys += team_keys
    reply = yield Script(
        "sign_in_by_email",
        tuple(script_keys),
        (
            effect.email,
            keys.user(p),
            keys.user_sessions(p),
            effect.now_ms,
            1 if effect.sign_up_enabled else 0,
            user.id,
            user.signed_up_at_millis,
            session.id,
            session.expires_at_millis + GRACE_MS,
            keys.membership(p),
            team_id,
            team_created_at,
            len(user_items),
            len(session_items),
            len(team_items),
            keys.user_channels(p),
            *user_items,
            *session_items,
            *team_items,
            *membership_items,
        ),
    )
    return EmailSignIn(EmailSignInOutcome(_text(reply[0])), _user(reply[1]) if len(reply) > 1 else None)
