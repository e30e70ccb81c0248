"""The password flows' writes: a reset code sent (the e-mail index read, the code and its mail stored), a password
reset (the code used, the hash written, the sessions removed), changed (all sessions but one removed) or set.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _email_json, _flat, _json, _json_fields, _text
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import (
    _CREATE_CODE,
    _EMIT_EVENT,
    _EMIT_USER_EVENT,
    _EXTEND_EXPIRY,
    _RECORD_JSON,
    _REVOKE_SESSIONS,
)
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import ChangePassword, PasswordWrite, ResetPassword, SetPassword, StorePasswordResetCode
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

# KEYS: e-mail index, code, nonce counter, outbox. ARGV: e-mail, user key prefix, the code's expiry (ms), mail
# (1/0), the mail's JSON, keep, then field, value, ... of the code. Returns the user's id (code and mail stored),
# or nil (nothing written).
script(
    "store_password_reset_code",
    _EXTEND_EXPIRY
    + _CREATE_CODE
    + _SIGN_IN_USER_ID
    + """
local id = sign_in_user_id(KEYS[1], ARGV[2], ARGV[1])
if not id then return false end
create_code(KEYS[2], KEYS[3], ARGV[3], {unpack(ARGV, 7)})
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
            *_flat(_json_fields(dataclasses.asdict(code))),
        ),
    )
    return None if found is None else _text(found)


# KEYS: code, the events stream (`user.updated`). ARGV: purpose (JSON), now_ms, password hash (JSON), user key
# prefix, session set prefix, session key prefix, token entry prefix, team key prefix. Returns an outcome of
# `PasswordWrite`; checks in the contract's order.
script(
    "reset_password",
    _REVOKE_SESSIONS
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_USER_EVENT
    + """
local code = redis.call('HMGET', KEYS[1], 'purpose', 'expires_at_millis', 'used', 'user_id')
if not code[1] or code[1] ~= ARGV[1] then return 'code_not_found' end
if tonumber(ARGV[2]) >= tonumber(code[2]) then return 'code_expired' end
if code[3] == 'true' then return 'code_used' end
redis.call('HSET', KEYS[1], 'used', 'true')
local uid = code[4] and cjson.decode(code[4])
if type(uid) ~= 'string' or redis.call('EXISTS', ARGV[4] .. uid) == 0 then return 'user_not_found' end
redis.call('HSET', ARGV[4] .. uid, 'password_hash', ARGV[3])
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
