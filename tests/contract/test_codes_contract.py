"""The one-time code contract over every store: storing a code (a commit's `PutCode`), presenting it
(`AttemptVerificationCode`), using it (a commit's `UseCode` under `CodeIsUnused`); TTLs (expiry plus `GRACE_MS`) on
the Redis stores."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from backends.memory import MemoryStore
from backends.redis import GRACE_MS, ORPHAN_NONCE_TTL_MS, RedisStore
from identity_proto.drivers import Store, arun
from identity_proto.effects import (
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    Committed,
    Conflict,
    perform,
)
from identity_proto.records import CodePurpose, VerificationCode
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import (
    CODE_LIFETIME_MS,
    OTHER_PROJECT,
    PROJECT,
    T0,
    in_threads,
    make_code,
    put_code,
    use_code,
)

NOW = T0 + 1_000  # while a `make_code` code is valid


def attempt(
    code: VerificationCode,
    *,
    code_hash: str | None = None,
    nonce_hash: str | None = None,
    purpose: str | None = None,
    now_ms: int = NOW,
    consume: bool = True,
    max_attempts: int = 20,
    project_id: str = PROJECT,
) -> AttemptVerificationCode:
    """An attempt at `code`, by default with its own hashes and purpose while it is valid."""
    return AttemptVerificationCode(
        project_id,
        code_hash=code.code_hash if code_hash is None else code_hash,
        nonce_hash=code.nonce_hash if nonce_hash is None else nonce_hash,
        purpose=code.purpose if purpose is None else purpose,
        now_ms=now_ms,
        consume=consume,
        max_attempts=max_attempts,
    )


def used(code: VerificationCode) -> VerificationCode:
    return dataclasses.replace(code, used=True)


# --------------------------------------------------------------------------------------------------------------
# Round trip and OK


def test_attempt_returns_the_code_with_every_field_as_stored(store: Store) -> None:
    code = make_code("rich", purpose=CodePurpose.MFA, email="zoë@exämple.com ✓", user_id="user-ü", is_new_user=True)
    store.apply(put_code(PROJECT, code))

    result = store.apply(attempt(code, consume=False))

    assert result == CodeAttempt(CodeOutcome.OK, code)
    assert result.code is not None
    assert result.code.email == "zoë@exämple.com ✓"
    assert result.code.user_id == "user-ü"
    assert result.code.is_new_user is True
    assert result.code.expires_at_millis == T0 + CODE_LIFETIME_MS


def test_attempt_round_trips_absent_optional_fields(store: Store) -> None:
    code = make_code("plain")
    store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(code, consume=False)) == CodeAttempt(CodeOutcome.OK, code)


def test_an_attempt_without_consume_leaves_the_code_usable(store: Store) -> None:
    code = make_code("reusable")
    store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(code, consume=False)).outcome is CodeOutcome.OK
    assert store.apply(attempt(code, consume=False)).outcome is CodeOutcome.OK
    assert store.apply(attempt(code, consume=True)) == CodeAttempt(CodeOutcome.OK, code)  # the code as it was


def test_a_consuming_attempt_uses_the_code(store: Store) -> None:
    code = make_code("once")
    store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(code)) == CodeAttempt(CodeOutcome.OK, code)
    assert store.apply(attempt(code)) == CodeAttempt(CodeOutcome.ALREADY_USED, used(code))
    assert store.apply(attempt(code, consume=False)) == CodeAttempt(CodeOutcome.ALREADY_USED, used(code))


# --------------------------------------------------------------------------------------------------------------
# One test per outcome, and their order


def test_not_found_for_a_missing_code(store: Store) -> None:
    assert store.apply(attempt(make_code("missing"))) == CodeAttempt(CodeOutcome.NOT_FOUND, None)


def test_a_code_of_the_other_purpose_is_not_found(store: Store) -> None:
    code = make_code("sign-in", purpose=CodePurpose.SIGN_IN)
    store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(code, purpose=CodePurpose.MFA)) == CodeAttempt(CodeOutcome.NOT_FOUND, None)
    # and that attempt neither used it
    assert store.apply(attempt(code)) == CodeAttempt(CodeOutcome.OK, code)


def test_a_code_of_another_project_is_not_found(store: Store) -> None:
    code = make_code("elsewhere")
    store.apply(put_code(OTHER_PROJECT, code))

    assert store.apply(attempt(code)).outcome is CodeOutcome.NOT_FOUND


@pytest.mark.parametrize("after_ms", [0, 1, 10_000_000], ids=["at-expiry", "just-after", "long-after"])
def test_expired_from_the_expiry_instant_on(store: Store, after_ms: int) -> None:
    code = make_code("expiring")
    store.apply(put_code(PROJECT, code))

    result = store.apply(attempt(code, now_ms=code.expires_at_millis + after_ms))

    assert result == CodeAttempt(CodeOutcome.EXPIRED, code)
    # an expired attempt does not use it
    assert store.apply(attempt(code, now_ms=code.expires_at_millis - 1)).outcome is CodeOutcome.OK


def test_already_used(store: Store) -> None:
    code = make_code("used")
    store.apply(put_code(PROJECT, code))
    assert store.apply(use_code(PROJECT, code.code_hash)) == Committed()

    assert store.apply(attempt(code, consume=False)) == CodeAttempt(CodeOutcome.ALREADY_USED, used(code))


def test_max_attempts_reached_when_the_count_before_reaches_the_maximum(store: Store) -> None:
    code = make_code("guessed")
    store.apply(put_code(PROJECT, code))
    for i in range(3):  # wrong guesses: the code is missing, but each attempt counts on the nonce
        assert store.apply(attempt(code, code_hash=f"wrong-{i}", max_attempts=3)).outcome is CodeOutcome.NOT_FOUND

    assert store.apply(attempt(code, max_attempts=3)) == CodeAttempt(CodeOutcome.MAX_ATTEMPTS_REACHED, code)
    # and it was not used
    assert store.apply(attempt(code, max_attempts=100)).outcome is CodeOutcome.OK


def test_the_last_allowed_attempt_is_ok(store: Store) -> None:
    code = make_code("last-chance")
    store.apply(put_code(PROJECT, code))
    for i in range(2):
        store.apply(attempt(code, code_hash=f"wrong-{i}", max_attempts=3))

    assert store.apply(attempt(code, max_attempts=3)) == CodeAttempt(CodeOutcome.OK, code)  # 2 before < 3


def test_max_attempts_default_is_20(store: Store) -> None:
    code = make_code("default-max")
    store.apply(put_code(PROJECT, code))
    for i in range(20):
        store.apply(attempt(code, code_hash=f"wrong-{i}"))

    assert store.apply(attempt(code)).outcome is CodeOutcome.MAX_ATTEMPTS_REACHED


def test_expired_comes_before_already_used_and_max_attempts(store: Store) -> None:
    code = make_code("all-wrong")
    store.apply(put_code(PROJECT, code))
    store.apply(use_code(PROJECT, code.code_hash))
    store.apply(attempt(code, code_hash="wrong", max_attempts=1))

    result = store.apply(attempt(code, now_ms=code.expires_at_millis, max_attempts=1))

    assert result == CodeAttempt(CodeOutcome.EXPIRED, used(code))


def test_already_used_comes_before_max_attempts(store: Store) -> None:
    code = make_code("used-and-guessed")
    store.apply(put_code(PROJECT, code))
    store.apply(use_code(PROJECT, code.code_hash))
    store.apply(attempt(code, code_hash="wrong", max_attempts=1))

    assert store.apply(attempt(code, max_attempts=1)) == CodeAttempt(CodeOutcome.ALREADY_USED, used(code))


def test_not_found_comes_before_everything(store: Store) -> None:
    code = make_code("expired-used-guessed", purpose=CodePurpose.MFA)
    store.apply(put_code(PROJECT, code))
    store.apply(use_code(PROJECT, code.code_hash))
    store.apply(attempt(code, code_hash="wrong", max_attempts=1))

    result = store.apply(attempt(code, purpose=CodePurpose.SIGN_IN, now_ms=code.expires_at_millis, max_attempts=1))

    assert result == CodeAttempt(CodeOutcome.NOT_FOUND, None)


# --------------------------------------------------------------------------------------------------------------
# The attempt counter: per nonce


def test_the_count_is_per_nonce_across_codes_with_that_nonce(store: Store) -> None:
    first = make_code("first", nonce="shared")
    second = make_code("second", nonce="shared")
    other = make_code("other", nonce="other")
    for code in (first, second, other):
        store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(first, consume=False, max_attempts=2)).outcome is CodeOutcome.OK  # 0 before
    assert store.apply(attempt(first, consume=False, max_attempts=2)).outcome is CodeOutcome.OK  # 1 before

    assert store.apply(attempt(second, max_attempts=2)).outcome is CodeOutcome.MAX_ATTEMPTS_REACHED  # 2 before
    assert store.apply(attempt(other, max_attempts=2)).outcome is CodeOutcome.OK  # its own nonce: 0 before


def test_the_count_is_per_project(store: Store) -> None:
    code = make_code("per-project")
    store.apply(put_code(PROJECT, code))
    store.apply(put_code(OTHER_PROJECT, code))
    store.apply(attempt(code, code_hash="wrong", project_id=OTHER_PROJECT, max_attempts=1))

    assert store.apply(attempt(code, max_attempts=1)).outcome is CodeOutcome.OK
    assert store.apply(attempt(code, project_id=OTHER_PROJECT, max_attempts=1)).outcome is (
        CodeOutcome.MAX_ATTEMPTS_REACHED
    )


def test_an_attempt_on_a_missing_code_counts_on_its_nonce_even_before_any_code_has_it(store: Store) -> None:
    early = make_code("early", nonce="early-nonce")
    assert store.apply(attempt(early, max_attempts=1)).outcome is CodeOutcome.NOT_FOUND

    store.apply(put_code(PROJECT, early))

    assert store.apply(attempt(early, max_attempts=1)) == CodeAttempt(CodeOutcome.MAX_ATTEMPTS_REACHED, early)


def test_attempts_of_the_other_purpose_and_on_expired_codes_count_too(store: Store) -> None:
    code = make_code("counted")
    store.apply(put_code(PROJECT, code))
    store.apply(attempt(code, purpose=CodePurpose.MFA))  # NOT_FOUND, counted
    store.apply(attempt(code, now_ms=code.expires_at_millis))  # EXPIRED, counted

    assert store.apply(attempt(code, max_attempts=2)).outcome is CodeOutcome.MAX_ATTEMPTS_REACHED
    assert store.apply(attempt(code, max_attempts=4)).outcome is CodeOutcome.OK  # 3 before < 4


# --------------------------------------------------------------------------------------------------------------
# Using a code (a commit's UseCode under CodeIsUnused)


def test_using_a_code_commits_once_then_conflicts(store: Store) -> None:
    code = make_code("consumable")
    store.apply(put_code(PROJECT, code))

    assert store.apply(use_code(PROJECT, code.code_hash)) == Committed()
    assert store.apply(use_code(PROJECT, code.code_hash)) == Conflict(0)
    assert store.apply(attempt(code)).outcome is CodeOutcome.ALREADY_USED


def test_using_a_missing_code_conflicts_and_creates_nothing(store: Store) -> None:
    code = make_code("ghost")

    assert store.apply(use_code(PROJECT, code.code_hash)) == Conflict(0)
    assert store.apply(attempt(code)).outcome is CodeOutcome.NOT_FOUND


def test_using_a_code_after_a_consuming_attempt_conflicts(store: Store) -> None:
    code = make_code("attempted")
    store.apply(put_code(PROJECT, code))
    store.apply(attempt(code))

    assert store.apply(use_code(PROJECT, code.code_hash)) == Conflict(0)


# --------------------------------------------------------------------------------------------------------------
# Concurrency


def test_of_20_concurrent_consuming_attempts_exactly_one_is_ok(store: Store) -> None:
    code = make_code("raced")
    store.apply(put_code(PROJECT, code))

    results = in_threads(*[lambda: store.apply(attempt(code)) for _ in range(20)])

    outcomes = sorted(result.outcome.value for result in results)
    assert outcomes == ["already_used"] * 19 + ["ok"]
    assert store.apply(attempt(code, consume=False)).outcome is CodeOutcome.ALREADY_USED


def test_of_20_concurrent_uses_exactly_one_commits(store: Store) -> None:
    code = make_code("consume-raced")
    store.apply(put_code(PROJECT, code))

    results = in_threads(*[lambda: store.apply(use_code(PROJECT, code.code_hash)) for _ in range(20)])

    assert sorted(results, key=repr) == [Committed()] + [Conflict(0)] * 19


def test_concurrent_attempts_are_each_counted(store: Store) -> None:
    code = make_code("counted-raced")
    store.apply(put_code(PROJECT, code))

    in_threads(*[lambda: store.apply(attempt(code, code_hash="wrong")) for _ in range(20)])

    assert store.apply(attempt(code, max_attempts=20)).outcome is CodeOutcome.MAX_ATTEMPTS_REACHED
    assert store.apply(attempt(code, max_attempts=22)).outcome is CodeOutcome.OK  # exactly 21 before


# --------------------------------------------------------------------------------------------------------------
# Expiry is the core's: a code its clock says is expired answers EXPIRED, also where a TTL collects garbage


def test_a_code_expired_by_the_wall_clock_still_answers_expired(store: Store) -> None:
    now = _wall_ms()
    # Expired ten minutes ago by every clock in the room (the core's and Redis's alike); Redis keeps it for the
    # grace period, so the answer is EXPIRED (the code is known, its lifetime over), never NOT_FOUND.
    code = make_code("expired-by-the-clock", created_at=now - 2 * CODE_LIFETIME_MS)
    store.apply(put_code(PROJECT, code))

    assert store.apply(attempt(code, now_ms=now)) == CodeAttempt(CodeOutcome.EXPIRED, code)
    assert store.apply(attempt(code, now_ms=now, consume=False)) == CodeAttempt(CodeOutcome.EXPIRED, code)


# --------------------------------------------------------------------------------------------------------------
# Async


def test_async_codes_through_arun(async_store: AsyncBackend) -> None:
    code = make_code("async", email="a@example.com")

    async def scenario(store: Any) -> list[Any]:
        await arun(perform(put_code(PROJECT, code)), store)
        return [
            await arun(perform(attempt(code, purpose=CodePurpose.MFA)), store),
            await arun(perform(attempt(code)), store),
            await arun(perform(attempt(code)), store),
            await arun(perform(use_code(PROJECT, code.code_hash)), store),
        ]

    assert async_store.run(scenario) == [
        CodeAttempt(CodeOutcome.NOT_FOUND),
        CodeAttempt(CodeOutcome.OK, code),
        CodeAttempt(CodeOutcome.ALREADY_USED, used(code)),
        Conflict(0),
    ]


# --------------------------------------------------------------------------------------------------------------
# Redis: TTLs (wall-clock times here only)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _assert_pttl_close(store: RedisStore, key: str, expected_ms: int, *, slack_ms: int = 2_000) -> None:
    pttl = store.client.pttl(key)
    assert expected_ms - slack_ms <= pttl <= expected_ms, f"PTTL {pttl} ms of {key}, expected ~{expected_ms}"


def test_redis_grace_is_24_hours() -> None:
    assert GRACE_MS == 24 * 60 * 60 * 1000


def test_redis_code_and_nonce_keys_expire_a_grace_period_after_the_code(redis_store: RedisStore) -> None:
    now = _wall_ms()
    code = make_code("ttl", nonce="ttl-nonce", created_at=now, lifetime_ms=60_000)

    redis_store.apply(put_code(PROJECT, code))

    keys = redis_store.keys
    ttl = code.expires_at_millis + GRACE_MS - now
    _assert_pttl_close(redis_store, keys.code(PROJECT, code.code_hash), ttl)
    _assert_pttl_close(redis_store, keys.nonce(PROJECT, code.nonce_hash), ttl)
    # attempts (and consuming) keep the TTLs
    redis_store.apply(attempt(code, now_ms=now))
    _assert_pttl_close(redis_store, keys.code(PROJECT, code.code_hash), ttl)
    _assert_pttl_close(redis_store, keys.nonce(PROJECT, code.nonce_hash), ttl)


def test_redis_nonce_counter_lives_as_long_as_its_longest_code(redis_store: RedisStore) -> None:
    now = _wall_ms()
    longer = make_code("longer", nonce="n", created_at=now, lifetime_ms=120_000)
    shorter = make_code("shorter", nonce="n", created_at=now, lifetime_ms=30_000)
    nonce_key = redis_store.keys.nonce(PROJECT, longer.nonce_hash)

    redis_store.apply(put_code(PROJECT, shorter))
    _assert_pttl_close(redis_store, nonce_key, 30_000 + GRACE_MS)
    redis_store.apply(put_code(PROJECT, longer))
    _assert_pttl_close(redis_store, nonce_key, 120_000 + GRACE_MS)
    redis_store.apply(put_code(PROJECT, shorter))  # never shortened
    _assert_pttl_close(redis_store, nonce_key, 120_000 + GRACE_MS)
    _assert_pttl_close(redis_store, redis_store.keys.code(PROJECT, shorter.code_hash), 30_000 + GRACE_MS)


def test_redis_a_counter_an_attempt_creates_expires_too(redis_store: RedisStore) -> None:
    orphan = make_code("orphan", nonce="orphan-nonce")

    redis_store.apply(attempt(orphan))

    _assert_pttl_close(redis_store, redis_store.keys.nonce(PROJECT, orphan.nonce_hash), ORPHAN_NONCE_TTL_MS)


def test_memory_counts_of_nonces_no_code_has_go_after_as_long_as_on_redis() -> None:
    # Guessed nonces (attempts with codes that do not exist) must not make the store grow with the guesses.
    store = MemoryStore()
    tenant = store.tenant(PROJECT)
    kept = make_code("kept", nonce="kept-nonce", lifetime_ms=2 * ORPHAN_NONCE_TTL_MS)
    store.apply(attempt(kept))  # counted first, then a code has that nonce: its count is the code's now
    store.apply(put_code(PROJECT, kept))
    for n in range(2048):
        store.apply(attempt(make_code(f"guess-{n}", nonce=f"guess-{n}")))
    assert len(tenant.nonce_attempts) == 2049  # within the hour every count holds
    later = NOW + ORPHAN_NONCE_TTL_MS
    for n in range(1024):
        store.apply(attempt(make_code(f"late-{n}", nonce=f"late-{n}"), now_ms=later))
    assert len(tenant.nonce_attempts) == 1025  # the first 2048 went; the code's and the late ones stay
    assert store.apply(attempt(kept, max_attempts=1, now_ms=later)).outcome is CodeOutcome.MAX_ATTEMPTS_REACHED


def test_memory_expired_codes_go_with_the_counts_of_their_nonces() -> None:
    store = MemoryStore()
    tenant = store.tenant(PROJECT)
    for n in range(1023):
        code = make_code(f"old-{n}")
        store.apply(put_code(PROJECT, code))
        store.apply(attempt(code))  # used
    assert (len(tenant.codes), len(tenant.nonce_attempts)) == (1023, 1023)
    fresh = make_code("fresh", created_at=T0 + CODE_LIFETIME_MS)
    store.apply(put_code(PROJECT, fresh))  # the 1024th: the sweep, at the new code's creation
    assert set(tenant.codes) == {fresh.code_hash}
    assert set(tenant.nonce_attempts) == {fresh.nonce_hash}


def test_redis_a_code_past_its_grace_period_is_gone(redis_store: RedisStore) -> None:
    now = _wall_ms()
    # expired a grace period and a minute ago: its TTL is already over when it is stored
    code = make_code("long-gone", created_at=now - GRACE_MS - CODE_LIFETIME_MS - 60_000)
    redis_store.apply(put_code(PROJECT, code))

    # Redis's clock collected it: NOT_FOUND, where the memory store would still answer EXPIRED
    assert redis_store.apply(attempt(code, now_ms=now)) == CodeAttempt(CodeOutcome.NOT_FOUND)
    assert redis_store.client.exists(redis_store.keys.code(PROJECT, code.code_hash)) == 0


def test_redis_a_code_within_its_grace_period_is_kept(redis_store: RedisStore) -> None:
    now = _wall_ms()
    code = make_code("in-grace", created_at=now - CODE_LIFETIME_MS - 3_600_000)  # expired an hour ago
    redis_store.apply(put_code(PROJECT, code))

    ttl = code.expires_at_millis + GRACE_MS - now
    _assert_pttl_close(redis_store, redis_store.keys.code(PROJECT, code.code_hash), ttl)
    assert redis_store.apply(attempt(code, now_ms=now)) == CodeAttempt(CodeOutcome.EXPIRED, code)


def test_redis_code_layout(redis_store: RedisStore) -> None:
    code = make_code("layout", email="a@example.com")
    redis_store.apply(put_code(PROJECT, code))
    client, keys = redis_store.client, redis_store.keys
    code_key = f"{keys.namespace}{{p:{PROJECT}}}:code:{code.code_hash}"
    nonce_key = f"{keys.namespace}{{p:{PROJECT}}}:nonce:{code.nonce_hash}"

    assert keys.code(PROJECT, code.code_hash) == code_key
    assert keys.nonce(PROJECT, code.nonce_hash) == nonce_key
    assert client.type(code_key) == b"hash"
    assert client.hget(code_key, "purpose") == b'"sign_in"'
    assert client.hget(code_key, "used") == b"false"
    assert client.hget(code_key, "user_id") == b"null"
    assert client.hget(code_key, "expires_at_millis") == str(code.expires_at_millis).encode()
    assert client.get(nonce_key) == b"0"
    redis_store.apply(attempt(code))
    assert client.get(nonce_key) == b"1"
    assert client.hget(code_key, "used") == b"true"
