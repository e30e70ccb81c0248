"""Redis down: requests fail fast, the outage is said once, and the service sees Redis back by itself
(`backends.redis.runner.CircuitBreaker`, and the auto-pipeline's shared connect attempt).

Measured before (tests/hardening/README.md): with Redis refusing connections, 50 requests in flight got their 503
after up to 10 s, each retrying its own connection in turn; with Redis accepting and dropping connections, up to
30 s and 400 connection attempts. Here: the requests in flight share one attempt, and later ones make none while
the circuit is open. Counted, not timed: connections a loopback listener accepted, log lines said."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backends.redis import AsyncRedisStore, RedisStore
from backends.redis.runner import CircuitBreaker
from benchmarks.redis_down import DroppingListener
from identity_proto.effects import LoadProject
from identity_proto.errors import StorageUnavailable
from tests.processes import free_port
from tests.redis_ops.servers import RedisProcess, start_redis

pytestmark = pytest.mark.redis

PROJECT = LoadProject("00000000-0000-4000-8000-000000000000")
IN_FLIGHT = 50


@pytest.fixture
def dropping() -> Iterator[DroppingListener]:
    listener = DroppingListener()
    yield listener
    listener.close()


# --- the breaker itself -----------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_on_a_fault_refuses_at_once_and_lets_one_probe_through_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    breaker = CircuitBreaker(window_s=0.5, clock=clock)
    caplog.set_level(logging.WARNING, logger="identity_service")
    assert breaker.admit(PROJECT) is False  # closed: everyone goes, nobody is a probe
    breaker.failed()
    breaker.failed()  # a second request in flight failing too: still one outage
    assert breaker.open
    with pytest.raises(StorageUnavailable) as refused:
        breaker.admit(PROJECT)
    assert refused.value.quiet
    clock.now += 0.5
    assert breaker.admit(PROJECT) is True  # the probe
    with pytest.raises(StorageUnavailable):
        breaker.admit(PROJECT)  # one probe at a time
    breaker.failed()  # the probe failed: another window
    with pytest.raises(StorageUnavailable):
        breaker.admit(PROJECT)
    clock.now += 0.5
    probe = breaker.admit(PROJECT)
    breaker.abandoned(probe)  # cancelled before an answer: the next request probes instead
    assert breaker.admit(PROJECT) is True
    clock.now += 2.0
    breaker.succeeded()
    assert not breaker.open
    assert breaker.admit(PROJECT) is False
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith("Redis unavailable: answering 503 at once")
    assert said[1] == "Redis available again after 3.0 s"


# --- the stores, against a Redis that is not there ----------------------------------------------------------------


def test_requests_in_flight_when_redis_breaks_share_one_connect_attempt_and_later_ones_make_none(
    dropping: DroppingListener,
) -> None:
    async def scenario() -> tuple[int, int]:
        store = AsyncRedisStore.from_url(f"redis://127.0.0.1:{dropping.port}/0")
        try:
            first = await asyncio.gather(*(store.apply(PROJECT) for _ in range(IN_FLIGHT)), return_exceptions=True)
            assert all(isinstance(result, StorageUnavailable) for result in first), first
            in_flight = dropping.accepted
            later = await asyncio.gather(*(store.apply(PROJECT) for _ in range(IN_FLIGHT)), return_exceptions=True)
            assert all(isinstance(r, StorageUnavailable) and r.quiet for r in later), later
            return in_flight, dropping.accepted - in_flight
        finally:
            await store.aclose()

    in_flight, later = asyncio.run(scenario())
    # one connect attempt (redis-py retries its connect and handshake: a few connections), not one per request
    # (before: 8 connections per request, 400 for 50)
    assert 1 <= in_flight <= 8, in_flight
    assert later == 0


def test_the_sync_store_refuses_at_once_once_it_knows_redis_is_down(dropping: DroppingListener) -> None:
    store = RedisStore.from_url(f"redis://127.0.0.1:{dropping.port}/0")
    try:
        with pytest.raises(StorageUnavailable) as first:
            store.apply(PROJECT)
        assert not first.value.quiet
        before = dropping.accepted
        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(lambda _: _refusal(store), range(IN_FLIGHT)))
        assert all(outcome is not None and outcome.quiet for outcome in outcomes), outcomes
        assert dropping.accepted == before
    finally:
        store.client.close()


def _refusal(store: RedisStore) -> StorageUnavailable | None:
    try:
        store.apply(PROJECT)
    except StorageUnavailable as exc:
        return exc
    return None


# --- and back ----------------------------------------------------------------------------------------------------


def test_the_store_sees_redis_back_by_itself_and_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    caplog.set_level(logging.WARNING, logger="identity_service")

    async def scenario() -> RedisProcess:
        store = AsyncRedisStore.from_url(f"redis://127.0.0.1:{port}/0")
        try:
            with pytest.raises(StorageUnavailable):
                await store.apply(PROJECT)
            server = _start_redis_on(tmp_path, port)
            deadline = time.monotonic() + 10
            refusals: list[StorageUnavailable] = []
            while True:  # refused at once until the window has passed, then one probe finds Redis back
                try:
                    found = await store.apply(PROJECT)
                    break
                except StorageUnavailable as exc:
                    refusals.append(exc)
                if time.monotonic() > deadline:
                    pytest.fail("the store never saw Redis back")
                await asyncio.sleep(0.05)
            assert found is None  # no such project: Redis answered
            # only the refusals of the open circuit: no new attempt failed once Redis was there
            assert all(refusal.quiet for refusal in refusals), refusals
            return server
        finally:
            await store.aclose()

    server = asyncio.run(scenario())
    server.stop()
    said = [r.getMessage() for r in caplog.records if r.name == "identity_service"]
    assert len(said) == 2, said
    assert said[0].startswith("Redis unavailable")
    assert said[1].startswith("Redis available again after")


def _start_redis_on(workdir: Path, port: int) -> RedisProcess:
    """A redis-server on `port` (the one the store was made for)."""
    server = start_redis(workdir)
    server.stop()
    server.port = port
    server.restart()
    return server
