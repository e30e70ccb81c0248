"""The outbox: sent e-mail, newest first."""

from __future__ import annotations

from backends.redis.codecs import _email, _outbox_prefix, _required
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, _plans
from backends.redis.read import FIRST, LAST, MEMBER, each, key, read
from identity_proto.effects import ListOutbox
from identity_proto.records import Email


@_plans(ListOutbox)
def _list_outbox(keys: KeySpace, effect: ListOutbox) -> Plan[tuple[Email, ...]]:
    if effect.limit <= 0:
        return ()
    outbox = keys.outbox(effect.project_id)
    if effect.to is None:
        items = yield Call("LRANGE", outbox, 0, effect.limit - 1)
    else:
        # The first `limit` items (newest first) that start with the address's prefix, 200 read at a time.
        item = {"v": MEMBER, "pre": _outbox_prefix(effect.to), "need": 1, "out": 1}
        reply = yield read(
            (outbox,), [each("LRANGE", key(1), FIRST, LAST, do=[item], page=200, limit=effect.limit, out=1)]
        )
        items = reply[0]
    return tuple(_required(_email(item)) for item in items)
