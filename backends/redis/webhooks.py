"""Webhooks: endpoints, the fan-out of the events stream (`<p>events`, appended by the commits of the changes) into
deliveries, their claims, attempts and retries, and retention; `identity_proto.effects.webhooks` is the contract.

Every write is one script on keys of the project's slot, but for the set of projects with endpoints
(``<ns>{webhooks}:projects``, its own hash tag), which is never in a script with a project's keys, like the projects
index. A new endpoint (a commit's `PutWebhookEndpoint`) adds the project to it before the commit and again after;
a commit's `DropWebhookEndpoint` removes it after the commit when no endpoint is left, then looks again (HLEN) and
adds it back if an endpoint was created meanwhile. Whatever the interleaving, a project with an endpoint is in the
set once its creation has returned; a crash can at worst leave a project without endpoints in it (harmless: its
fan-out finds nothing), never the reverse.

The keys are the table's in `backends/README.md`. A delivery's attempts are a JSON array made by joining the JSON
texts Python made (never re-encoded in Lua); claim tokens are kept as their SHA-256 only.

The choices the effects leave open are the memory store's (`backends.memory.webhooks`), point by point."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import orjson

from backends.redis.codecs import _pairs, _text
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import SETTLED_DELIVERY_TTL_MS, KeySpace, webhook_delivery_id, webhook_sortable
from backends.redis.lua import _EMIT_EVENT, _FIELDS
from backends.redis.plan import Arg, Batch, Call, Plan, Script, _plans, script
from backends.redis.read import FIRST, LAST, MEMBER, call, cat, each, key, read
from identity_proto.effects import (
    TEST_EVENT_TYPE,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
    CountPendingDeliveries,
    DeliveriesAre,
    Delivery,
    DeliveryAttempt,
    DeliveryIs,
    DeliveryState,
    DropDelivery,
    DropWebhookEndpoint,
    EndpointCountIs,
    EndpointIs,
    FanOutEvents,
    ListDeliveries,
    ListEvents,
    ListWebhookEndpoints,
    ListWebhookProjects,
    LoadDelivery,
    LoadWebhookEndpoint,
    PutWebhookEndpoint,
    RecordAttempt,
    RestartDelivery,
    TrimWebhookData,
    WebhookEndpoint,
)
from identity_proto.effects.webhooks import message_id
from identity_proto.records import StoredEvent


def _endpoint_json(endpoint: WebhookEndpoint) -> str:
    return orjson.dumps(dataclasses.asdict(endpoint)).decode()


def _endpoint(raw: Any) -> WebhookEndpoint | None:
    if raw is None:
        return None
    data = orjson.loads(raw)
    if data["event_types"] is not None:
        data["event_types"] = tuple(data["event_types"])
    return WebhookEndpoint(**data)


def _event(entry_id: Any, fields: Any, tag: str) -> StoredEvent:
    """A stream entry (its id and its fields, as XRANGE's reply gives them: a dict or a flat list) of the project
    whose message ids are tagged `tag`."""
    entry = _text(entry_id)
    f = _pairs(fields)
    ids = f.get("i", "")
    return StoredEvent(
        id=message_id(tag, entry),
        type=f["t"],
        created_at_millis=int(entry.partition("-")[0]),
        record=f.get("r") or None,
        team=f.get("m") or None,
        ids=tuple(ids.split("\n")) if ids else (),
    )


def _delivery(reply: Any) -> Delivery:
    f = _pairs(reply)
    next_at = f["next_attempt_at_millis"]
    return Delivery(
        endpoint_id=f["endpoint_id"],
        message_id=f["message_id"],
        event_type=f["event_type"],
        state=DeliveryState(f["state"]),
        next_attempt_at_millis=int(next_at) if next_at else None,
        attempts=tuple(DeliveryAttempt(**attempt) for attempt in orjson.loads(f["attempts"])),
        created_at_millis=int(f["created_at_millis"]),
    )


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _delivery_at(space: KeySpace, project_id: str, message_id: str, endpoint_id: str) -> tuple[str, str, str]:
    """A delivery the flow read (its message id one of the project's): its key, its id and its index member."""
    entry_id = space.webhook_entry_id(project_id, message_id)
    assert entry_id is not None  # guarded: the flow read the delivery
    key = space.webhook_delivery(project_id, message_id, endpoint_id)
    return key, webhook_delivery_id(entry_id, endpoint_id), webhook_sortable(entry_id)


# ----------------------------------------------------------------------------------------------------------------
# Endpoints


@guards(EndpointIs)
def _endpoint_is(ops: Ops, position: int, guard: EndpointIs) -> None:
    stored = False if guard.endpoint is None else _endpoint_json(guard.endpoint)
    ops.guards.append(
        [position, "hget", ops.key(ops.space.webhook_endpoints(ops.project_id)), guard.endpoint_id, stored]
    )


@guards(EndpointCountIs)
def _endpoint_count_is(ops: Ops, position: int, guard: EndpointCountIs) -> None:
    ops.guards.append([position, "hlen", ops.key(ops.space.webhook_endpoints(ops.project_id)), guard.count])


@writes(PutWebhookEndpoint)
def _put_endpoint(ops: Ops, write: PutWebhookEndpoint) -> None:
    space, p, endpoint = ops.space, ops.project_id, write.endpoint
    ops.writes.append(["hset", ops.key(space.webhook_endpoints(p)), endpoint.id, _endpoint_json(endpoint)])
    if write.new:  # it starts after the stream's last entry
        ops.writes.append(["xlast", ops.key(space.events(p)), "last"])
        ops.writes.append(["hset", ops.key(space.webhook_endpoint_from(p)), endpoint.id, {"v": "last"}])
        # The set of projects with endpoints is in its own slot: added before (a crash after the commit leaves
        # it listed) and after (a concurrent deletion of the last endpoint removed it).
        ops.before.append(Call("SADD", space.webhook_projects, p))
        ops.after.append(_call(Call("SADD", space.webhook_projects, p)))
    if write.skip_history:
        ops.writes.append(["set", ops.key(space.webhook_cursor(p)), {"v": "last"}])


def _call(call: Call) -> Plan[None]:
    yield call


@_plans(LoadWebhookEndpoint)
def _load_endpoint(keys: KeySpace, effect: LoadWebhookEndpoint) -> Plan[WebhookEndpoint | None]:
    return _endpoint((yield Call("HGET", keys.webhook_endpoints(effect.project_id), effect.endpoint_id)))


@_plans(ListWebhookEndpoints)
def _list_endpoints(keys: KeySpace, effect: ListWebhookEndpoints) -> Plan[tuple[WebhookEndpoint, ...]]:
    found = [_endpoint(raw) for raw in (yield Call("HVALS", keys.webhook_endpoints(effect.project_id)))]
    return tuple(sorted((e for e in found if e is not None), key=lambda e: (e.created_at_millis, e.id)))


@writes(DropWebhookEndpoint)
def _drop_endpoint(ops: Ops, write: DropWebhookEndpoint) -> None:
    space, p = ops.space, ops.project_id
    ops.writes.append(["hdel", ops.key(space.webhook_endpoints(p)), write.endpoint_id])
    ops.writes.append(["hdel", ops.key(space.webhook_endpoint_from(p)), write.endpoint_id])
    ops.writes.append(["del", ops.key(space.webhook_deliveries(p, write.endpoint_id))])
    ops.after.append(_unlist_project(space, p))


def _unlist_project(space: KeySpace, project_id: str) -> Plan[None]:
    # Out of the set of projects with endpoints when none is left; back in when one was created meanwhile (its own
    # SADD may have come before our SREM).
    endpoints = space.webhook_endpoints(project_id)
    if not (yield Call("HLEN", endpoints)):
        yield Call("SREM", space.webhook_projects, project_id)
        if (yield Call("HLEN", endpoints)):
            yield Call("SADD", space.webhook_projects, project_id)


@_plans(ListWebhookProjects)
def _list_webhook_projects(keys: KeySpace, effect: ListWebhookProjects) -> Plan[tuple[str, ...]]:
    return tuple(sorted(_text(member) for member in (yield Call("SMEMBERS", keys.webhook_projects))))


# ----------------------------------------------------------------------------------------------------------------
# Events and deliveries


@_plans(ListEvents)
def _list_events(keys: KeySpace, effect: ListEvents) -> Plan[tuple[StoredEvent, ...]]:
    if effect.limit <= 0:
        return ()
    start = "-"
    if effect.after is not None:
        after = keys.webhook_entry_id(effect.project_id, effect.after)
        if after is None:
            return ()
        start = "(" + after
    reply = yield Call("XRANGE", keys.events(effect.project_id), start, "+", "COUNT", effect.limit)
    tag = keys.webhook_message_tag(effect.project_id)
    return tuple(_event(entry[0], entry[1], tag) for entry in reply or ())  # redis-py's tuples, or lists


#: Lua: what every webhook script starts with. KEYS: the events stream, the fan-out cursor, the endpoints, their
#: starts, the due, pending and settled sets. ARGV: the delivery key prefix, the delivery index prefix, the project's
#: message id tag (`_script`), then the script's own. Stream entry ids (``<ms>-<seq>``): `wh_less` compares two;
#: `wh_sortable` makes the text whose byte order is theirs (each part 20 digits: the first part of a delivery id,
#: `keys.webhook_delivery_id`), `wh_entry_id` undoes it; `wh_next` is the id right after one (numbers are exact: ms
#: and seq stay far below 2**53). `wh_new_delivery` makes a pending delivery of an entry to an endpoint, due at
#: `now` (its hash, its places in the due and pending sets and the endpoint's index); `wh_settle` settles one (state
#: succeeded or failed) whose last attempt (or give-up) was at `at`: into the settled set, its hash expiring after
#: `SETTLED_DELIVERY_TTL_MS`. `wh_endpoints_are`: the endpoints hash holds exactly those of `expected` (JSON: id ->
#: the endpoint's JSON text, `_endpoints_read`), the guard of a fan-out and of a claim on the endpoints the core read.
_LIB = (
    _FIELDS
    + f"""
local events, cursor, endpoints, starts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local due, pending, settled = KEYS[5], KEYS[6], KEYS[7]
local delivery_prefix, index_prefix, tag = ARGV[1], ARGV[2], ARGV[3]
local function wh_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)')
  return tonumber(ms), tonumber(seq)
end
local function wh_less(a, b)
  local am, as = wh_parts(a)
  local bm, bs = wh_parts(b)
  if am ~= bm then return am < bm end
  return as < bs
end
local function wh_sortable(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return string.rep('0', 20 - #ms) .. ms .. '-' .. string.rep('0', 20 - #seq) .. seq
end
local function wh_entry_id(sortable)
  local ms, seq = wh_parts(sortable)
  return string.format('%.0f-%.0f', ms, seq)
end
local function wh_next(id)
  local ms, seq = wh_parts(id)
  return string.format('%.0f-%.0f', ms, seq + 1)
end
local function wh_new_delivery(endpoint_id, entry_id, event_type, now)
  local sortable = wh_sortable(entry_id)
  local did = sortable .. ':' .. endpoint_id
  local key = delivery_prefix .. did
  redis.call('DEL', key)
  redis.call('HSET', key, 'endpoint_id', endpoint_id, 'message_id', 'msg_' .. tag .. entry_id, 'event_type',
    event_type, 'state', 'pending', 'next_attempt_at_millis', now, 'attempts', '[]', 'created_at_millis', now,
    'failures', '0', 'claim', '', 'last_attempt_at_millis', '')
  redis.call('ZADD', due, now, did)
  redis.call('ZADD', pending, 0, did)
  redis.call('ZADD', index_prefix .. endpoint_id, 0, sortable)
end
local function wh_settle(key, did, state, at)
  redis.call('HSET', key, 'state', state, 'next_attempt_at_millis', '', 'claim', '', 'last_attempt_at_millis', at)
  redis.call('ZREM', due, did)
  redis.call('ZREM', pending, did)
  redis.call('ZADD', settled, at, did)
  redis.call('PEXPIRE', key, {SETTLED_DELIVERY_TTL_MS})
end
local function wh_endpoints_are(expected)
  local n = 0
  for id, json in pairs(cjson.decode(expected)) do
    n = n + 1
    if redis.call('HGET', endpoints, id) ~= json then return false end
  end
  return redis.call('HLEN', endpoints) == n
end
"""
)


def _script(keys: KeySpace, project_id: str, name: str, *args: Arg) -> Script:
    """Webhook script `name` on the project's keys, with the arguments every one takes (`_LIB`), then `args`."""
    p, k = project_id, keys
    first = (k.events(p), k.webhook_cursor(p), k.webhook_endpoints(p), k.webhook_endpoint_from(p), k.webhook_due(p))
    return Script(
        name,
        (*first, k.webhook_pending(p), k.webhook_settled(p)),
        (k.webhook_delivery(p), k.webhook_deliveries(p, ""), k.webhook_message_tag(p), *args),
    )


def _endpoints_read(endpoints: tuple[WebhookEndpoint, ...]) -> str:
    return orjson.dumps({e.id: _endpoint_json(e) for e in endpoints}).decode()


# ARGV (after `_LIB`'s): the test event type, its data JSON, endpoint id, now. Records the event (`emit_event`) and,
# if the endpoint exists, its one delivery; returns the entry id.
script(
    "add_test_event",
    _LIB
    + _EMIT_EVENT
    + """
local id = emit_event(events, ARGV[4], ARGV[5], '', '')
if redis.call('HEXISTS', endpoints, ARGV[6]) == 1 then wh_new_delivery(ARGV[6], id, ARGV[4], ARGV[7]) end
return id
""",
)


@_plans(AddTestEvent)
def _add_test_event(keys: KeySpace, effect: AddTestEvent) -> Plan[StoredEvent]:
    p, data = effect.project_id, effect.data_json
    entry_id = yield _script(keys, p, "add_test_event", TEST_EVENT_TYPE, data, effect.endpoint_id, effect.now_ms)
    return _event(entry_id, {"t": TEST_EVENT_TYPE, "r": data}, keys.webhook_message_tag(p))


# ARGV (after `_LIB`'s): now, limit, the endpoints as read (`wh_endpoints_are`), the routes (JSON: [endpoint id,
# only, types]). Unless the endpoints changed (then false), the entries after the cursor (at most `limit`) become one
# delivery per route that takes their type and whose endpoint started before them; the cursor moves to the last.
# Returns how many entries the cursor moved past.
script(
    "fan_out_events",
    _LIB
    + """
if not wh_endpoints_are(ARGV[6]) then return false end
local last = redis.call('GET', cursor)
local start = '-'
if last then start = '(' .. last end
local entries = redis.call('XRANGE', events, start, '+', 'COUNT', ARGV[5])
if #entries == 0 then return 0 end
local routes = {}
for _, r in ipairs(cjson.decode(ARGV[7])) do
  local types = {}
  for _, t in ipairs(r[3]) do types[t] = true end
  routes[#routes + 1] = {id = r[1], only = r[2], types = types, from = redis.call('HGET', starts, r[1]) or '0-0'}
end
for _, entry in ipairs(entries) do
  local id, t = entry[1], fields(entry[2])['t']
  for _, r in ipairs(routes) do
    if wh_less(r.from, id) and (r.types[t] == true) == r.only then wh_new_delivery(r.id, id, t, ARGV[4]) end
  end
end
redis.call('SET', cursor, entries[#entries][1])
return #entries
""",
)


@_plans(FanOutEvents)
def _fan_out(keys: KeySpace, effect: FanOutEvents) -> Plan[int | None]:
    if effect.limit <= 0:
        return 0
    routes = orjson.dumps([[r.endpoint_id, r.only, r.types] for r in effect.routes]).decode()
    read = _endpoints_read(effect.endpoints)
    fanned = yield _script(keys, effect.project_id, "fan_out_events", effect.now_ms, effect.limit, read, routes)
    return None if fanned is None else int(fanned)


# ARGV (after `_LIB`'s): now, lease (ms), limit, the endpoints as read (`wh_endpoints_are`), the sendable endpoints'
# ids (JSON), then one claim token hash per claim. Unless the endpoints changed (then false), the deliveries due at
# `now` (oldest due first, at most `limit`) are claimed: due again at now + lease, with the next token hash. One to
# an endpoint not sendable, or whose event is no longer kept, is settled as failed instead (no attempt). Returns
# {delivery's HGETALL, stream entry} per claim.
script(
    "claim_deliveries",
    _LIB
    + """
if not wh_endpoints_are(ARGV[7]) then return false end
local sendable = {}
for _, id in ipairs(cjson.decode(ARGV[8])) do sendable[id] = true end
local until_at = string.format('%.0f', tonumber(ARGV[4]) + tonumber(ARGV[5]))
local out = {}
for _, did in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', ARGV[4], 'LIMIT', 0, ARGV[6])) do
  local key = delivery_prefix .. did
  local d = redis.call('HMGET', key, 'endpoint_id', 'message_id')
  if not d[1] then
    redis.call('ZREM', due, did)
    redis.call('ZREM', pending, did)
  else
    local entry_id = wh_entry_id(did)
    local entry = redis.call('XRANGE', events, entry_id, entry_id)
    if not sendable[d[1]] or #entry == 0 then
      wh_settle(key, did, 'failed', ARGV[4])
    else
      redis.call('HSET', key, 'claim', ARGV[9 + #out], 'next_attempt_at_millis', until_at)
      redis.call('ZADD', due, until_at, did)
      out[#out + 1] = {redis.call('HGETALL', key), entry[1]}
    end
  end
end
return out
""",
)


@_plans(ClaimDeliveries)
def _claim(keys: KeySpace, effect: ClaimDeliveries) -> Plan[tuple[ClaimedDelivery, ...] | None]:
    if effect.limit <= 0:
        return ()
    tokens = effect.claim_tokens[: effect.limit]
    sendable, read = orjson.dumps(effect.sendable).decode(), _endpoints_read(effect.endpoints)
    args: tuple[Arg, ...] = (effect.now_ms, effect.lease_ms, len(tokens), read, sendable)
    args += tuple(_token_hash(token) for token in tokens)
    reply = yield _script(keys, effect.project_id, "claim_deliveries", *args)
    if reply is None:
        return None
    endpoints = {e.id: e for e in effect.endpoints}  # as stored: the script checked it
    claimed = []
    for token, (fields, entry) in zip(tokens, reply, strict=False):
        delivery = _delivery(fields)
        # The event under the id its delivery was made with (a delivery older than tagged ids keeps its id).
        event = dataclasses.replace(_event(entry[0], entry[1], ""), id=delivery.message_id)
        failures = int(_pairs(fields)["failures"])
        claimed.append(ClaimedDelivery(delivery, event, endpoints[delivery.endpoint_id], token, failures))
    return tuple(claimed)


# ARGV (after `_LIB`'s): delivery id, claim token hash, attempt JSON, attempt time, the state it settles in, its
# failures, when it is due again (pending). The attempt is appended; only under the current claim is the delivery
# settled or rescheduled. Returns 1 if the claim was current, else 0.
script(
    "record_attempt",
    _LIB
    + """
local key = delivery_prefix .. ARGV[4]
if redis.call('EXISTS', key) == 0 then return 0 end
local attempts = redis.call('HGET', key, 'attempts')
if attempts == '[]' then
  attempts = '[' .. ARGV[6] .. ']'
else
  attempts = string.sub(attempts, 1, -2) .. ',' .. ARGV[6] .. ']'
end
redis.call('HSET', key, 'attempts', attempts)
local d = redis.call('HMGET', key, 'claim', 'state')
if d[1] == '' or d[1] ~= ARGV[5] or d[2] ~= 'pending' then return 0 end
redis.call('HSET', key, 'failures', ARGV[9])
if ARGV[8] ~= 'pending' then
  wh_settle(key, ARGV[4], ARGV[8], ARGV[7])
  return 1
end
redis.call('HSET', key, 'next_attempt_at_millis', ARGV[10], 'claim', '', 'last_attempt_at_millis', ARGV[7])
redis.call('ZADD', due, ARGV[10], ARGV[4])
return 1
""",
)


@_plans(RecordAttempt)
def _record_attempt(keys: KeySpace, effect: RecordAttempt) -> Plan[bool]:
    entry_id = keys.webhook_entry_id(effect.project_id, effect.message_id)
    if entry_id is None:
        return False
    attempt = effect.attempt
    current = yield _script(
        keys,
        effect.project_id,
        "record_attempt",
        webhook_delivery_id(entry_id, effect.endpoint_id),
        _token_hash(effect.claim_token),
        orjson.dumps(dataclasses.asdict(attempt)).decode(),
        attempt.at_millis,
        effect.state.value,
        effect.failures,
        effect.next_attempt_at_millis or 0,
    )
    return bool(current)


@_plans(CountPendingDeliveries)
def _count_pending(keys: KeySpace, effect: CountPendingDeliveries) -> Plan[int]:
    return int((yield Call("ZCARD", keys.webhook_pending(effect.project_id))))


@_plans(ListDeliveries)
def _list_deliveries(keys: KeySpace, effect: ListDeliveries) -> Plan[tuple[Delivery, ...]]:
    if effect.limit is not None and effect.limit <= 0:
        return ()
    # Newest first, at most `limit`, skipping those gone by TTL.
    p = effect.project_id
    found = call("HGETALL", cat(keys.webhook_delivery(p), MEMBER, ":" + effect.endpoint_id), need=1, out=1)
    if effect.limit is None:  # all at once: the ids of those gone by TTL leave the index too (`DeliveriesAre`)
        found["miss"] = ["ZREM", key(1), MEMBER]
        steps = [each("ZRANGE", key(1), 0, -1, "REV", do=[found], out=1)]
    else:
        steps = [each("ZRANGE", key(1), FIRST, LAST, "REV", do=[found], limit=effect.limit, out=1)]
    reply = yield read((keys.webhook_deliveries(p, effect.endpoint_id),), steps)
    return tuple(_delivery(fields) for fields in reply[0])


@_plans(LoadDelivery)
def _load_delivery(keys: KeySpace, effect: LoadDelivery) -> Plan[Delivery | None]:
    entry_id = keys.webhook_entry_id(effect.project_id, effect.message_id)
    if entry_id is None:
        return None
    delivery = keys.webhook_delivery(effect.project_id, effect.message_id, effect.endpoint_id)
    kept = Call("XRANGE", keys.events(effect.project_id), entry_id, entry_id)
    fields, entry = yield Batch((Call("HGETALL", delivery), kept))
    return _delivery(fields) if fields and entry else None


@guards(DeliveryIs)
def _delivery_is(ops: Ops, position: int, guard: DeliveryIs) -> None:
    read = guard.delivery
    delivery = ops.key(ops.space.webhook_delivery(ops.project_id, read.message_id, read.endpoint_id))
    attempts = orjson.dumps([dataclasses.asdict(attempt) for attempt in read.attempts]).decode()
    ops.guards.append([position, "hget", delivery, "state", read.state.value])
    ops.guards.append([position, "hget", delivery, "attempts", attempts])


@guards(DeliveriesAre)
def _deliveries_are(ops: Ops, position: int, guard: DeliveriesAre) -> None:
    members = [_delivery_at(ops.space, ops.project_id, m, guard.endpoint_id)[2] for m in guard.message_ids]
    ops.exactly(position, ops.space.webhook_deliveries(ops.project_id, guard.endpoint_id), members)


@writes(DropDelivery)
def _drop_delivery(ops: Ops, write: DropDelivery) -> None:
    space, p = ops.space, ops.project_id
    delivery, did, member = _delivery_at(space, p, write.message_id, write.endpoint_id)
    ops.writes.append(["del", ops.key(delivery)])
    ops.writes += [["zrem", ops.key(k), did] for k in (space.webhook_due(p), space.webhook_pending(p))]
    ops.writes.append(["zrem", ops.key(space.webhook_settled(p)), did])
    ops.writes.append(["zrem", ops.key(space.webhook_deliveries(p, write.endpoint_id)), member])


@writes(RestartDelivery)
def _restart_delivery(ops: Ops, write: RestartDelivery) -> None:
    space, p, now = ops.space, ops.project_id, str(write.now_ms)
    key, did, _ = _delivery_at(space, p, write.message_id, write.endpoint_id)
    delivery = ops.key(key)
    fields = ["state", "pending", "next_attempt_at_millis", now, "claim", "", "failures", "0"]
    ops.writes += [["hset", delivery, *fields], ["persist", delivery]]
    ops.writes.append(["zadd", ops.key(space.webhook_due(p)), now, did])
    ops.writes.append(["zadd", ops.key(space.webhook_pending(p)), "0", did])
    ops.writes.append(["zrem", ops.key(space.webhook_settled(p)), did])


# ARGV (after `_LIB`'s): before (ms), keep (events). Forgets the settled deliveries last attempted before `before`,
# then trims the stream to the entries from `before` on and the newest `keep` (XTRIM MINID, exact), keeping whatever
# their age the oldest entry a pending delivery needs and everything after it, and (while the project has endpoints)
# the entries not fanned out yet.
script(
    "trim_webhook_data",
    _LIB
    + """
for _, did in ipairs(redis.call('ZRANGEBYSCORE', settled, '-inf', '(' .. ARGV[4])) do
  redis.call('DEL', delivery_prefix .. did)
  redis.call('ZREM', index_prefix .. string.sub(did, 43), string.sub(did, 1, 41))
  redis.call('ZREM', settled, did)
end
local minid = ARGV[4] .. '-0'
local keep = tonumber(ARGV[5])
local candidate = nil
if keep <= 0 then
  local last = redis.call('XREVRANGE', events, '+', '-', 'COUNT', 1)
  if #last > 0 then candidate = wh_next(last[1][1]) end
else
  local newest = redis.call('XREVRANGE', events, '+', '-', 'COUNT', keep)
  if #newest == keep then candidate = newest[keep][1] end
end
if candidate and wh_less(minid, candidate) then minid = candidate end
local first_pending = redis.call('ZRANGE', pending, 0, 0)
if #first_pending > 0 then
  local needed = wh_entry_id(first_pending[1])
  if wh_less(needed, minid) then minid = needed end
end
if redis.call('HLEN', endpoints) > 0 then
  local next_id = wh_next(redis.call('GET', cursor) or '0-0')
  if wh_less(next_id, minid) then minid = next_id end
end
redis.call('XTRIM', events, 'MINID', minid)
return 1
""",
)


@_plans(TrimWebhookData)
def _trim(keys: KeySpace, effect: TrimWebhookData) -> Plan[None]:
    before, keep = max(effect.before_ms, 0), max(effect.keep_events, 0)
    yield _script(keys, effect.project_id, "trim_webhook_data", before, keep)
