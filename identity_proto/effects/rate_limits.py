"""Rate limits."""

from __future__ import annotations

from dataclasses import dataclass

from identity_proto.effects.base import StorageEffect


@dataclass(frozen=True, slots=True)
class RateLimitHit:
    """One request counted in one fixed window: the counter `key` (window start included) lives until
    `expires_at_millis`. `amount` 0 reads the counter without counting (a failure limit looks before it acts)."""

    key: str
    expires_at_millis: int
    amount: int = 1


@dataclass(frozen=True, slots=True)
class HitRateLimits(StorageEffect[tuple[int, ...]]):
    """Add each hit's `amount` to its counter, and return each counter's value afterwards (in order). Each increment
    is atomic (concurrent requests never lose a count); the counters need not be one transaction. Counters whose
    window ended before `now_ms` may be forgotten."""

    hits: tuple[RateLimitHit, ...]
    now_ms: int
