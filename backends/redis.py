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
``<p>project``                  HASH    The project record: ``id``,                   none
                                        ``display_name``, ``created_at_millis``
                                        (decimal), ``signing_key``, ``keys`` (JSON
                                        object of key hashes), ``config.<name>``
                                        (JSON) per config field.
``<p>code:<code_hash>``         HASH    A one-time code: one JSON field per           PEXPIREAT its
                                        `VerificationCode` field (``used`` is         ``expires_at_millis`` +
                                        ``true``/``false``).                          `GRACE_MS`
``<p>nonce:<nonce_hash>``       STRING  The attempt counter of a nonce (INCR; the     PEXPIREAT the latest
                                        codes of that nonce create it at ``0``).      ``expires_at_millis`` of
                                                                                      its codes + `GRACE_MS`;
                                                                                      1 h (`ORPHAN_NONCE_TTL_MS`)
                                                                                      when an attempt creates it
``<p>user:<user_id>``           HASH    A user: one JSON field per `User` field       none
                                        (``risk_scores`` a JSON object, metadata
                                        any JSON).
``<p>user-by-email``            HASH    The e-mail index: auth e-mail (plain text,    none
                                        the primary e-mail of users whose
                                        ``primary_email_auth_enabled``) -> user id.
``<p>user-order``               ZSET    Every user id, scored by its                  none
                                        ``signed_up_at_millis``. Equal scores order
                                        by member, byte-wise: exactly the
                                        (signed_up_at_millis, id) order of
                                        ListUsers (ZRANK / ZREVRANK of the cursor,
                                        then ZRANGE by rank: O(log n + limit)).
``<p>session:<session_id>``     HASH    A session: one JSON field per `Session`       PEXPIREAT its
                                        field.                                        ``expires_at_millis`` +
                                                                                      `GRACE_MS`
``<p>session-by-token:<hash>``  STRING  The id of the session whose refresh token     PEXPIREAT the session's
                                        hashes to ``<hash>``.                         ``expires_at_millis`` +
                                                                                      `GRACE_MS`
``<p>user-sessions:<user_id>``  SET     The ids of the user's sessions (may hold ids  PEXPIREAT the latest
                                        of sessions gone by TTL; ListSessions skips   ``expires_at_millis`` of
                                        and removes those).                           its sessions + `GRACE_MS`
``<p>outbox``                   LIST    Sent e-mail, newest first: each item the      none (LTRIM to ``keep``)
                                        JSON object of an `Email`, ``to`` its first
                                        member (``code``, ``magic_link`` only when
                                        set).
``<p>team:<team_id>``           HASH    A team: one JSON field per `Team` field       none
                                        (metadata any JSON).
``<p>team-order``               ZSET    Every team id, scored by its                  none
                                        ``created_at_millis``.
``<p>membership-seq``           STRING  The project's membership counter: INCR        none
                                        numbers each new membership (its *seq*).
``<p>membership:<seq>``         HASH    A membership: one JSON field per              none
                                        `Membership` field (``permissions`` a JSON
                                        array, kept sorted by ChangePermission).
``<p>membership-order``         ZSET    Every membership's seq (decimal), scored by   none
                                        itself: creation order, also within one
                                        millisecond.
``<p>team-members:<team_id>``   ZSET    The user ids of a team's members, each        none
                                        scored by its membership's seq (ZSCORE
                                        finds the membership of (team, user)).
``<p>user-teams:<user_id>``     ZSET    The team ids of a user's memberships, each    none
                                        scored by its membership's seq.
==============================  ======  ============================================  ===========================

Scores are doubles: exact for integers up to 2**53, which every millisecond time and seq is. Memberships are keyed
by seq rather than by (team id, user id), so no id needs escaping to make a key unambiguous; the three membership
indexes are ZSETs scored by seq, so each lists in creation order, never by timestamp.

TTLs only collect garbage: the core judges expiry against the request's clock, and Redis expires keys against its
own. Codes, their nonce counters and sessions are therefore kept `GRACE_MS` (24 h) past their
``expires_at_millis``: in that time an expired code still answers EXPIRED (not NOT_FOUND) and an expired session is
still returned by UseRefreshToken for the core to refuse, as in the memory store, whatever the skew between the two
clocks. Only after the grace period is a code or session gone (NOT_FOUND, None) where the memory store would still
hold it. Counters, sessions and codes are security state: run Redis with ``maxmemory-policy noeviction`` (a
``volatile-*`` policy could evict a nonce counter and reset its attempts). Redis >= 7.0 (PEXPIREAT ... GT).

Atomicity (identity_proto.effects: every effect is atomic). Each write to a project's data (DeleteProject aside, see
below) is one Lua script on keys of that project's slot: CreateProject (write if absent), EnsureProject (write if
absent, else replace only the ``keys`` field; returns the stored record), UpdateProject (only if present, HSET just
the given fields, so two concurrent updates of different config keys both survive; returns the record);
CreateVerificationCode (code, its counter and their TTLs), AttemptVerificationCode (INCR the counter, look up, judge
in the contract's order, mark used on OK when consuming: of concurrent attempts exactly one gets OK),
ConsumeVerificationCode (used only if it was unused), AcceptTotp (the attempt code marked used and the step
stored in the user's ``totp_last_step``, only if the code was unused and the step is later than the stored one:
a TOTP signs in once), CreateSignInCode (the e-mail index and the holder's
``primary_email_verified`` read, then the code stored as by CreateVerificationCode, or nothing); CreateUser (refused
if the index holds its auth e-mail; record, index entry and order entry together), UpdateUser (HSET only the changed
fields, so concurrent updates of different fields both survive; the script reads the stored ``primary_email`` and
``primary_email_auth_enabled``, applies the changes, and moves the index entry, or refuses EMAIL_TAKEN before
writing anything; re-scores the order entry when ``signed_up_at_millis`` changes; with ``revoke_sessions`` it
removes the user's sessions in the same script), DeleteUser (record, its e-mail index entry if it points at the
user, every session with its token entry and the user's set, every membership with its place in the three membership
indexes, the order entry); CreateSession (session, token entry, user's set), SignInByEmail (the e-mail index and the
holder's record read; then either the holder's ``otp_auth_enabled`` / ``last_active_at_millis`` and a session as by
CreateSession, or a new user as by CreateUser with its personal team as by CreateTeam and a session; or nothing when
refused: the code sign-in's one write), UseRefreshToken (token -> session -> user, then the session's
``last_used_at_millis`` and, if later, the user's ``last_active_at_millis``), DeleteSession and RevokeUserSessions
(sessions, their token entries and set members); AppendOutbox (LPUSH + LTRIM); CreateTeam (refused USER_NOT_FOUND
before writing anything if the creator's user is missing; the team, its order entry, and the creator's membership
with its seq and index entries), UpdateTeam (only if present, HSET just the given fields; re-scores the order entry
when ``created_at_millis`` changes), DeleteTeam (the team, its order entry, every membership of it, and the
``selected_team_id`` of each member who had it selected), AddMembership (checks the user, the team and the
membership in the contract's order before writing anything; of concurrent adds of one membership exactly one
succeeds), RemoveMembership (the membership, its index entries, and the user's selection of that team),
UpdateMembership (HSET just the given fields), ChangePermission (read, add or remove one id, sort byte-wise, write:
concurrent grants of different permissions all survive). Reads of one key are one command (LoadUser, LoadSession,
LoadTeam, ...); reads that follow a pointer (FindUserByAuthEmail, ListUsers, ListSessions, ListOutbox with ``to``,
ListTeams, LoadMembership, ListMemberships) are one script too, so none observes half of a write. Scripts that walk
a whole team or user (DeleteTeam, DeleteUser, ListTeams, ListMemberships) are O(its memberships), and ListUsers with
no limit is O(users): they block the server for that long, like any script.

Scripts that follow a pointer (token -> session -> user, index -> user, set -> sessions, user order -> users, team
index -> teams, membership index -> seq -> membership, member index -> users' selections) build the pointed-to
key names in Lua from a key prefix passed in ARGV, as they cannot be known beforehand. Those keys carry the project's
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
other key matching ``<p>*``, found with SCAN (MATCH, COUNT 1000; on a cluster, on every primary node in turn) and
removed page by page with UNLINK. Cost: SCAN walks the whole keyspace of the database, not only the project's
keys (O(all keys) on the server, about all keys / 1000 round trips); fine for a rare administrative operation, to
be replaced by a per-project key registry if databases grow large. This part is not atomic: a write racing the
delete may leave a key behind, and a repeated DeleteProject (which always scans) removes it.

Faults: every redis-py `ConnectionError` / `TimeoutError` and every `OSError` raised while talking to Redis is
re-raised as `StorageUnavailable` (the message names the effect, never the URL or its password). `from_url`
bounds connect and read time, pings idle connections before reuse (`health_check_interval`), and retries a
*connection* error once (a dead pooled connection after a Redis restart), never a timeout (a slow server may have
performed the command). A connection lost after a command was sent can thus repeat it once: every plan is
idempotent in effect, except that a repeated AttemptVerificationCode counts one more attempt, and a repeated
create, add, consume or delete reports the outcome of the second run (False, 0, EMAIL_TAKEN, MEMBERSHIP_EXISTS,
ALREADY_USED) for a write that did happen.

Connections (asyncio): the client `AsyncRedisStore.from_url` makes has a *blocking* pool of 100 connections: a burst
of more concurrent requests than that waits up to the socket timeout for a connection, then gets 503, rather than
failing at once (redis-py's default pool refuses the 101st with `MaxConnectionsError`). Scripts, which are nearly
every request's one round trip, run on connections the store holds between calls (at most 16 idle, and never more
than half the pool), skipping the pool's per-command checkout and its metrics hooks; `_held_evalsha` says what of
redis-py's behaviour that path keeps (retry, health check, NOSCRIPT reload, and no reuse after a cancelled call).

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

import asyncio
import dataclasses
import re
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypeVar, cast

import orjson
import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.cluster
import redis.retry
from redis.backoff import ExponentialBackoff
from redis.commands.core import AsyncScript
from redis.commands.core import Script as RedisScript

from identity_proto.effects import (
    AcceptTotp,
    AddMembership,
    AppendOutbox,
    AttemptVerificationCode,
    ChangePermission,
    CodeAttempt,
    CodeOutcome,
    ConsumeVerificationCode,
    CreateProject,
    CreateSession,
    CreateSignInCode,
    CreateTeam,
    CreateUser,
    CreateVerificationCode,
    DeleteProject,
    DeleteSession,
    DeleteTeam,
    DeleteUser,
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
    EnsureProject,
    FindUserByAuthEmail,
    HitRateLimits,
    ListMemberships,
    ListOutbox,
    ListProjects,
    ListSessions,
    ListTeams,
    ListUsers,
    LoadClockOverride,
    LoadMembership,
    LoadProject,
    LoadSession,
    LoadTeam,
    LoadUser,
    LoadUserWithTeam,
    RemoveMembership,
    ResetProjectData,
    RevokeUserSessions,
    SetClockOverride,
    SignInByEmail,
    StorageEffect,
    TeamWrite,
    Together,
    TotpAcceptance,
    UpdateMembership,
    UpdateProject,
    UpdateTeam,
    UpdateUser,
    UseRefreshToken,
    UserWrite,
)
from identity_proto.errors import StorageUnavailable
from identity_proto.records import (
    ClockOverride,
    Email,
    Membership,
    Project,
    ProjectConfig,
    Session,
    Team,
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
    "GRACE_MS",
    "ORPHAN_NONCE_TTL_MS",
    "SCRIPTS",
    "AsyncRedisStore",
    "Batch",
    "Call",
    "KeySpace",
    "Plan",
    "RedisStore",
    "Scan",
    "Script",
]

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

DEFAULT_NAMESPACE: Final = "identity:"

#: How long Redis keeps a code, its nonce counter and a session after their `expires_at_millis`. The core judges
#: expiry against the request's clock; TTLs only collect garbage, and this grace keeps an expired record around
#: long enough for the core to see it and answer EXPIRED (a code) or refuse it (a session), instead of NOT_FOUND,
#: whatever the skew between the two clocks.
GRACE_MS: Final = 24 * 3_600_000

#: How long a nonce counter lives when an attempt (not a code) creates it: no live code has that nonce, so its
#: count only matters if such a code is created soon after (then the code extends it to its own expiry).
ORPHAN_NONCE_TTL_MS: Final = 3_600_000

#: SCAN page size for DeleteProject and ResetProjectData.
_SCAN_COUNT: Final = 1000

#: What a command argument may be (redis-py encodes str as UTF-8 and numbers as their decimal text).
Arg: TypeAlias = str | bytes | int | float


# --------------------------------------------------------------------------------------------------------------
# Operations a plan yields


#: Rate-limit counters outlive their window by this much (Redis's clock may differ a little from the core's).
RATE_COUNTER_GRACE_MS: Final = 60_000


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

#: Lua: store a one-time code (replacing one with its hash) with its TTL, and create its nonce counter at 0 or push
#: the counter's TTL to the code's. Needs `_EXTEND_EXPIRY`.
_CREATE_CODE = """
local function create_code(code_key, nonce_key, expires_at, items)
  redis.call('DEL', code_key)
  redis.call('HSET', code_key, unpack(items))
  redis.call('PEXPIREAT', code_key, expires_at)
  redis.call('SET', nonce_key, 0, 'NX')
  extend_expiry(nonce_key, expires_at)
end
"""

#: Lua: store a session (replacing one with its id), its token entry and its place in the user's set, each with
#: its TTL. Needs `_EXTEND_EXPIRY`.
_CREATE_SESSION = """
local function create_session(session_key, token_key, set_key, session_id, expires_at, items)
  redis.call('DEL', session_key)
  redis.call('HSET', session_key, unpack(items))
  redis.call('PEXPIREAT', session_key, expires_at)
  redis.call('SET', token_key, session_id)
  redis.call('PEXPIREAT', token_key, expires_at)
  redis.call('SADD', set_key, session_id)
  extend_expiry(set_key, expires_at)
end
"""

#: Lua: store a team (replacing one with its id) and its creator's membership: the membership keeps the seq it had
#: if the creator was a member already, else takes the next one and enters the three membership indexes. Needs
#: `_SEQ`.
_CREATE_TEAM = """
local function create_team(team_key, order_key, team_id, created_at, team_items)
  redis.call('DEL', team_key)
  redis.call('HSET', team_key, unpack(team_items))
  redis.call('ZADD', order_key, created_at, team_id)
end
local function add_creator(members_key, user_teams_key, morder_key, mseq_key, prefix, team_id, user_id, items)
  local seq = redis.call('ZSCORE', members_key, user_id)
  if seq then
    seq = seq_text(seq)
  else
    seq = seq_text(redis.call('INCR', mseq_key))
    redis.call('ZADD', members_key, seq, user_id)
    redis.call('ZADD', user_teams_key, seq, team_id)
    redis.call('ZADD', morder_key, seq, seq)
  end
  redis.call('DEL', prefix .. seq)
  redis.call('HSET', prefix .. seq, unpack(items))
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

#: Lua: the auth e-mail of a user from its stored (JSON) `primary_email_auth_enabled` and `primary_email`, or false.
_AUTH_EMAIL = """
local function auth_email(enabled, email)
  if enabled ~= 'true' or not email then return false end
  local value = cjson.decode(email)
  if type(value) ~= 'string' then return false end
  return value
end
"""

#: Lua: a membership's sequence number (an INCR reply, or a score as ZSCORE / WITHSCORES return it) as the decimal
#: text its key and index members use.
_SEQ = """
local function seq_text(n)
  return string.format('%.0f', tonumber(n))
end
"""

#: Lua: clear the user's `selected_team_id` when it is `team_id` (a missing user is left missing).
_DESELECT = """
local function deselect(user_key, team_id)
  local selected = redis.call('HGET', user_key, 'selected_team_id')
  if selected and cjson.decode(selected) == team_id then
    redis.call('HSET', user_key, 'selected_team_id', 'null')
  end
end
"""

#: Lua: byte-wise string order (Python's order of str, as UTF-8 byte order is code point order). Lua's own `<` on
#: strings follows the server's LC_COLLATE, which Redis takes from its environment.
_BYTE_LESS = """
local function byte_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
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
    + _CREATE_CODE
    + """
create_code(KEYS[1], KEYS[2], ARGV[1], {unpack(ARGV, 2)})
return 1
""",
    # KEYS: code, nonce counter, e-mail index. ARGV: expires_at_millis, the code's e-mail, user key prefix,
    # sign-up enabled (1/0), then field, value, ... of the code. Returns 'ok' (stored), or 'unverified' /
    # 'sign_up_disabled' (nothing written).
    "create_sign_in_code": _EXTEND_EXPIRY
    + _CREATE_CODE
    + """
local uid = redis.call('HGET', KEYS[3], ARGV[2])
local verified = false
if uid then verified = redis.call('HGET', ARGV[3] .. uid, 'primary_email_verified') end
if verified then
  if verified ~= 'true' then return 'unverified' end
elseif ARGV[4] ~= '1' then
  return 'sign_up_disabled'
end
create_code(KEYS[1], KEYS[2], ARGV[1], {unpack(ARGV, 5)})
return 'ok'
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
    # KEYS: MFA attempt code, user. ARGV: the TOTP's time step (decimal). Returns 'accepted' (code marked used and
    # the step stored as the user's totp_last_step), or 'code_used' / 'user_not_found' / 'step_used' (nothing
    # written), checked in that order.
    "accept_totp": """
local used = redis.call('HGET', KEYS[1], 'used')
if not used or used == 'true' then return 'code_used' end
if redis.call('EXISTS', KEYS[2]) == 0 then return 'user_not_found' end
local last = redis.call('HGET', KEYS[2], 'totp_last_step')
if last and last ~= 'null' and tonumber(last) >= tonumber(ARGV[1]) then return 'step_used' end
redis.call('HSET', KEYS[1], 'used', 'true')
redis.call('HSET', KEYS[2], 'totp_last_step', ARGV[1])
return 'accepted'
""",
    # ---- users
    # KEYS: e-mail index. ARGV: e-mail, user key prefix. Returns the user's record, or nil.
    # KEYS: user. ARGV: team key prefix. Returns {user fields, team fields} ({} when none), or false.
    "load_user_with_team": """
local user = redis.call('HGETALL', KEYS[1])
if #user == 0 then return false end
local selected = redis.call('HGET', KEYS[1], 'selected_team_id')
local team = {}
if selected and selected ~= 'null' then team = redis.call('HGETALL', ARGV[1] .. cjson.decode(selected)) end
return {user, team}
""",
    "find_user_by_email": """
local id = redis.call('HGET', KEYS[1], ARGV[1])
if not id then return false end
return redis.call('HGETALL', ARGV[2] .. id)
""",
    # KEYS: user, e-mail index, user order. ARGV: user id, has auth e-mail (1/0), auth e-mail, signed_up_at_millis,
    # then field, value, ... Returns 1 if stored, 0 if the auth e-mail is another user's (nothing written).
    "create_user": """
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
if ARGV[2] == '1' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], ARGV[3], ARGV[1]) end
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
""",
    # KEYS: user, e-mail index, user's session set, user order. ARGV: user id, revoke sessions (1/0), session key
    # prefix, token entry prefix, then field, value, ... (JSON values; maybe none).
    # Returns {'ok', record}, {'not_found'} or {'email_taken'} (nothing written).
    "update_user": _REVOKE_SESSIONS
    + _AUTH_EMAIL
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'not_found'} end
local stored = redis.call('HMGET', KEYS[1], 'primary_email_auth_enabled', 'primary_email')
local enabled, email = stored[1], stored[2]
local old = auth_email(enabled, email)
local signed_up = false
for i = 5, #ARGV, 2 do
  if ARGV[i] == 'primary_email_auth_enabled' then enabled = ARGV[i + 1]
  elseif ARGV[i] == 'primary_email' then email = ARGV[i + 1]
  elseif ARGV[i] == 'signed_up_at_millis' then signed_up = ARGV[i + 1] end
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
if signed_up then redis.call('ZADD', KEYS[4], signed_up, ARGV[1]) end
if ARGV[2] == '1' then revoke_sessions(KEYS[3], ARGV[3], ARGV[4]) end
return {'ok', redis.call('HGETALL', KEYS[1])}
""",
    # KEYS: user, e-mail index, user's session set, user order, user's team index, membership order.
    # ARGV: user id, session key prefix, token entry prefix, membership key prefix, team member-index prefix.
    # Returns 1 if the user existed (and is gone with everything pointing at them), else 0 (nothing changed).
    "delete_user": _REVOKE_SESSIONS
    + _AUTH_EMAIL
    + _SEQ
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local stored = redis.call('HMGET', KEYS[1], 'primary_email_auth_enabled', 'primary_email')
local email = auth_email(stored[1], stored[2])
if email and redis.call('HGET', KEYS[2], email) == ARGV[1] then redis.call('HDEL', KEYS[2], email) end
revoke_sessions(KEYS[3], ARGV[2], ARGV[3])
local teams = redis.call('ZRANGE', KEYS[5], 0, -1, 'WITHSCORES')
for i = 1, #teams, 2 do
  local seq = seq_text(teams[i + 1])
  redis.call('DEL', ARGV[4] .. seq)
  redis.call('ZREM', ARGV[5] .. teams[i], ARGV[1])
  redis.call('ZREM', KEYS[6], seq)
end
redis.call('DEL', KEYS[5])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('DEL', KEYS[1])
return 1
""",
    # KEYS: user order. ARGV: user key prefix, cursor id, has cursor (1/0), descending (1/0), limit (> 0; -1: all).
    # Returns the users' records in (signed_up_at_millis, id) order from the cursor's rank on (O(log n) to find it,
    # then one ZRANGE by rank per page); members whose record is missing are skipped, never counted.
    "list_users": """
local order, prefix, limit = KEYS[1], ARGV[1], tonumber(ARGV[5])
local rev = ARGV[4] == '1'
local start = 0
if ARGV[3] == '1' then
  local rank
  if rev then rank = redis.call('ZREVRANK', order, ARGV[2]) else rank = redis.call('ZRANK', order, ARGV[2]) end
  if not rank then return {} end
  start = rank
end
local out = {}
while limit < 0 or #out < limit do
  local want = 256
  if limit >= 0 then want = limit - #out end
  local ids
  if rev then
    ids = redis.call('ZRANGE', order, start, start + want - 1, 'REV')
  else
    ids = redis.call('ZRANGE', order, start, start + want - 1)
  end
  for _, id in ipairs(ids) do
    local user = redis.call('HGETALL', prefix .. id)
    if #user > 0 then out[#out + 1] = user end
  end
  if #ids < want then break end
  start = start + want
end
return out
""",
    # ---- sessions
    # KEYS: session, token entry, user's session set. ARGV: session id, expires_at_millis, field, value, ...
    "create_session": _EXTEND_EXPIRY
    + _CREATE_SESSION
    + """
create_session(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], {unpack(ARGV, 3)})
return 1
""",
    # KEYS: e-mail index, user order, session, token entry, and with a personal team: team, team order, the team's
    # member index, the new user's team index, membership order, membership sequence.
    # ARGV: e-mail, user key prefix, session set prefix, now_ms, sign-up enabled (1/0), new user's id, its
    # signed_up_at_millis, session id, session expiry, membership key prefix, team id, team created_at_millis,
    # then the counts nu, ns, nt and nu items field, value, ... of the new user, ns of the session (without
    # user_id), nt of the team, and the rest: the creator's membership.
    # Returns {outcome, user record} or {outcome}; the outcomes of SignInByEmail, checked in its order.
    "sign_in_by_email": _EXTEND_EXPIRY
    + _SEQ
    + _CREATE_SESSION
    + _CREATE_TEAM
    + """
local nu, ns, nt = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local user_items = {unpack(ARGV, 16, 15 + nu)}
local session_items = {unpack(ARGV, 16 + nu, 15 + nu + ns)}
local team_items = {unpack(ARGV, 16 + nu + ns, 15 + nu + ns + nt)}
local membership_items = {unpack(ARGV, 16 + nu + ns + nt)}
local function start_session(uid, id_json)
  session_items[#session_items + 1] = 'user_id'
  session_items[#session_items + 1] = id_json
  create_session(KEYS[3], KEYS[4], ARGV[3] .. uid, ARGV[8], ARGV[9], session_items)
end
local uid = redis.call('HGET', KEYS[1], ARGV[1])
if uid then
  local ukey = ARGV[2] .. uid
  local u = redis.call('HMGET', ukey, 'id', 'primary_email_verified', 'otp_auth_enabled', 'totp_secret_base64',
    'last_active_at_millis')
  if u[1] then
    if u[2] ~= 'true' then return {'unverified', redis.call('HGETALL', ukey)} end
    if u[3] ~= 'true' then redis.call('HSET', ukey, 'otp_auth_enabled', 'true') end
    if u[4] and u[4] ~= 'null' then return {'mfa_required', redis.call('HGETALL', ukey)} end
    if not u[5] or tonumber(u[5]) < tonumber(ARGV[4]) then
      redis.call('HSET', ukey, 'last_active_at_millis', ARGV[4])
    end
    start_session(uid, u[1])
    return {'signed_in', redis.call('HGETALL', ukey)}
  end
end
if ARGV[5] ~= '1' then return {'sign_up_disabled'} end
local nkey = ARGV[2] .. ARGV[6]
if redis.call('EXISTS', nkey) == 1 then return {'id_taken'} end
redis.call('HSET', nkey, unpack(user_items))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[6])
if #KEYS > 4 then
  create_team(KEYS[5], KEYS[6], ARGV[11], ARGV[12], team_items)
  add_creator(KEYS[7], KEYS[8], KEYS[9], KEYS[10], ARGV[10], ARGV[11], ARGV[6], membership_items)
end
start_session(ARGV[6], redis.call('HGET', nkey, 'id'))
return {'signed_up', redis.call('HGETALL', nkey)}
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
    # ---- teams and memberships
    # KEYS: team, team order, and with a creator: the creator's user, the team's member index, the creator's team
    # index, membership order, membership sequence. ARGV: team id, created_at_millis, membership key prefix,
    # creator's user id (or ''), n, then n items field, value, ... of the team, then those of the creator's
    # membership. Returns 1 if stored, 0 if the creator's user is missing (nothing written).
    "create_team": _SEQ
    + _CREATE_TEAM
    + """
local creator = #KEYS > 2
if creator and redis.call('EXISTS', KEYS[3]) == 0 then return 0 end
local n = tonumber(ARGV[5])
create_team(KEYS[1], KEYS[2], ARGV[1], ARGV[2], {unpack(ARGV, 6, 5 + n)})
if creator then
  add_creator(KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[3], ARGV[1], ARGV[4], {unpack(ARGV, 6 + n)})
end
return 1
""",
    # KEYS: a team index (team order, or a user's team index). ARGV: team key prefix. Returns the teams' records
    # (in index order; the caller sorts).
    "list_teams": """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local team = redis.call('HGETALL', ARGV[1] .. id)
  if #team > 0 then out[#out + 1] = team end
end
return out
""",
    # KEYS: team, team order. ARGV: team id, then field, value, ... (maybe none). Returns the record, or nil.
    "update_team": """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i] == 'created_at_millis' then redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[1]) end
end
return redis.call('HGETALL', KEYS[1])
""",
    # KEYS: team, team order, the team's member index, membership order. ARGV: team id, membership key prefix,
    # user team-index prefix, user key prefix. Returns 1 if the team existed (and is gone with its memberships,
    # deselected by every member who had it selected), else 0.
    "delete_team": _SEQ
    + _DESELECT
    + """
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
local members = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  local uid, seq = members[i], seq_text(members[i + 1])
  redis.call('DEL', ARGV[2] .. seq)
  redis.call('ZREM', ARGV[3] .. uid, ARGV[1])
  redis.call('ZREM', KEYS[4], seq)
  deselect(ARGV[4] .. uid, ARGV[1])
end
redis.call('DEL', KEYS[3])
return 1
""",
    # KEYS: user, team, the team's member index, the user's team index, membership order, membership sequence.
    # ARGV: team id, user id, membership key prefix, then field, value, ... of the membership.
    # Returns 'ok', or the first check that failed: 'user_not_found', 'team_not_found', 'membership_exists'.
    "add_membership": _SEQ
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'user_not_found' end
if redis.call('EXISTS', KEYS[2]) == 0 then return 'team_not_found' end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then return 'membership_exists' end
local seq = seq_text(redis.call('INCR', KEYS[6]))
redis.call('HSET', ARGV[3] .. seq, unpack(ARGV, 4))
redis.call('ZADD', KEYS[3], seq, ARGV[2])
redis.call('ZADD', KEYS[4], seq, ARGV[1])
redis.call('ZADD', KEYS[5], seq, seq)
return 'ok'
""",
    # KEYS: the team's member index. ARGV: user id, membership key prefix. Returns the record, or nil.
    "load_membership": _SEQ
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
return redis.call('HGETALL', ARGV[2] .. seq_text(seq))
""",
    # KEYS: a membership index scored by sequence (membership order, a team's members, a user's teams).
    # ARGV: membership key prefix. Returns the records in creation order.
    "list_memberships": _SEQ
    + """
local out = {}
local index = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 2, #index, 2 do
  local membership = redis.call('HGETALL', ARGV[1] .. seq_text(index[i]))
  if #membership > 0 then out[#out + 1] = membership end
end
return out
""",
    # KEYS: the team's member index, the user's team index, membership order, user. ARGV: team id, user id,
    # membership key prefix. Returns 1 if the membership existed (and is gone, the team deselected), else 0.
    "remove_membership": _SEQ
    + _DESELECT
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not seq then return 0 end
seq = seq_text(seq)
redis.call('DEL', ARGV[3] .. seq)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], seq)
deselect(KEYS[4], ARGV[1])
return 1
""",
    # KEYS: the team's member index. ARGV: user id, membership key prefix, then field, value, ... (maybe none).
    # Returns the record, or nil when there is no such membership.
    "update_membership": _SEQ
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
local key = ARGV[2] .. seq_text(seq)
if #ARGV > 2 then redis.call('HSET', key, unpack(ARGV, 3)) end
return redis.call('HGETALL', key)
""",
    # KEYS: the team's member index. ARGV: user id, membership key prefix, permission id, grant (1/0).
    # Returns the record with the permission granted or revoked (permissions kept sorted), or nil.
    "change_permission": _SEQ
    + _BYTE_LESS
    + """
local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not seq then return false end
local key = ARGV[2] .. seq_text(seq)
local seen, held = {}, {}
local function keep(permission)
  if type(permission) == 'string' and not seen[permission] then
    seen[permission] = true
    held[#held + 1] = permission
  end
end
local raw = redis.call('HGET', key, 'permissions')
local stored = raw and cjson.decode(raw)
if type(stored) == 'table' then
  for _, permission in ipairs(stored) do
    if permission ~= ARGV[3] then keep(permission) end
  end
end
if ARGV[4] == '1' then keep(ARGV[3]) end
table.sort(held, byte_less)
local items = {}
for i, permission in ipairs(held) do items[i] = cjson.encode(permission) end
redis.call('HSET', key, 'permissions', '[' .. table.concat(items, ',') .. ']')
return redis.call('HGETALL', key)
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

    def rate_counter(self, key: str) -> str:
        """A rate-limit counter (identity_proto.ratelimits); its own hash tag, so counters spread over a cluster."""
        return f"{self.namespace}{{{key}}}"

    def clock_override(self) -> str:
        """Dev/test mode: the clock override shared by every worker (hash tag `{clock}`: its own slot)."""
        return f"{self.namespace}{{clock}}:override"

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

    def user_order(self, project_id: str) -> str:
        """Every user id, scored by signed_up_at_millis (the order of ListUsers)."""
        return self.prefix(project_id) + "user-order"

    def team(self, project_id: str, team_id: str = "") -> str:
        """A team record."""
        return f"{self.prefix(project_id)}team:{team_id}"

    def team_order(self, project_id: str) -> str:
        """Every team id, scored by created_at_millis."""
        return self.prefix(project_id) + "team-order"

    def membership(self, project_id: str, seq: int | str = "") -> str:
        """A membership record, by its sequence number."""
        return f"{self.prefix(project_id)}membership:{seq}"

    def membership_seq(self, project_id: str) -> str:
        """The counter that numbers the project's memberships."""
        return self.prefix(project_id) + "membership-seq"

    def membership_order(self, project_id: str) -> str:
        """Every membership's sequence number, scored by itself (creation order)."""
        return self.prefix(project_id) + "membership-order"

    def team_members(self, project_id: str, team_id: str = "") -> str:
        """The ids of a team's members, scored by their membership's sequence number."""
        return f"{self.prefix(project_id)}team-members:{team_id}"

    def user_teams(self, project_id: str, user_id: str = "") -> str:
        """The ids of a user's teams, scored by their membership's sequence number."""
        return f"{self.prefix(project_id)}user-teams:{user_id}"


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
    """A hash of JSON fields (as `_pairs` reads it) decoded; {} for nil or empty. (orjson reads the values' bytes
    as they come: no text is made of them first.)"""
    if not reply:
        return {}
    items: Iterable[tuple[Any, Any]] = (
        reply.items() if isinstance(reply, Mapping) else zip(reply[::2], reply[1::2], strict=True)
    )
    return {_text(name): orjson.loads(value) for name, value in items}


_Record = TypeVar("_Record", VerificationCode, Session, Team)


def _plain_record(cls: type[_Record], reply: Any) -> _Record | None:
    """A VerificationCode, Session or Team from its hash; fields it does not know are ignored, missing ones
    default."""
    data = _decoded(reply)
    if not data:
        return None
    known = _field_names(cls)
    return cls(**{name: value for name, value in data.items() if name in known})


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def _user(reply: Any) -> User | None:
    data = _decoded(reply)
    return user_from_json(data) if data else None


def _code(reply: Any) -> VerificationCode | None:
    return _plain_record(VerificationCode, reply)


def _session(reply: Any) -> Session | None:
    return _plain_record(Session, reply)


def _team(reply: Any) -> Team | None:
    return _plain_record(Team, reply)


def _membership(reply: Any) -> Membership | None:
    data = _decoded(reply)
    if not data:
        return None
    known = {f.name for f in dataclasses.fields(Membership)}
    values = {name: value for name, value in data.items() if name in known}
    if isinstance(values.get("permissions"), list):
        values["permissions"] = tuple(values["permissions"])
    return Membership(**values)


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


_BLANK_TEAM: Final = Team(id="", display_name="", created_at_millis=0)
_BLANK_MEMBERSHIP: Final = Membership(team_id="", user_id="", created_at_millis=0)


def _team_change_fields(changes: tuple[tuple[str, Any], ...]) -> list[tuple[str, str]]:
    """The hash fields an UpdateTeam sets; an unknown field name is a TypeError, as in the memory store."""
    changed = dict(changes)
    if "id" in changed:
        raise TypeError("UpdateTeam cannot change a team's id")
    plain = dataclasses.asdict(dataclasses.replace(_BLANK_TEAM, **changed))
    return [(name, _json(plain[name])) for name in changed]


def _membership_change_fields(changes: tuple[tuple[str, Any], ...]) -> list[tuple[str, str]]:
    """The hash fields an UpdateMembership sets; an unknown field name is a TypeError, as in the memory store."""
    changed = dict(changes)
    if "team_id" in changed or "user_id" in changed:
        raise TypeError("UpdateMembership cannot move a membership to another team or user")
    plain = dataclasses.asdict(dataclasses.replace(_BLANK_MEMBERSHIP, **changed))
    return [(name, _json(plain[name])) for name in changed]


def _email_json(email: Email) -> str:
    """An outbox item: the e-mail's JSON object with `to` first (ListOutbox matches on that prefix); the optional
    `code` and `magic_link` only when the mail has them."""
    data = dataclasses.asdict(email)
    for name in ("code", "magic_link"):
        if data[name] is None:
            del data[name]
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
    yield from _unlink_matching(keys.project_pattern(project_id))
    return bool(existed)


def _unlink_matching(match: str, keep: str = "") -> Plan[None]:
    """UNLINK every key matching `match` but `keep`, a SCAN page at a time. Every key a project pattern matches
    carries the project's hash tag, so each page's UNLINK is on one slot (legal on a cluster)."""
    cursor = "0"
    while True:
        cursor, found = yield Scan(match, cursor)
        doomed = [key for key in found if _text(key) != keep]
        if doomed:
            yield Call("UNLINK", *doomed)
        if cursor == "0":
            return


# ---- one-time codes


@_plans(CreateVerificationCode)
def _create_code(keys: KeySpace, effect: CreateVerificationCode) -> Plan[None]:
    code = effect.code
    args: tuple[Arg, ...] = (code.expires_at_millis + GRACE_MS, *_flat(_json_fields(dataclasses.asdict(code))))
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


@_plans(CreateSignInCode)
def _create_sign_in_code(keys: KeySpace, effect: CreateSignInCode) -> Plan[EmailRefusal | None]:
    code, project_id = effect.code, effect.project_id
    reply = yield Script(
        "create_sign_in_code",
        (
            keys.code(project_id, code.code_hash),
            keys.nonce(project_id, code.nonce_hash),
            keys.users_by_email(project_id),
        ),
        (
            code.expires_at_millis + GRACE_MS,
            code.email or "",
            keys.user(project_id),
            1 if effect.sign_up_enabled else 0,
            *_flat(_json_fields(dataclasses.asdict(code))),
        ),
    )
    outcome = _text(reply)
    return None if outcome == "ok" else EmailRefusal(outcome)


@_plans(ConsumeVerificationCode)
def _consume_code(keys: KeySpace, effect: ConsumeVerificationCode) -> Plan[bool]:
    return bool((yield Script("consume_code", (keys.code(effect.project_id, effect.code_hash),))))


@_plans(AcceptTotp)
def _accept_totp(keys: KeySpace, effect: AcceptTotp) -> Plan[TotpAcceptance]:
    code_key = keys.code(effect.project_id, effect.code_hash)
    user_key = keys.user(effect.project_id, effect.user_id)
    return TotpAcceptance(_text((yield Script("accept_totp", (code_key, user_key), (str(effect.step),)))))


# ---- users


@_plans(LoadUser)
def _load_user(keys: KeySpace, effect: LoadUser) -> Plan[User | None]:
    return _user((yield Call("HGETALL", keys.user(effect.project_id, effect.user_id))))


@_plans(LoadUserWithTeam)
def _load_user_with_team(keys: KeySpace, effect: LoadUserWithTeam) -> Plan[tuple[User, Team | None] | None]:
    # One round trip for what rendering a user needs (the team key is built in the script: same project slot).
    reply = yield Script(
        "load_user_with_team", (keys.user(effect.project_id, effect.user_id),), (keys.team(effect.project_id),)
    )
    if not reply:
        return None
    user = _user(reply[0])
    return None if user is None else (user, _team(reply[1]) if reply[1] else None)


@_plans(FindUserByAuthEmail)
def _find_user_by_auth_email(keys: KeySpace, effect: FindUserByAuthEmail) -> Plan[User | None]:
    project_id = effect.project_id
    reply = yield Script(
        "find_user_by_email", (keys.users_by_email(project_id),), (effect.email, keys.user(project_id))
    )
    return _user(reply)


@_plans(CreateUser)
def _create_user(keys: KeySpace, effect: CreateUser) -> Plan[User | UserWrite]:
    user, project_id = effect.user, effect.project_id
    email = user.auth_email
    args = (
        user.id,
        0 if email is None else 1,
        email or "",
        user.signed_up_at_millis,
        *_flat(_json_fields(user_to_json(user))),
    )
    created = yield Script(
        "create_user",
        (keys.user(project_id, user.id), keys.users_by_email(project_id), keys.user_order(project_id)),
        args,
    )
    if created == -1:
        return UserWrite.ID_TAKEN
    return user if created else UserWrite.EMAIL_TAKEN


@_plans(UpdateUser)
def _update_user(keys: KeySpace, effect: UpdateUser) -> Plan[User | UserWrite]:
    project_id, user_id = effect.project_id, effect.user_id
    fields = _user_change_fields(effect.changes)
    reply = yield Script(
        "update_user",
        (
            keys.user(project_id, user_id),
            keys.users_by_email(project_id),
            keys.user_sessions(project_id, user_id),
            keys.user_order(project_id),
        ),
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


@_plans(DeleteUser)
def _delete_user(keys: KeySpace, effect: DeleteUser) -> Plan[bool]:
    project_id, user_id = effect.project_id, effect.user_id
    deleted = yield Script(
        "delete_user",
        (
            keys.user(project_id, user_id),
            keys.users_by_email(project_id),
            keys.user_sessions(project_id, user_id),
            keys.user_order(project_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
        ),
        (
            user_id,
            keys.session(project_id),
            keys.session_by_token(project_id),
            keys.membership(project_id),
            keys.team_members(project_id),
        ),
    )
    return bool(deleted)


@_plans(ListUsers)
def _list_users(keys: KeySpace, effect: ListUsers) -> Plan[tuple[User, ...]]:
    if effect.limit is not None and effect.limit <= 0:
        return ()
    project_id = effect.project_id
    reply = yield Script(
        "list_users",
        (keys.user_order(project_id),),
        (
            keys.user(project_id),
            effect.cursor or "",
            0 if effect.cursor is None else 1,
            1 if effect.descending else 0,
            -1 if effect.limit is None else effect.limit,
        ),
    )
    return tuple(_required(_user(item)) for item in reply)


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
        (session.id, session.expires_at_millis + GRACE_MS, *_flat(_json_fields(dataclasses.asdict(session)))),
    )


@_plans(SignInByEmail)
def _sign_in_by_email(keys: KeySpace, effect: SignInByEmail) -> Plan[EmailSignIn]:
    p, user, session = effect.project_id, effect.new_user, effect.session
    user_items = _flat(_json_fields(user_to_json(user)))
    session_items = _flat(pair for pair in _json_fields(dataclasses.asdict(session)) if pair[0] != "user_id")
    script_keys = [
        keys.users_by_email(p),
        keys.user_order(p),
        keys.session(p, session.id),
        keys.session_by_token(p, session.refresh_token_hash),
    ]
    team_id, team_created_at = "", 0
    team_items: tuple[str, ...] = ()
    membership_items: tuple[str, ...] = ()
    if effect.personal_team is not None:
        team, creator = effect.personal_team
        team_id, team_created_at = team.id, team.created_at_millis
        team_items = _flat(_json_fields(dataclasses.asdict(team)))
        membership_items = _flat(_json_fields(dataclasses.asdict(creator)))
        script_keys += [
            keys.team(p, team.id),
            keys.team_order(p),
            keys.team_members(p, team.id),
            keys.user_teams(p, user.id),
            keys.membership_order(p),
            keys.membership_seq(p),
        ]
    reply = yield Script(
        "sign_in_by_email",
        tuple(script_keys),
        (
            effect.email,
            keys.user(p),
            keys.user_sessions(p),
            effect.now_ms,
            1 if effect.sign_up_enabled else 0,
            user.id,
            user.signed_up_at_millis,
            session.id,
            session.expires_at_millis + GRACE_MS,
            keys.membership(p),
            team_id,
            team_created_at,
            len(user_items),
            len(session_items),
            len(team_items),
            *user_items,
            *session_items,
            *team_items,
            *membership_items,
        ),
    )
    return EmailSignIn(EmailSignInOutcome(_text(reply[0])), _user(reply[1]) if len(reply) > 1 else None)


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


# ---- teams and memberships


@_plans(CreateTeam)
def _create_team(keys: KeySpace, effect: CreateTeam) -> Plan[Team | TeamWrite]:
    team, creator, project_id = effect.team, effect.creator, effect.project_id
    team_items = _flat(_json_fields(dataclasses.asdict(team)))
    script_keys = [keys.team(project_id, team.id), keys.team_order(project_id)]
    args: list[Arg] = [team.id, team.created_at_millis, keys.membership(project_id), "", len(team_items)]
    args += team_items
    if creator is not None:
        # The membership is the team's by construction: keyed by this team and the creator's user, as in memory.
        script_keys += [
            keys.user(project_id, creator.user_id),
            keys.team_members(project_id, team.id),
            keys.user_teams(project_id, creator.user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
        ]
        args[3] = creator.user_id
        args += _flat(_json_fields(dataclasses.asdict(creator)))
    created = yield Script("create_team", tuple(script_keys), tuple(args))
    return team if created else TeamWrite.USER_NOT_FOUND


@_plans(LoadTeam)
def _load_team(keys: KeySpace, effect: LoadTeam) -> Plan[Team | None]:
    return _team((yield Call("HGETALL", keys.team(effect.project_id, effect.team_id))))


@_plans(ListTeams)
def _list_teams(keys: KeySpace, effect: ListTeams) -> Plan[tuple[Team, ...]]:
    project_id = effect.project_id
    index = keys.team_order(project_id) if effect.user_id is None else keys.user_teams(project_id, effect.user_id)
    reply = yield Script("list_teams", (index,), (keys.team(project_id),))
    teams = [_required(_team(item)) for item in reply]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_plans(UpdateTeam)
def _update_team(keys: KeySpace, effect: UpdateTeam) -> Plan[Team | None]:
    project_id = effect.project_id
    fields = _team_change_fields(effect.changes)
    reply = yield Script(
        "update_team",
        (keys.team(project_id, effect.team_id), keys.team_order(project_id)),
        (effect.team_id, *_flat(fields)),
    )
    return _team(reply)


@_plans(DeleteTeam)
def _delete_team(keys: KeySpace, effect: DeleteTeam) -> Plan[bool]:
    project_id, team_id = effect.project_id, effect.team_id
    deleted = yield Script(
        "delete_team",
        (
            keys.team(project_id, team_id),
            keys.team_order(project_id),
            keys.team_members(project_id, team_id),
            keys.membership_order(project_id),
        ),
        (team_id, keys.membership(project_id), keys.user_teams(project_id), keys.user(project_id)),
    )
    return bool(deleted)


_TEAM_WRITES: Final = {
    "user_not_found": TeamWrite.USER_NOT_FOUND,
    "team_not_found": TeamWrite.TEAM_NOT_FOUND,
    "membership_exists": TeamWrite.MEMBERSHIP_EXISTS,
}


@_plans(AddMembership)
def _add_membership(keys: KeySpace, effect: AddMembership) -> Plan[Membership | TeamWrite]:
    membership, project_id = effect.membership, effect.project_id
    team_id, user_id = membership.team_id, membership.user_id
    reply = yield Script(
        "add_membership",
        (
            keys.user(project_id, user_id),
            keys.team(project_id, team_id),
            keys.team_members(project_id, team_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.membership_seq(project_id),
        ),
        (team_id, user_id, keys.membership(project_id), *_flat(_json_fields(dataclasses.asdict(membership)))),
    )
    return _TEAM_WRITES.get(_text(reply), membership)


@_plans(LoadMembership)
def _load_membership(keys: KeySpace, effect: LoadMembership) -> Plan[Membership | None]:
    project_id = effect.project_id
    reply = yield Script(
        "load_membership",
        (keys.team_members(project_id, effect.team_id),),
        (effect.user_id, keys.membership(project_id)),
    )
    return _membership(reply)


@_plans(ListMemberships)
def _list_memberships(keys: KeySpace, effect: ListMemberships) -> Plan[tuple[Membership, ...]]:
    project_id, team_id, user_id = effect.project_id, effect.team_id, effect.user_id
    if team_id is not None and user_id is not None:
        one = yield from _load_membership(keys, LoadMembership(project_id, team_id, user_id))
        return () if one is None else (one,)
    if team_id is not None:
        index = keys.team_members(project_id, team_id)
    elif user_id is not None:
        index = keys.user_teams(project_id, user_id)
    else:
        index = keys.membership_order(project_id)
    reply = yield Script("list_memberships", (index,), (keys.membership(project_id),))
    return tuple(_required(_membership(item)) for item in reply)


@_plans(RemoveMembership)
def _remove_membership(keys: KeySpace, effect: RemoveMembership) -> Plan[bool]:
    project_id, team_id, user_id = effect.project_id, effect.team_id, effect.user_id
    removed = yield Script(
        "remove_membership",
        (
            keys.team_members(project_id, team_id),
            keys.user_teams(project_id, user_id),
            keys.membership_order(project_id),
            keys.user(project_id, user_id),
        ),
        (team_id, user_id, keys.membership(project_id)),
    )
    return bool(removed)


@_plans(UpdateMembership)
def _update_membership(keys: KeySpace, effect: UpdateMembership) -> Plan[Membership | None]:
    project_id = effect.project_id
    fields = _membership_change_fields(effect.changes)
    reply = yield Script(
        "update_membership",
        (keys.team_members(project_id, effect.team_id),),
        (effect.user_id, keys.membership(project_id), *_flat(fields)),
    )
    return _membership(reply)


@_plans(ChangePermission)
def _change_permission(keys: KeySpace, effect: ChangePermission) -> Plan[Membership | None]:
    project_id = effect.project_id
    reply = yield Script(
        "change_permission",
        (keys.team_members(project_id, effect.team_id),),
        (effect.user_id, keys.membership(project_id), effect.permission_id, 1 if effect.granted else 0),
    )
    return _membership(reply)


# --------------------------------------------------------------------------------------------------------------
# Runners

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


# ---- dev/test mode


@_plans(LoadClockOverride)
def _load_clock_override(keys: KeySpace, effect: LoadClockOverride) -> Plan[ClockOverride | None]:
    raw = yield Call("GET", keys.clock_override())
    return None if raw is None else ClockOverride(**orjson.loads(raw))


@_plans(SetClockOverride)
def _set_clock_override(keys: KeySpace, effect: SetClockOverride) -> Plan[None]:
    if effect.override is None:
        yield Call("DEL", keys.clock_override())
    else:
        yield Call("SET", keys.clock_override(), _json(dataclasses.asdict(effect.override)))


@_plans(Together)
def _together(keys: KeySpace, effect: Together) -> Plan[tuple[Any, ...]]:
    results: list[Any] = []
    for inner in effect.effects:
        results.append((yield from _plan_for(inner, keys, "RedisStore")))
    return tuple(results)


@_plans(HitRateLimits)
def _hit_rate_limits(keys: KeySpace, effect: HitRateLimits) -> Plan[tuple[int, ...]]:
    # One round trip for every counter of a request: INCR is atomic per counter (no count is ever lost), and the
    # expiry, set with each hit, ends the counter a little after its window (GC only; the window is in the key).
    calls: list[Call] = []
    for hit in effect.hits:
        counter = keys.rate_counter(hit.key)
        calls += [
            Call("INCRBY", counter, hit.amount),
            Call("PEXPIREAT", counter, hit.expires_at_millis + RATE_COUNTER_GRACE_MS),
        ]
    replies = yield Batch(tuple(calls))
    return tuple(int(reply) for reply in replies[0::2])


@_plans(ResetProjectData)
def _reset_project_data(keys: KeySpace, effect: ResetProjectData) -> Plan[bool]:
    # Like DeleteProject, a SCAN of the project's slot prefix, keeping its record: a test-only operation, so a
    # write racing the reset may survive it (repeating the reset removes it).
    record = keys.project(effect.project_id)
    if not (yield Call("EXISTS", record)):
        return False
    yield from _unlink_matching(keys.project_pattern(effect.project_id), keep=record)
    return True


def _plan_for(effect: StorageEffect[T], keys: KeySpace, store: str) -> Plan[T]:
    plan = _PLANS.get(type(effect))
    if plan is None:
        raise TypeError(f"{store} cannot perform {type(effect).__name__}")
    return cast("Plan[T]", plan(keys, effect))


#: How redis-py's cluster client says that no node answered, or that no node serves some slot (a
#: `RedisClusterException`, which otherwise means a misuse such as keys of several slots in one command).
_CLUSTER_UNREACHABLE: Final = re.compile(
    r"Redis Cluster cannot be connected|All slots are not covered|No targets were found"
)


def _cluster_unreachable(exc: redis.exceptions.RedisClusterException) -> bool:
    return isinstance(exc, redis.exceptions.SlotNotCoveredError) or bool(_CLUSTER_UNREACHABLE.match(str(exc)))


def _unavailable(effect: StorageEffect[Any], exc: BaseException) -> StorageUnavailable:
    # The class name only: redis-py messages name the host, and a URL is never worth the risk of a password.
    return StorageUnavailable(f"Redis unavailable during {type(effect).__name__} ({type(exc).__name__})")


#: Connections an asyncio store made by `AsyncRedisStore.from_url` opens at most (per process); more concurrent
#: commands wait for one (up to the socket timeout).
_ASYNC_MAX_CONNECTIONS = 100
#: Idle connections an `AsyncRedisStore` holds for its scripts between calls, at most (see `_held_evalsha`).
_HELD_IDLE_MAX = 16


def _retry_backoff() -> ExponentialBackoff:
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


def _queue(pipe: Any, op: Op, scripts: Mapping[str, RedisScript]) -> None:
    """Queue one plan operation on a sync pipeline (a Batch queues each of its calls)."""
    if isinstance(op, Call):
        pipe.execute_command(op.command, *op.args)
    elif isinstance(op, Script):
        scripts[op.name](keys=op.keys, args=op.args, client=pipe)
    elif isinstance(op, Batch):
        for call in op.calls:
            pipe.execute_command(call.command, *call.args)
    else:  # a Scan walks node by node: never a plan's first operation, so never in a pipeline
        raise TypeError(f"{type(op).__name__} cannot be pipelined")


async def _aqueue(pipe: Any, op: Op, scripts: Mapping[str, AsyncScript]) -> None:
    """Queue one plan operation on an asyncio pipeline."""
    if isinstance(op, Call):
        pipe.execute_command(op.command, *op.args)
    elif isinstance(op, Script):
        await scripts[op.name](keys=op.keys, args=op.args, client=pipe)
    elif isinstance(op, Batch):
        for call in op.calls:
            pipe.execute_command(call.command, *call.args)
    else:  # a Scan walks node by node: never a plan's first operation, so never in a pipeline
        raise TypeError(f"{type(op).__name__} cannot be pipelined")


def _split(raw: list[Any], pending: list[tuple[int, Op]]) -> list[Any]:
    """The pipeline's replies regrouped per operation (a Batch gets the list of its calls' replies)."""
    replies: list[Any] = []
    at = 0
    for _, op in pending:
        if isinstance(op, Batch):
            replies.append(raw[at : at + len(op.calls)])
            at += len(op.calls)
        else:
            replies.append(raw[at])
            at += 1
    return replies


class RedisStore:
    """A store over a sync `redis.Redis` client, or a `redis.cluster.RedisCluster` (thread-safe: redis-py pools
    connections)."""

    #: The effect types this store performs, each with its command plan (shared with `AsyncRedisStore`).
    performs = _PLANS

    def __init__(self, client: redis.Redis | redis.cluster.RedisCluster, *, namespace: str = DEFAULT_NAMESPACE) -> None:
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
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc
            except redis.exceptions.RedisClusterException as exc:
                if not _cluster_unreachable(exc):
                    raise
                raise _unavailable(effect, exc) from exc

    def _apply_together(self, effect: Together) -> tuple[Any, ...]:
        """The first operation of every plan in one pipeline (one round trip); what follows, plan by plan."""
        started = _start_together(effect, self.keys, type(self).__name__)
        if started.pending:
            try:
                replies = self._first_replies(started.pending)
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc
            except redis.exceptions.RedisClusterException as exc:
                if not _cluster_unreachable(exc):
                    raise
                raise _unavailable(effect, exc) from exc
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
                _queue(pipe, op, self._scripts)
            raw = pipe.execute()
        return _split(raw, pending)

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
        self._scripts: dict[str, AsyncScript] = {name: client.register_script(src) for name, src in SCRIPTS.items()}
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
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc
            except redis.exceptions.RedisClusterException as exc:
                if not _cluster_unreachable(exc):
                    raise
                raise _unavailable(effect, exc) from exc

    async def _apply_together(self, effect: Together) -> tuple[Any, ...]:
        """The first operation of every plan in one pipeline (one round trip); what follows, plan by plan."""
        started = _start_together(effect, self.keys, type(self).__name__)
        if started.pending:
            try:
                replies = await self._first_replies(started.pending)
            except _UNAVAILABLE as exc:
                raise _unavailable(effect, exc) from exc
            except redis.exceptions.RedisClusterException as exc:
                if not _cluster_unreachable(exc):
                    raise
                raise _unavailable(effect, exc) from exc
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
                await _aqueue(pipe, op, self._scripts)
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
