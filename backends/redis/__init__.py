"""The Redis store: every storage effect as one *command plan* (`plan.py`), run by a sync or an asyncio runner
(`RedisStore`, `AsyncRedisStore`), so no logic is written twice and the Redis protocol is never hand-rolled.
backends/README.md has this package's modules, how to find an effect's plan, and the key layout.

Atomicity (every effect is atomic): a write is one `Commit`, one run of the generic `commit` script (`commit.py`);
a read of one key is one command, a read that follows pointers one run of the generic `read` script (`read.py`), so
none observes half of a write; the few operations kept specific are a script each (`operations.py`, `webhooks.py`). A
read of a whole team or user is O(its memberships), ListUsers with no limit O(users): a script blocks the server
that long.

Redis Cluster: ``from_url(url, cluster=True)`` (either store) reaches a cluster through any one of its nodes, with
`redis.cluster.RedisCluster` / `redis.asyncio.cluster.RedisCluster`; both constructors also take such a client. The
plans are the same. Every script declares keys of one slot only, and the keys it builds from ARGV prefixes (the
record a pointer names, a membership by its sequence number) carry the same hash tag (tests/redis_ops/test_cluster.py
checks both for every script, on a real cluster), although Redis Cluster's documentation asks for every key to be
declared. What spans slots is never in a script: the project index ``{projects}`` and the clock override
``{clock}`` are single-key commands that redis-py routes to their node; ListProjects' and HitRateLimits' pipelines
are split per node by redis-py; DeleteProject and ResetProjectData SCAN every primary in turn (the `Scan` cursor
names the node and its own cursor), and each page's UNLINK holds keys of the project's slot only. A cluster's
pipelines refuse scripts, so there `Together` sends its plans' first operations each on its own (concurrently, with
the asyncio store) rather than in one pipeline. The client `from_url` makes refreshes its map of the cluster and
retries once on a connection error, CLUSTERDOWN or a slot no node serves, never on a timeout; CLUSTERDOWN,
MASTERDOWN, TRYAGAIN and a slot no node serves are `StorageUnavailable`, like a lost connection, and so is a cluster
no node of which answers (redis-py's `RedisClusterException` saying so; any other is a misuse, and propagates). The
sync client reads the cluster's map as it is made, so ``RedisStore.from_url(..., cluster=True)`` itself raises
`StorageUnavailable` then; the asyncio client connects on first use. A project's keys live on one primary: while it
is down that project's requests get 503 and others go on, until the cluster declares itself down (after
``cluster-node-timeout``, with the default ``cluster-require-full-coverage yes``) or a replica takes over.
"""

from __future__ import annotations

# These modules register their plans and scripts as they are imported.
from backends.redis import (  # noqa: F401
    commit,
    operations,
    reads,
    webhooks,
    writes,
)
from backends.redis.keys import DEFAULT_NAMESPACE, GRACE_MS, ORPHAN_NONCE_TTL_MS, KeySpace
from backends.redis.plan import SCRIPTS, Batch, Call, Op, Plan, Scan, Script
from backends.redis.store import RedisStore
from backends.redis.store_async import AsyncRedisStore

__all__ = [
    "DEFAULT_NAMESPACE",
    "GRACE_MS",
    "ORPHAN_NONCE_TTL_MS",
    "SCRIPTS",
    "AsyncRedisStore",
    "Batch",
    "Call",
    "KeySpace",
    "Op",
    "Plan",
    "RedisStore",
    "Scan",
    "Script",
]
