"""The asyncio Redis store pipelines the commands of concurrent requests on one connection (`AutoPipeline`). What
that path must keep, on a real redis-server:

- concurrent requests each get their own answer, also when they are sent in one write; an error reply reaches only
  the request whose command it answers;
- a request cancelled while its reply is in flight leaves that reply to nobody: the others (in flight with it, or
  later) get their own;
- a script the server forgot (restart, SCRIPT FLUSH) is loaded again, transparently;
- a connection the server dropped is replaced, and the call succeeds (one retry, as redis-py's policy);
- a server that does not answer within the socket timeout fails every outstanding request (StorageUnavailable),
  and the store works again once it answers;
- a burst larger than the pool is answered in full; closing the store gives the connection back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import fakeredis
import pytest
import redis.asyncio
import redis.asyncio.retry
import redis.exceptions
from redis.backoff import NoBackoff

from backends.redis import AsyncRedisStore
from backends.redis.autopipe import AutoPipeline
from identity_proto.effects import LoadSession, LoadUser, LoadUserWithTeam, Together
from identity_proto.effects.commit import Committed
from identity_proto.errors import StorageUnavailable
from identity_proto.records import User
from tests.contract.factories import ID_TAKEN, add_user
from tests.processes import RedisServer

pytestmark = [pytest.mark.redis]

PROJECT = "autopipe-project"


def _user(n: int) -> User:
    return User(id=f"00000000-0000-4000-8000-{n:012d}", signed_up_at_millis=n, last_active_at_millis=n)


async def _read(store: AsyncRedisStore, n: int) -> User | None:
    """User n through LoadUserWithTeam, which is one script (EVALSHA)."""
    found = await store.apply(LoadUserWithTeam(PROJECT, _user(n).id))
    return None if found is None else found[0]


def _client(server: RedisServer, *, socket_timeout: float = 2) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(
        host=server.host,
        port=server.port,
        socket_connect_timeout=2,
        socket_timeout=socket_timeout,
        retry=redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
    )


def _pipeline(store: AsyncRedisStore) -> AutoPipeline:
    assert store._pipeline is not None, "a pooled asyncio client must get the auto-pipeline"
    return store._pipeline


def _with_store(
    server: RedisServer,
    name: str,
    scenario: Callable[[AsyncRedisStore, RedisServer], Awaitable[None]],
    *,
    from_url: bool = False,
    socket_timeout: float = 2,
) -> None:
    """Run `scenario` in a fresh event loop on a store (namespace `name`) holding users 1-20; with `from_url`, the
    store `AsyncRedisStore.from_url` makes (a blocking pool of 100 connections), else one over a plain client."""

    async def main() -> None:
        if from_url:
            url = f"redis://{server.host}:{server.port}/0"
            store = AsyncRedisStore.from_url(url, namespace=f"pipe-{name}")
        else:
            store = AsyncRedisStore(_client(server, socket_timeout=socket_timeout), namespace=f"pipe-{name}")
        _pipeline(store)
        try:
            for n in range(1, 21):
                assert await store.apply(add_user(PROJECT, _user(n))) in (Committed((_user(n),)), ID_TAKEN)
            await scenario(store, server)
        finally:
            await store.aclose()

    asyncio.run(main())


def _admin(server: RedisServer) -> redis.asyncio.Redis:
    return redis.asyncio.Redis(host=server.host, port=server.port, socket_timeout=5)


def _count_writes(pipeline: AutoPipeline) -> list[int]:
    """Count the writes on the pipeline's connection from now on (one entry per write: its commands' count)."""
    writes: list[int] = []
    conn = pipeline._conn
    assert conn is not None
    send = conn.send_packed_command

    async def counted(command: Any, check_health: bool = True) -> None:
        writes.append(len(pipeline._waiting))
        await send(command, check_health=check_health)

    conn.send_packed_command = counted
    return writes


async def _requests_of_one_turn_share_a_write_and_get_their_own_answers(
    store: AsyncRedisStore, redis_server: RedisServer
) -> None:
    await _read(store, 1)  # the connection is open
    writes = _count_writes(_pipeline(store))
    numbers = list(range(1, 21)) * 3
    found = await asyncio.gather(
        *(_read(store, n) for n in numbers),
        *(store.apply(LoadUser(PROJECT, _user(n).id)) for n in numbers),
        *(store.apply(Together((LoadUser(PROJECT, _user(n).id), LoadSession(PROJECT, "none")))) for n in numbers),
    )
    reads, loads, togethers = found[:60], found[60:120], found[120:]
    assert reads == [_user(n) for n in numbers]
    assert loads == [_user(n) for n in numbers]
    assert togethers == [(_user(n), None) for n in numbers]
    assert 1 <= len(writes) < len(found), f"180 requests of one turn took {len(writes)} writes"


def test_requests_of_one_turn_share_a_write_and_get_their_own_answers(redis_server: RedisServer) -> None:
    _with_store(redis_server, "one-turn", _requests_of_one_turn_share_a_write_and_get_their_own_answers)


async def _an_error_reply_reaches_only_its_request(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        # User 5's key holds a string: HGETALL on it (LoadUser) answers WRONGTYPE, in the middle of a pipeline.
        await admin.set(store.keys.user(PROJECT, _user(5).id), "not a hash")
        results = await asyncio.gather(
            *(store.apply(LoadUser(PROJECT, _user(n).id)) for n in range(1, 11)), return_exceptions=True
        )
        for n, result in zip(range(1, 11), results, strict=True):
            if n == 5:
                assert isinstance(result, redis.exceptions.ResponseError)
                assert "WRONGTYPE" in str(result)
            else:
                assert result == _user(n)
        assert await _read(store, 6) == _user(6)
    finally:
        await admin.aclose()


def test_an_error_reply_reaches_only_its_request(redis_server: RedisServer) -> None:
    _with_store(redis_server, "error-reply", _an_error_reply_reaches_only_its_request)


async def _a_request_cancelled_mid_reply_leaves_its_reply_to_nobody(
    store: AsyncRedisStore, redis_server: RedisServer
) -> None:
    admin = _admin(redis_server)
    try:
        await _read(store, 1)
        conn = _pipeline(store)._conn
        # The server holds every command for 300 ms: all below are sent; one is cancelled before its reply.
        await admin.client_pause(300, all=True)
        doomed = asyncio.ensure_future(_read(store, 2))
        others = [asyncio.ensure_future(_read(store, n)) for n in (3, 4, 5)]
        await asyncio.sleep(0.05)
        doomed.cancel()
        assert await asyncio.gather(*others) == [_user(3), _user(4), _user(5)]
        with pytest.raises(asyncio.CancelledError):
            await doomed
        for n in (6, 7, 8):
            assert await _read(store, n) == _user(n)
        assert not _pipeline(store)._waiting
        assert _pipeline(store)._conn is conn, "a cancelled request must not cost the others their connection"
    finally:
        await admin.aclose()


def test_a_request_cancelled_mid_reply_leaves_its_reply_to_nobody(redis_server: RedisServer) -> None:
    _with_store(redis_server, "cancelled", _a_request_cancelled_mid_reply_leaves_its_reply_to_nobody)


async def _a_forgotten_script_is_loaded_again(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        await admin.script_flush()
        assert await _read(store, 7) == _user(7)
        await admin.script_flush()
        # Several requests of one turn all find it gone; each loads it and runs again.
        assert await asyncio.gather(*(_read(store, n) for n in (1, 2, 3))) == [_user(1), _user(2), _user(3)]
        assert await store.apply(add_user(PROJECT, _user(99))) == Committed((_user(99),))
    finally:
        await admin.aclose()


def test_a_forgotten_script_is_loaded_again(redis_server: RedisServer) -> None:
    _with_store(redis_server, "forgotten-script", _a_forgotten_script_is_loaded_again)


async def _a_dropped_connection_is_replaced(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        await _read(store, 1)
        killed = await admin.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        assert await asyncio.gather(*(_read(store, n) for n in (8, 9))) == [_user(8), _user(9)]
        assert _pipeline(store)._conn is not None
    finally:
        await admin.aclose()


def test_a_dropped_connection_is_replaced(redis_server: RedisServer) -> None:
    _with_store(redis_server, "dropped", _a_dropped_connection_is_replaced)


async def _a_silent_server_fails_what_is_outstanding(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    admin = _admin(redis_server)
    try:
        await _read(store, 1)
        await admin.client_pause(600, all=True)  # longer than the store's socket timeout (0.2 s)
        results = await asyncio.gather(*(_read(store, n) for n in (2, 3, 4)), return_exceptions=True)
        assert all(isinstance(result, StorageUnavailable) for result in results), results
        await asyncio.sleep(0.6)
        assert await _read(store, 5) == _user(5)
    finally:
        await admin.aclose()


def test_a_silent_server_fails_what_is_outstanding(redis_server: RedisServer) -> None:
    _with_store(redis_server, "silent", _a_silent_server_fails_what_is_outstanding, socket_timeout=0.2)


async def _bursts_are_answered_in_full(store: AsyncRedisStore, redis_server: RedisServer) -> None:
    # 300 reads at once, more than the pool's 100 connections: every one is answered, with its own user.
    numbers = [n % 20 + 1 for n in range(300)]
    scripted = [_read(store, n) for n in numbers[::2]]
    plain = [store.apply(LoadUser(PROJECT, _user(n).id)) for n in numbers[1::2]]
    found = await asyncio.gather(*scripted, *plain)
    assert [user.id if user else None for user in found] == [_user(n).id for n in numbers[::2] + numbers[1::2]]
    assert isinstance(store.client, redis.asyncio.Redis)
    pool = store.client.connection_pool
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert len(pool._in_use_connections) == 1, "the pipeline holds one connection of the pool"


def test_bursts_are_answered_in_full(redis_server: RedisServer) -> None:
    _with_store(redis_server, "bursts", _bursts_are_answered_in_full, from_url=True)


def test_closing_gives_the_connection_back(redis_server: RedisServer) -> None:
    asyncio.run(_closing_gives_the_connection_back(redis_server))


async def _closing_gives_the_connection_back(redis_server: RedisServer) -> None:
    store = AsyncRedisStore(_client(redis_server), namespace="pipe-close")
    await asyncio.gather(*(_read(store, n) for n in range(10)))
    assert isinstance(store.client, redis.asyncio.Redis)
    pool = store.client.connection_pool
    assert len(pool._in_use_connections) == 1
    await store.aclose()
    assert len(pool._in_use_connections) == 0
    with pytest.raises(StorageUnavailable):
        await _read(store, 1)


def test_fakeredis_clients_take_the_same_path() -> None:
    asyncio.run(_fakeredis_clients_take_the_same_path())


async def _fakeredis_clients_take_the_same_path() -> None:
    store = AsyncRedisStore(fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer()), namespace="pipe-fake")
    pipeline = _pipeline(store)
    assert await store.apply(add_user(PROJECT, _user(1))) == Committed((_user(1),))
    assert await asyncio.gather(*(_read(store, 1) for _ in range(5))) == [_user(1)] * 5
    assert pipeline._conn is not None
    await store.aclose()
