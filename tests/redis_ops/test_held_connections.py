"""The asyncio Redis store runs its scripts on connections it holds between calls (`_held_evalsha`), past the
pool's per-command bookkeeping. What that path must keep of redis-py's own behaviour, on a real redis-server:

- a call cancelled while its reply is in flight never leaves that reply for the next caller;
- a script the server forgot (restart, SCRIPT FLUSH) is loaded again, transparently;
- a held connection the server dropped is reconnected by the connection's retry policy, and the call succeeds;
- concurrent calls each get their own answer; a burst larger than the pool waits for connections (the pool
  `from_url` makes blocks) instead of failing, and the idle connections held back stay bounded;
- closing the store gives every held connection back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import fakeredis
import pytest
import redis.asyncio
import redis.asyncio.retry
import redis.exceptions
from redis.backoff import NoBackoff

from backends.redis import AsyncRedisStore
from identity_proto.effects import CreateUser, LoadUser, LoadUserWithTeam, UserWrite
from identity_proto.records import User
from tests.processes import RedisServer

pytestmark = [pytest.mark.redis]

PROJECT = "held-conn-project"


def _user(n: int) -> User:
    return User(id=f"00000000-0000-4000-8000-{n:012d}", signed_up_at_millis=n, last_active_at_millis=n)


async def _read(store: AsyncRedisStore, n: int) -> User | None:
    """User n through LoadUserWithTeam, which is one script (EVALSHA): the held-connection path."""
    found = await store.apply(LoadUserWithTeam(PROJECT, _user(n).id))
    return None if found is None else found[0]


def _client(server: RedisServer) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(
        host=server.host,
        port=server.port,
        socket_connect_timeout=2,
        socket_timeout=2,
        retry=redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
    )


def _with_store(
    server: RedisServer,
    name: str,
    scenario: Callable[[AsyncRedisStore, RedisServer], Awaitable[None]],
    *,
    from_url: bool = False,
) -> None:
    """Run `scenario` in a fresh event loop on a store (namespace `name`) holding users 1-20; with `from_url`, the
    store `AsyncRedisStore.from_url` makes (a blocking pool of 100 connections), else one over a plain client."""

    async def main() -> None:
        if from_url:
            url = f"redis://{server.host}:{server.port}/0"
            store = AsyncRedisStore.from_url(url, namespace=f"held-{name}")
        else:
            store = AsyncRedisStore(_client(server), namespace=f"held-{name}")
        assert store._held is not None, "a plain asyncio client must get the held-connection path"
        try:
            for n in range(1, 21):
                assert await store.apply(CreateUser(PROJECT, _user(n))) in (_user(n), UserWrite.ID_TAKEN)
            await scenario(store, server)
        finally:
            await store.aclose()

    asyncio.run(main())


def _admin(server: RedisServer) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(host=server.host, port=server.port, socket_timeout=5)


async def _a_call_cancelled_mid_reply_leaves_nothing_for_the_next(
    store: AsyncRedisStore, redis_server: RedisServer
) -> None:
    admin = _admin(redis_server)
    try:
        await _read(store, 1)  # one connection held
        assert store._held is not None
        assert len(store._held) == 1
        # The server holds every command for 300 ms: the call below is sent and then cancelled before its reply.
        await admin.client_pause(300, all=True)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_read(store, 2), timeout=0.05)
        assert store._held == [], "a connection with a reply in flight must not be held for reuse"
        await asyncio.sleep(0.35)  # the pause is over: the abandoned reply (user 2) would now be readable
        for n in (3, 4, 5):
            assert await _read(store, n) == _user(n)
    finally:
        await admin.aclose()


def test_a_call_cancelled_mid_reply_leaves_nothing_for_the_next(redis_server: RedisServer) -> None:
    _with_store(redis_server, "a_call_cancelled_mi", _a_call_cancelled_mid_reply_leaves_nothing_for_the_next)


async def _a_forgotten_script_is_loaded_again(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        await admin.script_flush()
        assert await _read(store, 7) == _user(7)
        assert await store.apply(CreateUser(PROJECT, _user(99))) == _user(99)
    finally:
        await admin.aclose()


def test_a_forgotten_script_is_loaded_again(redis_server: RedisServer) -> None:
    _with_store(redis_server, "a_forgotten_script_", _a_forgotten_script_is_loaded_again)


async def _a_dropped_held_connection_is_reconnected(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        await _read(store, 1)
        killed = await admin.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        assert await _read(store, 8) == _user(8)
    finally:
        await admin.aclose()


def test_a_dropped_held_connection_is_reconnected(redis_server: RedisServer) -> None:
    _with_store(redis_server, "a_dropped_held_conn", _a_dropped_held_connection_is_reconnected)


async def _bursts_queue_and_each_call_gets_its_own_answer(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    # 300 reads at once, more than the pool's 100 connections: scripts (held path) and plain commands (the pool)
    # mixed. Every one is answered, with its own user; none fails for want of a connection (the pool blocks).
    numbers = [n % 20 + 1 for n in range(300)]
    scripted = [_read(store, n) for n in numbers[::2]]
    plain = [store.apply(LoadUser(PROJECT, _user(n).id)) for n in numbers[1::2]]
    found = await asyncio.gather(*scripted, *plain)
    assert [user.id if user else None for user in found] == [_user(n).id for n in numbers[::2] + numbers[1::2]]
    assert isinstance(store.client, redis.asyncio.Redis)
    pool = store.client.connection_pool
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert store._held is not None
    # Idle connections held back stay bounded (at most half the pool): plain commands keep theirs.
    assert 1 <= len(store._held) <= min(16, pool.max_connections // 2)
    again = await asyncio.gather(*(store.apply(LoadUser(PROJECT, _user(n).id)) for n in numbers[:120]))
    assert [user.id if user else None for user in again] == [_user(n).id for n in numbers[:120]]


def test_bursts_queue_and_each_call_gets_its_own_answer(redis_server: RedisServer) -> None:
    _with_store(redis_server, "bursts", _bursts_queue_and_each_call_gets_its_own_answer, from_url=True)


def test_closing_gives_every_held_connection_back(redis_server: RedisServer) -> None:
    asyncio.run(_closing_gives_every_held_connection_back(redis_server))


async def _closing_gives_every_held_connection_back(redis_server: RedisServer) -> None:
    store = AsyncRedisStore(_client(redis_server), namespace="held-close")
    await asyncio.gather(*(_read(store, n) for n in range(10)))
    assert isinstance(store.client, redis.asyncio.Redis)
    pool = store.client.connection_pool
    assert store._held
    assert len(pool._in_use_connections) == len(store._held)
    await store.aclose()
    assert store._held == []
    assert len(pool._in_use_connections) == 0


def test_fakeredis_clients_take_the_same_path() -> None:
    asyncio.run(_fakeredis_clients_take_the_same_path())


async def _fakeredis_clients_take_the_same_path() -> None:
    store = AsyncRedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()), namespace="held-fake")
    assert store._held is not None
    assert await store.apply(CreateUser(PROJECT, _user(1))) == _user(1)
    assert await _read(store, 1) == _user(1)
    assert store._held
    assert len(store._held) == 1
    await store.aclose()
