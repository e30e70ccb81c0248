"""Anonymous users: the upgrade in place (the user becomes non-anonymous and takes its address only if the address
is still free, its "Personal Team" renamed, in one script). The sign-up is the core's new-user `Commit`.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

import dataclasses

from backends.redis.codecs import _change_fields, _flat, _json, _required, _text, _user
from backends.redis.keys import KeySpace
from backends.redis.lua import (
    _AUTH_EMAIL,
    _EMIT_EVENT,
    _EMIT_USER_EVENT,
    _RECORD_JSON,
)
from backends.redis.oauth import sign_in_keys
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import (
    ANONYMOUS_PERSONAL_TEAM_NAME,
    UpgradeAnonymousUser,
    UpgradeRefusal,
)
from identity_proto.records import User

# KEYS: user, e-mail index, user order, the user's team index, the OAuth index, the events stream (`user.updated`,
# with the selected team), the user's contact channels. ARGV: user id, team key prefix, the
# new personal team name (JSON), the linked account's JSON object ('' for none), its OAuth index key ('' for none or
# an account without sign-in), user key prefix, then field, value, ... (JSON values) of the changes.
# Returns {'ok', record as JSON}, or {'not_found'} / {'not_anonymous'} / {'account_taken'} / {'email_taken'}
# (checked in that order; nothing written).
script(
    "upgrade_anonymous_user",
    _AUTH_EMAIL
    + _RECORD_JSON
    + _EMIT_EVENT
    + _EMIT_USER_EVENT
    + """
local stored = redis.call('HMGET', KEYS[1], 'id', 'is_anonymous', 'primary_email_auth_enabled', 'primary_email')
if not stored[1] then return {'not_found'} end
if stored[2] ~= 'true' then return {'not_anonymous'} end
-- OAuth: the account's index entry is checked first
if ARGV[5] ~= '' then
  local holder = redis.call('HGET', KEYS[5], ARGV[5])
  if holder and holder ~= ARGV[1] and redis.call('EXISTS', ARGV[6] .. holder) == 1 then return {'account_taken'} end
end
local enabled, email = stored[3], stored[4]
local old = auth_email(enabled, email)
local signed_up = false
for i = 7, #ARGV, 2 do
  if ARGV[i] == 'primary_email_auth_enabled' then enabled = ARGV[i + 1]
  elseif ARGV[i] == 'primary_email' then email = ARGV[i + 1]
  elseif ARGV[i] == 'signed_up_at_millis' then signed_up = ARGV[i + 1] end
end
local new = auth_email(enabled, email)
-- contact channels: one address is never two channels of one user (as UpdateUser)
if email and email ~= stored[4] and email ~= 'null' then
  local value = cjson.decode(email)
  for _, text in ipairs(redis.call('HVALS', KEYS[7])) do
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
if #ARGV > 6 then redis.call('HSET', KEYS[1], unpack(ARGV, 7)) end
if signed_up then redis.call('ZADD', KEYS[3], signed_up, ARGV[1]) end
-- OAuth: the account appended to the stored array's text (never decoded and re-encoded), and indexed
if ARGV[4] ~= '' then
  local accounts = redis.call('HGET', KEYS[1], 'oauth_accounts')
  if not accounts or accounts == '[]' then
    accounts = '[' .. ARGV[4] .. ']'
  else
    accounts = string.sub(accounts, 1, -2) .. ',' .. ARGV[4] .. ']'
  end
  redis.call('HSET', KEYS[1], 'oauth_accounts', accounts)
  if ARGV[5] ~= '' then redis.call('HSET', KEYS[5], ARGV[5], ARGV[1]) end
end
for _, team_id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  local tkey = ARGV[2] .. team_id
  local name = redis.call('HGET', tkey, 'display_name')
  if name and cjson.decode(name) == '"""
    + ANONYMOUS_PERSONAL_TEAM_NAME
    + """' then redis.call('HSET', tkey, 'display_name', ARGV[3]) end
end
emit_user_event(KEYS[6], 'user.updated', KEYS[1], ARGV[2], false)
return {'ok', record_json(redis.call('HGETALL', KEYS[1]))}
""",
)


@_plans(UpgradeAnonymousUser)
def _upgrade_anonymous_user(keys: KeySpace, effect: UpgradeAnonymousUser) -> Plan[User | UpgradeRefusal]:
    p, user_id = effect.project_id, effect.user_id
    account = effect.oauth_account  # OAuth: the account the upgrade links, if any
    index_key = "" if account is None else (sign_in_keys((account,)) or [""])[0]
    reply = yield Script(
        "upgrade_anonymous_user",
        (
            keys.user(p, user_id),
            keys.users_by_email(p),
            keys.user_order(p),
            keys.user_teams(p, user_id),
            keys.oauth_index(p),
            keys.events(p),
            keys.user_channels(p, user_id),
        ),
        (
            user_id,
            keys.team(p),
            _json(effect.personal_team_name),
            "" if account is None else _json(dataclasses.asdict(account)),
            index_key,
            keys.user(p),
            *_flat(_change_fields(effect.changes)),
        ),
    )
    status = _text(reply[0])
    if status != "ok":
        return UpgradeRefusal(status)
    return _required(_user(reply[1]))
