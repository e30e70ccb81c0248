"""The runner core the two stores share: error translation, script loading, `Together` and cluster scans.

Faults: every redis-py `ConnectionError` / `TimeoutError` and every `OSError` raised while talking to Redis is
re-raised as `StorageUnavailable` (the message names the effect, never the URL or its password). `from_url`
bounds connect and read time, pings idle connections before reuse (`health_check_interval`), and retries a
*connection* error once (a dead pooled connection after a Redis restart), never a timeout (a slow server may have
performed the command). A connection lost after a command was sent can thus repeat it once: every plan is
idempotent in effect, except that a repeated AttemptVerificationCode counts one more attempt, and a repeated
create, add, consume or delete reports the outcome of the second run (False, 0, EMAIL_TAKEN, MEMBERSHIP_EXISTS,
ALREADY_USED) for a write that did happen.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.backoff import ExponentialBackoff

from backends.redis.keys import KeySpace
from backends.redis.plan import SCRIPTS, Batch, Call, Op, Plan, Script, _plan_for, admitted_sources
from identity_proto.effects import StorageEffect, Together
from identity_proto.errors import StorageUnavailable

T = TypeVar("T")

#: SCAN page size for DeleteProject and ResetProjectData.
_SCAN_COUNT: Final = 1000

#: What "Redis could not be reached or did not answer" looks like from redis-py (asyncio's TimeoutError is OSError),
#: and on a cluster: CLUSTERDOWN (MASTERDOWN), TRYAGAIN (a slot mid-migration), a slot no node serves.
_UNAVAILABLE: Final = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)


#: How redis-py's cluster client says that no node answered, or that no node serves some slot (a
#: `RedisClusterException`, which otherwise means a misuse such as keys of several slots in one command).
_CLUSTER_UNREACHABLE: Final = re.compile(
    r"Redis Cluster cannot be connected|All slots are not covered|No targets were found"
)


def _cluster_unreachable(exc: redis.exceptions.RedisClusterException) -> bool:
    return isinstance(exc, redis.exceptions.SlotNotCoveredError) or bool(_CLUSTER_UNREACHABLE.match(str(exc)))


#: What the runners catch around every round trip: `_UNAVAILABLE`, and the cluster client's own exceptions.
FAULTS: Final = (*_UNAVAILABLE, redis.exceptions.RedisClusterException)


def storage_fault(effect: StorageEffect[Any], exc: BaseException) -> StorageUnavailable:
    """The `StorageUnavailable` to raise for `exc` (one of `FAULTS`), raised while performing `effect`. Both
    runners, sync and asyncio, translate errors here only: ``except FAULTS as exc: raise storage_fault(effect, exc)
    from exc``. A `RedisClusterException` that does not say the cluster is unreachable is a misuse (keys of several
    slots in one command, ...): it is re-raised as it is."""
    if isinstance(exc, _UNAVAILABLE) or (
        isinstance(exc, redis.exceptions.RedisClusterException) and _cluster_unreachable(exc)
    ):
        # The class name only: redis-py messages name the host, and a URL is never worth the risk of a password.
        return StorageUnavailable(f"Redis unavailable during {type(effect).__name__} ({type(exc).__name__})")
    raise exc


logger = logging.getLogger("identity_service")


class StoreObserver(Protocol):
    """What a host that measures the store is told (`observe`): each operation's outcome, and the circuit
    breaker's state when it changes. Called on the store's path: it must be quick and must not raise."""

    def performed(self, operation: str, outcome: str, seconds: float) -> None:
        """One effect performed (`operation`: its type's name) in `seconds`: "ok", "unavailable" (a fault, or the
        circuit refused it at once), "error" (Redis answered with an error) or "cancelled" (the request went)."""

    def circuit(self, is_open: bool) -> None:
        """The circuit breaker opened (Redis is known to be down) or closed again."""


class CircuitBreaker:
    """Fail fast while Redis is known to be down: after a fault, every request is refused at once
    (`StorageUnavailable`, `quiet`: the outage is said once, here) for `window_s`; then one request at a time goes
    through as a probe. A probe that reaches Redis closes the circuit; one that fails opens it for another window.

    Why: without it, each request waits for its own connection attempts (a connect timeout, redis-py's retry and
    backoff) while the others queue behind it, so with 50 requests in flight the last 503 came after 10 s (Redis
    refusing connections) to 30 s (Redis accepting and dropping them); with it, the requests in flight when Redis
    went away get their 503 from the attempt they share, and every later one in microseconds. The price: a
    recovery is seen up to `window_s` late. One line is logged when the circuit opens and one when it closes.

    Shared by the asyncio store (one event loop) and the sync one (threads): the state is guarded by a lock, taken
    only while the circuit is open. On a Redis Cluster the stores keep it off (`enabled=False`): one node down
    leaves the projects of the others available, and the cluster client follows the cluster's own failover."""

    def __init__(
        self, window_s: float = 0.5, clock: Callable[[], float] = time.monotonic, *, enabled: bool = True
    ) -> None:
        self.window_s = window_s
        self.enabled = enabled
        self._clock = clock
        self._lock = threading.Lock()
        #: When the circuit opened (None: closed), when the next probe may go, and whether one is out.
        self._opened_at: float | None = None
        self._probe_at = 0.0
        self._probing = False
        #: Told when the circuit opens and closes (`StoreObserver.circuit`).
        self.observer: StoreObserver | None = None

    @property
    def open(self) -> bool:
        """Whether requests are being refused at once (or probing)."""
        return self._opened_at is not None

    def admit(self, effect: StorageEffect[Any]) -> bool:
        """Let a request through (True when it is the probe) or refuse it at once."""
        if self._opened_at is None:
            return False
        with self._lock:
            if self._opened_at is None:
                return False
            if not self._probing and self._clock() >= self._probe_at:
                self._probing = True
                return True
        raise StorageUnavailable(f"Redis unavailable during {type(effect).__name__} (circuit open)", quiet=True)

    def failed(self) -> None:
        """A request met a fault: open the circuit (saying so once), or keep it open for another window."""
        if not self.enabled:
            return
        with self._lock:
            now = self._clock()
            if self._opened_at is None:
                self._opened_at = now
                logger.warning(
                    "Redis unavailable: answering 503 at once, one request every %.1f s checks whether it is back",
                    self.window_s,
                )
                if self.observer is not None:
                    self.observer.circuit(True)
            self._probe_at = now + self.window_s
            self._probing = False

    def succeeded(self) -> None:
        """A request reached Redis: close the circuit (saying so once)."""
        if self._opened_at is None:
            return
        with self._lock:
            if self._opened_at is None:
                return
            down = self._clock() - self._opened_at
            self._opened_at, self._probing = None, False
        logger.warning("Redis available again after %.1f s", down)
        if self.observer is not None:
            self.observer.circuit(False)

    def abandoned(self, probe: bool) -> None:
        """A request let through ended without an answer (cancelled): the next one probes instead."""
        if probe:
            with self._lock:
                self._probing = False


def register_scripts(client: Any) -> dict[str, Any]:
    """Every Lua script of `SCRIPTS`, and each behind the prelude of `Admit` (`admitted_sources`), registered with
    `client` (sync or asyncio): redis-py's `Script` objects run EVALSHA and load the script when the server answers
    NOSCRIPT."""
    sources = {**SCRIPTS, **admitted_sources()}
    return {name: client.register_script(source) for name, source in sources.items()}


#: Connections an asyncio store made by `AsyncRedisStore.from_url` opens at most (per process); more concurrent
#: commands wait for one (up to the socket timeout).
_ASYNC_MAX_CONNECTIONS = 100


def _options(socket_timeout: float, health_check_interval: float) -> dict[str, Any]:
    """The timeouts every client `from_url` makes is given."""
    return {
        "socket_connect_timeout": socket_timeout,
        "socket_timeout": socket_timeout,
        "health_check_interval": health_check_interval,
    }


def _backoff() -> ExponentialBackoff:
    return ExponentialBackoff(cap=0.25, base=0.05)


#: What a cluster client retries itself, after refreshing its map of the cluster: a refused or dropped connection,
#: CLUSTERDOWN, a slot no node serves. Never a timeout (RedisCluster's default retries those too): a slow node may
#: have performed the command.
_CLUSTER_RETRIED: Final = (
    redis.exceptions.ConnectionError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.SlotNotCoveredError,
)


class _Cluster(redis.cluster.RedisCluster):
    """The sync cluster client `RedisStore.from_url(..., cluster=True)` makes."""

    ERRORS_ALLOW_RETRY = _CLUSTER_RETRIED  # type: ignore[assignment]  # narrower on purpose: no timeouts


class _AsyncCluster(redis.asyncio.cluster.RedisCluster):
    """The asyncio cluster client `AsyncRedisStore.from_url(..., cluster=True)` makes."""

    ERRORS_ALLOW_RETRY = _CLUSTER_RETRIED  # type: ignore[assignment]  # narrower on purpose: no timeouts


def client_from_url(
    url: str, *, socket_timeout: float, health_check_interval: float, cluster: bool
) -> redis.Redis | redis.cluster.RedisCluster:
    """The sync client `RedisStore.from_url` makes (see there). The cluster client reads the cluster's map as it is
    made: a cluster it cannot reach is `StorageUnavailable` here."""
    options = _options(socket_timeout, health_check_interval)
    if not cluster:
        retry = redis.retry.Retry(_backoff(), 1, supported_errors=(redis.exceptions.ConnectionError,))
        return redis.Redis.from_url(url, retry=retry, **options)
    try:
        return _Cluster.from_url(url, retry=redis.retry.Retry(_backoff(), 1), **options)
    except redis.exceptions.RedisClusterException as exc:
        if not _cluster_unreachable(exc):
            raise
        raise StorageUnavailable("Redis Cluster unavailable while connecting (RedisClusterException)") from exc


def async_client_from_url(
    url: str, *, socket_timeout: float, health_check_interval: float, cluster: bool
) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
    """The asyncio client `AsyncRedisStore.from_url` makes (see there): on one server, a *blocking* pool of
    `_ASYNC_MAX_CONNECTIONS`: when every connection is busy (a burst of more concurrent requests than the pool has
    connections), a command waits up to `socket_timeout` for one instead of failing at once (redis-py's default pool
    refuses the 101st with `MaxConnectionsError`). Nothing connects yet."""
    options = _options(socket_timeout, health_check_interval)
    if cluster:
        return _AsyncCluster.from_url(url, retry=redis.asyncio.retry.Retry(_backoff(), 1), **options)
    retry = redis.asyncio.retry.Retry(_backoff(), 1, supported_errors=(redis.exceptions.ConnectionError,))
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=_ASYNC_MAX_CONNECTIONS, timeout=socket_timeout, retry=retry, **options
    )
    return redis.asyncio.Redis.from_pool(pool)  # the client owns the pool: closing it closes the pool


def gather(*replies: T) -> list[T]:
    """The sync counterpart of `async_gather`: the replies, which the caller's arguments got one after another."""
    return list(replies)


async def async_gather(*replies: Awaitable[T]) -> list[T]:
    """The replies of awaitables run concurrently (`asyncio.gather`), in order."""
    return list(await asyncio.gather(*replies))


def _scan_position(cursor: str, primaries: list[str]) -> tuple[str, int] | None:
    """Where a cluster-wide `Scan` goes on: (a primary's name, its own SCAN cursor), or None when it is over.

    The opaque cursor is ``"<node cursor>@<node name>"``, ``"0"`` the start of the first primary; primaries go by
    name. A node gone since (failed over, removed) is skipped, its successors scanned: not atomic, like the rest of
    a DeleteProject, which a repeat finishes."""
    if cursor == "0":
        return (primaries[0], 0) if primaries else None
    at, _, name = cursor.partition("@")
    if name in primaries:
        return name, int(at)
    later = [node for node in primaries if node > name]
    return (later[0], 0) if later else None


def _scan_cursor(name: str, node_cursor: int, primaries: list[str]) -> str:
    """The opaque cursor after a SCAN of primary `name` answered `node_cursor`."""
    if node_cursor != 0:
        return f"{node_cursor}@{name}"
    later = [node for node in primaries if node > name]
    return f"0@{later[0]}" if later else "0"


@dataclass
class _Started:
    """Plans of a `Together`, started: their first operations (pending) or, for plans that needed none, results."""

    plans: list[Plan[Any]]
    results: list[Any]
    pending: list[tuple[int, Op]]


def _start_together(effect: Together, keys: KeySpace, store: str) -> _Started:
    plans = [_plan_for(inner, keys, store) for inner in effect.effects]
    results: list[Any] = [None] * len(plans)
    pending: list[tuple[int, Op]] = []
    for index, plan in enumerate(plans):
        try:
            pending.append((index, next(plan)))
        except StopIteration as stop:
            results[index] = stop.value
    return _Started(plans, results, pending)


def commands(ops: list[Op], scripts: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The commands of plan operations, in order, to pipeline (a Batch: each of its calls). A script is its EVALSHA:
    redis-py's `Script` on a pipeline makes the pipeline ask SCRIPT EXISTS first, a round trip of its own; a script
    the server does not know answers NOSCRIPT instead (see `forgotten_scripts`)."""
    out: list[tuple[Any, ...]] = []
    for op in ops:
        if isinstance(op, Script):
            out.append(("EVALSHA", scripts[op.name].sha, len(op.keys), *op.keys, *op.args))
        elif isinstance(op, Call):
            out.append((op.command, *op.args))
        elif isinstance(op, Batch):
            out += [(call.command, *call.args) for call in op.calls]
        else:  # a Scan walks node by node: never a plan's first operation, so never in a pipeline
            raise TypeError(f"{type(op).__name__} cannot be pipelined")
    return out


def forgotten_scripts(replies: list[Any], ops: list[Op]) -> list[int]:
    """The indexes of the scripts among `ops` the server answered NOSCRIPT for (it did not run them: they are to be
    run again, through their `Script`, which loads them), given the replies of a pipeline run with
    ``raise_on_error=False`` as `_split` regroups them."""
    return [
        at
        for at, (op, reply) in enumerate(zip(ops, replies, strict=True))
        if isinstance(op, Script) and isinstance(reply, redis.exceptions.NoScriptError)
    ]


def raise_first_error(replies: list[Any], ops: list[Op]) -> None:
    """Raise the first error reply among the replies to `ops` (as `_split` regroups them: a Batch's is the list of
    its calls' replies) of a pipeline run with ``raise_on_error=False``, as ``raise_on_error=True`` would have
    (after the forgotten scripts ran again)."""
    for op, reply in zip(ops, replies, strict=True):
        for one in reply if isinstance(op, Batch) else (reply,):
            if isinstance(one, redis.exceptions.ResponseError):
                raise one


def _split(raw: list[Any], ops: list[Op]) -> list[Any]:
    """The pipeline's replies regrouped per operation (a Batch gets the list of its calls' replies)."""
    replies: list[Any] = []
    at = 0
    for op in ops:
        if isinstance(op, Batch):
            replies.append(raw[at : at + len(op.calls)])
            at += len(op.calls)
        else:
            replies.append(raw[at])
            at += 1
    return replies
