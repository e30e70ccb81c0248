"""The memory store: webhook endpoints, the fan-out of recorded events (`Tenant.events`) into deliveries, their
claims, attempts and retries, and retention (`identity_proto.effects.webhooks`: each effect one step under the lock).

Choices the effects' docstrings leave open, the same on Redis (`backends.redis.webhooks`):

- An endpoint gets the events recorded *after* its creation (`Tenant.webhook_endpoint_from`): a new endpoint is not
  flooded with the project's history, and the first endpoint of a project moves the fan-out cursor to the end.
- Test events (`stack.test`, `AddTestEvent`) are recorded like the others (`ListEvents` lists them); which events
  an endpoint gets, and whose deliveries a claim fails, the core decides (`FanOutEvents.routes`,
  `ClaimDeliveries.sendable`), from the endpoints it read (guarded: both answer None when they changed).
- `FanOutEvents` returns how many events the cursor moved past (those no route takes included).
- Deliveries are listed newest message first (the order they were made in: fan-out follows the events' order).
- `TrimWebhookData` keeps the events of pending deliveries and those not yet fanned out (when the project has
  endpoints) whatever their age: an event is never forgotten before it was delivered or given up.
- An `after` that is not one of this store's message ids lists nothing.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    TEST_EVENT_TYPE,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
    CountPendingDeliveries,
    DeliveriesAre,
    Delivery,
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
from identity_proto.effects.webhooks import MESSAGE_TAG_LENGTH, message_position
from identity_proto.records import StoredEvent


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    """A delivery as this store keeps it: the record, the current claim's token (None: unclaimed), the failed
    attempts since the schedule (re)started, and when its last attempt was (retention)."""

    delivery: Delivery
    claim_token: str | None = None
    failures: int = 0
    last_attempt_at_millis: int | None = None


def _seq(message_id: str) -> int:
    """The event sequence number of a message id of this project's (`msg_<tag><12 digits>`)."""
    return int(message_id[len("msg_") + MESSAGE_TAG_LENGTH :])


def _event_seq(event: StoredEvent) -> int:
    return _seq(event.id)


def _own_seq(tenant: Tenant, message_id: str) -> int | None:
    """The sequence number of `message_id` when it is one of this project's ids (its tag), else None."""
    position = message_position(message_id, tenant.event_tag)
    return int(position) if position is not None and position.isdigit() and position.isascii() else None


def _find_event(tenant: Tenant, message_id: str) -> StoredEvent | None:
    seq, events = _own_seq(tenant, message_id), tenant.events
    at = len(events) if seq is None else bisect.bisect_left(events, seq, key=_event_seq)
    return events[at] if at < len(events) and events[at].id == message_id else None


def _endpoints_are(tenant: Tenant | None, endpoints: tuple[WebhookEndpoint, ...]) -> bool:
    return (tenant.webhook_endpoints if tenant else {}) == {e.id: e for e in endpoints}


def _new_delivery(tenant: Tenant, endpoint_id: str, event: StoredEvent, now_ms: int) -> None:
    delivery = Delivery(endpoint_id, event.id, event.type, DeliveryState.PENDING, now_ms, created_at_millis=now_ms)
    tenant.deliveries[(endpoint_id, event.id)] = DeliveryRow(delivery)


def _settled(row: DeliveryRow, state: DeliveryState, failures: int, at: int | None) -> DeliveryRow:
    delivery = dataclasses.replace(row.delivery, state=state, next_attempt_at_millis=None)
    return DeliveryRow(delivery, None, failures, at if at is not None else row.last_attempt_at_millis)


# ----------------------------------------------------------------------------------------------------------------
# Endpoints


@checks(EndpointIs)
def _endpoint_is(tenant: Tenant, guard: EndpointIs) -> bool:
    return tenant.webhook_endpoints.get(guard.endpoint_id) == guard.endpoint


@checks(EndpointCountIs)
def _endpoint_count_is(tenant: Tenant, guard: EndpointCountIs) -> bool:
    return len(tenant.webhook_endpoints) == guard.count


@applies(PutWebhookEndpoint)
def _put_endpoint(tenant: Tenant, write: PutWebhookEndpoint) -> None:
    endpoint = write.endpoint
    tenant.webhook_endpoints[endpoint.id] = endpoint
    if write.new:
        tenant.webhook_endpoint_from[endpoint.id] = tenant.event_seq
        tenant.store.webhook_projects.add(tenant.project_id)
    if write.skip_history:
        tenant.fanout_seq = max(tenant.fanout_seq, tenant.event_seq)


@_performs(LoadWebhookEndpoint)
def _load_endpoint(store: MemoryStore, effect: LoadWebhookEndpoint) -> WebhookEndpoint | None:
    tenant = store.tenants.get(effect.project_id)
    return None if tenant is None else tenant.webhook_endpoints.get(effect.endpoint_id)


@_performs(ListWebhookEndpoints)
def _list_endpoints(store: MemoryStore, effect: ListWebhookEndpoints) -> tuple[WebhookEndpoint, ...]:
    tenant = store.tenants.get(effect.project_id)
    if tenant is None:
        return ()
    return tuple(sorted(tenant.webhook_endpoints.values(), key=lambda e: (e.created_at_millis, e.id)))


@applies(DropWebhookEndpoint)
def _drop_endpoint(tenant: Tenant, write: DropWebhookEndpoint) -> None:
    del tenant.webhook_endpoints[write.endpoint_id]
    tenant.webhook_endpoint_from.pop(write.endpoint_id, None)
    if not tenant.webhook_endpoints:
        tenant.store.webhook_projects.discard(tenant.project_id)


@_performs(ListWebhookProjects)
def _list_webhook_projects(store: MemoryStore, effect: ListWebhookProjects) -> tuple[str, ...]:
    return tuple(sorted(store.webhook_projects))


# ----------------------------------------------------------------------------------------------------------------
# Events and deliveries


@_performs(ListEvents)
def _list_events(store: MemoryStore, effect: ListEvents) -> tuple[StoredEvent, ...]:
    tenant = store.tenants.get(effect.project_id)
    if tenant is None or effect.limit <= 0:
        return ()
    events = tenant.events
    if effect.after is None:
        return tuple(events[: effect.limit])
    after = _own_seq(tenant, effect.after)
    if after is None:
        return ()
    start = bisect.bisect_right(events, after, key=_event_seq)
    return tuple(events[start : start + effect.limit])


@_performs(AddTestEvent)
def _add_test_event(store: MemoryStore, effect: AddTestEvent) -> StoredEvent:
    tenant = store.tenant(effect.project_id)
    tenant.record_event(TEST_EVENT_TYPE, record=effect.data_json)
    event = tenant.events[-1]
    if effect.endpoint_id in tenant.webhook_endpoints:
        _new_delivery(tenant, effect.endpoint_id, event, effect.now_ms)
    return event


@_performs(FanOutEvents)
def _fan_out(store: MemoryStore, effect: FanOutEvents) -> int | None:
    tenant = store.tenants.get(effect.project_id)
    if effect.limit > 0 and not _endpoints_are(tenant, effect.endpoints):
        return None
    if tenant is None or effect.limit <= 0:
        return 0
    events = tenant.events
    start = bisect.bisect_right(events, tenant.fanout_seq, key=_event_seq)
    batch, starts = events[start : start + effect.limit], tenant.webhook_endpoint_from
    for event in batch:
        seq = _seq(event.id)
        for route in effect.routes:
            if starts.get(route.endpoint_id, 0) < seq and (event.type in route.types) == route.only:
                _new_delivery(tenant, route.endpoint_id, event, effect.now_ms)
    if batch:
        tenant.fanout_seq = _seq(batch[-1].id)
    return len(batch)


@_performs(ClaimDeliveries)
def _claim(store: MemoryStore, effect: ClaimDeliveries) -> tuple[ClaimedDelivery, ...] | None:
    tenant = store.tenants.get(effect.project_id)
    if effect.limit > 0 and not _endpoints_are(tenant, effect.endpoints):
        return None
    if tenant is None or effect.limit <= 0:
        return ()
    due = sorted(
        (
            (row.delivery.next_attempt_at_millis, _seq(key[1]), key)
            for key, row in tenant.deliveries.items()
            if row.delivery.state is DeliveryState.PENDING
            and row.delivery.next_attempt_at_millis is not None
            and row.delivery.next_attempt_at_millis <= effect.now_ms
        ),
    )
    claimed: list[ClaimedDelivery] = []
    for _, _, key in due[: effect.limit]:
        row = tenant.deliveries[key]
        event, endpoint = _find_event(tenant, key[1]), tenant.webhook_endpoints.get(key[0])
        if key[0] not in effect.sendable or endpoint is None or event is None:
            tenant.deliveries[key] = _settled(row, DeliveryState.FAILED, row.failures, effect.now_ms)
            continue
        token = effect.claim_tokens[len(claimed)]
        delivery = dataclasses.replace(row.delivery, next_attempt_at_millis=effect.now_ms + effect.lease_ms)
        tenant.deliveries[key] = dataclasses.replace(row, delivery=delivery, claim_token=token)
        claimed.append(ClaimedDelivery(delivery, event, endpoint, token, row.failures))
    return tuple(claimed)


@_performs(RecordAttempt)
def _record_attempt(store: MemoryStore, effect: RecordAttempt) -> bool:
    tenant = store.tenants.get(effect.project_id)
    key = (effect.endpoint_id, effect.message_id)
    row = None if tenant is None else tenant.deliveries.get(key)
    if tenant is None or row is None:
        return False
    attempt = effect.attempt
    delivery = dataclasses.replace(row.delivery, attempts=(*row.delivery.attempts, attempt))
    row = dataclasses.replace(row, delivery=delivery)
    current = row.claim_token is not None and row.claim_token == effect.claim_token
    if not current or delivery.state is not DeliveryState.PENDING:
        tenant.deliveries[key] = row
        return False
    at = attempt.at_millis
    if effect.state is DeliveryState.PENDING:
        delivery = dataclasses.replace(delivery, next_attempt_at_millis=effect.next_attempt_at_millis)
        tenant.deliveries[key] = dataclasses.replace(
            row, delivery=delivery, claim_token=None, failures=effect.failures, last_attempt_at_millis=at
        )
    else:
        tenant.deliveries[key] = _settled(row, effect.state, effect.failures, at)
    return True


@_performs(ListDeliveries)
def _list_deliveries(store: MemoryStore, effect: ListDeliveries) -> tuple[Delivery, ...]:
    tenant = store.tenants.get(effect.project_id)
    if tenant is None or (effect.limit is not None and effect.limit <= 0):
        return ()
    rows = [
        (_seq(message_id), row.delivery)
        for (endpoint_id, message_id), row in tenant.deliveries.items()
        if endpoint_id == effect.endpoint_id
    ]
    rows.sort(key=lambda pair: pair[0], reverse=True)
    return tuple(delivery for _, delivery in rows[: effect.limit])


@_performs(CountPendingDeliveries)
def _count_pending(store: MemoryStore, effect: CountPendingDeliveries) -> int:
    tenant = store.tenants.get(effect.project_id)
    if tenant is None:
        return 0
    pending = DeliveryState.PENDING
    return sum(1 for row in tenant.deliveries.values() if row.delivery.state is pending)


@_performs(LoadDelivery)
def _load_delivery(store: MemoryStore, effect: LoadDelivery) -> Delivery | None:
    tenant = store.tenants.get(effect.project_id)
    row = None if tenant is None else tenant.deliveries.get((effect.endpoint_id, effect.message_id))
    if tenant is None or row is None or _find_event(tenant, effect.message_id) is None:
        return None
    return row.delivery


@checks(DeliveryIs)
def _delivery_is(tenant: Tenant, guard: DeliveryIs) -> bool:
    read = guard.delivery
    row = tenant.deliveries.get((read.endpoint_id, read.message_id))
    return row is not None and (row.delivery.state, row.delivery.attempts) == (read.state, read.attempts)


@checks(DeliveriesAre)
def _deliveries_are(tenant: Tenant, guard: DeliveriesAre) -> bool:
    stored = {message_id for endpoint_id, message_id in tenant.deliveries if endpoint_id == guard.endpoint_id}
    return stored == set(guard.message_ids)


@applies(DropDelivery)
def _drop_delivery(tenant: Tenant, write: DropDelivery) -> None:
    del tenant.deliveries[(write.endpoint_id, write.message_id)]


@applies(RestartDelivery)
def _restart_delivery(tenant: Tenant, write: RestartDelivery) -> None:
    key = (write.endpoint_id, write.message_id)
    row = tenant.deliveries[key]
    delivery = dataclasses.replace(row.delivery, state=DeliveryState.PENDING, next_attempt_at_millis=write.now_ms)
    tenant.deliveries[key] = dataclasses.replace(row, delivery=delivery, claim_token=None, failures=0)


@_performs(TrimWebhookData)
def _trim(store: MemoryStore, effect: TrimWebhookData) -> None:
    tenant = store.tenants.get(effect.project_id)
    if tenant is None:
        return
    for key, row in list(tenant.deliveries.items()):
        last = row.last_attempt_at_millis
        if row.delivery.state is not DeliveryState.PENDING and last is not None and last < effect.before_ms:
            del tenant.deliveries[key]
    events = tenant.events
    cut = 0  # events[:cut] go
    while cut < len(events) and events[cut].created_at_millis < effect.before_ms:
        cut += 1
    cut = max(cut, len(events) - max(effect.keep_events, 0))
    # Kept whatever their age: the events of pending deliveries, and those not fanned out yet.
    pending = DeliveryState.PENDING
    keep_from = [_seq(key[1]) for key, row in tenant.deliveries.items() if row.delivery.state is pending]
    if tenant.webhook_endpoints:
        keep_from.append(tenant.fanout_seq + 1)
    if keep_from:
        first_kept = min(keep_from)
        cut = min(cut, bisect.bisect_left(events, first_kept, key=_event_seq))
    del events[:cut]
