"""Fixtures for the store contract suite: one behaviour suite, run against every store.

- `store`: a fresh sync store per test, for each backend: `memory`, `fakeredis` and `redis` (a real redis-server).
- `redis_store`: the same, Redis backends only (for tests that look at keys or plant a dangling index entry).
- `async_store` / `async_redis_store`: an `AsyncBackend` for the same backends; `.run(scenario)` opens the async
  store inside a fresh event loop, awaits `scenario(store)` and closes the store in that same loop.
- `redis_server`: one real redis-server for the session, started here on a free loopback port and stopped by its
  Popen handle. Without `redis-server` on PATH the real-Redis tests FAIL: CI must never silently skip them.

Each test gets a fresh namespace (real Redis) or a fresh FakeServer (fakeredis), so tests are independent.

A third store runs the same suite without editing it: `IDENTITY_CONTRACT_STORE=package.module:factory`, a callable
answering a fresh, empty sync store (`identity_proto.drivers.Store`: `apply(effect)` and `close()`), adds it to
`store` as `external` (`pytest tests/contract -k external`).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import fakeredis
import pytest
import redis
import redis.asyncio

from backends.memory import AsyncMemoryStore, MemoryStore
from backends.redis import AsyncRedisStore, RedisStore
from identity_proto.drivers import AsyncStore, Store
from tests.processes import RedisServer

T = TypeVar("T")

#: Every backend; the real-Redis one carries the `redis` marker (`-m "not redis"` deselects it explicitly).
BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("fakeredis", id="fakeredis"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]
REDIS_BACKENDS = BACKENDS[1:]
ASYNC_BACKENDS = list(BACKENDS)  # a third store joins the sync suite (its async twin is its own business)
#: A third store's factory, `module:callable` (see the module docstring).
EXTERNAL_STORE = os.environ.get("IDENTITY_CONTRACT_STORE", "")
if EXTERNAL_STORE:
    BACKENDS.append(pytest.param("external", id="external"))

_START_TIMEOUT_S = 10.0


def _fresh_namespace() -> str:
    return f"test-{uuid.uuid4().hex}:"


def _open_sync(kind: str, request: pytest.FixtureRequest) -> Store:
    if kind == "memory":
        return MemoryStore()
    if kind == "external":
        module, _, name = EXTERNAL_STORE.partition(":")
        opened: Store = getattr(importlib.import_module(module), name)()
        return opened
    if kind == "fakeredis":
        return RedisStore(fakeredis.FakeRedis(server=fakeredis.FakeServer()), namespace=_fresh_namespace())
    server: RedisServer = request.getfixturevalue("redis_server")
    return RedisStore.from_url(server.url, namespace=_fresh_namespace())


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """A fresh, empty sync store of each backend."""
    opened = _open_sync(request.param, request)
    yield opened
    opened.close()


@pytest.fixture(params=REDIS_BACKENDS)
def redis_store(request: pytest.FixtureRequest) -> Iterator[RedisStore]:
    """A fresh, empty RedisStore over fakeredis and over a real redis-server."""
    opened = _open_sync(request.param, request)
    assert isinstance(opened, RedisStore)
    yield opened
    opened.close()


@dataclass
class AsyncBackend:
    """How to open one async store; every `run` opens it in a new event loop and closes it there."""

    kind: str
    open: Callable[[], AsyncStore]

    def run(self, scenario: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        async def main() -> T:
            store = self.open()
            try:
                return await scenario(store)
            finally:
                await store.aclose()

        return asyncio.run(main())


def _async_backend(kind: str, request: pytest.FixtureRequest) -> AsyncBackend:
    if kind == "memory":
        shared = MemoryStore()
        return AsyncBackend(kind, lambda: AsyncMemoryStore(shared))
    namespace = _fresh_namespace()
    if kind == "fakeredis":
        fake_server = fakeredis.FakeServer()
        return AsyncBackend(
            kind, lambda: AsyncRedisStore(fakeredis.FakeAsyncRedis(server=fake_server), namespace=namespace)
        )
    server: RedisServer = request.getfixturevalue("redis_server")

    def open_real() -> AsyncStore:
        client = redis.asyncio.Redis(host=server.host, port=server.port, socket_connect_timeout=2, socket_timeout=2)
        return AsyncRedisStore(client, namespace=namespace)

    return AsyncBackend(kind, open_real)


@pytest.fixture(params=ASYNC_BACKENDS)
def async_store(request: pytest.FixtureRequest) -> AsyncBackend:
    """An async store of each backend (fresh and empty), used through `AsyncBackend.run`."""
    return _async_backend(request.param, request)


@pytest.fixture(params=REDIS_BACKENDS)
def async_redis_store(request: pytest.FixtureRequest) -> AsyncBackend:
    """An AsyncRedisStore over fakeredis and over a real redis-server, used through `AsyncBackend.run`."""
    return _async_backend(request.param, request)
