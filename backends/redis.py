"""The Redis store: every storage effect as one *command plan*, run by a sync or an asyncio runner.

Each effect's Redis logic is written once, as a small generator (a command plan) that yields redis operations
(`Call`, `Batch`, `Script`) and is sent their replies; it returns the effect's result. Two tiny runners perform
those operations with redis-py: `RedisStore` over `redis.Redis` and `AsyncRedisStore` over `redis.asyncio.Redis`.
This is what `identity_proto.drivers` does for the core's flows, one level down; no business logic is written
twice, and the Redis protocol is never hand-rolled (commands go through `execute_command`, pipelines and
`register_script` Script objects).

Key layout (`<ns>` is the namespace prefix, `"identity:"` by default):

====================================  ======  ================================================================
Key                                   Type    Holds
====================================  ======  ================================================================
``<ns>{p:<project_id>}:project``      HASH    The project record, one field per piece: ``id``,
                                              ``display_name``, ``created_at_millis`` (decimal),
                                              ``signing_key``, ``keys`` (JSON object of key hashes), and
                                              ``config.<name>`` (JSON) for each config field. Hash tag
                                              ``{p:<project_id>}``: every key of one project lives in the same
                                              Redis Cluster slot, so a multi-key script on a project is legal.
``<ns>{projects}:index``              SET     The ids of every project. Hash tag ``{projects}``: its own slot,
                                              never in a script together with a project's keys.
====================================  ======  ================================================================

Atomicity (identity_proto.effects: every effect is atomic). Each write to a project's record is one Lua script
on keys of that project's slot: CreateProject (write if absent), EnsureProject (write if absent, else replace
only the ``keys`` field; returns the stored record), UpdateProject (only if present, HSET just the given fields,
so two concurrent updates of different config keys both survive; returns the record) and DeleteProject (delete
the record and, as they are added, the project's other keys; says whether it existed).

The index is in another slot, so it cannot be written in the same script. The order makes every crash safe:
*create* writes the record first and the index entry second; *delete* removes the index entry first and the
record second. A crash therefore never leaves an index entry pointing at nothing, only (at worst) a record
missing from the index; CreateProject and EnsureProject add the id to the index whatever the script found
(SADD is idempotent), so retrying either repairs it. A create racing a delete of the same id can still leave a
dangling entry, so ListProjects (SMEMBERS, then HGETALL of each in one pipeline) skips ids whose record is
missing, and sorts by (created_at_millis, id) like the memory store.

Faults: every redis-py `ConnectionError` / `TimeoutError` and every `OSError` raised while talking to Redis is
re-raised as `StorageUnavailable` (the message names the effect, never the URL or its password). `from_url`
bounds connect and read time, pings idle connections before reuse (`health_check_interval`), and retries a
*connection* error once (a dead pooled connection after a Redis restart), never a timeout (a slow server may have
performed the command). A connection lost after a command was sent can thus repeat it once: every plan is
idempotent in effect, though a repeated CreateProject or DeleteProject script then reports False for a write
that did happen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar, cast

import orjson
import redis
import redis.asyncio
import redis.asyncio.retry
import redis.retry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript
from redis.commands.core import Script as RedisScript

from identity_proto.effects import (
    CreateProject,
    DeleteProject,
    EnsureProject,
    ListProjects,
    LoadProject,
    StorageEffect,
    UpdateProject,
)
from identity_proto.errors import StorageUnavailable
from identity_proto.records import Project, ProjectConfig, config_to_json, project_from_json, project_to_json

__all__ = [
    "DEFAULT_NAMESPACE",
    "SCRIPTS",
    "AsyncRedisStore",
    "Batch",
    "Call",
    "KeySpace",
    "Plan",
    "RedisStore",
    "Script",
]

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

DEFAULT_NAMESPACE: Final = "identity:"

#: What a command argument may be (redis-py encodes str as UTF-8 and numbers as their decimal text).
Arg: TypeAlias = str | bytes | int | float


# --------------------------------------------------------------------------------------------------------------
# Operations a plan yields


@dataclass(frozen=True, slots=True, init=False)
class Call:
    """One command; the plan is sent its reply as redis-py parses it."""

    command: str
    args: tuple[Arg, ...]

    def __init__(self, command: str, *args: Arg) -> None:
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "args", args)


@dataclass(frozen=True, slots=True)
class Batch:
    """Several independent commands in one round trip (a non-transactional pipeline); sent the list of replies."""

    calls: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class Script:
    """Run the module-level Lua script `SCRIPTS[name]` (EVALSHA, loading it on demand); sent its reply."""

    name: str
    keys: tuple[str, ...]
    args: tuple[Arg, ...] = ()


Op: TypeAlias = Call | Batch | Script

#: A command plan: yields operations, is sent their replies, returns the effect's result.
Plan: TypeAlias = Generator[Op, Any, T]

#: The Lua scripts, registered once per store (`register_script`). Each touches only keys of one project's slot.
SCRIPTS: Final[Mapping[str, str]] = {
    # KEYS: record. ARGV: field, value, ... Returns 1 if stored, 0 if the id was taken.
    "create_project": """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
""",
    # KEYS: record. ARGV: keys JSON, then field, value, ... of the whole record. Returns the stored record.
    "ensure_project": """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'keys', ARGV[1])
else
  redis.call('HSET', KEYS[1], unpack(ARGV, 2))
end
return redis.call('HGETALL', KEYS[1])
""",
    # KEYS: record. ARGV: field, value, ... (maybe none). Returns the record, or nil when there is none.
    "update_project": """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return redis.call('HGETALL', KEYS[1])
""",
    # KEYS: record, then the project's other keys. Returns 1 if the record existed, else 0.
    "delete_project": """
local existed = redis.call('EXISTS', KEYS[1])
redis.call('DEL', unpack(KEYS))
return existed
""",
}


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The key names under one namespace (the table in the module docstring)."""

    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if "{" in self.namespace or "}" in self.namespace:
            raise ValueError("the namespace must not contain '{' or '}' (it would change the hash tags)")

    @property
    def index(self) -> str:
        """The set of every project id (hash tag `{projects}`)."""
        return f"{self.namespace}{{projects}}:index"

    def project(self, project_id: str) -> str:
        """The project record (hash tag `{p:<project_id>}`, shared by all of the project's keys)."""
        return f"{self.namespace}{{p:{project_id}}}:project"

    def project_keys(self, project_id: str) -> tuple[str, ...]:
        """Every key of the project, record first (DeleteProject deletes them all)."""
        return (self.project(project_id),)


# --------------------------------------------------------------------------------------------------------------
# Records <-> hash fields


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _flat(pairs: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(item for pair in pairs for item in pair)


def _record_fields(project: Project) -> list[tuple[str, str]]:
    data = project_to_json(project)
    fields = [
        ("id", data["id"]),
        ("display_name", data["display_name"]),
        ("created_at_millis", str(data["created_at_millis"])),
        ("signing_key", data["signing_key"]),
        ("keys", _json(data["keys"])),
    ]
    fields += [(f"config.{name}", _json(value)) for name, value in data["config"].items()]
    return fields


def _config_fields(changes: tuple[tuple[str, Any], ...]) -> list[tuple[str, str]]:
    """The hash fields an UpdateProject sets; an unknown config name is a TypeError, as in the memory store."""
    changed = dict(changes)
    plain = config_to_json(dataclasses.replace(ProjectConfig(), **changed))
    return [(f"config.{name}", _json(plain[name])) for name in changed]


def _pairs(reply: Any) -> dict[str, str]:
    """A hash as HGETALL (a dict) or a script (a flat list) returns it, in str; {} for nil or empty."""
    if not reply:
        return {}
    items: Iterable[tuple[Any, Any]] = (
        reply.items() if isinstance(reply, Mapping) else zip(reply[::2], reply[1::2], strict=True)
    )
    return {_text(key): _text(value) for key, value in items}


def _project(reply: Any) -> Project | None:
    fields = _pairs(reply)
    if not fields:
        return None
    prefix = "config."
    return project_from_json(
        {
            "id": fields["id"],
            "display_name": fields["display_name"],
            "created_at_millis": int(fields["created_at_millis"]),
            "signing_key": fields["signing_key"],
            "config": {k[len(prefix) :]: orjson.loads(v) for k, v in fields.items() if k.startswith(prefix)},
            "keys": orjson.loads(fields["keys"]),
        }
    )


def _stored(reply: Any) -> Project:
    project = _project(reply)
    if project is None:
        raise RuntimeError("the script returned no record")
    return project


# --------------------------------------------------------------------------------------------------------------
# Command plans: one per effect


_PlanFn = Callable[[KeySpace, Any], Plan[Any]]
_PLANS: dict[type[StorageEffect[Any]], _PlanFn] = {}


def _plans(effect_type: type[E]) -> Callable[[Callable[[KeySpace, E], Plan[Any]]], Callable[[KeySpace, E], Plan[Any]]]:
    """Register the generator below as the command plan of `effect_type`."""

    def register(plan: Callable[[KeySpace, E], Plan[Any]]) -> Callable[[KeySpace, E], Plan[Any]]:
        _PLANS[effect_type] = plan
        return plan

    return register


@_plans(LoadProject)
def _load_project(keys: KeySpace, effect: LoadProject) -> Plan[Project | None]:
    return _project((yield Call("HGETALL", keys.project(effect.project_id))))


@_plans(CreateProject)
def _create_project(keys: KeySpace, effect: CreateProject) -> Plan[bool]:
    project = effect.project
    created = yield Script("create_project", (keys.project(project.id),), _flat(_record_fields(project)))
    # Record first, then index. Also when the id was taken: its entry may be the one a crash (or a lost reply
    # and a retry) kept from being added, and adding an existing member changes nothing.
    yield Call("SADD", keys.index, project.id)
    return bool(created)


@_plans(EnsureProject)
def _ensure_project(keys: KeySpace, effect: EnsureProject) -> Plan[Project]:
    project = effect.project
    args = (_json(project_to_json(project)["keys"]), *_flat(_record_fields(project)))
    stored = _stored((yield Script("ensure_project", (keys.project(project.id),), args)))
    yield Call("SADD", keys.index, project.id)  # record first, then index (idempotent: repairs a lost entry)
    return stored


@_plans(UpdateProject)
def _update_project(keys: KeySpace, effect: UpdateProject) -> Plan[Project | None]:
    fields = _config_fields(effect.config)
    if effect.display_name is not None:
        fields.insert(0, ("display_name", effect.display_name))
    return _project((yield Script("update_project", (keys.project(effect.project_id),), _flat(fields))))


@_plans(ListProjects)
def _list_projects(keys: KeySpace, effect: ListProjects) -> Plan[tuple[Project, ...]]:
    ids = sorted(_text(member) for member in (yield Call("SMEMBERS", keys.index)))
    if not ids:
        return ()
    replies = yield Batch(tuple(Call("HGETALL", keys.project(project_id)) for project_id in ids))
    projects = [project for project in map(_project, replies) if project is not None]  # skip dangling ids
    return tuple(sorted(projects, key=lambda p: (p.created_at_millis, p.id)))


@_plans(DeleteProject)
def _delete_project(keys: KeySpace, effect: DeleteProject) -> Plan[bool]:
    yield Call("SREM", keys.index, effect.project_id)  # index first, then record
    existed = yield Script("delete_project", keys.project_keys(effect.project_id))
    return bool(existed)


# --------------------------------------------------------------------------------------------------------------
# Runners

#: What "Redis could not be reached or did not answer" looks like from redis-py (asyncio's TimeoutError is OSError).
_UNAVAILABLE: Final = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _plan_for(effect: StorageEffect[T], keys: KeySpace, store: str) -> Plan[T]:
    plan = _PLANS.get(type(effect))
    if plan is None:
        raise TypeError(f"{store} cannot perform {type(effect).__name__}")
    return cast("Plan[T]", plan(keys, effect))


def _unavailable(effect: StorageEffect[Any], exc: BaseException) -> StorageUnavailable:
    # The class name only: redis-py messages name the host, and a URL is never worth the risk of a password.
    return StorageUnavailable(f"Redis unavailable during {type(effect).__name__} ({type(exc).__name__})")


def _retry_backoff() -> ExponentialBackoff:
    return ExponentialBackoff(cap=0.25, base=0.05)


class RedisStore:
    """A store over a sync `redis.Redis` client (thread-safe: redis-py pools connections)."""

    #: The effect types this store performs, each with its command plan (shared with `AsyncRedisStore`).
    performs = _PLANS

    def __init__(self, client: redis.Redis, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._scripts: dict[str, RedisScript] = {name: client.register_script(src) for name, src in SCRIPTS.items()}

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout: float = 2.0,
        health_check_interval: float = 30.0,
    ) -> RedisStore:
        """A store with its own client for `url` (redis://[[user]:password@]host:port/db, rediss://, unix://)."""
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
        plan = _plan_for(effect, self.keys, type(self).__name__)
        reply: Any = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return cast(T, stop.value)
            try:
                reply = self._execute(op)
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc

    def _execute(self, op: Op) -> Any:
        if isinstance(op, Call):
            return self.client.execute_command(op.command, *op.args)  # type: ignore[no-untyped-call]
        if isinstance(op, Script):
            return self._scripts[op.name](keys=op.keys, args=op.args)
        with self.client.pipeline(transaction=False) as pipe:
            for call in op.calls:
                pipe.execute_command(call.command, *call.args)  # type: ignore[no-untyped-call]
            return pipe.execute()

    def close(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        self.client.close()


class AsyncRedisStore:
    """A store over an asyncio `redis.asyncio.Redis` client: the same plans as `RedisStore`, awaited."""

    #: The effect types this store performs, each with its command plan (shared with `RedisStore`).
    performs = _PLANS

    def __init__(self, client: redis.asyncio.Redis, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        self.client = client
        self.keys = KeySpace(namespace)
        self._scripts: dict[str, AsyncScript] = {name: client.register_script(src) for name, src in SCRIPTS.items()}

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout: float = 2.0,
        health_check_interval: float = 30.0,
    ) -> AsyncRedisStore:
        """A store with its own client for `url` (redis://[[user]:password@]host:port/db, rediss://, unix://)."""
        client = redis.asyncio.Redis.from_url(
            url,
            socket_connect_timeout=socket_timeout,
            socket_timeout=socket_timeout,
            health_check_interval=health_check_interval,
            retry=redis.asyncio.retry.Retry(_retry_backoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
        )
        return cls(client, namespace=namespace)

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect by running its command plan."""
        plan = _plan_for(effect, self.keys, type(self).__name__)
        reply: Any = None
        while True:
            try:
                op = plan.send(reply)
            except StopIteration as stop:
                return cast(T, stop.value)
            try:
                reply = await self._execute(op)
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc

    async def _execute(self, op: Op) -> Any:
        if isinstance(op, Call):
            return await self.client.execute_command(op.command, *op.args)  # type: ignore[no-untyped-call]
        if isinstance(op, Script):
            return await self._scripts[op.name](keys=op.keys, args=op.args)
        async with self.client.pipeline(transaction=False) as pipe:
            for call in op.calls:
                pipe.execute_command(call.command, *call.args)
            return await pipe.execute()

    async def aclose(self) -> None:
        """Close the client (and its connection pool, if the client owns it)."""
        await self.client.aclose()
