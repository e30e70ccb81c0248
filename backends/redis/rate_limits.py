"""Rate-limit counters (identity_proto.ratelimits): one pipeline of INCRBY + PEXPIREAT per request."""

from __future__ import annotations

from backends.redis.keys import RATE_COUNTER_GRACE_MS, KeySpace
from backends.redis.plan import Batch, Call, Plan, _plans
from identity_proto.effects import HitRateLimits


@_plans(HitRateLimits)
def _hit_rate_limits(keys: KeySpace, effect: HitRateLimits) -> Plan[tuple[int, ...]]:
    # One round trip for every counter of a request: INCR is atomic per counter (no count is ever lost), and the
    # expiry, set with each hit, ends the counter a little after its window (GC only; the window is in the key).
    calls: list[Call] = []
    for hit in effect.hits:
        counter = keys.rate_counter(hit.key)
        calls += [
            Call("INCRBY", counter, hit.amount),
            Call("PEXPIREAT", counter, hit.expires_at_millis + RATE_COUNTER_GRACE_MS),
        ]
    replies = yield Batch(tuple(calls))
    return tuple(int(reply) for reply in replies[0::2])
