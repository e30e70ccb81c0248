"""`Commit` on Redis: one generic script that reads a structured op list.

The plan below translates the core's guards, writes and events into raw operations on this store's key layout
(`keys.py`) and encodings (`codecs.py`), and sends them as one JSON document to the `commit` script, which checks
every guard and, only if all hold, applies every write and records every event: one script, so atomic. The script
knows Redis commands, not business rules: it could commit any store's layout.

The op list (`ARGV[1]`): ``{"g": [guard, ...], "w": [write, ...], "r": [return, ...]}``. A key is a number (an
index into `KEYS`), or ``{"p": prefix, "v": name}`` (the prefix followed by a value the script made: a membership's
sequence number, in the project's slot like every key here). An argument is a string, or ``{"v": name}``.

Guards, each starting with the index of the core guard it checks (the script returns it on a conflict):
``[i, command, key, argument, ..., expected]``, the reply of that Redis command ("exists", "hget", "hlen", "zcard",
"scard", "sismember") is `expected` (false: a missing field; a list: one of them); ``[i, "hgt", key, field,
number]`` (the field holds a number above); ``[i, "zscore", key, member, present]`` (the member is there, or not, as
`present` says; with a `name` after it, its score becomes the value `name`, so later guards and writes can name the
record it keys, such as a membership by its sequence number).

Writes: ``[command, key, argument, ...]``, the Redis command of that name on the key: "del", "hset", "hdel", "zadd",
"zrem", "zremrangebyscore", "srem", "sadd", "set" (its options too: ``"NX"``), "lpush", "ltrim", "persist",
"pexpireat"; ``["extend", key, ms]`` (expire at `ms` or later: PEXPIREAT, with GT when the key has an expiry); four
that make the value `name`: ``["incr", key, name]`` (the new value, as decimal text), ``["zscore", key, member,
name]`` (an error if the member is missing: guard it), ``["hget", key, field, name]`` ('' when missing; with a
fifth item ``"json"``, JSON-decoded: a stored id that names a key) and ``["xlast", key, name]`` (the stream's last
entry id, '0-0' when empty); and ``["event", events key, type, record key or 0, team key prefix or "", unselected
(0/1), ids, endpoints key]`` (an event with the record's hash as stored now, and the team its ``selected_team_id``
names; unselected: that field as null, no team; recorded only when the endpoints key exists: no endpoint is owed an
event recorded while the project has none, as in the memory store).

Returns (`Commit.returns`, so that a write that answers with its record costs one round trip): a key (its hash as
stored once everything is written), or ``{"k": key, "f": field, "p": prefix}``: the hash at the prefix followed by
the id that field of that hash holds (JSON text; {} when it holds null or nothing).

Every key is in the project's hash-tag slot, so the script runs on Redis Cluster too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from backends.redis.codecs import _change_fields, _flat, _json, _json_fields, _project, _team, _user
from backends.redis.keys import GRACE_MS, KeySpace
from backends.redis.lua import _EMIT_EVENT, _RECORD_JSON
from backends.redis.plan import Call, Plan, Script, _plans, script
from identity_proto.changes import TeamChanges, UserChanges
from identity_proto.effects.commit import (
    Announce,
    Commit,
    CommitGuard,
    Committed,
    CommitWrite,
    Conflict,
    DropIndex,
    FieldsAre,
    GrantPermissions,
    IndexIs,
    IndexName,
    IsAbsent,
    PatchTeam,
    PatchUser,
    PutMembership,
    PutSession,
    PutTeam,
    PutUser,
    RecordKind,
    ReferencedBy,
    SessionIsLive,
    SetIndex,
)
from identity_proto.records import Team, User

script(
    "commit",
    _RECORD_JSON
    + _EMIT_EVENT
    + """
local reads = {exists = 1, hget = 1, hlen = 1, zcard = 1, scard = 1, sismember = 1}
local plain = {del = 1, hset = 1, hdel = 1, zadd = 1, zrem = 1, zremrangebyscore = 1, srem = 1, sadd = 1, set = 1,
  lpush = 1, ltrim = 1, persist = 1, pexpireat = 1}
local ops = cjson.decode(ARGV[1])
local vars = {}
local function key(k)
  if type(k) == 'number' then return KEYS[k] end
  return k.p .. vars[k.v]
end
local function arg(a)
  if type(a) == 'table' then return vars[a.v] end
  return a
end
local function args(op, first)
  local out = {}
  for i = first, #op do out[#out + 1] = arg(op[i]) end
  return out
end
for _, g in ipairs(ops.g) do
  local kind, k, holds = g[2], key(g[3]), false
  if kind == 'hgt' then
    local stored = tonumber(redis.call('HGET', k, g[4]))
    holds = stored ~= nil and stored > tonumber(g[5])
  elseif kind == 'zscore' then
    local score = redis.call('ZSCORE', k, g[4])
    holds = (score ~= false) == g[5]
    if holds and score and g[6] then vars[g[6]] = string.format('%.0f', tonumber(score)) end
  elseif reads[kind] then
    local stored, expected = redis.call(kind, k, unpack(g, 4, #g - 1)), g[#g]
    if type(expected) ~= 'table' then expected = {expected} end
    for _, text in ipairs(expected) do holds = holds or stored == text end
  else
    return redis.error_reply('commit: unknown guard ' .. tostring(kind))
  end
  if not holds then return g[1] end
end
for _, w in ipairs(ops.w) do
  local kind = w[1]
  if plain[kind] then
    redis.call(kind, key(w[2]), unpack(args(w, 3)))
  elseif kind == 'zscore' then
    local score = redis.call('ZSCORE', key(w[2]), arg(w[3]))
    if score == false then return redis.error_reply('commit: no score for ' .. tostring(arg(w[3]))) end
    vars[w[4]] = string.format('%.0f', tonumber(score))
  elseif kind == 'hget' then
    local held = redis.call('HGET', key(w[2]), arg(w[3]))
    if held and w[5] == 'json' then held = cjson.decode(held) end
    vars[w[4]] = held or ''
  elseif kind == 'extend' then
    if redis.call('PTTL', key(w[2])) == -1 then
      redis.call('PEXPIREAT', key(w[2]), arg(w[3]))
    else
      redis.call('PEXPIREAT', key(w[2]), arg(w[3]), 'GT')
    end
  elseif kind == 'xlast' then
    local last = redis.call('XREVRANGE', key(w[2]), '+', '-', 'COUNT', 1)
    vars[w[3]] = (#last > 0 and last[1][1]) or '0-0'
  elseif kind == 'incr' then
    vars[w[3]] = string.format('%.0f', redis.call('INCR', key(w[2])))
  elseif kind == 'event' and redis.call('EXISTS', key(w[8])) == 1 then
    local record, team = '', ''
    if w[4] ~= 0 then
      local fields = redis.call('HGETALL', key(w[4]))
      for i = 1, #fields, 2 do
        if fields[i] == 'selected_team_id' and fields[i + 1] ~= 'null' then
          if w[6] == 1 then
            fields[i + 1] = 'null'
          elseif w[5] ~= '' then
            local stored = redis.call('HGETALL', w[5] .. cjson.decode(fields[i + 1]))
            if #stored > 0 then team = record_json(stored) end
          end
        end
      end
      record = record_json(fields)
    end
    emit_event(key(w[2]), w[3], record, team, w[7])
  elseif kind == 'event' then
    -- the project has no webhook endpoint: no one is owed the event, nothing is recorded
  else
    return redis.error_reply('commit: unknown write ' .. tostring(kind))
  end
end
if #ops.r == 0 then return -1 end
local out = {-1}
for _, r in ipairs(ops.r) do
  if type(r) == 'table' then
    local held, found = redis.call('HGET', key(r.k), r.f), {}
    if held then held = cjson.decode(held) end
    if type(held) == 'string' then found = redis.call('HGETALL', r.p .. held) end
    out[#out + 1] = found
  else
    out[#out + 1] = redis.call('HGETALL', key(r))
  end
end
return out
""",
)


G = TypeVar("G", bound=CommitGuard)
W = TypeVar("W", bound=CommitWrite)


class Ops:
    """The op list of one commit, and the keys it names (each once, in `KEYS` order). What a guard or a write adds
    is registered by type (`guards`, `writes`): the generic ones here, a resource's own in `writes.py`."""

    def __init__(self, keys: KeySpace, project_id: str) -> None:
        self.space = keys
        self.project_id = project_id
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        self.guards: list[list[Any]] = []
        self.writes: list[list[Any]] = []
        self.returns: list[int | dict[str, Any]] = []
        #: Commands on keys outside the project's slot (the sets of projects): sent before the script, and, once it
        #: committed, after it (plans, each run to its end).
        self.before: list[Call] = []
        self.after: list[Plan[Any]] = []

    def key(self, name: str) -> int:
        """The number that stands for key `name` in the op list (its place in `KEYS`)."""
        found = self._index.get(name)
        if found is None:
            self.keys.append(name)
            found = self._index[name] = len(self.keys)
        return found

    def record_key(self, kind: RecordKind, record_id: str) -> int:
        p = self.project_id
        if kind is RecordKind.PROJECT:
            return self.key(self.space.project(record_id))
        return self.key(self.space.user(p, record_id) if kind is RecordKind.USER else self.space.team(p, record_id))

    def record_prefix(self, kind: RecordKind) -> str:
        """The key of a record of `kind` without its id (in the project's slot)."""
        p = self.project_id
        return self.space.user(p, "") if kind is RecordKind.USER else self.space.team(p, "")

    def put(self, key: int, fields: dict[str, str]) -> None:
        """Writes that replace the hash at `key` with `fields`."""
        self.writes += [["del", key], ["hset", key, *_flat(fields.items())]]

    def exactly(self, position: int, name: str, members: Iterable[str], kind: str = "z") -> None:
        """Guards: the sorted set (`kind` "z") or set ("s") `name` holds exactly `members`."""
        key, held = self.key(name), dict.fromkeys(members)
        self.guards.append([position, f"{kind}card", key, len(held)])
        check, present = ("zscore", True) if kind == "z" else ("sismember", 1)
        self.guards += [[position, check, key, member, present] for member in held]

    def fields_are(self, position: int, key: Any, record: Any, names: Iterable[str]) -> None:
        """Guards: the hash at `key` holds the fields `names` of `record` as its codec stores them (`codecs`); a field
        missing from the hash reads as its default, so where `record` holds the default, missing holds too."""
        stored, defaults = _json_fields(record), {f.name: f.default for f in dataclasses.fields(record)}
        for name in names:
            text = [stored[name], False] if getattr(record, name) == defaults[name] else stored[name]
            self.guards.append([position, "hget", key, name, text])

    def index_key(self, index: IndexName) -> int:
        return self.key(self.space.user_index(self.project_id, index))

    def document(self) -> str:
        return orjson.dumps({"g": self.guards, "w": self.writes, "r": self.returns}).decode()


_GUARDS: dict[type[Any], Callable[[Ops, int, Any], None]] = {}
_WRITES: dict[type[Any], Callable[[Ops, Any], None]] = {}


def guards(guard_type: type[G]) -> Callable[[Callable[[Ops, int, G], None]], Callable[[Ops, int, G], None]]:
    """Register the function below as how `guard_type` becomes guard ops (each starting with its position)."""

    def register(add: Callable[[Ops, int, G], None]) -> Callable[[Ops, int, G], None]:
        _GUARDS[guard_type] = add
        return add

    return register


def writes(write_type: type[W]) -> Callable[[Callable[[Ops, W], None]], Callable[[Ops, W], None]]:
    """Register the function below as how `write_type` becomes write ops."""

    def register(add: Callable[[Ops, W], None]) -> Callable[[Ops, W], None]:
        _WRITES[write_type] = add
        return add

    return register


# ---------------------------------------------------------------------------------------------------------------
# Guards


@guards(IsAbsent)
def _is_absent(ops: Ops, position: int, guard: IsAbsent) -> None:
    ops.guards.append([position, "exists", ops.record_key(guard.kind, guard.id), 0])


@guards(FieldsAre)
def _fields_are(ops: Ops, position: int, guard: FieldsAre) -> None:
    record_key = ops.record_key(guard.kind, guard.record.id)
    ops.guards.append([position, "exists", record_key, 1])
    ops.fields_are(position, record_key, guard.record, guard.names)


@guards(IndexIs)
def _index_is(ops: Ops, position: int, guard: IndexIs) -> None:
    value = False if guard.value is None else guard.value
    ops.guards.append([position, "hget", ops.index_key(guard.index), guard.key, value])


@guards(SessionIsLive)
def _session_is_live(ops: Ops, position: int, guard: SessionIsLive) -> None:
    session_key = ops.key(ops.space.session(ops.project_id, guard.session_id))
    ops.guards.append([position, "hget", session_key, "user_id", _json(guard.user_id)])
    ops.guards.append([position, "hgt", session_key, "expires_at_millis", str(guard.now_ms)])


# ---------------------------------------------------------------------------------------------------------------
# Writes


#: The index that orders the records of a kind (ListUsers, ListTeams), and the field that scores them.
_ORDER = {
    RecordKind.USER: (KeySpace.user_order, "signed_up_at_millis"),
    RecordKind.TEAM: (KeySpace.team_order, "created_at_millis"),
}


def _put(ops: Ops, kind: RecordKind, record: User | Team) -> None:
    order, scored_by = _ORDER[kind]
    ops.put(ops.record_key(kind, record.id), _json_fields(record))
    ops.writes.append(["zadd", ops.key(order(ops.space, ops.project_id)), str(getattr(record, scored_by)), record.id])


def _patch(ops: Ops, kind: RecordKind, record_id: str, changes: UserChanges | TeamChanges) -> None:
    """HSET just the changed fields; the order index follows a changed timestamp."""
    fields = _change_fields(changes)
    if fields:
        ops.writes.append(["hset", ops.record_key(kind, record_id), *_flat(fields)])
    order, scored_by = _ORDER[kind]
    for name, value in changes:
        if name == scored_by:
            ops.writes.append(["zadd", ops.key(order(ops.space, ops.project_id)), str(value), record_id])


writes(PutUser)(lambda ops, write: _put(ops, RecordKind.USER, write.user))
writes(PutTeam)(lambda ops, write: _put(ops, RecordKind.TEAM, write.team))
writes(PatchUser)(lambda ops, write: _patch(ops, RecordKind.USER, write.user_id, write.changes))
writes(PatchTeam)(lambda ops, write: _patch(ops, RecordKind.TEAM, write.team_id, write.changes))


@writes(PutMembership)
def _put_membership(ops: Ops, write: PutMembership) -> None:
    # Keyed by a sequence number the script draws (`keys.py`: memberships list in creation order).
    space, p, membership = ops.space, ops.project_id, write.membership
    seq = {"v": "seq"}
    ops.writes.append(["incr", ops.key(space.membership_seq(p)), "seq"])
    ops.writes.append(["zadd", ops.key(space.team_members(p, membership.team_id)), seq, membership.user_id])
    ops.writes.append(["zadd", ops.key(space.user_teams(p, membership.user_id)), seq, membership.team_id])
    ops.writes.append(["zadd", ops.key(space.membership_order(p)), seq, seq])
    ops.writes.append(["hset", {"p": space.membership(p, ""), "v": "seq"}, *_flat(_json_fields(membership).items())])


@writes(PutSession)
def _put_session(ops: Ops, write: PutSession) -> None:
    # TTLs collect garbage only: `GRACE_MS` past the session's expiry (`keys.py`).
    space, p, session = ops.space, ops.project_id, write.session
    expires = str(session.expires_at_millis + GRACE_MS)
    session_key = ops.key(space.session(p, session.id))
    token_key = ops.key(space.session_by_token(p, session.refresh_token_hash))
    user_sessions = ops.key(space.user_sessions(p, session.user_id))
    ops.put(session_key, _json_fields(session))
    ops.writes.append(["pexpireat", session_key, expires])
    ops.writes += [["set", token_key, session.id], ["pexpireat", token_key, expires]]
    ops.writes += [["sadd", user_sessions, session.id], ["extend", user_sessions, expires]]


@writes(GrantPermissions)
def _grant_permissions(ops: Ops, write: GrantPermissions) -> None:
    if write.permission_ids:
        space, p = ops.space, ops.project_id
        ops.writes.append(["sadd", ops.key(space.user_permissions(p, write.user_id)), *write.permission_ids])
        ops.writes.append(["sadd", ops.key(space.permission_users(p)), write.user_id])


@writes(SetIndex)
def _set_index(ops: Ops, write: SetIndex) -> None:
    ops.writes.append(["hset", ops.index_key(write.index), write.key, write.value])


@writes(DropIndex)
def _drop_index(ops: Ops, write: DropIndex) -> None:
    ops.writes.append(["hdel", ops.index_key(write.index), write.key])


# ---------------------------------------------------------------------------------------------------------------
# Events and the plan


def _event(ops: Ops, event: Announce) -> None:
    record_key: int = 0
    team_prefix = ""
    if event.record is not None:
        kind, record_id = event.record
        record_key = ops.record_key(kind, record_id)
        if kind is RecordKind.USER and event.with_team:
            team_prefix = ops.space.team(ops.project_id, "")
    events_key = ops.key(ops.space.events(ops.project_id))
    ids = "\n".join(event.ids)
    unselected = 1 if event.unselected else 0
    endpoints_key = ops.key(ops.space.webhook_endpoints(ops.project_id))
    ops.writes.append(["event", events_key, event.type, record_key, team_prefix, unselected, ids, endpoints_key])


@_plans(Commit)
def _commit(keys: KeySpace, effect: Commit) -> Plan[Conflict | Committed]:
    ops = Ops(keys, effect.project_id)
    for position, guard in enumerate(effect.guards):
        _GUARDS[type(guard)](ops, position, guard)
    for write in effect.writes:
        _WRITES[type(write)](ops, write)
    for event in effect.events:
        _event(ops, event)
    kinds: list[RecordKind] = []
    for named in effect.returns:
        if isinstance(named, ReferencedBy):
            held_by = ops.record_key(*named.of)
            ops.returns.append({"k": held_by, "f": named.field, "p": ops.record_prefix(named.kind)})
            kinds.append(named.kind)
        else:
            ops.returns.append(ops.record_key(*named))
            kinds.append(named[0])
    for call in ops.before:  # noqa: UP028 (a plan is sent replies: a list's iterator takes none)
        yield call
    reply = yield Script("commit", tuple(ops.keys), (ops.document(),))
    if not isinstance(reply, list) and int(reply) >= 0:
        return Conflict(int(reply))
    for after in ops.after:
        yield from after
    if not isinstance(reply, list):
        return Committed()
    decode = {RecordKind.USER: _user, RecordKind.TEAM: _team, RecordKind.PROJECT: _project}
    return Committed(tuple(decode[kind](fields) for kind, fields in zip(kinds, reply[1:], strict=True)))
