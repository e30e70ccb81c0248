"""The contract of `Admit` over every store: a request's first write behind its rate counters and (dev mode) the
clock override, in one step. Within the limits and on no override the write runs and its result comes back with the
counts; a counter past its limit, or an override set, and it does not run at all (the code is not spent, its nonce
not counted), while the counters count. On Redis the same runs twice: on one server (the write's script behind the
prelude, one command) and as on a Cluster (the prelude's pipeline first, then the write): `KeySpace.one_node`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from backends.redis import RedisStore
from backends.redis.keys import KeySpace
from identity_proto.drivers import Store
from identity_proto.effects import (
    Admission,
    Admit,
    CodeOutcome,
    Committed,
    HitRateLimits,
    PutShortLived,
    RateLimitHit,
    SetClockOverride,
    ShortLived,
    TakeShortLived,
)
from identity_proto.records import ClockOverride
from tests.contract.factories import PROJECT, T0, make_code, make_user, put_code
from tests.contract.test_codes_contract import NOW, attempt

WINDOW_END = NOW + 60_000


def counter(*keys: str, amount: int = 1) -> HitRateLimits:
    return HitRateLimits(tuple(RateLimitHit(key, WINDOW_END, amount) for key in keys), NOW)


def admit_code_attempt_within_the_limits(store: Store) -> None:
    code = make_code("within")
    store.apply(put_code(PROJECT, code))
    admission = store.apply(Admit(attempt(code), counter("rl:a", "rl:b"), (2, 2)))
    assert admission.performed
    assert admission.counts == (1, 1)
    assert admission.clock_override is None
    assert admission.result.outcome is CodeOutcome.OK
    again = store.apply(Admit(attempt(code), counter("rl:a", "rl:b"), (2, 2)))
    assert again.counts == (2, 2)
    assert again.result.outcome is CodeOutcome.ALREADY_USED


def admit_refuses_past_a_limit_and_writes_nothing(store: Store) -> None:
    code = make_code("over")
    store.apply(put_code(PROJECT, code))
    store.apply(counter("rl:full", amount=3))
    admission = store.apply(Admit(attempt(code), counter("rl:free", "rl:full"), (5, 3)))
    assert admission == Admission((1, 4), False, None, None)
    # Neither the code spent nor an attempt counted on its nonce: the only attempt allowed still succeeds.
    assert store.apply(attempt(code, max_attempts=1)).outcome is CodeOutcome.OK
    # Both counters counted, the refused request too (a limit counts requests, not admitted ones).
    assert store.apply(counter("rl:free", "rl:full", amount=0)) == (1, 4)


def admit_behind_the_clock_gate(store: Store) -> None:
    code = make_code("gated")
    store.apply(put_code(PROJECT, code))
    store.apply(SetClockOverride(ClockOverride(frozen_ms=T0)))
    held = store.apply(Admit(attempt(code), counter("rl:gate"), (10,), clock_gate=True))
    assert held == Admission((1,), False, None, ClockOverride(frozen_ms=T0))
    assert store.apply(attempt(code, max_attempts=1)).outcome is CodeOutcome.OK  # untouched by the held attempt
    store.apply(SetClockOverride(None))
    other = make_code("gated-2")
    store.apply(put_code(PROJECT, other))
    admitted = store.apply(Admit(attempt(other), counter("rl:gate"), (10,), clock_gate=True))
    assert admitted.performed
    assert admitted.counts == (2,)
    assert admitted.result.outcome is CodeOutcome.OK


def admit_a_commit_and_a_plain_write_with_no_counter(store: Store) -> None:
    nothing = HitRateLimits((), NOW)
    committed = store.apply(Admit(put_code(PROJECT, make_code("commit")), nothing, clock_gate=True))
    assert committed.performed
    assert committed.counts == ()
    assert isinstance(committed.result, Committed)
    # a write whose Redis plan starts with a plain command (not a script): the prelude goes before it
    put = PutShortLived(ShortLived.OUTER_CODE, "k", "v", NOW, NOW + 1_000, project_id=PROJECT)
    kept = store.apply(Admit(put, counter("rl:plain"), (1,), clock_gate=True))
    assert kept == Admission((1,), True, True, None)
    refused = store.apply(
        Admit(
            PutShortLived(ShortLived.OUTER_CODE, "k2", "v", NOW, NOW + 1_000, project_id=PROJECT),
            counter("rl:plain"),
            (1,),
        )
    )
    assert refused == Admission((2,), False, None, None)
    assert store.apply(TakeShortLived(ShortLived.OUTER_CODE, "k2", project_id=PROJECT)) is None
    assert store.apply(TakeShortLived(ShortLived.OUTER_CODE, "k", project_id=PROJECT)) == "v"


def admit_a_user_commit(store: Store) -> None:
    from tests.contract.factories import add_user

    admission = store.apply(
        Admit(add_user(PROJECT, make_user("admitted", "admitted@example.com")), counter("rl:u"), (1,))
    )
    assert admission.performed
    assert isinstance(admission.result, Committed)
    refused = store.apply(Admit(add_user(PROJECT, make_user("refused", "refused@example.com")), counter("rl:u"), (1,)))
    assert not refused.performed
    assert refused.counts == (2,)


SCENARIOS: list[Callable[[Store], None]] = [
    admit_code_attempt_within_the_limits,
    admit_refuses_past_a_limit_and_writes_nothing,
    admit_behind_the_clock_gate,
    admit_a_commit_and_a_plain_write_with_no_counter,
    admit_a_user_commit,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.__name__)
def test_admit(store: Store, scenario: Callable[[Store], None]) -> None:
    scenario(store)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.__name__)
def test_admit_as_on_a_cluster(redis_store: RedisStore, scenario: Callable[[Store], None]) -> None:
    redis_store.keys = KeySpace(redis_store.keys.namespace, one_node=False)
    commands: list[str] = []
    execute = redis_store._execute

    def counting(op: object) -> object:
        commands.append(type(op).__name__)
        return execute(op)  # type: ignore[arg-type]

    redis_store._execute = counting  # type: ignore[method-assign]
    scenario(redis_store)
    assert "Batch" in commands  # the prelude went as a pipeline of its own
