"""The Redis store: every storage effect as one *command plan*, run by a sync or an asyncio runner.

Each effect's Redis logic is written once, as a small generator (a command plan) that yields redis operations
(`Call`, `Batch`, `Script`) and is sent their replies; it returns the effect's result. Two tiny runners perform
those operations with redis-py: `RedisStore` over `redis.Redis` and `AsyncRedisStore` over `redis.asyncio.Redis`.
This is what `identity_proto.drivers` does for the core's flows, one level down; no business logic is written
twice, and the Redis protocol is never hand-rolled (commands go through `execute_command`, pipelines and
`register_script` Script objects).

Key layout. ``<ns>`` is the namespace prefix (``"identity:"`` by default) and ``<p>`` stands for
``<ns>{p:<project_id>}:``, the prefix of every key of one project. Its hash tag ``{p:<project_id>}`` puts all of
a project's keys in one Redis Cluster slot, so a multi-key script on one project is legal. Record fields marked
JSON hold the JSON text of one field of the record (``"a@b.c"``, ``1700000000123``, ``true``, ``null``, objects).

==============================  ======  ============================================  ===========================
Key                             Type    Holds                                         TTL
==============================  ======  ============================================  ===========================
``<ns>{projects}:index``        SET     The ids of every project. Hash tag            none
                                        ``{projects}``: its own slot, never in a
                                        script together with a project's keys.
``<p>project``                  HASH    The project record: ``id``, ``display_name``, none
                                        ``created_at_millis`` (decimal),
                                        ``signing_key``, ``keys`` (JSON object of
                                        key hashes), ``config.<name>`` (JSON) per
                                        config field.
``<p>code:<code_hash>``         HASH    A one-time code: one JSON field per           PEXPIREAT its
                                        `VerificationCode` field (``used`` is         ``expires_at_millis``
                                        ``true``/``false``).
``<p>nonce:<nonce_hash>``       STRING  The attempt counter of a nonce (INCR; the     PEXPIREAT the latest
                                        codes of that nonce create it at ``0``).      ``expires_at_millis`` of
                                                                                      its codes; 1 h
                                                                                      (`ORPHAN_NONCE_TTL_MS`)
                                                                                      when an attempt creates it
``<p>user:<user_id>``           HASH    A user: one JSON field per `User` field       none
                                        (``risk_scores`` a JSON object, metadata
                                        any JSON).
``<p>user-by-email``            HASH    The e-mail index: auth e-mail (plain text,    none
                                        the primary e-mail of users whose
                                        ``primary_email_auth_enabled``) -> user id.
``<p>session:<session_id>``     HASH    A session: one JSON field per `Session`       PEXPIREAT its
                                        field.                                        ``expires_at_millis``
``<p>session-by-token:<hash>``  STRING  The id of the session whose refresh token     PEXPIREAT the session's
                                        hashes to ``<hash>``.                         ``expires_at_millis``
``<p>user-sessions:<user_id>``  SET     The ids of the user's sessions (may hold ids  PEXPIREAT the latest
                                        of sessions gone by TTL; ListSessions skips   ``expires_at_millis`` of
                                        and removes those).                           its sessions
``<p>outbox``                   LIST    Sent e-mail, newest first: each item the      none (LTRIM to ``keep``)
                                        JSON object of an `Email`, ``to`` its first
                                        member.
==============================  ======  ============================================  ===========================

TTLs only collect garbage: the core judges expiry against the request's clock, and Redis expires keys against its
own. A code or session is therefore gone (NOT_FOUND, None) from the moment Redis's clock passes its
``expires_at_millis``, where the memory store would still hold it (EXPIRED, or the record). Counters, sessions and
codes are security state: run Redis with ``maxmemory-policy noeviction`` (a ``volatile-*`` policy could evict a
nonce counter and reset its attempts). Redis >= 7.0 (PEXPIREAT ... GT).

Atomicity (identity_proto.effects: every effect is atomic). Each write to a project's data (DeleteProject aside, see
below) is one Lua script on keys of that project's slot: CreateProject (write if absent), EnsureProject (write if
absent, else replace only the ``keys`` field; returns the stored record), UpdateProject (only if present, HSET just
the given fields, so two concurrent updates of different config keys both survive; returns the record);
CreateVerificationCode (code, its counter and their TTLs), AttemptVerificationCode (INCR the counter, look up, judge
in the contract's order, mark used on OK when consuming: of concurrent attempts exactly one gets OK),
ConsumeVerificationCode (used only if it was unused); CreateUser (refused if the index holds its auth e-mail; record
and index entry together), UpdateUser (HSET only the changed fields, so concurrent updates of different fields both
survive; the script reads the stored ``primary_email`` and ``primary_email_auth_enabled``, applies the changes, and
moves the index entry, or refuses EMAIL_TAKEN before writing anything; with ``revoke_sessions`` it removes the
user's sessions in the same script); CreateSession (session, token entry, user's set), UseRefreshToken (token ->
session -> user, then the session's ``last_used_at_millis`` and, if later, the user's ``last_active_at_millis``),
DeleteSession and RevokeUserSessions (sessions, their token entries and set members); AppendOutbox (LPUSH + LTRIM).
Reads of one key are one command; reads that follow a pointer (FindUserByAuthEmail, ListSessions, ListOutbox with
``to``) are one script too, so none observes half of a write.

Scripts that follow a pointer (token -> session -> user, index -> user, set -> sessions) build the pointed-to key
names in Lua from a key prefix passed in ARGV, as they cannot be known beforehand. Those keys carry the project's
hash tag, so they are in the slot of the script's declared KEYS; Redis Cluster runs such scripts, although the
Redis documentation asks for every key to be declared.

The project index is in another slot, so it cannot be written in the same script as a record. The order makes
every crash safe: *create* writes the record first and the index entry second; *delete* removes the index entry
first and the record second. A crash therefore never leaves an index entry pointing at nothing, only (at worst) a
record missing from the index; CreateProject and EnsureProject add the id to the index whatever the script found
(SADD is idempotent), so retrying either repairs it. A create racing a delete of the same id can still leave a
dangling entry, so ListProjects (SMEMBERS, then HGETALL of each in one pipeline) skips ids whose record is
missing, and sorts by (created_at_millis, id) like the memory store.

DeleteProject removes the index entry, then the record (its reply says whether the project existed), then every
other key matching ``<p>*``, found with SCAN (MATCH, COUNT 1000) and removed page by page with UNLINK. Cost: SCAN
walks the whole keyspace of the database, not only the project's keys (O(all keys) on the server, about
all keys / 1000 round trips); fine for a rare administrative operation, to be replaced by a per-project key
registry if databases grow large. This part is not atomic: a write racing the delete may leave a key behind, and
a repeated DeleteProject (which always scans) removes it.

Faults: every redis-py `ConnectionError` / `TimeoutError` and every `OSError` raised while talking to Redis is
re-raised as `StorageUnavailable` (the message names the effect, never the URL or its password). `from_url`
bounds connect and read time, pings idle connections before reuse (`health_check_interval`), and retries a
*connection* error once (a dead pooled connection after a Redis restart), never a timeout (a slow server may have
performed the command). A connection lost after a command was sent can thus repeat it once: every plan is
idempotent in effect, except that a repeated AttemptVerificationCode counts one more attempt, and a repeated
create, consume or delete reports the outcome of the second run (False, 0, EMAIL_TAKEN, ALREADY_USED) for a write
that did happen.
"""

from __future__ import annotations

import dataclasses
import re
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
    AppendOutbox,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    ConsumeVerificationCode,
    CreateProject,
    CreateSession,
    CreateUser,
    CreateVerificationCode,
    DeleteProject,
    DeleteSession,
    EnsureProject,
    FindUserByAuthEmail,
    ListOutbox,
    ListProjects,
    ListSessions,
    LoadProject,
    LoadSession,
    LoadUser,
    RevokeUserSessions,
    StorageEffect,
    UpdateProject,
    UpdateUser,
    UseRefreshToken,
    UserWrite,
)
from identity_proto.errors import StorageUnavailable
from identity_proto.records import (
    Email,
    Project,
    ProjectConfig,
    Session,
    User,
    VerificationCode,
    config_to_json,
    project_from_json,
    project_to_json,
    user_from_json,
    user_to_json,
)

__all__ = [
    "DEFAULT_NAMESPACE",
    "ORPHAN_NONCE_TTL_MS",
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

#: How long a nonce counter lives when an attempt (not a code) creates it: no live code has that nonce, so its
#: count only matters if such a code is created soon after (then the code extends it to its own expiry).
ORPHAN_NONCE_TTL_MS: Final = 3_600_000

#: SCAN page size for DeleteProject.
_SCAN_COUNT: Final = 1000

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

#: Lua: make `key` live until at least `at` (ms since the epoch): set its expiry when it has none, else only
#: push it later (GT). A missing key is left missing.
_EXTEND_EXPIRY = """
local function extend_expiry(key, at)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIREAT', key, at)
  else
    redis.call('PEXPIREAT', key, at, 'GT')
  end
end
"""

#: Lua: a record's fields as a table, from an HGETALL reply.
_FIELDS = """
local function fields(reply)
  local t = {}
  for i = 1, #reply, 2 do t[reply[i]] = reply[i + 1] end
  return t
end
"""

#: Lua: remove every session of a user (records, token entries, the set); returns how many records existed.
_REVOKE_SESSIONS = """
local function revoke_sessions(set_key, session_prefix, token_prefix)
  local n = 0
  for _, sid in ipairs(redis.call('SMEMBERS', set_key)) do
    local skey = session_prefix .. sid
    local token = redis.call('HGET', skey, 'refresh_token_hash')
    if redis.call('DEL', skey) == 1 then
      n = n + 1
      if token then
        local tkey = token_prefix .. cjson.decode(token)
        if redis.call('GET', tkey) == sid then redis.call('DEL', tkey) end
      end
    end
  end
  redis.call('DEL', set_key)
  return n
end
"""

#: The Lua scripts, registered once per store (`register_script`). Each touches only keys of one project's slot.
SCRIPTS: Final[Mapping[str, str]] = {
    # ---- projects
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
    # ---- one-time codes
    # KEYS: code, nonce counter. ARGV: expires_at_millis, then field, value, ... of the code.
    "create_code": _EXTEND_EXPIRY
    + """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], 0, 'NX')
extend_expiry(KEYS[2], ARGV[1])
return 1
""",
    # KEYS: code, nonce counter. ARGV: purpose (JSON), now_ms, max_attempts, consume (1/0), orphan TTL (ms).
    # Returns {outcome} or {outcome, code as it was}; the checks run in the contract's order.
    "attempt_code": _FIELDS
    + """
local before = redis.call('INCR', KEYS[2]) - 1
if redis.call('PTTL', KEYS[2]) == -1 then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
local code = redis.call('HGETALL', KEYS[1])
local f = fields(code)
if #code == 0 or f['purpose'] ~= ARGV[1] then return {'not_found'} end
if tonumber(ARGV[2]) >= tonumber(f['expires_at_millis']) then return {'expired', code} end
if f['used'] == 'true' then return {'already_used', code} end
if before >= tonumber(ARGV[3]) then return {'max_attempts_reached', code} end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'used', 'true') end
return {'ok', code}
""",
    # KEYS: code. Returns 1 if this call marked it used, 0 if it is missing or was used.
    "consume_code": """
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'used') == 'true' then return 0 end
redis.call('HSET', KEYS[1], 'used', 'true')
return 1
""",
    # ---- users
    # KEYS: e-mail index. ARGV: e-mail, user key prefix. Returns the user's record, or nil.
    "find_user_by_email": """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
return redis.call('HGETALL', ARGV[2] .. id)
""",
    # KEYS: user, e-mail index. ARGV: user id, has auth e-mail (1/0), auth e-mail, then field, value, ...
    # Returns 1 if stored, 0 if the auth e-mail is another user's (nothing written).
    "create_user": """
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
return 1
""",
    # KEYS: user, e-mail index, user's session set. ARGV: user id, revoke sessions (1/0), session key prefix,
    # token entry prefix, then field, value, ... (JSON values; maybe none).
    # Returns {'ok', record}, {'not_found'} or {'email_taken'} (nothing written).
    "update_user": _REVOKE_SESSIONS
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local function auth_email(enabled, email)
  if enabled ~= 'true' or not email then return false end
  local value = cjson.decode(email)
  if type(value) ~= 'string' then return false end
  return value
end
local stored = redis.call('HMGET', KEYS[1], 'primary_email_auth_enabled', 'primary_email')
local enabled, email = stored[1], stored[2]
local old = auth_email(enabled, email)
for i = 5, #ARGV, 2 do
  if ARGV[i] == 'primary_email_auth_enabled' then enabled = ARGV[i + 1]
  elseif ARGV[i] == 'primary_email' then email = ARGV[i + 1] end
end
local new = auth_email(enabled, email)
if new ~= old then
  if new then
    local owner = redis.call('HGET', KEYS[2], new)
    if owner and owner ~= ARGV[1] then return {'email_taken'} end
  end
  if old and redis.call('HGET', KEYS[2], old) == ARGV[1] then redis.call('HDEL', KEYS[2], old) end
  if new then redis.call('HSET', KEYS[2], new, ARGV[1]) end
end
if #ARGV > 4 then redis.call('HSET', KEYS[1], unpack(ARGV, 5)) end
if ARGV[2] == '1' then revoke_sessions(KEYS[3], ARGV[3], ARGV[4]) end
return {'ok', redis.call('HGETALL', KEYS[1])}
""",
    # ---- sessions
    # KEYS: session, token entry, user's session set. ARGV: session id, expires_at_millis, field, value, ...
    "create_session": _EXTEND_EXPIRY
    + """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
extend_expiry(KEYS[3], ARGV[2])
return 1
""",
    # KEYS: token entry. ARGV: session key prefix, user key prefix, now_ms.
    # Returns {session, user} after recording now_ms as the session's last use and, if later, the user's last
    # activity; or nil.
    "use_refresh_token": """
local sid = redis.call('GET', KEYS[1])
if not sid then return false end
local skey = ARGV[1] .. sid
local uid = redis.call('HGET', skey, 'user_id')
if not uid then return false end
local ukey = ARGV[2] .. cjson.decode(uid)
if redis.call('EXISTS', ukey) == 0 then return false end
redis.call('HSET', skey, 'last_used_at_millis', ARGV[3])
local active = redis.call('HGET', ukey, 'last_active_at_millis')
if not active or tonumber(active) < tonumber(ARGV[3]) then
  redis.call('HSET', ukey, 'last_active_at_millis', ARGV[3])
end
return {redis.call('HGETALL', skey), redis.call('HGETALL', ukey)}
""",
    # KEYS: user's session set. ARGV: session key prefix. Returns the sessions' records (unordered); removes
    # the ids of sessions gone (by TTL) from the set.
    "list_sessions": """
local out = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local s = redis.call('HGETALL', ARGV[1] .. sid)
  if #s == 0 then redis.call('SREM', KEYS[1], sid) else out[#out + 1] = s end
end
return out
""",
    # KEYS: session. ARGV: session id, token entry prefix, session set prefix. Returns 1 if it existed, else 0.
    "delete_session": """
local f = redis.call('HMGET', KEYS[1], 'user_id', 'refresh_token_hash')
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if f[2] then
  local tkey = ARGV[2] .. cjson.decode(f[2])
  if redis.call('GET', tkey) == ARGV[1] then redis.call('DEL', tkey) end
end
if f[1] then redis.call('SREM', ARGV[3] .. cjson.decode(f[1]), ARGV[1]) end
return 1
""",
    # KEYS: user's session set. ARGV: session key prefix, token entry prefix. Returns how many sessions existed.
    "revoke_user_sessions": _REVOKE_SESSIONS
    + """
return revoke_sessions(KEYS[1], ARGV[1], ARGV[2])
""",
    # ---- outbox
    # KEYS: outbox. ARGV: e-mail JSON, keep.
    "append_outbox": """
redis.call('LPUSH', KEYS[1], ARGV[1])
local keep = tonumber(ARGV[2])
if keep <= 0 then redis.call('DEL', KEYS[1]) else redis.call('LTRIM', KEYS[1], 0, keep - 1) end
return 1
""",
    # KEYS: outbox. ARGV: item prefix ('{"to":<JSON address>,'), limit (> 0). Returns the first `limit` items
    # (newest first) that start with the prefix, reading the list 200 items at a time.
    "list_outbox_to": """
local prefix, limit = ARGV[1], tonumber(ARGV[2])
local out, start = {}, 0
while #out < limit do
  local page = redis.call('LRANGE', KEYS[1], start, start + 199)
  if #page == 0 then break end
  for _, item in ipairs(page) do
    if string.sub(item, 1, #prefix) == prefix then
      out[#out + 1] = item
      if #out >= limit then break end
    end
  end
  start = start + 200
end
return out
""",
}


_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


@dataclass(frozen=True, slots=True)
class KeySpace:
    """The key names under one namespace (the table in the module docstring).

    The per-record methods called without an id return the prefix that id is appended to (what a script that
    follows a pointer is given in ARGV)."""

    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if "{" in self.namespace or "}" in self.namespace:
            raise ValueError("the namespace must not contain '{' or '}' (it would change the hash tags)")

    @property
    def index(self) -> str:
        """The set of every project id (hash tag `{projects}`)."""
        return f"{self.namespace}{{projects}}:index"

    def prefix(self, project_id: str) -> str:
        """What every key of the project starts with (its hash tag `{p:<project_id>}` included)."""
        return f"{self.namespace}{{p:{project_id}}}:"

    def project_pattern(self, project_id: str) -> str:
        """A SCAN MATCH pattern for every key of the project (glob characters of the prefix escaped)."""
        return _GLOB_SPECIAL.sub(r"\\\1", self.prefix(project_id)) + "*"

    def project(self, project_id: str) -> str:
        """The project record (hash tag `{p:<project_id>}`, shared by all of the project's keys)."""
        return self.prefix(project_id) + "project"

    def code(self, project_id: str, code_hash: str) -> str:
        """A one-time code."""
        return f"{self.prefix(project_id)}code:{code_hash}"

    def nonce(self, project_id: str, nonce_hash: str) -> str:
        """The attempt counter of a nonce."""
        return f"{self.prefix(project_id)}nonce:{nonce_hash}"

    def user(self, project_id: str, user_id: str = "") -> str:
        """A user record."""
        return f"{self.prefix(project_id)}user:{user_id}"

    def users_by_email(self, project_id: str) -> str:
        """The e-mail index: auth e-mail -> user id."""
        return self.prefix(project_id) + "user-by-email"

    def session(self, project_id: str, session_id: str = "") -> str:
        """A session record."""
        return f"{self.prefix(project_id)}session:{session_id}"

    def session_by_token(self, project_id: str, refresh_token_hash: str = "") -> str:
        """The id of the session with this refresh token hash."""
        return f"{self.prefix(project_id)}session-by-token:{refresh_token_hash}"

    def user_sessions(self, project_id: str, user_id: str = "") -> str:
        """The ids of a user's sessions."""
        return f"{self.prefix(project_id)}user-sessions:{user_id}"

    def outbox(self, project_id: str) -> str:
        """The project's outbox."""
        return self.prefix(project_id) + "outbox"


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


def _json_fields(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One hash field per record field, each holding the field's JSON."""
    return [(name, _json(value)) for name, value in data.items()]


def _decoded(reply: Any) -> dict[str, Any]:
    """A hash of JSON fields (as `_pairs` reads it) decoded; {} for nil or empty."""
    return {name: orjson.loads(value) for name, value in _pairs(reply).items()}


_Record = TypeVar("_Record", VerificationCode, Session)


def _plain_record(cls: type[_Record], reply: Any) -> _Record | None:
    """A VerificationCode or Session from its hash; fields it does not know are ignored, missing ones default."""
    data = _decoded(reply)
    if not data:
        return None
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in data.items() if name in known})


def _user(reply: Any) -> User | None:
    data = _decoded(reply)
    return user_from_json(data) if data else None


def _code(reply: Any) -> VerificationCode | None:
    return _plain_record(VerificationCode, reply)


def _session(reply: Any) -> Session | None:
    return _plain_record(Session, reply)


def _required(record: T | None) -> T:
    if record is None:
        raise RuntimeError("the script returned no record")
    return record


#: A user whose fields are replaced by an UpdateUser's changes, to validate and encode them like whole records.
_BLANK_USER: Final = User(id="", signed_up_at_millis=0, last_active_at_millis=0)


def _user_change_fields(changes: tuple[tuple[str, Any], ...]) -> list[tuple[str, str]]:
    """The hash fields an UpdateUser sets; an unknown field name is a TypeError, as in the memory store."""
    changed = dict(changes)
    if "id" in changed:
        raise TypeError("UpdateUser cannot change a user's id")
    plain = user_to_json(dataclasses.replace(_BLANK_USER, **changed))
    return [(name, _json(plain[name])) for name in changed]


def _email_json(email: Email) -> str:
    """An outbox item: the e-mail's JSON object with `to` first (ListOutbox matches on that prefix)."""
    data = dataclasses.asdict(email)
    return _json({"to": data.pop("to"), **data})


def _outbox_prefix(to: str) -> str:
    return '{"to":' + _json(to) + ","


def _email(item: str | bytes) -> Email:
    data = orjson.loads(item)
    known = {f.name for f in dataclasses.fields(Email)}
    return Email(**{name: value for name, value in data.items() if name in known})


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


# ---- projects


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
    project_id = effect.project_id
    yield Call("SREM", keys.index, project_id)  # index first, then record, then the rest
    existed = yield Call("DEL", keys.project(project_id))
    # Always scan, also when the record was gone: this is how a repeated delete finishes an interrupted one.
    cursor = 0
    while True:
        reply = yield Call("SCAN", cursor, "MATCH", keys.project_pattern(project_id), "COUNT", _SCAN_COUNT)
        cursor, found = int(reply[0]), reply[1]
        if found:
            yield Call("UNLINK", *found)
        if cursor == 0:
            return bool(existed)


# ---- one-time codes


@_plans(CreateVerificationCode)
def _create_code(keys: KeySpace, effect: CreateVerificationCode) -> Plan[None]:
    code = effect.code
    args: tuple[Arg, ...] = (code.expires_at_millis, *_flat(_json_fields(dataclasses.asdict(code))))
    yield Script(
        "create_code",
        (keys.code(effect.project_id, code.code_hash), keys.nonce(effect.project_id, code.nonce_hash)),
        args,
    )


@_plans(AttemptVerificationCode)
def _attempt_code(keys: KeySpace, effect: AttemptVerificationCode) -> Plan[CodeAttempt]:
    reply = yield Script(
        "attempt_code",
        (keys.code(effect.project_id, effect.code_hash), keys.nonce(effect.project_id, effect.nonce_hash)),
        (
            _json(effect.purpose),
            effect.now_ms,
            effect.max_attempts,
            1 if effect.consume else 0,
            ORPHAN_NONCE_TTL_MS,
        ),
    )
    outcome = CodeOutcome(_text(reply[0]))
    return CodeAttempt(outcome, _code(reply[1]) if len(reply) > 1 else None)


@_plans(ConsumeVerificationCode)
def _consume_code(keys: KeySpace, effect: ConsumeVerificationCode) -> Plan[bool]:
    return bool((yield Script("consume_code", (keys.code(effect.project_id, effect.code_hash),))))


# ---- users


@_plans(LoadUser)
def _load_user(keys: KeySpace, effect: LoadUser) -> Plan[User | None]:
    return _user((yield Call("HGETALL", keys.user(effect.project_id, effect.user_id))))


@_plans(FindUserByAuthEmail)
def _find_user_by_auth_email(keys: KeySpace, effect: FindUserByAuthEmail) -> Plan[User | None]:
    project_id = effect.project_id
    reply = yield Script(
        "find_user_by_email", (keys.users_by_email(project_id),), (effect.email, keys.user(project_id))
    )
    return _user(reply)


@_plans(CreateUser)
def _create_user(keys: KeySpace, effect: CreateUser) -> Plan[User | UserWrite]:
    user = effect.user
    email = user.auth_email
    args = (user.id, 0 if email is None else 1, email or "", *_flat(_json_fields(user_to_json(user))))
    created = yield Script(
        "create_user", (keys.user(effect.project_id, user.id), keys.users_by_email(effect.project_id)), args
    )
    return user if created else UserWrite.EMAIL_TAKEN


@_plans(UpdateUser)
def _update_user(keys: KeySpace, effect: UpdateUser) -> Plan[User | UserWrite]:
    project_id, user_id = effect.project_id, effect.user_id
    fields = _user_change_fields(effect.changes)
    reply = yield Script(
        "update_user",
        (keys.user(project_id, user_id), keys.users_by_email(project_id), keys.user_sessions(project_id, user_id)),
        (
            user_id,
            1 if effect.revoke_sessions else 0,
            keys.session(project_id),
            keys.session_by_token(project_id),
            *_flat(fields),
        ),
    )
    status = _text(reply[0])
    if status == "not_found":
        return UserWrite.NOT_FOUND
    if status == "email_taken":
        return UserWrite.EMAIL_TAKEN
    return _required(_user(reply[1]))


# ---- sessions


@_plans(CreateSession)
def _create_session(keys: KeySpace, effect: CreateSession) -> Plan[None]:
    session, project_id = effect.session, effect.project_id
    yield Script(
        "create_session",
        (
            keys.session(project_id, session.id),
            keys.session_by_token(project_id, session.refresh_token_hash),
            keys.user_sessions(project_id, session.user_id),
        ),
        (session.id, session.expires_at_millis, *_flat(_json_fields(dataclasses.asdict(session)))),
    )


@_plans(UseRefreshToken)
def _use_refresh_token(keys: KeySpace, effect: UseRefreshToken) -> Plan[tuple[Session, User] | None]:
    project_id = effect.project_id
    reply = yield Script(
        "use_refresh_token",
        (keys.session_by_token(project_id, effect.refresh_token_hash),),
        (keys.session(project_id), keys.user(project_id), effect.now_ms),
    )
    if not reply:
        return None
    return _required(_session(reply[0])), _required(_user(reply[1]))


@_plans(LoadSession)
def _load_session(keys: KeySpace, effect: LoadSession) -> Plan[Session | None]:
    return _session((yield Call("HGETALL", keys.session(effect.project_id, effect.session_id))))


@_plans(ListSessions)
def _list_sessions(keys: KeySpace, effect: ListSessions) -> Plan[tuple[Session, ...]]:
    project_id = effect.project_id
    reply = yield Script(
        "list_sessions", (keys.user_sessions(project_id, effect.user_id),), (keys.session(project_id),)
    )
    sessions = [_required(_session(item)) for item in reply]
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


@_plans(DeleteSession)
def _delete_session(keys: KeySpace, effect: DeleteSession) -> Plan[bool]:
    project_id = effect.project_id
    existed = yield Script(
        "delete_session",
        (keys.session(project_id, effect.session_id),),
        (effect.session_id, keys.session_by_token(project_id), keys.user_sessions(project_id)),
    )
    return bool(existed)


@_plans(RevokeUserSessions)
def _revoke_user_sessions(keys: KeySpace, effect: RevokeUserSessions) -> Plan[int]:
    project_id = effect.project_id
    count = yield Script(
        "revoke_user_sessions",
        (keys.user_sessions(project_id, effect.user_id),),
        (keys.session(project_id), keys.session_by_token(project_id)),
    )
    return int(count)


# ---- e-mail


@_plans(AppendOutbox)
def _append_outbox(keys: KeySpace, effect: AppendOutbox) -> Plan[None]:
    yield Script("append_outbox", (keys.outbox(effect.project_id),), (_email_json(effect.email), effect.keep))


@_plans(ListOutbox)
def _list_outbox(keys: KeySpace, effect: ListOutbox) -> Plan[tuple[Email, ...]]:
    if effect.limit <= 0:
        return ()
    outbox = keys.outbox(effect.project_id)
    if effect.to is None:
        items = yield Call("LRANGE", outbox, 0, effect.limit - 1)
    else:
        items = yield Script("list_outbox_to", (outbox,), (_outbox_prefix(effect.to), effect.limit))
    return tuple(_email(item) for item in items)


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
