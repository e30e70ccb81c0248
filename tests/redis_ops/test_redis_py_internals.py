"""The redis-py internals the asyncio store's auto-pipeline uses (`backends.redis.autopipe.AutoPipeline`) still have
the shape that code relies on. redis-py does not promise these (connection and pool methods, `Script.sha`), so its
version is pinned in pyproject.toml; these tests say what changed when a new redis-py breaks the pin's assumptions,
before the auto-pipeline tests fail in some less readable way.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import redis.asyncio.connection
import redis.asyncio.retry
import redis.exceptions
from packaging.requirements import Requirement
from redis.commands.core import AsyncScript

from backends.redis import AsyncRedisStore

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _accepts(name: str, function: Callable[..., Any], *args: Any) -> None:
    """`function` is a coroutine function that takes `args` (as `AutoPipeline` calls it)."""
    assert inspect.iscoroutinefunction(function), f"redis-py changed: {name} is no longer a coroutine function"
    try:
        inspect.signature(function).bind(*args)
    except TypeError as exc:
        raise AssertionError(
            f"redis-py changed: {name}{inspect.signature(function)} no longer takes {len(args)} positional "
            f"argument(s) ({exc})"
        ) from exc


def test_the_installed_redis_py_is_in_the_range_pyproject_pins() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pins = [Requirement(d) for d in dependencies if re.match(r"redis\b", d) and not d.startswith("redis-")]
    assert len(pins) == 1, f"pyproject.toml should list redis once, with a version range: {pins}"
    installed = version("redis")
    assert pins[0].specifier.contains(installed), (
        f"redis-py {installed} is outside the range {pins[0].specifier} the auto-pipeline was tested on"
    )
    assert pins[0].specifier.contains("999") is False, "the redis pin needs an upper bound"


def test_a_store_from_url_gets_a_blocking_pool_it_can_take_a_connection_from() -> None:
    store = AsyncRedisStore.from_url("redis://127.0.0.1:1/0")  # never connects
    client = store.client
    assert isinstance(client, redis.asyncio.Redis)
    assert client.single_connection_client is False, (
        "redis-py changed: redis.asyncio.Redis no longer says whether it is a single-connection client"
    )
    pool = client.connection_pool
    assert isinstance(pool, redis.asyncio.BlockingConnectionPool)
    assert isinstance(getattr(pool, "max_connections", None), int), (
        "redis-py changed: the pool's `max_connections` is gone or not an int"
    )
    assert store._pipeline is not None, "the store no longer pipelines over a plain client"
    _accepts("BlockingConnectionPool.get_connection", pool.get_connection)
    connection = pool.make_connection()
    _accepts("ConnectionPool.release", pool.release, connection)


def test_a_connection_packs_sends_and_reads_as_the_auto_pipeline_calls_it() -> None:
    pool = redis.asyncio.BlockingConnectionPool.from_url("redis://127.0.0.1:1/0")
    connection = pool.make_connection()
    packed = connection.pack_command("EVALSHA", "0" * 40, 1, "key", "arg")
    assert isinstance(packed, list), "redis-py changed: Connection.pack_command no longer returns a list"
    assert all(isinstance(chunk, bytes) for chunk in packed), "redis-py changed: pack_command's chunks"
    assert b"".join(packed).startswith(b"*5\r\n$7\r\nEVALSHA\r\n"), "redis-py changed: pack_command's output"
    _accepts("Connection.send_packed_command", connection.send_packed_command, packed, False)
    assert "check_health" in inspect.signature(connection.send_packed_command).parameters, (
        "redis-py changed: send_packed_command has no check_health parameter"
    )
    _accepts("Connection.read_response", connection.read_response)
    _accepts("Connection.disconnect", connection.disconnect)
    assert connection.is_connected is False, "redis-py changed: Connection.is_connected"


def test_a_registered_script_names_its_sha_and_source() -> None:
    client = redis.asyncio.Redis.from_url("redis://127.0.0.1:1/0")
    registered = client.register_script("return 1")
    assert isinstance(registered, AsyncScript)
    assert getattr(registered, "script", None) == "return 1", "redis-py changed: AsyncScript.script is not the source"
    assert getattr(registered, "sha", None) == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", (
        "redis-py changed: AsyncScript.sha is not the SHA-1 of the source (what EVALSHA needs)"
    )
    assert issubclass(redis.exceptions.NoScriptError, redis.exceptions.ResponseError)


@pytest.mark.parametrize("name", ["pack_command", "send_packed_command", "read_response", "disconnect"])
def test_the_connection_methods_are_the_abstract_connections(name: str) -> None:
    """Every connection class a URL can make (TCP, TLS, unix socket) inherits the methods checked above."""
    for cls in (
        redis.asyncio.connection.Connection,
        redis.asyncio.connection.SSLConnection,
        redis.asyncio.connection.UnixDomainSocketConnection,
    ):
        assert getattr(cls, name) is getattr(redis.asyncio.connection.AbstractConnection, name), (
            f"redis-py changed: {cls.__name__}.{name} now overrides AbstractConnection.{name}"
        )
