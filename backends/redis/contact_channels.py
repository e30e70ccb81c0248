"""Contact channels (identity_proto.effects.contact_channels has the design and every rule): the primary channel
is the user's ``primary_email*`` fields, the others one hash per user (``user-channels``: channel id -> JSON), their
auth addresses in the e-mail index.

Reads are scripts (a consistent view: the user, their channels and the index entries of their addresses in one
step). Writes are a commit's (`backends.redis.commit`): a stored channel put (HSET) or dropped (HDEL), the user's
stored channels guarded as read (HLEN and each entry's text), a one-time code used. No Lua here decides anything.
Every key is one of the project's (hash tag ``{p:<id>}``).
"""

from __future__ import annotations

from typing import Any

import orjson

from backends.redis.codecs import _pairs, _text, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.lua import _RECORD_JSON
from backends.redis.plan import Plan, Script, _plans, script
from identity_proto.effects import (
    ChannelsAre,
    CodeIsUnused,
    DropChannel,
    ListContactChannels,
    ListProjectContactChannels,
    PutChannel,
    UseCode,
    UserChannels,
    channels_of,
)
from identity_proto.records import ContactChannel, contact_channel_from_json, contact_channel_to_json


def _stored_channels(user_id: str, reply: Any) -> tuple[ContactChannel, ...]:
    stored = (contact_channel_from_json(user_id, orjson.loads(text)) for text in _pairs(reply).values())
    return tuple(sorted(stored, key=lambda c: (c.created_at_millis, c.id)))  # as the memory store lists them


def channel_text(channel: ContactChannel) -> str:
    """A stored channel's JSON text, as every write stores it (so a guard can compare it)."""
    return orjson.dumps(contact_channel_to_json(channel)).decode()


#: Lua: the user at `user_key`, their channels (`channels_key`) and the e-mail index entries of `addresses` and of
#: their channels' addresses: {'ok', user as JSON, channels hash, addresses, their index entries}, or {'none'}.
#: Needs `_RECORD_JSON`.
_LIST_CHANNELS = """
local function list_channels(user_key, channels_key, index_key, addresses)
  if redis.call('EXISTS', user_key) == 0 then return {'none'} end
  local channels = redis.call('HGETALL', channels_key)
  local primary = redis.call('HGET', user_key, 'primary_email')
  if primary and primary ~= 'null' then addresses[#addresses + 1] = cjson.decode(primary) end
  for i = 2, #channels, 2 do addresses[#addresses + 1] = cjson.decode(channels[i]).value end
  local holders = {}
  if #addresses > 0 then holders = redis.call('HMGET', index_key, unpack(addresses)) end
  return {'ok', record_json(redis.call('HGETALL', user_key)), channels, addresses, holders}
end
"""

# KEYS: user, user's channels, e-mail index. ARGV: addresses. Returns what `list_channels` does.
script(
    "list_contact_channels",
    _RECORD_JSON
    + _LIST_CHANNELS
    + """
local addresses = {}
for _, a in ipairs(ARGV) do addresses[#addresses + 1] = a end
return list_channels(KEYS[1], KEYS[2], KEYS[3], addresses)
""",
)


def user_channels(reply: Any) -> UserChannels | None:
    """A `list_channels` reply, read."""
    if _text(reply[0]) != "ok":
        return None
    user = _user(reply[1])
    if user is None:
        return None
    holders = {_text(a): (None if h is None else _text(h)) for a, h in zip(reply[3], reply[4], strict=True)}
    return UserChannels(user, _stored_channels(user.id, reply[2]), dict(sorted(holders.items())))


@_plans(ListContactChannels)
def _list_contact_channels(keys: KeySpace, effect: ListContactChannels) -> Plan[UserChannels | None]:
    p, user_id = effect.project_id, effect.user_id
    reply = yield Script(
        "list_contact_channels",
        (keys.user(p, user_id), keys.user_channels(p, user_id), keys.users_by_email(p)),
        effect.addresses,
    )
    return user_channels(reply)


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


@guards(ChannelsAre)
def _channels_are(ops: Ops, position: int, guard: ChannelsAre) -> None:
    channels_key = ops.key(ops.space.user_channels(ops.project_id, guard.user_id))
    ops.guards.append([position, "hlen", channels_key, len(guard.stored)])
    for channel in guard.stored:
        ops.guards.append([position, "hget", channels_key, channel.id, channel_text(channel)])


@writes(PutChannel)
def _put_channel(ops: Ops, write: PutChannel) -> None:
    channel = write.channel
    channels_key = ops.key(ops.space.user_channels(ops.project_id, channel.user_id))
    ops.writes.append(["hset", channels_key, channel.id, channel_text(channel)])


@writes(DropChannel)
def _drop_channel(ops: Ops, write: DropChannel) -> None:
    ops.writes.append(["hdel", ops.key(ops.space.user_channels(ops.project_id, write.user_id)), write.channel_id])


@guards(CodeIsUnused)
def _code_is_unused(ops: Ops, position: int, guard: CodeIsUnused) -> None:
    ops.guards.append([position, "hget", ops.key(ops.space.code(ops.project_id, guard.code_hash)), "used", "false"])


@writes(UseCode)
def _use_code(ops: Ops, write: UseCode) -> None:
    ops.writes.append(["hset", ops.key(ops.space.code(ops.project_id, write.code_hash)), "used", "true"])
