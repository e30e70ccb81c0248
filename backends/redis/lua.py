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
#: (`TrimWebhookData` applies the configured retention). Returns the entry id.
_EMIT_EVENT = f"""
local function emit_event(events_key, event_type, record, team, ids)
  local id = redis.call('XADD', events_key, 'MAXLEN', '~', {EVENTS_HARD_CAP}, '*',
    't', event_type, 'r', record, 'm', team, 'i', ids)
  redis.call('PEXPIRE', events_key, {EVENTS_IDLE_TTL_MS})
  return id
end
"""
