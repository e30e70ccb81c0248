"""The sync shell: `RedisStore` runs command plans with a `redis.Redis` (or `redis.cluster.RedisCluster`) client."""

from __future__ import annotations

from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.commands.core import Script as RedisScript

from backends.redis.keys import DEFAULT_NAMESPACE, KeySpace
from backends.redis.plan import _PLANS, Call, Op, Plan, Scan, Script, _plan_for
from backends.redis.runner import (
    _SCAN_COUNT,
    FAULTS,
    _Cluster,
    _cluster_unreachable,
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
from identity_proto.errors import StorageUnavailable

T = TypeVar("T")


class RedisStore:
    """A store over a sync `redis.Redis` client, or a `redis.cluster.RedisCluster` (thread-safe: redis-py pools
    connections)."""

    #: The effect types this store performs, each with its command plan (shared with `AsyncRedisStore`).
    performs = _PLANS

    def __init__(self, client: redis.Redis | redis.cluster.RedisCluster, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._scripts: dict[str, RedisScript] = register_scripts(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout: float = 2.0,
        health_check_interval: float = 30.0,
        cluster: bool = False,
    ) -> RedisStore:
        """A store with its own client for `url` (redis://[[user]:password@]host:port/db, rediss://, unix://).

        With `cluster`, `url` names any node of a Redis Cluster (redis:// or rediss://, database 0); the client
        discovers the others and follows the cluster's changes."""
        client: redis.Redis | redis.cluster.RedisCluster
        if cluster:
            try:  # the sync cluster client reads the cluster's map as it is made
                client = _Cluster.from_url(
                    url,
                    socket_connect_timeout=socket_timeout,
                    socket_timeout=socket_timeout,
                    health_check_interval=health_check_interval,
                    retry=redis.retry.Retry(_retry_backoff(), 1),
                )
            except redis.exceptions.RedisClusterException as exc:
                if not _cluster_unreachable(exc):
                    raise
                raise StorageUnavailable("Redis Cluster unavailable while connecting (RedisClusterException)") from exc
        else:
            client = redis.Redis.from_url(
                url,
                socket_connect_timeout=socket_timeout,
                socket_timeout=socket_timeout,
                health_check_interval=health_check_interval,
                retry=redis.retry.Retry(_retry_backoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
            )
        return cls(client, namespace=namespace)

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect by running its command plan."""
        if isinstance(effect, Together):
            return cast(T, self._apply_together(effect))
        return cast(T, self._finish(_plan_for(effect, self.keys, type(self).__name__), None, effect))

    def _finish(self, plan: Plan[Any], reply: Any, effect: StorageEffect[Any]) -> Any:
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return stop.value
            try:
                reply = self._execute(op)
            except FAULTS as exc:
                raise storage_fault(effect, exc) from exc

    def _apply_together(self, effect: Together) -> tuple[Any, ...]:
        """The first operation of every plan in one pipeline (one round trip); what follows, plan by plan."""
        started = _start_together(effect, self.keys, type(self).__name__)
        if started.pending:
            try:
                replies = self._first_replies(started.pending)
            except FAULTS as exc:
                raise storage_fault(effect, exc) from exc
            for (index, _op), reply in zip(started.pending, replies, strict=True):
                started.results[index] = self._finish(started.plans[index], reply, effect.effects[index])
        return tuple(started.results)

    def _first_replies(self, pending: list[tuple[int, Op]]) -> list[Any]:
        """The replies to the first operations of a Together's plans, from one pipeline. A cluster's pipelines
        refuse scripts (EVALSHA), so there each operation goes on its own."""
        if isinstance(self.client, redis.cluster.RedisCluster):
            return [self._execute(op) for _, op in pending]
        with self.client.pipeline(transaction=False) as pipe:
            for _, op in pending:
                queue(pipe, op, self._scripts)
            replies = _split(pipe.execute(raise_on_error=False), pending)
        ops = [op for _, op in pending]
        for at in forgotten_scripts(replies, ops):
            replies[at] = self._execute(ops[at])
        raise_first_error(replies, ops)
        return replies

    def _execute(self, op: Op) -> Any:
        if isinstance(op, Call):
            return self.client.execute_command(op.command, *op.args)  # type: ignore[no-untyped-call]
        if isinstance(op, Script):
            return self._scripts[op.name](keys=op.keys, args=op.args)
        if isinstance(op, Scan):
            return self._scan(op)
        with self.client.pipeline(transaction=False) as pipe:
            for call in op.calls:
                pipe.execute_command(call.command, *call.args)
            return pipe.execute()

    def _scan(self, op: Scan) -> tuple[str, list[Any]]:
        client = self.client
        if not isinstance(client, redis.cluster.RedisCluster):
            scan = ("SCAN", int(op.cursor), "MATCH", op.match, "COUNT", _SCAN_COUNT)
            reply: Any = client.execute_command(*scan)  # type: ignore[no-untyped-call]
            return str(int(reply[0])), list(reply[1])
        primaries = sorted(node.name for node in client.get_primaries())  # type: ignore[no-untyped-call]
        position = _scan_position(op.cursor, primaries)
        if position is None:
            return "0", []
        name, at = position
        node = client.get_node(node_name=name)  # type: ignore[no-untyped-call]
        cursors, found = cast(Any, client.scan(at, match=op.match, count=_SCAN_COUNT, target_nodes=node))
        return _scan_cursor(name, int(cursors[name]), primaries), list(found)

    def close(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        self.client.close()
