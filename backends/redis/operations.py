"""The Redis store's specific operations (backends/README.md: those that do not read, decide and write): using a
refresh token and presenting a one-time code (a script each), short-lived values (OAuth states, outer codes, the
mock provider's records: plain SET and GETDEL), rate-limit counters (one pipeline of INCRBY + PEXPIRE per
request), deleting a project, and dev/test mode (the shared clock override, a project's reset).

DeleteProject removes the index entry, then the record (its reply says whether the project existed), then every
other key matching ``<p>*``, found with SCAN (MATCH, COUNT 1000; on a cluster, on every primary node in turn) and
removed page by page with UNLINK. Cost: SCAN walks the whole keyspace of the database, not only the project's
keys (O(all keys) on the server, about all keys / 1000 round trips); fine for a rare administrative operation, to
be replaced by a per-project key registry if databases grow large. This part is not atomic: a write racing the
delete may leave a key behind, and a repeated DeleteProject (which always scans) removes it."""

from __future__ import annotations

import dataclasses

import orjson

from backends.redis.codecs import (
    _code,
    _json,
    _required,
    _session,
    _text,
    _user,
)
from backends.redis.keys import OAUTH_GRACE_MS, ORPHAN_NONCE_TTL_MS, RATE_COUNTER_GRACE_MS, KeySpace
from backends.redis.lua import _FIELDS
from backends.redis.plan import Arg, Batch, Call, Op, Plan, Scan, Script, _plan_for, _plans, admitted, script
from identity_proto.effects import (
    AddressHolder,
    Admission,
    Admit,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
    DeleteProject,
    HitRateLimits,
    LoadClockOverride,
    PutShortLived,
    RateLimitHit,
    ResetProjectData,
    SetClockOverride,
    ShortLived,
    TakeShortLived,
    UseRefreshToken,
)
from identity_proto.records import ClockOverride, Session, User


@_plans(DeleteProject)
def _delete_project(keys: KeySpace, effect: DeleteProject) -> Plan[bool]:
    project_id = effect.project_id
    yield Call("SREM", keys.index, project_id)  # index first, then record, then the rest
    existed = yield Call("DEL", keys.project(project_id))
    # Always scan, also when the record was gone: this is how a repeated delete finishes an interrupted one.
    yield from _unlink_matching(keys.project_pattern(project_id))
    yield Call("SREM", keys.webhook_projects, project_id)  # webhooks: the set is in its own slot
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


# KEYS: token entry. ARGV: session key prefix, user key prefix, now_ms.
# Returns {session, user} after recording now_ms as the session's last use and, if later, the user's last
# activity; or nil.
script(
    "use_refresh_token",
    """
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
)


@_plans(UseRefreshToken)
def _use_refresh_token(keys: KeySpace, effect: UseRefreshToken) -> Plan[tuple[Session, User] | None]:
    project_id = effect.project_id
    reply = yield Script(
        "use_refresh_token",
        (keys.session_by_token(project_id, effect.refresh_token_hash),),
        (keys.session(project_id, ""), keys.user(project_id, ""), effect.now_ms),
    )
    if not reply:
        return None
    return _required(_session(reply[0])), _required(_user(reply[1]))


# KEYS: code, nonce counter, and with the holder: the e-mail index. ARGV: purpose (JSON), now_ms, max_attempts,
# consume (1/0), orphan TTL (ms), and with the holder: the user key prefix. Counts an attempt on the nonce, then
# returns {outcome} or {outcome, code as it was}, on OK with the holder followed by {id the index names for the
# code's e-mail, or false; that user's fields}; the checks run in the contract's order, on the arguments given.
script(
    "attempt_code",
    _FIELDS
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
local reply = {'ok', code}
if #KEYS > 2 then
  local email = f['email'] and cjson.decode(f['email'])
  local id = type(email) == 'string' and redis.call('HGET', KEYS[3], email)
  reply[3] = id or false
  reply[4] = id and redis.call('HGETALL', ARGV[6] .. id) or {}
end
return reply
""",
)


@_plans(AttemptVerificationCode)
def _attempt_code(keys: KeySpace, effect: AttemptVerificationCode) -> Plan[CodeAttempt]:
    p = effect.project_id
    script_keys: tuple[str, ...] = (keys.code(p, effect.code_hash), keys.nonce(p, effect.nonce_hash))
    args: tuple[Arg, ...] = (_json(effect.purpose), effect.now_ms, effect.max_attempts, 1 if effect.consume else 0)
    args += (ORPHAN_NONCE_TTL_MS,)
    if effect.with_holder:
        script_keys += (keys.users_by_email(p),)
        args += (keys.user(p, ""),)
    reply = yield Script("attempt_code", script_keys, args)
    outcome = CodeOutcome(_text(reply[0]))
    code = _code(reply[1]) if len(reply) > 1 else None
    holder = None
    if outcome is CodeOutcome.OK and effect.with_holder and code is not None and code.email is not None:
        holder_id = _text(reply[2]) if len(reply) > 2 and reply[2] else None
        holder = AddressHolder(holder_id, _user(reply[3]) if holder_id is not None else None)
    return CodeAttempt(outcome, code, holder)


#: The mock provider's keys (`KeySpace.mock_oauth`), by kind.
_MOCK = {
    ShortLived.MOCK_KEYS: "keys",
    ShortLived.MOCK_CODE: "code:",
    ShortLived.MOCK_TOKEN: "token:",
    ShortLived.MOCK_FAILURE: "fail:",
}


def _short_lived_key(keys: KeySpace, kind: ShortLived, project_id: str | None, key: str) -> str:
    if kind is ShortLived.OAUTH_STATE:
        return keys.oauth_state(key)
    if kind is ShortLived.OUTER_CODE:
        assert project_id is not None, "an outer code is a project's"
        return keys.outer_code(project_id, key)
    return keys.mock_oauth(_MOCK[kind] + key)


@_plans(PutShortLived)
def _put_short_lived(keys: KeySpace, effect: PutShortLived) -> Plan[bool]:
    # A relative TTL (the lifetime by the core's clock, plus a grace), so a dev clock far from Redis's drops nothing.
    args: list[Arg] = [_short_lived_key(keys, effect.kind, effect.project_id, effect.key), effect.value]
    if effect.expires_at_millis is not None:
        if effect.expires_at_millis <= effect.now_ms:
            return False
        args += ["PX", effect.expires_at_millis - effect.now_ms + OAUTH_GRACE_MS]
    reply = yield Call("SET", *args, *(("NX",) if effect.only_if_absent else ()))
    return reply is not None


@_plans(TakeShortLived)
def _take_short_lived(keys: KeySpace, effect: TakeShortLived) -> Plan[str | None]:
    key = _short_lived_key(keys, effect.kind, effect.project_id, effect.key)
    reply = yield Call("GET" if effect.keep else "GETDEL", key)
    return None if reply is None else _text(reply)


@_plans(HitRateLimits)
def _hit_rate_limits(keys: KeySpace, effect: HitRateLimits) -> Plan[tuple[int, ...]]:
    # One round trip for every counter of a request: INCR is atomic per counter (no count is ever lost), and the
    # expiry, set with each hit, ends the counter a little after its window (GC only; the window is in the key).
    calls: list[Call] = []
    for hit in effect.hits:
        counter = keys.rate_counter(hit.key)
        calls += [Call("INCRBY", counter, hit.amount), Call("PEXPIRE", counter, _counter_ttl(hit, effect.now_ms))]
    replies = yield Batch(tuple(calls))
    return tuple(int(reply) for reply in replies[0::2])


@_plans(Admit)
def _admit(keys: KeySpace, effect: Admit) -> Plan[Admission]:
    # On one server, when the write's first command is a script (a commit, a code's attempt, a refresh token's
    # use): that script behind the prelude (`plan.admitted`), one command. Otherwise (a cluster, whose counters are
    # in other slots; a write that starts with a plain command) the prelude's commands go in a pipeline first, and
    # the write after them when they admit it.
    inner = _plan_for(effect.effect, keys, "RedisStore")
    try:
        first: Op | None = next(inner)
    except StopIteration as done:  # a write of no command (none so far): nothing to admit but the result
        first, nothing = None, done.value
    hits = effect.counter.hits
    counters = tuple([keys.rate_counter(hit.key) for hit in hits])
    gate = (keys.clock_override(),) if effect.clock_gate else ()
    if keys.one_node and isinstance(first, Script):
        args: list[Arg] = [len(hits), 1 if effect.clock_gate else 0]
        for hit, limit in zip(hits, effect.limits, strict=True):
            args += (hit.amount, _counter_ttl(hit, effect.counter.now_ms), limit)
        reply = yield Script(admitted(first.name), counters + gate + first.keys, (*args, *first.args))
        state, counts = int(reply[0]), tuple([int(count) for count in reply[1]])
        if state == 0:
            result = yield from _go_on(inner, reply[2] if len(reply) > 2 else None)
            return Admission(counts, True, result)
        inner.close()
        return Admission(counts, False, None, _clock_override(reply[2]) if state == 2 else None)
    calls: list[Call] = []
    for hit, counter in zip(hits, counters, strict=True):
        calls += (
            Call("INCRBY", counter, hit.amount),
            Call("PEXPIRE", counter, _counter_ttl(hit, effect.counter.now_ms)),
        )
    calls += [Call("GET", key) for key in gate]
    replies = (yield Batch(tuple(calls))) if calls else []
    counts = tuple([int(reply) for reply in replies[0 : 2 * len(hits) : 2]])
    override = _clock_override(replies[-1]) if gate else None
    if override is not None or not effect.admits(counts):
        inner.close()
        return Admission(counts, False, None, override)
    if first is None:
        return Admission(counts, True, nothing)
    result = yield from _go_on(inner, (yield first))
    return Admission(counts, True, result)


def _counter_ttl(hit: RateLimitHit, now_ms: int) -> int:
    """How long a rate counter lives from now, by Redis's clock: the rest of its window by the core's clock, plus a
    grace. Relative, not an instant (PEXPIREAT), so a dev clock set far from Redis's (in the past, say) keeps its
    counters as long as their windows last there."""
    return max(1, hit.expires_at_millis - now_ms) + RATE_COUNTER_GRACE_MS


def _go_on(plan: Plan[object], reply: object) -> Plan[object]:
    """What is left of `plan`, which yielded its first operation and is sent that operation's `reply`."""
    while True:
        try:
            op = plan.send(reply)
        except StopIteration as stop:
            return stop.value
        reply = yield op


def _clock_override(raw: bytes | str | None) -> ClockOverride | None:
    return None if raw is None else ClockOverride(**orjson.loads(raw))


@_plans(LoadClockOverride)
def _load_clock_override(keys: KeySpace, effect: LoadClockOverride) -> Plan[ClockOverride | None]:
    return _clock_override((yield Call("GET", keys.clock_override())))


@_plans(SetClockOverride)
def _set_clock_override(keys: KeySpace, effect: SetClockOverride) -> Plan[None]:
    if effect.override is None:
        yield Call("DEL", keys.clock_override())
    else:
        yield Call("SET", keys.clock_override(), _json(dataclasses.asdict(effect.override)))


@_plans(ResetProjectData)
def _reset_project_data(keys: KeySpace, effect: ResetProjectData) -> Plan[bool]:
    # Like DeleteProject, a SCAN of the project's slot prefix, keeping its record: a test-only operation, so a
    # write racing the reset may survive it (repeating the reset removes it).
    record = keys.project(effect.project_id)
    if not (yield Call("EXISTS", record)):
        return False
    yield from _unlink_matching(keys.project_pattern(effect.project_id), keep=record)
    yield Call("SREM", keys.webhook_projects, effect.project_id)  # webhooks: the set is in its own slot
    return True
