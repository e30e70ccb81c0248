"""The memory store: rate limits."""

from __future__ import annotations

from backends.memory.store import MemoryStore, _performs
from identity_proto.effects import HitRateLimits

#: Expired counters are swept when this many exist (they are tiny; the sweep keeps memory bounded).
_RATE_SWEEP_AT = 10_000


@_performs(HitRateLimits)
def _hit_rate_limits(store: MemoryStore, effect: HitRateLimits) -> tuple[int, ...]:
    counters = store.rate_counters
    counts: list[int] = []
    for hit in effect.hits:
        count = counters.get(hit.key, (0, 0))[0] + hit.amount
        counters[hit.key] = (count, hit.expires_at_millis)
        counts.append(count)
    if len(counters) > _RATE_SWEEP_AT:
        for key in [k for k, (_, expires) in counters.items() if expires <= effect.now_ms]:
            del counters[key]
    return tuple(counts)
