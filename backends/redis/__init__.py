"""The Redis store: every storage effect as one *command plan*, run by a sync or an asyncio runner.

Each effect's Redis logic is written once, as a small generator (a command plan) that yields redis operations
(`Call`, `Batch`, `Script`) and is sent their replies; it returns the effect's result. Two tiny runners perform
those operations with redis-py: `RedisStore` over `redis.Redis` and `AsyncRedisStore` over `redis.asyncio.Redis`.
This is what `identity_proto.drivers` does for the core's flows, one level down; no business logic is written
twice, and the Redis protocol is never hand-rolled (commands go through `execute_command`, pipelines and
`register_script` Script objects).

Layout of this package (see backends/README.md for finding an effect's plan and script):

- `keys`: the key layout (`KeySpace`, its table, TTLs and grace periods);
- `codecs`: records to and from Redis hashes;
- `plan`: what a plan yields (`Call`, `Batch`, `Script`, `Scan`) and the registries of plans and Lua scripts;
- `lua`: Lua functions several scripts share;
- `commit`: the one generic write (`Commit`): its script, and the registries of how guards and writes become ops;
- one module per resource, each holding its plans with their Lua scripts right above them, and its commit guards
  and writes: `projects`, `codes` (presenting a one-time code), `users`, `sessions`, `outbox`, `teams` (and
  memberships), `permissions`, `api_keys`, `team_invitations`, `contact_channels`, `passwords`, `oauth`,
  `webhooks`, `rate_limits`, `testing` (clock override, project reset);
- `runner`: what both runners share (error translation, script loading, `Together`, cluster scans); `store_async`
  (`AsyncRedisStore`, asyncio) and `store` (`RedisStore`, sync, generated from `store_async` by
  `scripts/generate_sync`).

Atomicity (identity_proto.effects: every effect is atomic). Writes are decided by the core and sent as one
`Commit`: `commit.py` translates its guards and writes into an op list on this store's key layout, and one generic
Lua script checks every guard and, only if all hold, applies every write and records the events (see `commit.py`
and backends/README.md). The writes not yet moved onto `Commit` (projects, a code's attempts, the remaining user,
session and password writes, webhook endpoints and deliveries) are one Lua script each, on
keys of the project's slot, named after the effect (backends/README.md lists them). Reads of one key are one
command (LoadUser, LoadSession, LoadTeam, ...); reads that follow a pointer (FindUserByIndex, ListUsers,
ListSessions, ListOutbox with ``to``, ListTeams, LoadMembership, ListMemberships, ListContactChannels) are one script
too, so none observes half of a write. Scripts that walk a whole team or user are O(its memberships), and ListUsers
with no limit is O(users): they block the server for that long, like any script. DeleteProject and
ResetProjectData walk the project's keys with SCAN and UNLINK them page by page (below).

Scripts that follow a pointer (token -> session -> user, index -> user, set -> sessions, user order -> users, team
index -> teams, membership index -> seq -> membership, member index -> users' selections) build the pointed-to
key names in Lua from a key prefix passed in ARGV, as they cannot be known beforehand. Those keys carry the project's
hash tag, so they are in the slot of the script's declared KEYS; Redis Cluster runs such scripts, although the
Redis documentation asks for every key to be declared.

Redis Cluster: ``from_url(url, cluster=True)`` (either store) reaches a cluster through any one of its nodes, with
`redis.cluster.RedisCluster` / `redis.asyncio.cluster.RedisCluster`; both constructors also take such a client. The
plans are the same. Every script declares keys of one slot only, and the keys it builds from ARGV prefixes carry the
same hash tag (tests/redis_ops/test_cluster.py checks both for every script, on a real cluster). What spans slots is
never in a script: the project index ``{projects}`` and the clock override ``{clock}`` are single-key commands that
redis-py routes to their node; ListProjects' and HitRateLimits' pipelines are split per node by redis-py;
DeleteProject and ResetProjectData SCAN every primary in turn (the `Scan` cursor names the node and its own cursor),
and each page's UNLINK holds keys of the project's slot only. A cluster's pipelines refuse scripts, so there
`Together` sends its plans' first operations each on its own (concurrently, with the asyncio store) rather than in
one pipeline. The client `from_url` makes refreshes its map of the cluster and retries once on a connection error,
CLUSTERDOWN or a slot no node serves, never on a timeout; CLUSTERDOWN, MASTERDOWN, TRYAGAIN and a slot no node
serves are `StorageUnavailable`, like a lost connection, and so is a cluster no node of which answers (redis-py's
`RedisClusterException` saying so; any other is a misuse, and propagates). The sync client reads the cluster's map
as it is made, so ``RedisStore.from_url(..., cluster=True)`` itself raises `StorageUnavailable` then; the asyncio
client connects on first use. A project's keys live on one primary: while it is down that project's requests get 503
and others go on, until the cluster declares itself down (after ``cluster-node-timeout``, with the default
``cluster-require-full-coverage yes``) or a replica takes over.
"""

from __future__ import annotations

# The resource modules register their plans and scripts as they are imported.
from backends.redis import (  # noqa: F401
    api_keys,
    codes,
    commit,  # the one generic write: guards, writes, events, one script
    contact_channels,
    oauth,  # OAuth: short-lived values (states, outer codes, the mock provider's), the OAuth index, tokens
    outbox,
    passwords,  # passwords: reset codes, resetting, changing and setting a password
    permissions,
    projects,
    rate_limits,
    sessions,
    team_invitations,
    teams,
    testing,
    users,
    webhooks,  # webhooks: endpoints, deliveries, fan-out, retention
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
