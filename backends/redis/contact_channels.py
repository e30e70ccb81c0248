"""Contact channels (identity_proto.effects.contact_channels has the design and every rule): the primary channel
is the user's ``primary_email*`` fields, the others one hash per user (``user-channels``: channel id -> JSON), their
auth addresses in the e-mail index. A read is a consistent view: the user, their channels and the index entries of
their addresses in one step."""

from __future__ import annotations

from typing import Any

import orjson

from backends.redis.codecs import _pairs, _required, _text, _user
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import KeySpace
from backends.redis.plan import Plan, _plans
from backends.redis.read import MEMBER, call, cat, each, key, read
from identity_proto.effects import (
    ChannelsAre,
    CodeIsUnused,
    DropChannel,
    InvitationIsUnused,
    ListContactChannels,
    ListProjectContactChannels,
    PutChannel,
    UseCode,
    UseInvitation,
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


def channel_steps(user: Any, channels: Any, index: Any, addresses: list[Any], n: int = 0) -> list[dict[str, Any]]:
    """Read steps (after `n` others): the user (needed), their channels, the addresses (`addresses`, the primary,
    the channels'), and the index entries of those addresses (false when none). What `user_channels` reads."""
    return [
        call("HGETALL", user, t="r", need=1, out=1),
        call("HGETALL", channels, out=1),
        call("HGET", user, "primary_email", t="j"),
        call("HVALS", channels, t="j", f="value"),
        {"list": [*addresses, {"s": n + 3}, {"s": n + 4}], "out": 1},
        call("HMGET", index, {"s": n + 5}, out=1),
    ]


def user_channels(reply: Any) -> UserChannels | None:
    """A `channel_steps` reply, read."""
    user = _user(reply[0]) if reply else None
    if user is None:
        return None
    holders = {_text(a): (None if h is None else _text(h)) for a, h in zip(reply[2], reply[3] or (), strict=True)}
    return UserChannels(user, _stored_channels(user.id, reply[1]), dict(sorted(holders.items())))


@_plans(ListContactChannels)
def _list_contact_channels(keys: KeySpace, effect: ListContactChannels) -> Plan[UserChannels | None]:
    p, user_id = effect.project_id, effect.user_id
    steps = channel_steps(key(1), key(2), key(3), list(effect.addresses))
    return user_channels(
        (yield read((keys.user(p, user_id), keys.user_channels(p, user_id), keys.users_by_email(p)), steps))
    )


@_plans(ListProjectContactChannels)
def _list_project_contact_channels(
    keys: KeySpace, effect: ListProjectContactChannels
) -> Plan[tuple[ContactChannel, ...]]:
    # Every user in ListUsers order with their stored channels (one script: a consistent view of the project).
    p = effect.project_id
    user = call("HGETALL", cat(keys.user(p, ""), MEMBER), t="r", need=1, out=1)
    channels = call("HGETALL", cat(keys.user_channels(p, ""), MEMBER), out=1)
    reply = yield read((keys.user_order(p),), [each("ZRANGE", key(1), 0, -1, do=[user, channels], out=1)])
    out: list[ContactChannel] = []
    items = iter(reply[0])
    for user_json, stored in zip(items, items, strict=True):
        found = _required(_user(user_json))
        out.extend(channels_of(found, _stored_channels(found.id, stored)))
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


def _code_is_unused(ops: Ops, position: int, guard: CodeIsUnused | InvitationIsUnused) -> None:
    ops.guards.append([position, "hget", ops.key(ops.space.code(ops.project_id, guard.code_hash)), "used", "false"])


guards(CodeIsUnused)(_code_is_unused)
guards(InvitationIsUnused)(_code_is_unused)


def _use_code(ops: Ops, write: UseCode | UseInvitation) -> None:
    ops.writes.append(["hset", ops.key(ops.space.code(ops.project_id, write.code_hash)), "used", "true"])


writes(UseCode)(_use_code)
writes(UseInvitation)(_use_code)
