"""The asyncio shell: `AsyncRedisStore` runs the same command plans, awaited, with a `redis.asyncio.Redis` (or
`redis.asyncio.cluster.RedisCluster`) client.

Connections (asyncio): the client `AsyncRedisStore.from_url` makes has a *blocking* pool of 100 connections: a burst
of more concurrent requests than that waits up to the socket timeout for a connection, then gets 503, rather than
failing at once (redis-py's default pool refuses the 101st with `MaxConnectionsError`). On one server, every
command but SCAN goes through `AutoPipeline` (`backends.redis.autopipe`): the commands concurrent requests issue in
one event-loop turn go to Redis in one write, on one connection taken from that pool, and each request gets its
own replies. Measured with 16 concurrent requests on one worker, an authenticated GET costs about a third less
Python CPU than with a connection held per request, and the server's CPU per request falls too (fewer reads and
writes). A `Together`'s first operations are one pipeline there too, without redis-py's `Pipeline`, which sends
SCRIPT EXISTS before any pipeline holding a script: a second round trip.
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

from backends.redis.autopipe import AutoPipeline
from backends.redis.keys import DEFAULT_NAMESPACE, KeySpace
from backends.redis.plan import _PLANS, SCRIPTS, Batch, Call, Op, Plan, Scan, Script, _plan_for
from backends.redis.runner import (
    _ASYNC_MAX_CONNECTIONS,
    _SCAN_COUNT,
    FAULTS,
    _AsyncCluster,
    _retry_backoff,
    _scan_cursor,
    _scan_position,
    _split,
    _start_together,
    forgotten_scripts,
    queue,
    raise_first_error,
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
        #: On one server (not a cluster, not a single-connection client), every command but SCAN is pipelined
        #: with those of concurrent requests (see `backends.redis.autopipe`).
        self._pipeline: AutoPipeline | None = None
        if isinstance(client, redis.asyncio.Redis) and not client.single_connection_client:
            self._pipeline = AutoPipeline(client.connection_pool)

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
        if self._pipeline is not None:
            return await self._pipelined([op for _, op in pending])
        if isinstance(self.client, redis.asyncio.cluster.RedisCluster):
            return list(await asyncio.gather(*(self._execute(op) for _, op in pending)))
        async with self.client.pipeline(transaction=False) as pipe:
            for _, op in pending:
                queue(pipe, op, self._scripts)
            replies = _split(await pipe.execute(raise_on_error=False), pending)
        ops = [op for _, op in pending]
        for at in forgotten_scripts(replies, ops):
            replies[at] = await self._execute(ops[at])
        raise_first_error(replies, ops)
        return replies

    async def _execute(self, op: Op) -> Any:
        if self._pipeline is not None and not isinstance(op, Scan):
            return (await self._pipelined([op]))[0]
        if isinstance(op, Call):
            return await self.client.execute_command(op.command, *op.args)
        if isinstance(op, Script):
            return await self._scripts[op.name](keys=op.keys, args=op.args)
        if isinstance(op, Scan):
            return await self._scan(op)
        async with self.client.pipeline(transaction=False) as pipe:
            for call in op.calls:
                pipe.execute_command(call.command, *call.args)
            return await pipe.execute()

    async def _pipelined(self, ops: list[Op]) -> list[Any]:
        """The replies to `ops` (a Batch: the list of its calls' replies), their commands sent together, and with
        those of concurrent requests (`AutoPipeline`). A script the server does not know (a restart, SCRIPT FLUSH:
        the reply NOSCRIPT, so it did not run) is loaded and run again, on its own. The first error reply is raised,
        as a redis-py pipeline raises it."""
        pipeline = self._pipeline
        assert pipeline is not None
        commands, sources = _commands(ops, self._scripts)
        raw = await pipeline.execute(commands)
        for at, reply in enumerate(raw):
            if isinstance(reply, redis.exceptions.NoScriptError) and at in sources:
                loaded, again = await pipeline.execute((("SCRIPT", "LOAD", sources[at]), commands[at]))
                raw[at] = again if not isinstance(loaded, redis.exceptions.ResponseError) else loaded
        replies = _split(raw, [(0, op) for op in ops])
        raise_first_error(replies, ops)
        return replies

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

    async def aclose(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        if self._pipeline is not None:
            await self._pipeline.aclose()
        await self.client.aclose()


def _commands(ops: list[Op], scripts: dict[str, AsyncScript]) -> tuple[list[tuple[Any, ...]], dict[int, str]]:
    """The commands of `ops`, in order (a Batch: each of its calls), and the source of each EVALSHA's script by
    the command's index (to load it when the server answers NOSCRIPT)."""
    commands: list[tuple[Any, ...]] = []
    sources: dict[int, str] = {}
    for op in ops:
        if isinstance(op, Script):
            sources[len(commands)] = SCRIPTS[op.name]
            commands.append(("EVALSHA", scripts[op.name].sha, len(op.keys), *op.keys, *op.args))
        elif isinstance(op, Call):
            commands.append((op.command, *op.args))
        elif isinstance(op, Batch):
            commands += [(call.command, *call.args) for call in op.calls]
        else:  # a Scan walks node by node, with the client's own SCAN
            raise TypeError(f"{type(op).__name__} cannot be pipelined")
    return commands, sources
