"""Webhooks: endpoints, the fan-out of the events stream (`<p>events`, appended by the commits of the changes) into
deliveries, their claims, attempts and retries, and retention; `identity_proto.effects.webhooks` is the contract.

Every write is one script on keys of the project's slot, but for the set of projects with endpoints
(``<ns>{webhooks}:projects``, its own hash tag), which is never in a script with a project's keys, like the projects
index. A new endpoint (a commit's `PutWebhookEndpoint`) adds the project to it before the commit and again after;
a commit's `DropWebhookEndpoint` removes it after the commit when no endpoint is left, then looks again (HLEN) and
adds it back if an endpoint was created meanwhile. Whatever the interleaving, a project with an endpoint is in the
set once its creation has returned; a crash can at worst leave a project without endpoints in it (harmless: its
fan-out finds nothing), never the reverse.

Keys (the table in `keys`): the endpoints hash (id -> JSON, made in Python), the hash of where each endpoint's events
start (the last stream id at its creation: it gets later events only), the fan-out cursor (the last stream id fanned
out: FanOutEvents reads ``XRANGE (cursor + COUNT limit``), one hash per delivery (``<sortable entry id>:<endpoint
id>``, its attempts a JSON array made by joining the JSON texts Python made: never re-encoded in Lua), each
endpoint's index of its deliveries (sortable ids, score 0: ZREVRANGE is newest first), the due set (pending
deliveries scored by their next attempt or their lease's end: claims are ZRANGEBYSCORE), the pending set (score 0:
its first member is the oldest event a delivery still needs, which TrimWebhookData keeps) and the settled set (scored
by the last attempt: what TrimWebhookData forgets). Claim tokens are kept as their SHA-256 only.

The choices the effects leave open are the memory store's (`backends.memory.webhooks`), point by point."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import orjson

from backends.redis.codecs import _pairs, _text
from backends.redis.commit import Ops, guards, writes
from backends.redis.keys import SETTLED_DELIVERY_TTL_MS, KeySpace, webhook_delivery_id, webhook_sortable
from backends.redis.lua import (
    _FIELDS,
    _WEBHOOK_IDS,
    _WEBHOOK_NEW_DELIVERY,
    _WEBHOOK_SETTLE,
)
from backends.redis.plan import Batch, Call, Plan, Script, _plans, script
from backends.redis.read import FIRST, LAST, MEMBER, call, cat, each, key, read
from identity_proto.effects import (
    TEST_EVENT_TYPE,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
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
from identity_proto.effects.webhooks import EVENTS_HARD_CAP, message_id
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


def _entries(reply: Any) -> list[tuple[Any, Any]]:
    """XRANGE's reply as (entry id, fields) pairs: redis-py's parsed tuples or the raw nested lists."""
    return [(entry[0], entry[1]) for entry in reply or ()]


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
    return tuple(_event(entry_id, fields, tag) for entry_id, fields in _entries(reply))


# KEYS: events stream, endpoints, due, pending, the endpoint's delivery index. ARGV: the test event type, its data
# JSON, endpoint id, now, delivery key prefix, the stream's hard cap, the project's message id tag. Records the event
# (as `emit_event` does) and, if the endpoint exists, its one delivery; returns the entry id.
script(
    "add_test_event",
    _WEBHOOK_IDS
    + _WEBHOOK_NEW_DELIVERY
    + """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[6], '*', 't', ARGV[1], 'r', ARGV[2], 'm', '', 'i', '')
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  wh_new_delivery(ARGV[5], KEYS[3], KEYS[4], KEYS[5], ARGV[3], id, 'msg_' .. ARGV[7] .. id, ARGV[1], ARGV[4])
end
return id
""",
)


@_plans(AddTestEvent)
def _add_test_event(keys: KeySpace, effect: AddTestEvent) -> Plan[StoredEvent]:
    project_id = effect.project_id
    entry_id = yield Script(
        "add_test_event",
        (
            keys.events(project_id),
            keys.webhook_endpoints(project_id),
            keys.webhook_due(project_id),
            keys.webhook_pending(project_id),
            keys.webhook_deliveries(project_id, effect.endpoint_id),
        ),
        (
            TEST_EVENT_TYPE,
            effect.data_json,
            effect.endpoint_id,
            effect.now_ms,
            keys.webhook_delivery(project_id),
            EVENTS_HARD_CAP,
            keys.webhook_message_tag(project_id),
        ),
    )
    return _event(entry_id, {"t": TEST_EVENT_TYPE, "r": effect.data_json}, keys.webhook_message_tag(project_id))


#: Lua: whether the endpoints hash holds exactly the endpoints of `expected` (JSON: id -> the endpoint's JSON text,
#: `_endpoints_read`): the guard of a fan-out and of a claim on the endpoints the core read.
_ENDPOINTS_ARE = """
local function wh_endpoints_are(key, expected)
  local n = 0
  for id, json in pairs(cjson.decode(expected)) do
    n = n + 1
    if redis.call('HGET', key, id) ~= json then return false end
  end
  return redis.call('HLEN', key) == n
end
"""


def _endpoints_read(endpoints: tuple[WebhookEndpoint, ...]) -> str:
    return orjson.dumps({e.id: _endpoint_json(e) for e in endpoints}).decode()


# KEYS: events stream, cursor, endpoints, endpoint starts, due, pending. ARGV: now, limit, delivery key prefix,
# delivery index prefix, the project's message id tag, the endpoints as read (`_ENDPOINTS_ARE`), the routes (JSON:
# [endpoint id, only, types]). Unless the endpoints changed (then false), the entries after the cursor (at most
# `limit`) become one delivery per route that takes their type and whose endpoint started before them; the cursor
# moves to the last. Returns how many entries the cursor moved past.
script(
    "fan_out_events",
    _FIELDS
    + _WEBHOOK_IDS
    + _WEBHOOK_NEW_DELIVERY
    + _ENDPOINTS_ARE
    + """
if not wh_endpoints_are(KEYS[3], ARGV[6]) then return false end
local cursor = redis.call('GET', KEYS[2])
local start = '-'
if cursor then start = '(' .. cursor end
local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', ARGV[2])
if #entries == 0 then return 0 end
local routes = {}
for _, r in ipairs(cjson.decode(ARGV[7])) do
  local types = {}
  for _, t in ipairs(r[3]) do types[t] = true end
  routes[#routes + 1] = {id = r[1], only = r[2], types = types, from = redis.call('HGET', KEYS[4], r[1]) or '0-0'}
end
for _, entry in ipairs(entries) do
  local id, t = entry[1], fields(entry[2])['t']
  for _, r in ipairs(routes) do
    if wh_less(r.from, id) and (r.types[t] == true) == r.only then
      wh_new_delivery(ARGV[3], KEYS[5], KEYS[6], ARGV[4] .. r.id, r.id, id, 'msg_' .. ARGV[5] .. id, t, ARGV[1])
    end
  end
end
redis.call('SET', KEYS[2], entries[#entries][1])
return #entries
""",
)


@_plans(FanOutEvents)
def _fan_out(keys: KeySpace, effect: FanOutEvents) -> Plan[int | None]:
    if effect.limit <= 0:
        return 0
    project_id = effect.project_id
    fanned = yield Script(
        "fan_out_events",
        (
            keys.events(project_id),
            keys.webhook_cursor(project_id),
            keys.webhook_endpoints(project_id),
            keys.webhook_endpoint_from(project_id),
            keys.webhook_due(project_id),
            keys.webhook_pending(project_id),
        ),
        (
            effect.now_ms,
            effect.limit,
            keys.webhook_delivery(project_id),
            keys.webhook_deliveries(project_id, ""),
            keys.webhook_message_tag(project_id),
            _endpoints_read(effect.endpoints),
            orjson.dumps([[r.endpoint_id, r.only, r.types] for r in effect.routes]).decode(),
        ),
    )
    return None if fanned is None else int(fanned)


# KEYS: due, endpoints, events stream, pending, settled. ARGV: now, lease (ms), limit, delivery key prefix, settled
# TTL (ms), the endpoints as read (`_ENDPOINTS_ARE`), the sendable endpoints' ids (JSON), then one claim token hash
# per claim. Unless the endpoints changed (then false), the deliveries due at `now` (oldest due first, at most
# `limit`) are claimed: due again at now + lease, with the next token hash. One to an endpoint not sendable, or
# whose event is no longer kept, is settled as failed instead (no attempt). Returns {delivery's HGETALL, stream
# entry} per claim.
script(
    "claim_deliveries",
    _WEBHOOK_IDS
    + _WEBHOOK_SETTLE
    + _ENDPOINTS_ARE
    + """
if not wh_endpoints_are(KEYS[2], ARGV[6]) then return false end
local sendable = {}
for _, id in ipairs(cjson.decode(ARGV[7])) do sendable[id] = true end
local until_at = string.format('%.0f', tonumber(ARGV[1]) + tonumber(ARGV[2]))
local out = {}
for _, did in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])) do
  local key = ARGV[4] .. did
  local d = redis.call('HMGET', key, 'endpoint_id', 'message_id')
  if not d[1] then
    redis.call('ZREM', KEYS[1], did)
    redis.call('ZREM', KEYS[4], did)
  else
    local entry_id = wh_entry_id(did)
    local entry = redis.call('XRANGE', KEYS[3], entry_id, entry_id)
    if not sendable[d[1]] or #entry == 0 then
      wh_settle(key, did, 'failed', ARGV[1], KEYS[1], KEYS[4], KEYS[5], ARGV[5])
    else
      redis.call('HSET', key, 'claim', ARGV[8 + #out], 'next_attempt_at_millis', until_at)
      redis.call('ZADD', KEYS[1], until_at, did)
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
    project_id = effect.project_id
    tokens = effect.claim_tokens[: effect.limit]
    reply = yield Script(
        "claim_deliveries",
        (
            keys.webhook_due(project_id),
            keys.webhook_endpoints(project_id),
            keys.events(project_id),
            keys.webhook_pending(project_id),
            keys.webhook_settled(project_id),
        ),
        (
            effect.now_ms,
            effect.lease_ms,
            len(tokens),
            keys.webhook_delivery(project_id),
            SETTLED_DELIVERY_TTL_MS,
            _endpoints_read(effect.endpoints),
            orjson.dumps(effect.sendable).decode(),
            *(_token_hash(token) for token in tokens),
        ),
    )
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


# KEYS: the delivery, due, pending, settled. ARGV: delivery id, claim token hash, attempt JSON, attempt time, the
# state it settles in, its failures, settled TTL (ms), when it is due again (pending). The attempt is appended; only
# under the current claim is the delivery settled or rescheduled. Returns 1 if the claim was current, else 0.
script(
    "record_attempt",
    _WEBHOOK_SETTLE
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local attempts = redis.call('HGET', KEYS[1], 'attempts')
if attempts == '[]' then
  attempts = '[' .. ARGV[3] .. ']'
else
  attempts = string.sub(attempts, 1, -2) .. ',' .. ARGV[3] .. ']'
end
redis.call('HSET', KEYS[1], 'attempts', attempts)
local d = redis.call('HMGET', KEYS[1], 'claim', 'state')
if d[1] == '' or d[1] ~= ARGV[2] or d[2] ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'failures', ARGV[6])
if ARGV[5] ~= 'pending' then
  wh_settle(KEYS[1], ARGV[1], ARGV[5], ARGV[4], KEYS[2], KEYS[3], KEYS[4], ARGV[7])
  return 1
end
redis.call('HSET', KEYS[1], 'next_attempt_at_millis', ARGV[8], 'claim', '', 'last_attempt_at_millis', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[8], ARGV[1])
return 1
""",
)


@_plans(RecordAttempt)
def _record_attempt(keys: KeySpace, effect: RecordAttempt) -> Plan[bool]:
    entry_id = keys.webhook_entry_id(effect.project_id, effect.message_id)
    if entry_id is None:
        return False
    project_id, attempt = effect.project_id, effect.attempt
    current = yield Script(
        "record_attempt",
        (
            keys.webhook_delivery(project_id, effect.message_id, effect.endpoint_id),
            keys.webhook_due(project_id),
            keys.webhook_pending(project_id),
            keys.webhook_settled(project_id),
        ),
        (
            webhook_delivery_id(entry_id, effect.endpoint_id),
            _token_hash(effect.claim_token),
            orjson.dumps(dataclasses.asdict(attempt)).decode(),
            attempt.at_millis,
            effect.state.value,
            effect.failures,
            SETTLED_DELIVERY_TTL_MS,
            effect.next_attempt_at_millis or 0,
        ),
    )
    return bool(current)


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
    index = ops.key(ops.space.webhook_deliveries(ops.project_id, guard.endpoint_id))
    entry_ids = {ops.space.webhook_entry_id(ops.project_id, message_id) for message_id in guard.message_ids}
    members = {webhook_sortable(entry_id or "") for entry_id in entry_ids}  # ids the flow read: all of them valid
    ops.guards.append([position, "zcard", index, len(members)])
    ops.guards += [[position, "zscore", index, member, True] for member in members]


@writes(DropDelivery)
def _drop_delivery(ops: Ops, write: DropDelivery) -> None:
    space, p = ops.space, ops.project_id
    entry_id = space.webhook_entry_id(p, write.message_id)
    assert entry_id is not None  # guarded: the flow read the delivery
    did = webhook_delivery_id(entry_id, write.endpoint_id)
    ops.writes.append(["del", ops.key(space.webhook_delivery(p, write.message_id, write.endpoint_id))])
    ops.writes += [["zrem", ops.key(k), did] for k in (space.webhook_due(p), space.webhook_pending(p))]
    ops.writes.append(["zrem", ops.key(space.webhook_settled(p)), did])
    ops.writes.append(["zrem", ops.key(space.webhook_deliveries(p, write.endpoint_id)), webhook_sortable(entry_id)])


@writes(RestartDelivery)
def _restart_delivery(ops: Ops, write: RestartDelivery) -> None:
    space, p, now = ops.space, ops.project_id, str(write.now_ms)
    entry_id = space.webhook_entry_id(p, write.message_id)
    assert entry_id is not None  # guarded: the flow read the delivery
    did = webhook_delivery_id(entry_id, write.endpoint_id)
    delivery = ops.key(space.webhook_delivery(p, write.message_id, write.endpoint_id))
    fields = ["state", "pending", "next_attempt_at_millis", now, "claim", "", "failures", "0"]
    ops.writes += [["hset", delivery, *fields], ["persist", delivery]]
    ops.writes.append(["zadd", ops.key(space.webhook_due(p)), now, did])
    ops.writes.append(["zadd", ops.key(space.webhook_pending(p)), "0", did])
    ops.writes.append(["zrem", ops.key(space.webhook_settled(p)), did])


# KEYS: events stream, cursor, endpoints, pending, settled. ARGV: before (ms), keep (events), delivery key prefix,
# delivery index prefix. Forgets the settled deliveries last attempted before `before`, then trims the stream to
# the entries from `before` on and the newest `keep` (XTRIM MINID, exact), keeping whatever their age the oldest
# entry a pending delivery needs and everything after it, and (while the project has endpoints) the entries not
# fanned out yet.
script(
    "trim_webhook_data",
    _WEBHOOK_IDS
    + """
local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. ARGV[1])
for _, did in ipairs(old) do
  redis.call('DEL', ARGV[3] .. did)
  redis.call('ZREM', ARGV[4] .. string.sub(did, 43), string.sub(did, 1, 41))
  redis.call('ZREM', KEYS[5], did)
end
local minid = ARGV[1] .. '-0'
local keep = tonumber(ARGV[2])
local candidate = nil
if keep <= 0 then
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #last > 0 then candidate = wh_next(last[1][1]) end
else
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', keep)
  if #newest == keep then candidate = newest[keep][1] end
end
if candidate and wh_less(minid, candidate) then minid = candidate end
local first_pending = redis.call('ZRANGE', KEYS[4], 0, 0)
if #first_pending > 0 then
  local needed = wh_entry_id(first_pending[1])
  if wh_less(needed, minid) then minid = needed end
end
if redis.call('HLEN', KEYS[3]) > 0 then
  local next_id = wh_next(redis.call('GET', KEYS[2]) or '0-0')
  if wh_less(next_id, minid) then minid = next_id end
end
redis.call('XTRIM', KEYS[1], 'MINID', minid)
return 1
""",
)


@_plans(TrimWebhookData)
def _trim(keys: KeySpace, effect: TrimWebhookData) -> Plan[None]:
    project_id = effect.project_id
    yield Script(
        "trim_webhook_data",
        (
            keys.events(project_id),
            keys.webhook_cursor(project_id),
            keys.webhook_endpoints(project_id),
            keys.webhook_pending(project_id),
            keys.webhook_settled(project_id),
        ),
        (
            max(effect.before_ms, 0),
            max(effect.keep_events, 0),
            keys.webhook_delivery(project_id),
            keys.webhook_deliveries(project_id, ""),
        ),
    )
