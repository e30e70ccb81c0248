"""The outbox: sent e-mail, newest first.

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Shared Lua functions are in `backends.redis.lua`; key names in `backends.redis.keys`.
"""

from __future__ import annotations

from backends.redis.codecs import _email, _outbox_prefix
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, Script, _plans, script
from identity_proto.effects import ListOutbox
from identity_proto.records import Email

# KEYS: outbox. ARGV: item prefix ('{"to":<JSON address>,'), limit (> 0). Returns the first `limit` items
# (newest first) that start with the prefix, reading the list 200 items at a time.
script(
    "list_outbox_to",
    """
local prefix, limit = ARGV[1], tonumber(ARGV[2])
local out, start = {}, 0
while #out < limit do
  local page = redis.call('LRANGE', KEYS[1], start, start + 199)
  if #page == 0 then break end
  for _, item in ipairs(page) do
    if string.sub(item, 1, #prefix) == prefix then
      out[#out + 1] = item
      if #out >= limit then break end
    end
  end
  start = start + 200
end
return out
""",
)


@_plans(ListOutbox)
def _list_outbox(keys: KeySpace, effect: ListOutbox) -> Plan[tuple[Email, ...]]:
    if effect.limit <= 0:
        return ()
    outbox = keys.outbox(effect.project_id)
    if effect.to is None:
        items = yield Call("LRANGE", outbox, 0, effect.limit - 1)
    else:
        items = yield Script("list_outbox_to", (outbox,), (_outbox_prefix(effect.to), effect.limit))
    return tuple(_email(item) for item in items)
