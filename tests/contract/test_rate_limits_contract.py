"""Contract of HitRateLimits over every store: counts per key, in order, never losing a concurrent hit."""

from __future__ import annotations

import threading

from identity_proto.drivers import Store
from identity_proto.effects import HitRateLimits, RateLimitHit
from tests.contract.factories import T0


def test_each_counter_counts_its_hits_in_order(store: Store) -> None:
    a, b = RateLimitHit("rl:ip:1.2.3.4:0", T0), RateLimitHit("rl:project:p:0", T0)
    assert store.apply(HitRateLimits((a, b), T0 - 1)) == (1, 1)
    assert store.apply(HitRateLimits((a,), T0 - 1)) == (2,)
    assert store.apply(HitRateLimits((b, a), T0 - 1)) == (2, 3)
    assert store.apply(HitRateLimits((), T0 - 1)) == ()


def test_concurrent_hits_are_never_lost(store: Store) -> None:
    hit = RateLimitHit("rl:sign_in_ip:9.9.9.9:0", T0)

    def hammer() -> None:
        for _ in range(25):
            store.apply(HitRateLimits((hit,), T0 - 1))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.apply(HitRateLimits((hit,), T0 - 1)) == (201,)
