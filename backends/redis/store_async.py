"""The asyncio shell: `AsyncRedisStore` runs the same command plans, awaited, with a `redis.asyncio.Redis` (or
`redis.asyncio.cluster.RedisCluster`) client.

Connections (asyncio): the client `AsyncRedisStore.from_url` makes has a *blocking* pool of 100 connections: a burst
of more concurrent requests than that waits up to the socket timeout for a connection, then gets 503, rather than
failing at once (redis-py's default pool refuses the 101st with `MaxConnectionsError`). Scripts, which are nearly
every request's one round trip, run on connections the store holds between calls (at most 16 idle, and never more
than half the pool), skipping the pool's per-command checkout and its metrics hooks; `_held_evalsha` says what of
redis-py's behaviour that path keeps (retry, health check, NOSCRIPT reload, and no reuse after a cancelled call).
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.commands.core import AsyncScript

from backends.redis.keys import DEFAULT_NAMESPACE, KeySpace
from backends.redis.plan import _PLANS, Call, Op, Plan, Scan, Script, _plan_for
from backends.redis.runner import (
    _ASYNC_MAX_CONNECTIONS,
    _HELD_IDLE_MAX,
    _SCAN_COUNT,
    FAULTS,
    _AsyncCluster,
    _retry_backoff,
    _scan_cursor,
    _scan_position,
    _split,
    _start_together,
    queue,
    register_scripts,
    storage_fault,
)
from identity_proto.effects import StorageEffect, Together

T = TypeVar("T")


class AsyncRedisStore:
    """A store over an asyncio `redis.asyncio.Redis` client, or a `redis.asyncio.cluster.RedisCluster`: the same
    plans as `RedisStore`, awaited."""

    #: The effect types this store performs, each with its command plan (shared with `RedisStore`).
    performs = _PLANS

    def __init__(
        self,
        client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster,
        *,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._scripts: dict[str, AsyncScript] = register_scripts(client)
        #: Scripts on one server (not a cluster, not a single-connection client) run on connections this store
        #: holds between calls (see `_held_evalsha`).
        self._held: list[Any] | None = None
        self._pool: Any = None
        self._held_max = 0
        if isinstance(client, redis.asyncio.Redis) and client.connection is None:
            self._held, self._pool = [], client.connection_pool
            # At most half the pool idles here, so plain commands (and callers waiting on a blocking pool) always
            # find connections the pool can hand out.
            self._held_max = min(_HELD_IDLE_MAX, max(1, int(getattr(self._pool, "max_connections", 2)) // 2))

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout: float = 2.0,
        health_check_interval: float = 30.0,
        cluster: bool = False,
    ) -> AsyncRedisStore:
        """A store with its own client for `url` (redis://[[user]:password@]host:port/db, rediss://, unix://).

        With `cluster`, `url` names any node of a Redis Cluster (redis:// or rediss://, database 0); the client
        discovers the others and follows the cluster's changes."""
        client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster
        if cluster:
            client = _AsyncCluster.from_url(
                url,
                socket_connect_timeout=socket_timeout,
                socket_timeout=socket_timeout,
                health_check_interval=health_check_interval,
                retry=redis.asyncio.retry.Retry(_retry_backoff(), 1),
            )
        else:
            # A blocking pool: when every connection is busy (a burst of more concurrent requests than the pool
            # has connections), a command waits up to `socket_timeout` for one instead of failing at once.
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                url,
                max_connections=_ASYNC_MAX_CONNECTIONS,
                timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                socket_timeout=socket_timeout,
                health_check_interval=health_check_interval,
                retry=redis.asyncio.retry.Retry(
                    _retry_backoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)
                ),
            )
            client = redis.asyncio.Redis.from_pool(pool)  # the client owns the pool: closing it closes the pool
        return cls(client, namespace=namespace)

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect by running its command plan."""
        if isinstance(effect, Together):
            return cast(T, await self._apply_together(effect))
        return cast(T, await self._finish(_plan_for(effect, self.keys, type(self).__name__), None, effect))

    async def _finish(self, plan: Plan[Any], reply: Any, effect: StorageEffect[Any]) -> Any:
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            try:
                reply = await self._execute(op)
            except FAULTS as exc:
                raise storage_fault(effect, exc) from exc

    async def _apply_together(self, effect: Together) -> tuple[Any, ...]:
        """The first operation of every plan in one pipeline (one round trip); what follows, plan by plan."""
        started = _start_together(effect, self.keys, type(self).__name__)
        if started.pending:
            try:
                replies = await self._first_replies(started.pending)
            except FAULTS as exc:
                raise storage_fault(effect, exc) from exc
            for (index, _op), reply in zip(started.pending, replies, strict=True):
                started.results[index] = await self._finish(started.plans[index], reply, effect.effects[index])
        return tuple(started.results)

    async def _first_replies(self, pending: list[tuple[int, Op]]) -> list[Any]:
        """The replies to the first operations of a Together's plans, from one pipeline. A cluster's pipelines
        refuse scripts (EVALSHA), so there the operations go concurrently, each on its own."""
        if isinstance(self.client, redis.asyncio.cluster.RedisCluster):
            return list(await asyncio.gather(*(self._execute(op) for _, op in pending)))
        async with self.client.pipeline(transaction=False) as pipe:
            for _, op in pending:
                queued = queue(pipe, op, self._scripts)
                if queued is not None:
                    await queued
            raw = await pipe.execute()
        return _split(raw, pending)

    async def _execute(self, op: Op) -> Any:
        if isinstance(op, Call):
            return await self.client.execute_command(op.command, *op.args)
        if isinstance(op, Script):
            if self._held is not None:
                return await self._held_evalsha(self._scripts[op.name], op.keys, op.args)
            return await self._scripts[op.name](keys=op.keys, args=op.args)
        if isinstance(op, Scan):
            return await self._scan(op)
        async with self.client.pipeline(transaction=False) as pipe:
            for call in op.calls:
                pipe.execute_command(call.command, *call.args)
            return await pipe.execute()

    async def _scan(self, op: Scan) -> tuple[str, list[Any]]:
        client = self.client
        if not isinstance(client, redis.asyncio.cluster.RedisCluster):
            scan = ("SCAN", int(op.cursor), "MATCH", op.match, "COUNT", _SCAN_COUNT)
            reply: Any = await client.execute_command(*scan)  # type: ignore[no-untyped-call]
            return str(int(reply[0])), list(reply[1])
        primaries = sorted(node.name for node in client.get_primaries())
        position = _scan_position(op.cursor, primaries)
        if position is None:
            return "0", []
        name, at = position
        node = client.get_node(node_name=name)
        cursors, found = cast(Any, await client.scan(at, match=op.match, count=_SCAN_COUNT, target_nodes=node))
        return _scan_cursor(name, int(cursors[name]), primaries), list(found)

    async def _held_evalsha(self, script: AsyncScript, keys: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        """EVALSHA `script` on a connection this store holds, as `Redis.execute_command` would run it, minus the
        pool's per-command bookkeeping.

        Why: every command through `execute_command` takes a connection from the pool and gives it back, each
        under the pool's asyncio lock and with redis-py's metrics hooks awaited (even when metrics are off); on
        this machine that was ~50 µs of CPU per command, a tenth of a whole authenticated GET on Redis. Here an
        idle connection is popped from a plain list (one event loop: no lock needed) and pushed back after a
        clean reply. Everything else is redis-py's own: the connection's retry policy (one retry after a
        connection error, reconnecting), its health check before reuse, its encoder and reply parser. A
        connection whose call failed or was cancelled may still have a reply in flight: it is disconnected and
        handed back to the pool, never reused from here. Scripts the server forgot (a restart, SCRIPT FLUSH) are
        loaded again, as `Script.__call__` does.
        """
        held, pool = self._held, self._pool
        assert held is not None
        conn = held.pop() if held else await pool.get_connection()
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)

        async def call() -> Any:
            await conn.send_command(*command)
            return await conn.read_response()

        try:
            try:
                reply = await conn.retry.call_with_retry(call, lambda error: conn.disconnect())
            except redis.exceptions.NoScriptError:
                await conn.send_command("SCRIPT", "LOAD", script.script)
                await conn.read_response()
                reply = await conn.retry.call_with_retry(call, lambda error: conn.disconnect())
        except BaseException:
            try:
                await conn.disconnect()
            finally:
                await pool.release(conn)
            raise
        if len(held) < self._held_max:
            held.append(conn)
        else:
            await pool.release(conn)
        return reply

    async def aclose(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        while self._held:
            await self._pool.release(self._held.pop())
        await self.client.aclose()
