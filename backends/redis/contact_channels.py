"""Contact channels (identity_proto.effects.contact_channels has the design): the primary channel is the user's
``primary_email*`` fields, the others one hash per user (``user-channels``), their auth addresses in the e-mail
index.

Each write script reads the user's channels (`read_channels`), makes its change on that list, and writes the list
back (`write_channels`): the primary into the user's fields, the others into the channel hash, and the e-mail
index: the user's entries of addresses no longer used for auth removed, the written channel's claim added
(`claimed`: unverified claims by a client take no entry). Every key is one of the project's (hash tag ``{p:<id>}``).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

from typing import Any

import orjson

from backends.redis.codecs import _code, _json, _pairs, _text, _user
from backends.redis.keys import ORPHAN_NONCE_TTL_MS, KeySpace
from backends.redis.lua import _ATTEMPT_CODE, _CHANNEL_JSON, _FIELDS, _RECORD_JSON
from backends.redis.plan import Arg, Plan, Script, _plans, script
from identity_proto.effects import (
    ChannelVerification,
    ChannelWrite,
    CodeAttempt,
    CodeOutcome,
    CreateContactChannel,
    DeleteContactChannel,
    ListContactChannels,
    ListProjectContactChannels,
    UpdateContactChannel,
    UserChannels,
    VerifyContactChannel,
    channels_of,
)
from identity_proto.records import ContactChannel, contact_channel_from_json, derived_primary_channel_id

#: Lua: the user's channels as tables {id, value, is_verified, used_for_auth, created_at_millis, primary}, the
#: primary (read from the user hash; `derived_id` when the user names no id) first; false when there is no user.
#: `write_channels` writes such a list back in place of the one read. Needs `_CHANNEL_JSON`.
_CHANNELS = """
local function read_channels(user_key, channels_key, derived_id)
  local u = redis.call('HMGET', user_key, 'id', 'primary_email', 'primary_email_verified',
    'primary_email_auth_enabled', 'primary_email_channel_id', 'primary_email_channel_created_at_millis',
    'signed_up_at_millis')
  if not u[1] then return false end
  local list = {}
  local email = u[2] and cjson.decode(u[2])
  if type(email) == 'string' then
    local id = u[5] and cjson.decode(u[5])
    if type(id) ~= 'string' then id = derived_id end
    local created = u[6] and cjson.decode(u[6])
    if type(created) ~= 'number' then created = tonumber(u[7]) end
    list[1] = {id = id, value = email, is_verified = u[3] == 'true', used_for_auth = u[4] == 'true',
      created_at_millis = created, primary = true}
  end
  for _, text in ipairs(redis.call('HVALS', channels_key)) do
    local c = cjson.decode(text)
    c.primary = false
    list[#list + 1] = c
  end
  return list
end
local function copy_channels(list)
  local out = {}
  for i, c in ipairs(list) do
    local t = {}
    for k, v in pairs(c) do t[k] = v end
    out[i] = t
  end
  return out
end
local function auth_values(list)
  local s = {}
  for _, c in ipairs(list) do if c.used_for_auth == true then s[c.value] = true end end
  return s
end
local function write_channels(user_key, channels_key, index_key, user_id, before, after, next_primary_id, claim)
  local primary, had = nil, false
  for _, c in ipairs(after) do if c.primary then primary = c end end
  for _, c in ipairs(before) do if c.primary then had = true end end
  if primary then
    redis.call('HSET', user_key, 'primary_email', cjson.encode(primary.value),
      'primary_email_verified', tostring(primary.is_verified == true),
      'primary_email_auth_enabled', tostring(primary.used_for_auth == true),
      'primary_email_channel_id', cjson.encode(primary.id),
      'primary_email_channel_created_at_millis', string.format('%.0f', primary.created_at_millis))
  elseif had then
    redis.call('HSET', user_key, 'primary_email', 'null', 'primary_email_verified', 'false',
      'primary_email_auth_enabled', 'false', 'primary_email_channel_id', cjson.encode(next_primary_id),
      'primary_email_channel_created_at_millis', 'null')
  end
  redis.call('DEL', channels_key)
  for _, c in ipairs(after) do
    if not c.primary then redis.call('HSET', channels_key, c.id, channel_json(c)) end
  end
  local old, new = auth_values(before), auth_values(after)
  for value in pairs(old) do
    if not new[value] and redis.call('HGET', index_key, value) == user_id then redis.call('HDEL', index_key, value) end
  end
  if claim then redis.call('HSET', index_key, claim, user_id) end
end
local function taken(index_key, user_id, c)
  if c.used_for_auth ~= true then return false end
  local owner = redis.call('HGET', index_key, c.value)
  return owner and owner ~= user_id
end
-- The written channel's claim (identity_proto.effects.claims_address): its value when it takes the index entry
-- (used for auth, and written by a server, verified, or holding it already), else false; an unverified claim by a
-- client that ends up primary is not used for auth.
local function claimed(index_key, user_id, c, trusted)
  if c.used_for_auth ~= true then return false end
  if trusted or c.is_verified == true or redis.call('HGET', index_key, c.value) == user_id then return c.value end
  if c.primary then c.used_for_auth = false end
  return false
end
local function channels_reply(user_key, channels_key)
  return {'ok', record_json(redis.call('HGETALL', user_key)), redis.call('HGETALL', channels_key)}
end
"""


def _channel_keys(keys: KeySpace, project_id: str, user_id: str) -> tuple[str, str, str]:
    return keys.user(project_id, user_id), keys.user_channels(project_id, user_id), keys.users_by_email(project_id)


def _stored_channels(user_id: str, reply: Any) -> tuple[ContactChannel, ...]:
    stored = (contact_channel_from_json(user_id, orjson.loads(text)) for text in _pairs(reply).values())
    return tuple(sorted(stored, key=lambda c: (c.created_at_millis, c.id)))  # as the memory store lists them


def _written(reply: Any) -> UserChannels | ChannelWrite:
    status = _text(reply[0])
    if status != "ok":
        return ChannelWrite(status)
    user = _user(reply[1])
    if user is None:
        raise RuntimeError("a contact-channel script answered ok without the user")
    return UserChannels(user, _stored_channels(user.id, reply[2]))


# KEYS: user, user's channels. Returns {'ok', user as JSON, channels hash} or {'none'}.
script(
    "list_contact_channels",
    _RECORD_JSON
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'none'} end
return {'ok', record_json(redis.call('HGETALL', KEYS[1])), redis.call('HGETALL', KEYS[2])}
""",
)


@_plans(ListContactChannels)
def _list_contact_channels(keys: KeySpace, effect: ListContactChannels) -> Plan[UserChannels | None]:
    p, user_id = effect.project_id, effect.user_id
    reply = yield Script("list_contact_channels", (keys.user(p, user_id), keys.user_channels(p, user_id)))
    if _text(reply[0]) != "ok":
        return None
    result = _written(reply)
    return result if isinstance(result, UserChannels) else None


# KEYS: user order. ARGV: user key prefix, channels key prefix. Returns {user as JSON, channels hash} per user, in
# ListUsers order (one script: a consistent view of the whole project).
script(
    "list_project_contact_channels",
    _RECORD_JSON
    + """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local user = redis.call('HGETALL', ARGV[1] .. id)
  if #user > 0 then out[#out + 1] = {record_json(user), redis.call('HGETALL', ARGV[2] .. id)} end
end
return out
""",
)


@_plans(ListProjectContactChannels)
def _list_project_contact_channels(
    keys: KeySpace, effect: ListProjectContactChannels
) -> Plan[tuple[ContactChannel, ...]]:
    p = effect.project_id
    reply = yield Script("list_project_contact_channels", (keys.user_order(p),), (keys.user(p), keys.user_channels(p)))
    out: list[ContactChannel] = []
    for item in reply:
        user = _user(item[0])
        if user is not None:
            out.extend(channels_of(user, _stored_channels(user.id, item[1])))
    return tuple(out)


# KEYS: user, user's channels, e-mail index. ARGV: user id, derived primary id, next primary id, make primary
# (1/0), then the channel: id, value, used for auth (1/0), verified (1/0), created_at_millis; then trusted (1/0),
# max channels (0: no cap).
# Returns {'ok', user as JSON, channels hash} or {'user_not_found' | 'already_exists' | 'used_for_auth' |
# 'too_many'}.
script(
    "create_contact_channel",
    _RECORD_JSON
    + _CHANNEL_JSON
    + _CHANNELS
    + """
local before = read_channels(KEYS[1], KEYS[2], ARGV[2])
if not before then return {'user_not_found'} end
local new = {id = ARGV[5], value = ARGV[6], used_for_auth = ARGV[7] == '1', is_verified = ARGV[8] == '1',
  created_at_millis = tonumber(ARGV[9]), primary = false}
for _, c in ipairs(before) do if c.value == new.value then return {'already_exists'} end end
if taken(KEYS[3], ARGV[1], new) then return {'used_for_auth'} end
local cap = tonumber(ARGV[11])
if cap > 0 and #before >= cap then return {'too_many'} end
local after = copy_channels(before)
after[#after + 1] = new
if ARGV[4] == '1' then
  for _, c in ipairs(after) do c.primary = (c == new) end
end
local claim = claimed(KEYS[3], ARGV[1], new, ARGV[10] == '1')
write_channels(KEYS[1], KEYS[2], KEYS[3], ARGV[1], before, after, ARGV[3], claim)
return channels_reply(KEYS[1], KEYS[2])
""",
)


@_plans(CreateContactChannel)
def _create_contact_channel(keys: KeySpace, effect: CreateContactChannel) -> Plan[UserChannels | ChannelWrite]:
    c = effect.channel
    reply = yield Script(
        "create_contact_channel",
        _channel_keys(keys, effect.project_id, c.user_id),
        (
            c.user_id,
            derived_primary_channel_id(c.user_id),
            effect.next_primary_id,
            1 if effect.make_primary else 0,
            c.id,
            c.value,
            1 if c.used_for_auth else 0,
            1 if c.is_verified else 0,
            c.created_at_millis,
            1 if effect.trusted else 0,
            effect.max_channels,
        ),
    )
    return _written(reply)


def _maybe(value: bool | None) -> str:
    return "" if value is None else "1" if value else "0"


# KEYS: user, user's channels, e-mail index. ARGV: user id, derived primary id, next primary id, channel id, new
# value ('' unchanged), used for auth, verified, primary (each '1', '0' or '' unchanged), trusted (1/0).
# Returns {'ok', user as JSON, channels hash} or {'user_not_found' | 'channel_not_found' | 'already_exists' |
# 'used_for_auth'}.
script(
    "update_contact_channel",
    _RECORD_JSON
    + _CHANNEL_JSON
    + _CHANNELS
    + """
local before = read_channels(KEYS[1], KEYS[2], ARGV[2])
if not before then return {'user_not_found'} end
local after = copy_channels(before)
local found = nil
for _, c in ipairs(after) do if c.id == ARGV[4] then found = c end end
if not found then return {'channel_not_found'} end
if ARGV[5] ~= '' and ARGV[5] ~= found.value then
  for _, c in ipairs(before) do if c.value == ARGV[5] then return {'already_exists'} end end
  found.value = ARGV[5]
  found.is_verified = false
end
if ARGV[6] ~= '' then found.used_for_auth = ARGV[6] == '1' end
if ARGV[7] ~= '' then found.is_verified = ARGV[7] == '1' end
if taken(KEYS[3], ARGV[1], found) then return {'used_for_auth'} end
if ARGV[8] == '1' then
  for _, c in ipairs(after) do c.primary = (c == found) end
elseif ARGV[8] == '0' then
  found.primary = false
end
local claim = claimed(KEYS[3], ARGV[1], found, ARGV[9] == '1')
write_channels(KEYS[1], KEYS[2], KEYS[3], ARGV[1], before, after, ARGV[3], claim)
return channels_reply(KEYS[1], KEYS[2])
""",
)


@_plans(UpdateContactChannel)
def _update_contact_channel(keys: KeySpace, effect: UpdateContactChannel) -> Plan[UserChannels | ChannelWrite]:
    args: tuple[Arg, ...] = (
        effect.user_id,
        derived_primary_channel_id(effect.user_id),
        effect.next_primary_id,
        effect.channel_id,
        effect.value or "",
        _maybe(effect.used_for_auth),
        _maybe(effect.is_verified),
        _maybe(effect.is_primary),
        1 if effect.trusted else 0,
    )
    reply = yield Script("update_contact_channel", _channel_keys(keys, effect.project_id, effect.user_id), args)
    return _written(reply)


# KEYS: user, user's channels, e-mail index. ARGV: user id, derived primary id, next primary id, channel id.
# Returns {'ok', user as JSON, channels hash} or {'user_not_found' | 'channel_not_found'}.
script(
    "delete_contact_channel",
    _RECORD_JSON
    + _CHANNEL_JSON
    + _CHANNELS
    + """
local before = read_channels(KEYS[1], KEYS[2], ARGV[2])
if not before then return {'user_not_found'} end
local after, found = {}, false
for _, c in ipairs(copy_channels(before)) do
  if c.id == ARGV[4] then found = true else after[#after + 1] = c end
end
if not found then return {'channel_not_found'} end
write_channels(KEYS[1], KEYS[2], KEYS[3], ARGV[1], before, after, ARGV[3], false)
return channels_reply(KEYS[1], KEYS[2])
""",
)


@_plans(DeleteContactChannel)
def _delete_contact_channel(keys: KeySpace, effect: DeleteContactChannel) -> Plan[UserChannels | ChannelWrite]:
    args = (effect.user_id, derived_primary_channel_id(effect.user_id), effect.next_primary_id, effect.channel_id)
    reply = yield Script("delete_contact_channel", _channel_keys(keys, effect.project_id, effect.user_id), args)
    return _written(reply)


# KEYS: code, nonce counter, e-mail index. ARGV: purpose (JSON), now_ms, max_attempts, consume ('1'), orphan TTL
# (ms), user key prefix, channels key prefix. Returns the attempt's reply ({outcome} or {outcome, code}) and, on
# 'ok', a third element: 1 when the code's channel (its user_id and email) was found and marked verified, else 0.
# The code is consumed either way. A verified auth channel takes its address in the index if nobody holds it (the
# first verification wins).
script(
    "verify_contact_channel",
    _FIELDS
    + _ATTEMPT_CODE
    + _CHANNEL_JSON
    + """
local reply, f = attempt_code(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if reply[1] ~= 'ok' then return reply end
local uid, email = cjson.decode(f['user_id'] or 'null'), cjson.decode(f['email'] or 'null')
if type(uid) ~= 'string' or type(email) ~= 'string' then return {'ok', reply[2], 0} end
local ukey, ckey = ARGV[6] .. uid, ARGV[7] .. uid
local u = redis.call('HMGET', ukey, 'id', 'primary_email')
if not u[1] then return {'ok', reply[2], 0} end
if u[2] and cjson.decode(u[2]) == email then
  redis.call('HSET', ukey, 'primary_email_verified', 'true')
  return {'ok', reply[2], 1}
end
local stored = redis.call('HGETALL', ckey)
for i = 1, #stored, 2 do
  local c = cjson.decode(stored[i + 1])
  if c.value == email then
    c.is_verified = true
    redis.call('HSET', ckey, stored[i], channel_json(c))
    if c.used_for_auth == true then redis.call('HSETNX', KEYS[3], email, uid) end
    return {'ok', reply[2], 1}
  end
end
return {'ok', reply[2], 0}
""",
)


@_plans(VerifyContactChannel)
def _verify_contact_channel(keys: KeySpace, effect: VerifyContactChannel) -> Plan[ChannelVerification]:
    attempt, p = effect.attempt, effect.attempt.project_id
    reply = yield Script(
        "verify_contact_channel",
        (keys.code(p, attempt.code_hash), keys.nonce(p, attempt.nonce_hash), keys.users_by_email(p)),
        (
            _json(attempt.purpose),
            attempt.now_ms,
            attempt.max_attempts,
            "1",
            ORPHAN_NONCE_TTL_MS,
            keys.user(p),
            keys.user_channels(p),
        ),
    )
    outcome = CodeOutcome(_text(reply[0]))
    code_attempt = CodeAttempt(outcome, _code(reply[1]) if len(reply) > 1 else None)
    return ChannelVerification(code_attempt, channel_found=len(reply) > 2 and int(reply[2]) == 1)
