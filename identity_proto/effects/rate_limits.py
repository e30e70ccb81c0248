"""Rate limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from identity_proto.effects.base import StorageEffect

if TYPE_CHECKING:
    from identity_proto.records import ClockOverride


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


@dataclass(frozen=True, slots=True)
class Admission:
    """What `Admit` did: each counter's value after its hit (`counts`, in order); whether the effect ran
    (`performed`) and its result (None when it did not); the clock override it found (with `clock_gate`; the effect
    did not run when one is set)."""

    counts: tuple[int, ...]
    performed: bool
    result: Any = None
    clock_override: ClockOverride | None = None


@dataclass(frozen=True, slots=True)
class Admit(StorageEffect[Admission]):
    """A request's first write and what decides whether it may run, in one step: add each of `counter`'s hits (as
    `HitRateLimits` does) and, with `clock_gate`, read the clock override (dev mode, `LoadClockOverride`); then
    perform `effect` only when no counter went past its limit (`limits[i]`: the most counter `i` may reach) and no
    override is set. A request over a limit or on a moved clock so writes nothing, and pays no round trip of its
    own to learn it (`preconditions.guarded`, `Service._on_test_clock`).

    Atomic where the store can (the memory store; a single Redis server: the counters and the clock are read in the
    script that performs `effect`, or just before the effect's first command); on a Redis Cluster the counters
    live in other slots than a project's keys, so there they go first, in a trip of their own, and `effect` after
    them: the same answer, one more trip. `counter` may have no hits (only the clock is looked at)."""

    effect: StorageEffect[Any]
    counter: HitRateLimits
    limits: tuple[int, ...] = ()
    clock_gate: bool = False

    def admits(self, counts: tuple[int, ...]) -> bool:
        """Whether `counts` (the counters after their hits) are all within `limits`."""
        for count, limit in zip(counts, self.limits, strict=True):  # noqa: SIM110 - see `preconditions._reads`
            if count > limit:
                return False
        return True
