# Generated from backends/redis/store_async.py by scripts/generate_sync: do not edit.
"""The sync twin of `backends.redis.store_async`, generated from it: its docstring tells of both."""

from __future__ import annotations

import time
from typing import Any, TypeVar, cast

import redis
import redis.cluster
from redis.commands.core import Script as RedisScript

from backends.redis.keys import DEFAULT_NAMESPACE, KeySpace
from backends.redis.plan import _PLANS, Call, Op, Plan, Scan, Script, _plan_for
from backends.redis.runner import (
    _SCAN_COUNT,
    FAULTS,
    CircuitBreaker,
    StoreObserver,
    _scan_cursor,
    _scan_position,
    _split,
    _start_together,
    client_from_url,
    commands,
    forgotten_scripts,
    gather,
    raise_first_error,
    register_scripts,
    storage_fault,
)
from identity_proto.effects import StorageEffect, Together
from identity_proto.errors import StorageUnavailable

T = TypeVar("T")


class RedisStore:
    """A store over a `redis.Redis` client, or a `redis.cluster.RedisCluster`."""

    #: The effect types this store performs, each with its command plan (the same for both shells).
    performs = _PLANS

    def __init__(
        self,
        client: redis.Redis | redis.cluster.RedisCluster,
        *,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> None:
        self.client = client
        one_node = not isinstance(client, redis.cluster.RedisCluster)
        self.keys = KeySpace(namespace, one_node=one_node)
        self._breaker = CircuitBreaker(enabled=one_node)
        self._observer: StoreObserver | None = None
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
        client = client_from_url(
            url, socket_timeout=socket_timeout, health_check_interval=health_check_interval, cluster=cluster
        )
        return cls(client, namespace=namespace)

    def observe(self, observer: StoreObserver) -> None:
        """Tell `observer` of every operation from now on, and of the circuit breaker's changes (metrics)."""
        self._observer = self._breaker.observer = observer

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect by running its command plan; refused at once while Redis is known to be down
        (`runner.CircuitBreaker`)."""
        if self._observer is None:
            return self._apply(effect)
        started = time.perf_counter()
        outcome = "cancelled"
        try:
            result = self._apply(effect)
            outcome = "ok"
        except StorageUnavailable:
            outcome = "unavailable"
            raise
        except Exception:
            outcome = "error"
            raise
        finally:
            self._observer.performed(type(effect).__name__, outcome, time.perf_counter() - started)
        return result

    def _apply(self, effect: StorageEffect[T]) -> T:
        probe = self._breaker.admit(effect)
        try:
            if isinstance(effect, Together):
                result: Any = self._apply_together(effect)
            else:
                result = self._finish(_plan_for(effect, self.keys, type(self).__name__), None, effect)
        except StorageUnavailable:
            self._breaker.failed()
            raise
        except Exception:
            self._breaker.succeeded()  # Redis answered (an error reply): it is there
            raise
        except BaseException:
            self._breaker.abandoned(probe)
            raise
        self._breaker.succeeded()
        return cast(T, result)

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
        refuse scripts (EVALSHA), so there each operation goes on its own (`gather`: concurrently on asyncio, one
        after the other in the sync shell)."""
        if isinstance(self.client, redis.cluster.RedisCluster):
            return gather(*(self._execute(op) for _, op in pending))
        ops = [op for _, op in pending]
        replies = self._pipelined(ops, raise_on_error=False)
        for at in forgotten_scripts(replies, ops):
            replies[at] = self._execute(ops[at])
        raise_first_error(replies, ops)
        return replies

    def _execute(self, op: Op) -> Any:
        client: Any = self.client  # redis-py types its sync client's commands loosely, its asyncio client's not
        if isinstance(op, Call):
            return client.execute_command(op.command, *op.args)
        if isinstance(op, Script):
            return self._scripts[op.name](keys=op.keys, args=op.args)
        if isinstance(op, Scan):
            return self._scan(op)
        return (self._pipelined([op]))[0]

    def _pipelined(self, ops: list[Op], *, raise_on_error: bool = True) -> list[Any]:
        """The replies to `ops`, sent in one pipeline (not a transaction), regrouped per operation."""
        client: Any = self.client  # redis-py types its sync client's commands loosely, its asyncio client's not
        with client.pipeline(transaction=False) as pipe:
            for command in commands(ops, self._scripts):
                pipe.execute_command(*command)
            return _split(pipe.execute(raise_on_error=raise_on_error), ops)

    def _scan(self, op: Scan) -> tuple[str, list[Any]]:
        client = self.client
        if not isinstance(client, redis.cluster.RedisCluster):
            scan = ("SCAN", int(op.cursor), "MATCH", op.match, "COUNT", _SCAN_COUNT)
            reply: Any = client.execute_command(*scan)  # type: ignore[no-untyped-call]
            return str(int(reply[0])), list(reply[1])
        cluster: Any = client  # redis-py types the asyncio cluster client's methods, not the sync one's
        primaries = sorted(node.name for node in cluster.get_primaries())
        position = _scan_position(op.cursor, primaries)
        if position is None:
            return "0", []
        name, at = position
        node = cluster.get_node(node_name=name)
        cursors, found = cluster.scan(at, match=op.match, count=_SCAN_COUNT, target_nodes=node)
        return _scan_cursor(name, int(cursors[name]), primaries), list(found)

    def close(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        self.client.close()
