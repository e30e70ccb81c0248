"""Lua functions several scripts share (each script is the concatenation of the functions it needs and its
body: Redis runs it as one chunk)."""

from __future__ import annotations

from identity_proto.effects.webhooks import EVENTS_HARD_CAP, EVENTS_IDLE_TTL_MS

#: Lua: a record hash of JSON fields (HGETALL's flat list) as the text of one JSON object, made by joining the
#: stored texts (never re-encoded: cjson would turn [] into {} and round numbers to 14 digits). The field names
#: are the record's field names (identifiers: nothing to escape). The reader decodes it with one `orjson.loads`
#: instead of one per field: about 9 us less Python CPU per user read, 3-4 us more on the server (measured).
_RECORD_JSON = """
local function record_json(fields)
  local parts = {}
  for i = 1, #fields, 2 do parts[#parts + 1] = '"' .. fields[i] .. '":' .. fields[i + 1] end
  return '{' .. table.concat(parts, ',') .. '}'
end
"""

#: Lua: a record's fields as a table, from an HGETALL reply.
_FIELDS = """
local function fields(reply)
  local t = {}
  for i = 1, #reply, 2 do t[reply[i]] = reply[i + 1] end
  return t
end
"""

#: Lua: record an event of the project in its events stream (`KeySpace.events`), in the commit that makes the change
#: it describes (the transactional outbox: `identity_proto.events`). `record` and `team` are JSON texts of stored
#: records (`record_json` of their hashes) or '' for none; `ids` the payload's ids joined by newlines ('' for none).
#: The stream id (Redis's clock, unique within the stream) with the project's tag becomes the message id
#: (`msg_<tag><stream id>`, `identity_proto.events.message_id`). The hard cap
#: and the idle TTL (`EVENTS_HARD_CAP`, `EVENTS_IDLE_TTL_MS`) only bound a stream no delivery loop trims
#: (`TrimWebhookData` applies the configured retention).
_EMIT_EVENT = f"""
local function emit_event(events_key, event_type, record, team, ids)
  redis.call('XADD', events_key, 'MAXLEN', '~', {EVENTS_HARD_CAP}, '*',
    't', event_type, 'r', record, 'm', team, 'i', ids)
  redis.call('PEXPIRE', events_key, {EVENTS_IDLE_TTL_MS})
end
"""

# The webhook delivery scripts' shared functions (`backends.redis.webhooks`).
#: Lua: stream entry ids (``<ms>-<seq>``): `wh_less` compares two; `wh_sortable` makes the text whose byte order is
#: theirs (each part 20 digits: the first part of a delivery id, `keys.webhook_delivery_id`), `wh_entry_id` undoes
#: it; `wh_next` is the id right after one. Numbers are exact: ms and seq stay far below 2**53.
_WEBHOOK_IDS = """
local function wh_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)')
  return tonumber(ms), tonumber(seq)
end
local function wh_less(a, b)
  local am, as = wh_parts(a)
  local bm, bs = wh_parts(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local function wh_sortable(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return string.rep('0', 20 - #ms) .. ms .. '-' .. string.rep('0', 20 - #seq) .. seq
end
local function wh_entry_id(sortable)
  local ms, seq = wh_parts(sortable)
  return string.format('%.0f-%.0f', ms, seq)
end
local function wh_next(id)
  local ms, seq = wh_parts(id)
  return string.format('%.0f-%.0f', ms, seq + 1)
end
"""

#: Lua: make a pending delivery of stream entry `entry_id` (message `message_id`: `msg_` + the project's tag + the
#: entry id, `keys.KeySpace.webhook_message_tag`) to an endpoint, due at `now` (its hash, its places in the due set,
#: the pending set and the endpoint's index). Needs `_WEBHOOK_IDS`.
_WEBHOOK_NEW_DELIVERY = """
local function wh_new_delivery(delivery_prefix, due, pending, index, endpoint_id, entry_id, message_id, event_type,
    now)
  local sortable = wh_sortable(entry_id)
  local did = sortable .. ':' .. endpoint_id
  local key = delivery_prefix .. did
  redis.call('DEL', key)
  redis.call('HSET', key, 'endpoint_id', endpoint_id, 'message_id', message_id, 'event_type', event_type,
    'state', 'pending', 'next_attempt_at_millis', now, 'attempts', '[]', 'created_at_millis', now, 'failures', '0',
    'claim', '', 'last_attempt_at_millis', '')
  redis.call('ZADD', due, now, did)
  redis.call('ZADD', pending, 0, did)
  redis.call('ZADD', index, 0, sortable)
end
"""

#: Lua: settle a delivery (`state` succeeded or failed) whose last attempt (or give-up) was at `at`: out of the due
#: and pending sets, into the settled set scored by `at`, its hash expiring after `ttl` ms.
_WEBHOOK_SETTLE = """
local function wh_settle(key, did, state, at, due, pending, settled, ttl)
  redis.call('HSET', key, 'state', state, 'next_attempt_at_millis', '', 'claim', '', 'last_attempt_at_millis', at)
  redis.call('ZREM', due, did)
  redis.call('ZREM', pending, did)
  redis.call('ZADD', settled, at, did)
  redis.call('PEXPIRE', key, ttl)
end
"""
