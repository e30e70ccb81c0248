"""The password flows' writes: a reset code sent (the e-mail index read, the code and its mail stored, only for an
address a reset may go through), a password reset (the code's bindings checked, the code used, the hash written,
the address verified, the sessions removed), changed (all sessions but one removed) or set.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _email_json, _flat, _json, _json_fields, _text
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import (
    _CHANNEL_JSON,
    _CREATE_CODE,
    _EMIT_EVENT,
    _EMIT_USER_EVENT,
    _EXTEND_EXPIRY,
    _RECORD_JSON,
    _REVOKE_SESSIONS,
)
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import (
    ChangePassword,
    PasswordWrite,
    ResetPassword,
    SetPassword,
    StorePasswordResetCode,
    password_fingerprint,
)
from identity_proto.records import CodePurpose

#: Lua: the id of the user whose sign-in address is `email` (the e-mail index, as `find_user_by_email` reads it),
#: or false when nobody's is or the index points at a user that is gone. The one lookup of the password flows.
_SIGN_IN_USER_ID = """
local function sign_in_user_id(index_key, user_prefix, email)
  local id = redis.call('HGET', index_key, email)
  if not id or redis.call('EXISTS', user_prefix .. id) == 0 then return false end
  return id
end
"""

#: Lua: whether a password reset may go through `address`, as `effects.passwords.may_reset_through` says it, for
#: the user hash `user_key` and their stored channels `channels_key`; and whether the user's stored password hash
#: (its JSON text; a record without the field has none) is `hash_json`.
_RESET_RULES = """
local function may_reset_through(user_key, channels_key, address)
  local u = redis.call('HMGET', user_key, 'primary_email', 'primary_email_verified', 'primary_email_auth_enabled',
    'oauth_accounts')
  local found, verified, others = false, false, 0
  local primary = u[1] and cjson.decode(u[1])
  if u[3] == 'true' and type(primary) == 'string' then
    if primary == address then found, verified = true, u[2] == 'true' else others = others + 1 end
  end
  for _, text in ipairs(redis.call('HVALS', channels_key)) do
    local c = cjson.decode(text)
    if c.used_for_auth == true then
      if c.value == address then found, verified = true, c.is_verified == true else others = others + 1 end
    end
  end
  if not found then return false end
  if verified then return true end
  if others > 0 then return false end
  local accounts = u[4] and cjson.decode(u[4])
  return type(accounts) ~= 'table' or next(accounts) == nil
end
local function password_is(user_key, hash_json)
  return (redis.call('HGET', user_key, 'password_hash') or 'null') == hash_json
end
"""

# KEYS: e-mail index, code, nonce counter, outbox. ARGV: e-mail, user key prefix, the code's expiry (ms), mail
# (1/0), the mail's JSON, keep, contact channels key prefix, the password hash the caller read (JSON), then field,
# value, ... of the code. Returns the user's id (code and mail stored), or nil (nothing written: nobody signs in
# with the address, no reset may go through it, or the password is no longer the one read).
script(
    "store_password_reset_code",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + _SIGN_IN_USER_ID
    + _RESET_RULES
    + """
local id = sign_in_user_id(KEYS[1], ARGV[2], ARGV[1])
if not id or not password_is(ARGV[2] .. id, ARGV[8]) or not may_reset_through(ARGV[2] .. id, ARGV[7] .. id, ARGV[1])
then
  return false
end
create_code(KEYS[2], KEYS[3], ARGV[3], {unpack(ARGV, 9)})
redis.call('HSET', KEYS[2], 'user_id', cjson.encode(id))
if ARGV[4] == '1' then
  redis.call('LPUSH', KEYS[4], ARGV[5])
  local keep = tonumber(ARGV[6])
  if keep <= 0 then redis.call('DEL', KEYS[4]) else redis.call('LTRIM', KEYS[4], 0, keep - 1) end
end
return id
""",
)


@_plans(StorePasswordResetCode)
def _store_password_reset_code(keys: KeySpace, effect: StorePasswordResetCode) -> Plan[str | None]:
    project_id, code, mail = effect.project_id, effect.code, effect.outbox_mail
    found = yield Script(
        "store_password_reset_code",
        (
            keys.users_by_email(project_id),
            keys.code(project_id, code.code_hash),
            keys.nonce(project_id, code.nonce_hash),
            keys.outbox(project_id),
        ),
        (
            code.email or "",
            keys.user(project_id),
            code.expires_at_millis + GRACE_MS,
            0 if mail is None else 1,
            "" if mail is None else _email_json(mail),
            effect.keep,
            keys.user_channels(project_id),
            _json(effect.password_hash),
            *_flat(_json_fields(dataclasses.asdict(code))),
        ),
    )
    return None if found is None else _text(found)


# KEYS: code, the events stream (`user.updated`). ARGV: purpose (JSON), now_ms, password hash (JSON), user key
# prefix, session set prefix, session key prefix, token entry prefix, team key prefix, contact channels key
# prefix, the fingerprint of the old password hash (JSON), the old password hash (JSON). Returns an outcome of
# `PasswordWrite`; checks in the contract's order.
script(
    "reset_password",
    _REVOKE_SESSIONS
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_USER_EVENT
    + _CHANNEL_JSON
    + _RESET_RULES
    + """
local code = redis.call('HMGET', KEYS[1], 'purpose', 'expires_at_millis', 'used', 'user_id')
if not code[1] or code[1] ~= ARGV[1] then return 'code_not_found' end
if tonumber(ARGV[2]) >= tonumber(code[2]) then return 'code_expired' end
if code[3] == 'true' then return 'code_used' end
local uid = code[4] and cjson.decode(code[4])
if type(uid) ~= 'string' or redis.call('EXISTS', ARGV[4] .. uid) == 0 then
  redis.call('HSET', KEYS[1], 'used', 'true')
  return 'user_not_found'
end
local ukey, ckey = ARGV[4] .. uid, ARGV[9] .. uid
local bound = redis.call('HMGET', KEYS[1], 'email', 'password_fingerprint')
local email = bound[1] and cjson.decode(bound[1])
if bound[2] ~= ARGV[10] or not password_is(ukey, ARGV[11]) or type(email) ~= 'string'
  or not may_reset_through(ukey, ckey, email) then
  return 'code_not_found'
end
redis.call('HSET', KEYS[1], 'used', 'true')
redis.call('HSET', ukey, 'password_hash', ARGV[3])
local primary = redis.call('HMGET', ukey, 'primary_email', 'primary_email_auth_enabled')
if primary[1] and primary[2] == 'true' and cjson.decode(primary[1]) == email then
  redis.call('HSET', ukey, 'primary_email_verified', 'true')
else
  local stored = redis.call('HGETALL', ckey)
  for i = 1, #stored, 2 do
    local c = cjson.decode(stored[i + 1])
    if c.value == email and c.used_for_auth == true then
      c.is_verified = true
      redis.call('HSET', ckey, stored[i], channel_json(c))
    end
  end
end
revoke_sessions(ARGV[5] .. uid, ARGV[6], ARGV[7])
emit_user_event(KEYS[2], 'user.updated', ARGV[4] .. uid, ARGV[8], false)
return 'done'
""",
)


@_plans(ResetPassword)
def _reset_password(keys: KeySpace, effect: ResetPassword) -> Plan[PasswordWrite]:
    project_id = effect.project_id
    reply = yield Script(
        "reset_password",
        (keys.code(project_id, effect.code_hash), keys.events(project_id)),
        (
            _json(CodePurpose.PASSWORD_RESET),
            effect.now_ms,
            _json(effect.password_hash),
            keys.user(project_id),
            keys.user_sessions(project_id),
            keys.session(project_id),
            keys.session_by_token(project_id),
            keys.team(project_id),
            keys.user_channels(project_id),
            _json(password_fingerprint(effect.old_password_hash)),
            _json(effect.old_password_hash),
        ),
    )
    return PasswordWrite(_text(reply))


# KEYS: user, user's session set. ARGV: old hash (JSON), new hash (JSON), session key prefix, token entry prefix,
# the refresh token hash of the session to keep ('' for none). Returns an outcome of `PasswordWrite`.
script(
    "change_password",
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'user_not_found' end
if redis.call('HGET', KEYS[1], 'password_hash') ~= ARGV[1] then return 'password_changed' end
redis.call('HSET', KEYS[1], 'password_hash', ARGV[2])
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local skey = ARGV[3] .. sid
  local token = redis.call('HGET', skey, 'refresh_token_hash')
  local hash = token and cjson.decode(token)
  if ARGV[5] == '' or hash ~= ARGV[5] then
    redis.call('DEL', skey)
    if type(hash) == 'string' and redis.call('GET', ARGV[4] .. hash) == sid then redis.call('DEL', ARGV[4] .. hash) end
    redis.call('SREM', KEYS[2], sid)
  end
end
return 'done'
""",
)


@_plans(ChangePassword)
def _change_password(keys: KeySpace, effect: ChangePassword) -> Plan[PasswordWrite]:
    project_id, user_id = effect.project_id, effect.user_id
    reply = yield Script(
        "change_password",
        (keys.user(project_id, user_id), keys.user_sessions(project_id, user_id)),
        (
            _json(effect.old_password_hash),
            _json(effect.new_password_hash),
            keys.session(project_id),
            keys.session_by_token(project_id),
            effect.keep_refresh_token_hash or "",
        ),
    )
    return PasswordWrite(_text(reply))


# KEYS: user. ARGV: password hash (JSON). Returns an outcome of `PasswordWrite`.
script(
    "set_password",
    """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'user_not_found' end
local stored = redis.call('HGET', KEYS[1], 'password_hash')
if stored and stored ~= 'null' then return 'has_password' end
redis.call('HSET', KEYS[1], 'password_hash', ARGV[1])
return 'done'
""",
)


@_plans(SetPassword)
def _set_password(keys: KeySpace, effect: SetPassword) -> Plan[PasswordWrite]:
    reply = yield Script(
        "set_password", (keys.user(effect.project_id, effect.user_id),), (_json(effect.password_hash),)
    )
    return PasswordWrite(_text(reply))
