"""A `Together` (a request's preconditions with its first read: the session check with the user of a GET) is one
round trip on every Redis store: its first operations in one pipeline, scripts queued as EVALSHA, never preceded by
the SCRIPT EXISTS redis-py's pipelines send for registered `Script` objects. A script the server forgot answers
NOSCRIPT inside the pipeline; it alone is loaded and run again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from backends.redis import AsyncRedisStore, RedisStore
from identity_proto.effects import LoadSession, LoadUserWithTeam, Together
from identity_proto.effects.commit import Committed
from identity_proto.records import User
from tests.conftest import spawn_redis_server
from tests.contract.factories import add_user
from tests.processes import RedisServer

pytestmark = [pytest.mark.redis]

PROJECT = "together-project"
USER = User(id="00000000-0000-4000-8000-000000000001", signed_up_at_millis=1, last_active_at_millis=1)
TOGETHER = Together((LoadSession(PROJECT, "no-such-session"), LoadUserWithTeam(PROJECT, USER.id)))


def _script_calls(admin: redis.Redis) -> dict[str, int]:
    """How many SCRIPT subcommands and EVALSHA the server has run so far."""
    stats: dict[str, Any] = admin.info("commandstats")  # type: ignore[assignment]
    return {
        name: stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("script|exists", "script|load", "evalsha")
    }


def _sync(server: RedisServer, namespace: str) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    store = RedisStore(redis.Redis(host=server.host, port=server.port), namespace=namespace)
    return store.apply, store.close


def _on_a_loop(store: AsyncRedisStore) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    loop = asyncio.new_event_loop()

    def close() -> None:
        loop.run_until_complete(store.aclose())
        loop.close()

    return lambda effect: loop.run_until_complete(store.apply(effect)), close


def _single_connection_async(server: RedisServer, namespace: str) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    """The asyncio store over a single-connection client: the path that uses redis-py's pipeline."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, single_connection_client=True)
    store = AsyncRedisStore(client, namespace=namespace)
    assert store._pipeline is None
    return _on_a_loop(store)


def _pooled_async(server: RedisServer, namespace: str) -> tuple[Callable[[Any], Any], Callable[[], None]]:
    store = AsyncRedisStore(redis.asyncio.Redis(host=server.host, port=server.port), namespace=namespace)
    assert store._pipeline is not None
    return _on_a_loop(store)


STORES = {"sync": _sync, "async-single-connection": _single_connection_async, "async-pooled": _pooled_async}


@pytest.fixture(scope="module")
def own_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for this module alone: it counts the server's EVALSHA calls, which a delivery loop another
    test left polling the session's server would move."""
    yield from spawn_redis_server(tmp_path_factory)


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_together_asks_no_script_exists_and_survives_a_script_flush(own_redis_server: RedisServer, kind: str) -> None:
    redis_server = own_redis_server
    admin = redis.Redis(host=redis_server.host, port=redis_server.port)
    apply, close = STORES[kind](redis_server, f"together-{kind}")
    try:
        _a_together_asks_no_script_exists_and_survives_a_script_flush(admin, apply)
    finally:
        close()
        admin.close()


def _a_together_asks_no_script_exists_and_survives_a_script_flush(
    admin: redis.Redis, apply: Callable[[Any], Any]
) -> None:
    assert apply(add_user(PROJECT, USER)) == Committed((USER,))
    assert apply(TOGETHER) == (None, (USER, None))  # scripts known from here on

    before = _script_calls(admin)
    assert apply(TOGETHER) == (None, (USER, None))
    after = _script_calls(admin)
    assert after["script|exists"] == before["script|exists"], "a Together must not ask SCRIPT EXISTS first"
    assert after["evalsha"] == before["evalsha"] + 1

    admin.script_flush()
    before = _script_calls(admin)
    assert apply(TOGETHER) == (None, (USER, None))
    after = _script_calls(admin)
    assert after["script|load"] >= before["script|load"] + 1, "the forgotten script is loaded again"
