"""What a command plan is: the operations it yields (`Call`, `Batch`, `Script`, `Scan`), the registry of plans by
effect type (`plans`), and the registry of Lua scripts by name (`SCRIPTS`, filled by `script`)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar, cast

from backends.redis.keys import KeySpace
from identity_proto.effects import StorageEffect, Together

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

#: What a command argument may be (redis-py encodes str as UTF-8 and numbers as their decimal text).
Arg: TypeAlias = str | bytes | int | float


@dataclass(frozen=True, slots=True, init=False)
class Call:
    """One command; the plan is sent its reply as redis-py parses it: through the client's response callbacks
    (`RedisStore`), or as the connection reads it (`AsyncRedisStore`'s pipeline): plans read both (HGETALL as a
    dict or a flat list, SMEMBERS as a set or a list, SET's OK as True or b"OK")."""

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


@dataclass(frozen=True, slots=True)
class Scan:
    """One step of a SCAN MATCH `match` over the whole keyspace: on a cluster, of every primary node in turn (by
    name), so that no node's keys are missed. Sent (next cursor, keys found). The cursor is opaque to the plan:
    start with ``"0"``; the walk is over when it comes back ``"0"``."""

    match: str
    cursor: str = "0"


Op: TypeAlias = Call | Batch | Script | Scan

#: A command plan: yields operations, is sent their replies, returns the effect's result.
Plan: TypeAlias = Generator[Op, Any, T]


_PlanFn = Callable[[KeySpace, Any], Plan[Any]]
_PLANS: dict[type[StorageEffect[Any]], _PlanFn] = {}


def _plans(effect_type: type[E]) -> Callable[[Callable[[KeySpace, E], Plan[Any]]], Callable[[KeySpace, E], Plan[Any]]]:
    """Register the generator below as the command plan of `effect_type`."""

    def register(plan: Callable[[KeySpace, E], Plan[Any]]) -> Callable[[KeySpace, E], Plan[Any]]:
        _PLANS[effect_type] = plan
        return plan

    return register


#: The Lua scripts by name, each registered once per store (`register_script`). Each touches only keys of one
#: project's slot. Filled by `script` as the modules are imported (importing `backends.redis` imports them all).
_SCRIPTS: dict[str, str] = {}
SCRIPTS: Final[Mapping[str, str]] = _SCRIPTS


def script(name: str, source: str) -> str:
    """Register the Lua `source` as the script a plan runs with ``Script(name, ...)``; returns `name`."""
    if name in _SCRIPTS:
        raise ValueError(f"two Lua scripts are named {name!r}")
    _SCRIPTS[name] = source
    return name


#: What an admitted script does before its script (`admitted`): ARGV[1] the number n of rate counters (KEYS[1..n]),
#: ARGV[2] '1' to look at the clock override (then KEYS[n+1]); for counter i, ARGV[3i] its amount, ARGV[3i+1] its
#: time to live (PEXPIRE, ms), ARGV[3i+2] the most it may reach. Replies {2, counts, override} when an override is set,
#: {1, counts} when a counter went past its limit, else {0, counts, the script's own reply} (the script ran on the
#: KEYS and ARGV that follow).
_ADMIT_PRELUDE = """
local n, gate = tonumber(ARGV[1]), ARGV[2] == '1'
local counts, over = {}, false
for i = 1, n do
  local count = redis.call('INCRBY', KEYS[i], ARGV[3 * i])
  redis.call('PEXPIRE', KEYS[i], ARGV[3 * i + 1])
  counts[i] = count
  if count > tonumber(ARGV[3 * i + 2]) then over = true end
end
local used = n
if gate then
  used = n + 1
  local override = redis.call('GET', KEYS[used])
  if override then return {2, counts, override} end
end
if over then return {1, counts} end
local inner_keys, inner_args = {}, {}
for i = used + 1, #KEYS do inner_keys[#inner_keys + 1] = KEYS[i] end
for i = 3 * n + 3, #ARGV do inner_args[#inner_args + 1] = ARGV[i] end
local function script(KEYS, ARGV)
"""


def admitted(name: str) -> str:
    """The name of script `name` run behind rate counters and the clock override (`Admit`; its source is
    `admitted_sources()[name]`): ``name`` and ``+admit``."""
    return f"{name}+admit"


def admitted_sources() -> dict[str, str]:
    """Every script of `SCRIPTS` behind the prelude of `Admit`, by its `admitted` name. The script's body becomes a
    function of its own KEYS and ARGV (its parameters shadow the globals), called once the prelude admits it. Its
    keys and the counters' have different hash tags: these run on a single Redis server only, never on a cluster
    (the plans of `Admit` know which: `KeySpace.one_node`)."""
    return {
        admitted(name): f"{_ADMIT_PRELUDE}{source}\nend\nreturn {{0, counts, script(inner_keys, inner_args)}}\n"
        for name, source in _SCRIPTS.items()
    }


def _plan_for(effect: StorageEffect[T], keys: KeySpace, store: str) -> Plan[T]:
    plan = _PLANS.get(type(effect))
    if plan is None:
        raise TypeError(f"{store} cannot perform {type(effect).__name__}")
    return cast("Plan[T]", plan(keys, effect))


@_plans(Together)
def _together(keys: KeySpace, effect: Together) -> Plan[tuple[Any, ...]]:
    results: list[Any] = []
    for inner in effect.effects:
        results.append((yield from _plan_for(inner, keys, "RedisStore")))
    return tuple(results)
