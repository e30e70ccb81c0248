"""Webhook storage over every store (`identity_proto.effects.webhooks`), each effect one atomic step: endpoints and
the set of projects that have some, the fan-out of recorded events into deliveries (exactly once, whatever the
number of workers), claims (each due delivery claimed by exactly one caller; a lease that ends makes it claimable
again, same message id), attempts on the Svix retry schedule, stale claims, replay, retention, and what a project's
reset or deletion takes with it.

Events are recorded here as the stores' writes record them: `Tenant.record_event` on the memory store, the Lua
function `emit_event` on Redis (`record_events` below), and `AddTestEvent` on both.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

import pytest
from redis.cluster import key_slot

from backends.memory import MemoryStore
from backends.redis import RedisStore
from backends.redis.keys import SETTLED_DELIVERY_TTL_MS
from backends.redis.lua import _EMIT_EVENT
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import (
    RETRY_SCHEDULE_MS,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
    CommitConflict,
    CountPendingDeliveries,
    DeleteProject,
    Delivery,
    DeliveryAttempt,
    DeliveryState,
    FanOutEvents,
    ListDeliveries,
    ListEvents,
    ListWebhookEndpoints,
    ListWebhookProjects,
    LoadWebhookEndpoint,
    RecordAttempt,
    ResetProjectData,
    TrimWebhookData,
    WebhookEndpoint,
    create_project,
)
from identity_proto.events import TEST_EVENT_TYPE
from identity_proto.flows.projects import new_project
from identity_proto.flows.webhook_delivery import claim_deliveries, fan_out_events, routes
from identity_proto.flows.webhooks import (
    add_webhook_endpoint,
    drop_webhook_endpoint,
    replace_webhook_endpoint,
    replay_delivery,
)
from identity_proto.records import StoredEvent
from identity_proto.tokens import SeededEntropy
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import OTHER_PROJECT, PROJECT, T0, in_threads

#: The service's clock in these tests (the stores take it from the effects).
NOW = T0
LEASE_MS = 30_000
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
_tokens = itertools.count()


def endpoint(endpoint_id: str = "ep-1", **fields: Any) -> WebhookEndpoint:
    values: dict[str, Any] = {
        "url": f"https://hooks.example.com/{endpoint_id}",
        "secret": SECRET,
        "created_at_millis": NOW,
    }
    return WebhookEndpoint(id=endpoint_id, **(values | fields))


def add_endpoint(store: Store, endpoint_id: str = "ep-1", project: str = PROJECT, **fields: Any) -> WebhookEndpoint:
    made = endpoint(endpoint_id, **fields)
    run(add_webhook_endpoint(project, made), store)
    return made


def record_events(store: Store, *types: str, project: str = PROJECT, ids: tuple[str, ...] = ("u-1",)) -> None:
    """Record events as a write's handler or script does (the transactional outbox's helpers)."""
    for event_type in types:
        if isinstance(store, MemoryStore):
            with store._lock:
                store.tenant(project).record_event(event_type, ids=ids)
        elif isinstance(store, RedisStore):
            body = _EMIT_EVENT + "emit_event(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])\nreturn 1\n"
            store.client.eval(body, 1, store.keys.events(project), event_type, "", "", "\n".join(ids))
        else:  # pragma: no cover - every store fixture is one of the two
            raise TypeError(type(store).__name__)


def tokens(n: int) -> tuple[str, ...]:
    return tuple(f"claim-{next(_tokens)}" for _ in range(n))


def claim(store: Store, now: int = NOW, limit: int = 10, project: str = PROJECT) -> tuple[ClaimedDelivery, ...]:
    return run(claim_deliveries(project, now, LEASE_MS, limit, tokens(limit)), store)


def attempt(at: int, status: int | None = 500, error: str | None = "HTTP 500") -> DeliveryAttempt:
    return DeliveryAttempt(at_millis=at, status_code=status, latency_ms=12, error=error)


def record(store: Store, claimed: ClaimedDelivery, result: DeliveryAttempt, project: str = PROJECT) -> bool:
    return store.apply(RecordAttempt.after(project, claimed, result))


def deliveries(store: Store, endpoint_id: str = "ep-1", project: str = PROJECT) -> tuple[Delivery, ...]:
    return store.apply(ListDeliveries(project, endpoint_id))


def events(store: Store, project: str = PROJECT) -> tuple[StoredEvent, ...]:
    return store.apply(ListEvents(project, limit=1000))


# ----------------------------------------------------------------------------------------------------------------
# Endpoints


def test_an_endpoint_round_trips_every_field(store: Store) -> None:
    full = endpoint(
        "ep-full",
        description="Ünïcode «hooks» 🎉",
        event_types=("user.created", "team.deleted"),
        disabled=True,
        previous_secret="whsec_b2xkIHNlY3JldA==",
        previous_until_millis=NOW + 86_400_000,
    )
    run(add_webhook_endpoint(PROJECT, full), store)
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-full")) == full
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-none")) is None
    assert store.apply(LoadWebhookEndpoint(OTHER_PROJECT, "ep-full")) is None
    bare = add_endpoint(store, "ep-bare", event_types=())
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-bare")) == bare


def test_endpoints_are_listed_in_creation_order(store: Store) -> None:
    made = [add_endpoint(store, f"ep-{name}", created_at_millis=NOW + i) for i, name in enumerate("cab")]
    assert store.apply(ListWebhookEndpoints(PROJECT)) == tuple(made)
    assert store.apply(ListWebhookEndpoints(OTHER_PROJECT)) == ()


def test_update_replaces_an_endpoint_and_refuses_a_missing_one(store: Store) -> None:
    add_endpoint(store)
    changed = endpoint("ep-1", url="https://new.example.com/h", disabled=True, event_types=("user.updated",))
    assert run(replace_webhook_endpoint(PROJECT, changed), store) == changed
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-1")) == changed
    assert run(replace_webhook_endpoint(PROJECT, endpoint("ep-none")), store) is None
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-none")) is None
    assert store.apply(ListWebhookEndpoints(PROJECT)) == (changed,)


def test_the_webhook_projects_are_those_with_an_endpoint(store: Store) -> None:
    assert store.apply(ListWebhookProjects()) == ()
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    add_endpoint(store, "ep-x", project=OTHER_PROJECT)
    assert store.apply(ListWebhookProjects()) == (PROJECT, OTHER_PROJECT)
    assert run(drop_webhook_endpoint(PROJECT, "ep-1"), store) is True
    assert store.apply(ListWebhookProjects()) == (PROJECT, OTHER_PROJECT)
    assert run(drop_webhook_endpoint(PROJECT, "ep-2"), store) is True
    assert store.apply(ListWebhookProjects()) == (OTHER_PROJECT,)
    assert run(drop_webhook_endpoint(PROJECT, "ep-2"), store) is False
    assert run(drop_webhook_endpoint(OTHER_PROJECT, "ep-1"), store) is False
    assert store.apply(ListWebhookEndpoints(OTHER_PROJECT)) == (endpoint("ep-x"),)


def test_deleting_an_endpoint_drops_its_deliveries_pending_or_not(store: Store) -> None:
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    record_events(store, "user.created", "user.updated")
    assert run(fan_out_events(PROJECT, NOW), store) == 2
    first = claim(store, limit=1)[0]
    assert record(store, first, attempt(NOW, 200, None))
    assert run(drop_webhook_endpoint(PROJECT, first.delivery.endpoint_id), store) is True
    assert deliveries(store, first.delivery.endpoint_id) == ()
    claimed = claim(store, limit=10)
    assert {c.delivery.endpoint_id for c in claimed} == {"ep-1", "ep-2"} - {first.delivery.endpoint_id}
    # an endpoint created again with the same id starts empty
    add_endpoint(store, first.delivery.endpoint_id)
    assert deliveries(store, first.delivery.endpoint_id) == ()


def test_the_pending_deliveries_are_counted_per_project_until_settled(store: Store) -> None:
    assert store.apply(CountPendingDeliveries(PROJECT)) == 0  # nothing of the project stored yet
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    record_events(store, "user.created", "user.updated")
    assert store.apply(CountPendingDeliveries(PROJECT)) == 0  # events not fanned out yet
    assert run(fan_out_events(PROJECT, NOW), store) == 2
    assert store.apply(CountPendingDeliveries(PROJECT)) == 4
    first, second = claim(store, limit=2)
    assert store.apply(CountPendingDeliveries(PROJECT)) == 4  # claimed is still pending
    assert record(store, first, attempt(NOW, 200, None))
    assert record(store, second, attempt(NOW))  # failed: due again later
    assert store.apply(CountPendingDeliveries(PROJECT)) == 3
    assert store.apply(CountPendingDeliveries(OTHER_PROJECT)) == 0
    assert run(drop_webhook_endpoint(PROJECT, "ep-2"), store) is True
    assert store.apply(CountPendingDeliveries(PROJECT)) == len(
        [d for d in deliveries(store, "ep-1") if d.state is DeliveryState.PENDING]
    )


def test_deleting_an_endpoint_conflicts_with_a_delivery_made_meanwhile(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    flow = drop_webhook_endpoint(PROJECT, "ep-1")
    the_commit = flow.send(store.apply(flow.send(store.apply(next(flow)))))  # its reads, then its commit
    assert run(fan_out_events(PROJECT, NOW), store) == 1
    with pytest.raises(CommitConflict):
        flow.send(store.apply(the_commit))
    assert len(deliveries(store)) == 1
    assert run(drop_webhook_endpoint(PROJECT, "ep-1"), store) is True
    assert deliveries(store) == ()


# ----------------------------------------------------------------------------------------------------------------
# Events, test events and the fan-out


def test_events_are_listed_oldest_first_after_a_message_id(store: Store) -> None:
    record_events(store, "user.created", "team.created", "user.deleted", ids=("u-1", "t-1"))
    listed = events(store)
    assert [e.type for e in listed] == ["user.created", "team.created", "user.deleted"]
    assert all(e.ids == ("u-1", "t-1") and e.id.startswith("msg_") for e in listed)
    assert len({e.id for e in listed}) == 3
    assert store.apply(ListEvents(PROJECT, after=listed[0].id)) == listed[1:]
    assert store.apply(ListEvents(PROJECT, after=listed[0].id, limit=1)) == listed[1:2]
    assert store.apply(ListEvents(PROJECT, after=listed[2].id)) == ()
    assert store.apply(ListEvents(PROJECT, limit=2)) == listed[:2]
    assert store.apply(ListEvents(PROJECT, after="not-a-message-id")) == ()
    assert store.apply(ListEvents(OTHER_PROJECT)) == ()


def test_a_test_event_is_recorded_and_delivered_to_its_endpoint_only(store: Store) -> None:
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    data = '{"message":"Ünïcode test ✓","n":12345678901234567890,"list":[]}'
    event = store.apply(AddTestEvent(PROJECT, "ep-2", data, NOW))
    assert event.type == TEST_EVENT_TYPE
    assert event.record == data
    assert event.ids == ()
    assert events(store) == (event,)
    assert deliveries(store, "ep-1") == ()
    assert deliveries(store, "ep-2") == (
        Delivery("ep-2", event.id, TEST_EVENT_TYPE, DeliveryState.PENDING, NOW, created_at_millis=NOW),
    )
    assert run(fan_out_events(PROJECT, NOW), store) == 1  # the cursor moves past it; no delivery made
    assert deliveries(store, "ep-1") == ()
    (claimed,) = claim(store)
    assert claimed.event == event
    assert claimed.endpoint == endpoint("ep-2")


def test_fan_out_makes_one_delivery_per_enabled_matching_endpoint_exactly_once(store: Store) -> None:
    add_endpoint(store, "ep-all")
    add_endpoint(store, "ep-users", event_types=("user.created", "user.deleted"))
    add_endpoint(store, "ep-off", disabled=True)
    add_endpoint(store, "ep-none", event_types=())
    record_events(store, "user.created", "team.created", "user.deleted")
    listed = events(store)
    assert run(fan_out_events(PROJECT, NOW, limit=2), store) == 2
    assert run(fan_out_events(PROJECT, NOW + 5), store) == 1
    assert run(fan_out_events(PROJECT, NOW + 9), store) == 0
    assert [d.message_id for d in deliveries(store, "ep-all")] == [e.id for e in reversed(listed)]
    assert [d.message_id for d in deliveries(store, "ep-users")] == [listed[2].id, listed[0].id]
    assert deliveries(store, "ep-off") == ()
    assert deliveries(store, "ep-none") == ()
    newest = deliveries(store, "ep-all")[0]
    assert newest == Delivery("ep-all", listed[2].id, "user.deleted", DeliveryState.PENDING, NOW + 5, (), NOW + 5)
    assert store.apply(ListDeliveries(PROJECT, "ep-all", limit=2)) == deliveries(store, "ep-all")[:2]


def test_an_endpoint_gets_only_the_events_recorded_after_it(store: Store) -> None:
    record_events(store, "user.created")  # before any endpoint: nobody's
    add_endpoint(store, "ep-1")
    record_events(store, "user.updated")
    add_endpoint(store, "ep-2")  # created before the fan-out of user.updated: not for it either
    record_events(store, "user.deleted")
    assert run(fan_out_events(PROJECT, NOW), store) == 2
    assert [d.event_type for d in deliveries(store, "ep-1")] == ["user.deleted", "user.updated"]
    assert [d.event_type for d in deliveries(store, "ep-2")] == ["user.deleted"]


def test_a_disabled_endpoint_gets_no_new_deliveries_and_enabled_again_gets_later_ones(store: Store) -> None:
    add_endpoint(store, "ep-1", disabled=True)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    assert deliveries(store) == ()
    run(replace_webhook_endpoint(PROJECT, endpoint("ep-1")), store)
    record_events(store, "user.updated")
    run(fan_out_events(PROJECT, NOW), store)
    assert [d.event_type for d in deliveries(store)] == ["user.updated"]


def test_concurrent_fan_outs_make_each_delivery_once(store: Store) -> None:
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    record_events(store, *(f"user.{i}" for i in range(60)))
    counts = in_threads(*[lambda: sum(run(fan_out_events(PROJECT, NOW, limit=7), store) for _ in range(12))] * 6)
    assert sum(counts) == 60
    for endpoint_id in ("ep-1", "ep-2"):
        made = store.apply(ListDeliveries(PROJECT, endpoint_id, limit=1000))
        assert sorted(d.event_type for d in made) == sorted(f"user.{i}" for i in range(60))


# ----------------------------------------------------------------------------------------------------------------
# Claims and attempts


def test_fan_out_and_claim_on_endpoints_changed_since_read_change_nothing(store: Store) -> None:
    read = (add_endpoint(store),)
    record_events(store, "user.created")
    add_endpoint(store, "ep-2")  # after the read: both steps refuse it, the flows read again
    assert store.apply(FanOutEvents(PROJECT, NOW, read, routes(read))) is None
    assert store.apply(ClaimDeliveries(PROJECT, NOW, LEASE_MS, 1, ("t",), read, ("ep-1",))) is None
    assert deliveries(store) == ()
    assert run(fan_out_events(PROJECT, NOW), store) == 1
    assert [c.endpoint.id for c in claim(store)] == ["ep-1"]


def test_a_claim_carries_the_delivery_its_event_and_endpoint_and_leases_it(store: Store) -> None:
    ep = add_endpoint(store, description="d")
    record_events(store, "team_membership.created", ids=("t-1", "u-1"))
    run(fan_out_events(PROJECT, NOW), store)
    (event,) = events(store)
    token = "claim-token-1"
    (claimed,) = run(claim_deliveries(PROJECT, NOW + 10, LEASE_MS, 3, (token, "t2", "t3")), store)
    assert claimed.event == event
    assert claimed.event.ids == ("t-1", "u-1")
    assert claimed.endpoint == ep
    assert claimed.claim_token == token
    leased = Delivery("ep-1", event.id, "team_membership.created", DeliveryState.PENDING, NOW + 10 + LEASE_MS, (), NOW)
    assert claimed.delivery == leased
    assert deliveries(store) == (leased,)
    assert claim(store, NOW + 10 + LEASE_MS - 1) == ()


def test_deliveries_not_yet_due_are_not_claimed_and_the_oldest_due_come_first(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "a")
    run(fan_out_events(PROJECT, NOW + 100), store)
    record_events(store, "b")
    run(fan_out_events(PROJECT, NOW), store)
    record_events(store, "c")
    run(fan_out_events(PROJECT, NOW + 200), store)
    assert claim(store, NOW - 1) == ()
    assert [c.event.type for c in claim(store, NOW + 150, limit=1)] == ["b"]
    assert [c.event.type for c in claim(store, NOW + 150, limit=5)] == ["a"]
    assert [c.event.type for c in claim(store, NOW + 200)] == ["c"]


def test_each_due_delivery_is_claimed_by_exactly_one_of_many_threads(store: Store) -> None:
    add_endpoint(store, "ep-1")
    add_endpoint(store, "ep-2")
    record_events(store, *(f"e.{i}" for i in range(40)))
    assert run(fan_out_events(PROJECT, NOW, limit=100), store) == 40

    def worker() -> list[tuple[str, str]]:
        got: list[tuple[str, str]] = []
        while batch := claim(store, NOW, limit=3):
            got += [(c.delivery.endpoint_id, c.delivery.message_id) for c in batch]
        return got

    results = in_threads(*[worker] * 8)
    everything = [pair for got in results for pair in got]
    assert len(everything) == 80
    assert len(set(everything)) == 80


def test_a_lease_that_ends_makes_the_delivery_claimable_again_with_the_same_message_id(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (first,) = claim(store, NOW)
    assert claim(store, NOW + LEASE_MS - 1) == ()
    (second,) = claim(store, NOW + LEASE_MS)
    assert second.delivery.message_id == first.delivery.message_id
    assert second.claim_token != first.claim_token
    assert second.delivery.next_attempt_at_millis == NOW + 2 * LEASE_MS


def test_a_stale_claim_token_records_its_attempt_and_changes_nothing_else(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (stale,) = claim(store, NOW)
    (current,) = claim(store, NOW + LEASE_MS)
    late = attempt(NOW + LEASE_MS + 5, 200, None)
    assert record(store, stale, late) is False
    (delivery,) = deliveries(store)
    assert delivery.state is DeliveryState.PENDING
    assert delivery.attempts == (late,)
    assert delivery.next_attempt_at_millis == NOW + 2 * LEASE_MS
    assert claim(store, NOW + LEASE_MS + 10) == ()  # still leased to the current claim
    failed = attempt(NOW + LEASE_MS + 20)
    assert record(store, current, failed) is True
    (delivery,) = deliveries(store)
    assert delivery.attempts == (late, failed)
    assert delivery.next_attempt_at_millis == failed.at_millis + RETRY_SCHEDULE_MS[0]
    # the current claim is spent: a second record with it is stale too
    assert record(store, current, attempt(NOW + LEASE_MS + 30)) is False
    assert deliveries(store)[0].next_attempt_at_millis == failed.at_millis + RETRY_SCHEDULE_MS[0]


def test_a_2xx_settles_the_delivery_as_succeeded(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (claimed,) = claim(store)
    ok = DeliveryAttempt(at_millis=NOW + 3, status_code=204, latency_ms=250)
    assert record(store, claimed, ok) is True
    (delivery,) = deliveries(store)
    assert delivery.state is DeliveryState.SUCCEEDED
    assert delivery.next_attempt_at_millis is None
    assert delivery.attempts == (ok,)
    assert claim(store, NOW + 10**9) == ()


def test_failures_follow_the_retry_schedule_then_the_delivery_fails(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    now, made = NOW, []
    for n, wait_ms in enumerate(RETRY_SCHEDULE_MS):
        (claimed,) = claim(store, now)
        failure = attempt(now + 7, None, "timeout") if n % 2 else attempt(now + 7, 503, "HTTP 503")
        assert record(store, claimed, failure) is True
        made.append(failure)
        (delivery,) = deliveries(store)
        assert delivery.state is DeliveryState.PENDING
        assert delivery.next_attempt_at_millis == failure.at_millis + wait_ms
        assert claim(store, failure.at_millis + wait_ms - 1) == ()
        now = failure.at_millis + wait_ms
    (claimed,) = claim(store, now)
    last = attempt(now + 1)
    assert record(store, claimed, last) is True  # the 8th failure
    (delivery,) = deliveries(store)
    assert delivery.state is DeliveryState.FAILED
    assert delivery.next_attempt_at_millis is None
    assert delivery.attempts == (*made, last)
    assert len(delivery.attempts) == len(RETRY_SCHEDULE_MS) + 1
    assert claim(store, now + 10**10) == ()


def test_recording_an_attempt_for_no_delivery_writes_nothing(store: Store) -> None:
    add_endpoint(store)
    failed = DeliveryState.FAILED
    assert store.apply(RecordAttempt(PROJECT, "ep-1", "msg_none", "t", attempt(NOW), failed)) is False
    assert store.apply(RecordAttempt(OTHER_PROJECT, "ep-1", "msg_none", "t", attempt(NOW), failed)) is False
    assert deliveries(store) == ()


def test_a_claim_meeting_a_disabled_endpoint_fails_its_delivery_without_an_attempt(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created", "user.updated")
    run(fan_out_events(PROJECT, NOW), store)
    run(replace_webhook_endpoint(PROJECT, endpoint("ep-1", disabled=True)), store)
    assert claim(store) == ()
    assert [(d.state, d.attempts) for d in deliveries(store)] == [(DeliveryState.FAILED, ())] * 2
    run(replace_webhook_endpoint(PROJECT, endpoint("ep-1")), store)
    assert claim(store, NOW + 10**9) == ()


# ----------------------------------------------------------------------------------------------------------------
# Replay


def test_replay_makes_a_settled_delivery_due_again_with_its_attempts_and_a_fresh_schedule(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (claimed,) = claim(store)
    first = attempt(NOW + 1, 200, None)
    record(store, claimed, first)
    message_id = claimed.delivery.message_id
    replayed = run(replay_delivery(PROJECT, "ep-1", message_id, NOW + 1000), store)
    expected = Delivery("ep-1", message_id, "user.created", DeliveryState.PENDING, NOW + 1000, (first,), NOW)
    assert replayed == expected
    assert deliveries(store) == (expected,)
    (again,) = claim(store, NOW + 1000)
    assert again.delivery.message_id == message_id
    assert again.event == claimed.event
    failure = attempt(NOW + 1001)
    record(store, again, failure)
    assert deliveries(store)[0].next_attempt_at_millis == failure.at_millis + RETRY_SCHEDULE_MS[0]


def test_replay_restarts_the_schedule_of_a_failed_delivery(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    now = NOW
    for _ in range(len(RETRY_SCHEDULE_MS) + 1):
        (claimed,) = claim(store, now)
        record(store, claimed, attempt(now))
        now = deliveries(store)[0].next_attempt_at_millis or now
    assert deliveries(store)[0].state is DeliveryState.FAILED
    message_id = claimed.delivery.message_id
    assert run(replay_delivery(PROJECT, "ep-1", message_id, now + 5), store) is not None
    (claimed,) = claim(store, now + 5)
    record(store, claimed, attempt(now + 6))
    (delivery,) = deliveries(store)
    assert delivery.state is DeliveryState.PENDING
    assert len(delivery.attempts) == len(RETRY_SCHEDULE_MS) + 2
    assert delivery.next_attempt_at_millis == now + 6 + RETRY_SCHEDULE_MS[0]


def test_replay_of_no_delivery_is_none(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    (event,) = events(store)
    assert run(replay_delivery(PROJECT, "ep-1", event.id, NOW), store) is None  # not fanned out yet
    assert run(replay_delivery(PROJECT, "ep-1", "msg_nothing", NOW), store) is None
    assert run(replay_delivery(PROJECT, "ep-2", event.id, NOW), store) is None
    assert deliveries(store) == ()


def test_replay_makes_a_claimed_delivery_due_now_and_its_claim_stale(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (claimed,) = claim(store)
    run(replay_delivery(PROJECT, "ep-1", claimed.delivery.message_id, NOW + 1), store)
    assert record(store, claimed, attempt(NOW + 2, 200, None)) is False
    (again,) = claim(store, NOW + 2)
    assert again.delivery.attempts == (attempt(NOW + 2, 200, None),)


# ----------------------------------------------------------------------------------------------------------------
# Retention


def _settle_all(store: Store, now: int, status: int = 200) -> None:
    for claimed in claim(store, now, limit=100):
        record(store, claimed, attempt(now, status, None))


def test_trim_forgets_settled_deliveries_attempted_before_the_cutoff_and_keeps_pending_ones(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "a", "b", "c")
    run(fan_out_events(PROJECT, NOW), store)
    (a, b, c) = claim(store, NOW, limit=3)
    record(store, a, attempt(NOW + 1, 200, None))  # succeeded at NOW + 1
    record(store, b, attempt(NOW + 5, 200, None))  # succeeded at NOW + 5
    record(store, c, attempt(NOW + 1))  # pending, retried later
    store.apply(TrimWebhookData(PROJECT, NOW + 5, 1000))
    assert [d.event_type for d in deliveries(store)] == ["c", "b"]
    store.apply(TrimWebhookData(PROJECT, NOW + 10**9, 1000))
    assert [d.event_type for d in deliveries(store)] == ["c"]


def test_trim_keeps_the_newest_events_and_those_still_to_deliver(store: Store) -> None:
    add_endpoint(store)
    record_events(store, *"abcdef")
    run(fan_out_events(PROJECT, NOW, limit=4), store)  # e, f not fanned out yet
    _settle_all(store, NOW)
    # before_ms far in the past: only the count applies; e and f are kept as not fanned out yet
    store.apply(TrimWebhookData(PROJECT, 0, 1))
    assert [e.type for e in events(store)] == ["e", "f"]
    run(fan_out_events(PROJECT, NOW), store)
    (e_claim, f_claim) = claim(store, NOW, limit=5)
    record(store, f_claim, attempt(NOW, 200, None))
    # e is pending: kept with everything after it; the count alone would keep only f
    store.apply(TrimWebhookData(PROJECT, 0, 1))
    assert [e.type for e in events(store)] == ["e", "f"]
    record(store, e_claim, attempt(NOW, 200, None))
    store.apply(TrimWebhookData(PROJECT, 0, 1))
    assert [e.type for e in events(store)] == ["f"]
    store.apply(TrimWebhookData(PROJECT, 0, 0))
    assert events(store) == ()
    assert [d.event_type for d in deliveries(store)] == ["f", "e", "d", "c", "b", "a"]  # all attempted at NOW


def test_trim_by_age_forgets_events_recorded_before_the_cutoff(store: Store) -> None:
    record_events(store, "a", "b")  # no endpoint: nothing to deliver, nothing kept for it
    store.apply(TrimWebhookData(PROJECT, _wall_ms() - 3_600_000, 1000))
    assert [e.type for e in events(store)] == ["a", "b"]
    store.apply(TrimWebhookData(PROJECT, _wall_ms() + 3_600_000, 1000))
    assert events(store) == ()
    record_events(store, "c")
    assert [e.type for e in events(store)] == ["c"]


def test_a_replay_of_a_delivery_whose_event_is_gone_is_none(store: Store) -> None:
    add_endpoint(store)
    record_events(store, "a")
    run(fan_out_events(PROJECT, NOW), store)
    (claimed,) = claim(store)
    record(store, claimed, attempt(NOW + 1, 200, None))
    store.apply(TrimWebhookData(PROJECT, 0, 0))
    assert events(store) == ()
    assert len(deliveries(store)) == 1  # the delivery is kept for its own retention
    assert run(replay_delivery(PROJECT, "ep-1", claimed.delivery.message_id, NOW + 2), store) is None


# ----------------------------------------------------------------------------------------------------------------
# Projects


def _project(project_id: str) -> Any:
    project, _ = new_project(SeededEntropy(7), NOW, "Hooks", None, project_id=project_id)
    return project


@pytest.mark.parametrize("effect", [ResetProjectData, DeleteProject], ids=lambda e: e.__name__)
def test_a_project_reset_or_deletion_takes_its_webhook_data_and_only_its(store: Store, effect: Any) -> None:
    for project_id in (PROJECT, OTHER_PROJECT):
        run(create_project(_project(project_id)), store)
        add_endpoint(store, project=project_id)
        record_events(store, "user.created", project=project_id)
        run(fan_out_events(project_id, NOW), store)
        store.apply(AddTestEvent(project_id, "ep-1", "{}", NOW))
    assert store.apply(effect(PROJECT)) is True
    assert store.apply(ListWebhookProjects()) == (OTHER_PROJECT,)
    assert store.apply(ListWebhookEndpoints(PROJECT)) == ()
    assert events(store) == ()
    assert deliveries(store) == ()
    assert claim(store) == ()
    assert len(events(store, OTHER_PROJECT)) == 2
    assert len(claim(store, project=OTHER_PROJECT)) == 2


# ----------------------------------------------------------------------------------------------------------------
# Redis specifics: keys, hash tags, TTLs


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def test_redis_webhook_keys_are_in_the_projects_slot_and_the_project_set_in_its_own(redis_store: RedisStore) -> None:
    keys, client = redis_store.keys, redis_store.client
    add_endpoint(redis_store)
    record_events(redis_store, "user.created")
    run(fan_out_events(PROJECT, NOW), redis_store)
    redis_store.apply(AddTestEvent(PROJECT, "ep-1", "{}", NOW))
    (claimed, _) = claim(redis_store)
    record(redis_store, claimed, attempt(NOW, 200, None))
    found = {k.decode() for k in client.scan_iter(match=f"{keys.namespace}*")}
    project_keys = found - {keys.webhook_projects}
    assert keys.webhook_projects in found
    assert {key_slot(k.encode()) for k in project_keys} == {key_slot(keys.project(PROJECT).encode())}
    assert key_slot(keys.webhook_projects.encode()) != key_slot(keys.project(PROJECT).encode())
    prefix = keys.prefix(PROJECT)
    kinds = {k[len(prefix) :].split(":")[0] for k in project_keys}
    assert kinds == {
        "events",
        "webhook-endpoints",
        "webhook-endpoint-from",
        "webhook-cursor",
        "webhook-delivery",
        "webhook-deliveries",
        "webhook-due",
        "webhook-pending",
        "webhook-settled",
    }
    assert client.type(keys.webhook_endpoints(PROJECT)) == b"hash"
    assert client.type(keys.webhook_due(PROJECT)) == b"zset"


def test_redis_settled_deliveries_expire_after_their_retention_and_pending_ones_do_not(
    redis_store: RedisStore,
) -> None:
    add_endpoint(redis_store)
    record_events(redis_store, "a", "b")
    run(fan_out_events(PROJECT, NOW), redis_store)
    (a, b) = claim(redis_store, limit=2)
    record(redis_store, a, attempt(NOW, 200, None))
    record(redis_store, b, attempt(NOW))
    client, keys = redis_store.client, redis_store.keys
    ttl_a = client.pttl(keys.webhook_delivery(PROJECT, a.delivery.message_id, "ep-1"))
    assert SETTLED_DELIVERY_TTL_MS - 60_000 < ttl_a <= SETTLED_DELIVERY_TTL_MS
    assert client.pttl(keys.webhook_delivery(PROJECT, b.delivery.message_id, "ep-1")) == -1
    run(replay_delivery(PROJECT, "ep-1", a.delivery.message_id, NOW), redis_store)
    assert client.pttl(keys.webhook_delivery(PROJECT, a.delivery.message_id, "ep-1")) == -1


def test_redis_a_delivery_gone_by_ttl_is_skipped_by_every_reader(redis_store: RedisStore) -> None:
    add_endpoint(redis_store)
    record_events(redis_store, "a", "b")
    run(fan_out_events(PROJECT, NOW), redis_store)
    (a, _b) = claim(redis_store, limit=2)
    record(redis_store, a, attempt(NOW, 200, None))
    redis_store.client.delete(redis_store.keys.webhook_delivery(PROJECT, a.delivery.message_id, "ep-1"))
    assert [d.event_type for d in deliveries(redis_store)] == ["b"]
    assert run(replay_delivery(PROJECT, "ep-1", a.delivery.message_id, NOW), redis_store) is None
    redis_store.apply(TrimWebhookData(PROJECT, NOW + 1, 1000))
    assert [d.event_type for d in deliveries(redis_store)] == ["b"]


def test_redis_deleting_an_endpoint_whose_delivery_is_gone_by_ttl(redis_store: RedisStore) -> None:
    add_endpoint(redis_store)
    record_events(redis_store, "a", "b")
    run(fan_out_events(PROJECT, NOW), redis_store)
    (a, b) = claim(redis_store, limit=2)
    record(redis_store, a, attempt(NOW, 200, None))
    client, keys = redis_store.client, redis_store.keys
    client.delete(keys.webhook_delivery(PROJECT, a.delivery.message_id, "ep-1"))
    assert run(drop_webhook_endpoint(PROJECT, "ep-1"), redis_store) is True
    left = (keys.webhook_deliveries(PROJECT, "ep-1"), keys.webhook_delivery(PROJECT, b.delivery.message_id, "ep-1"))
    assert client.exists(*left) == 0
    assert client.zcard(keys.webhook_due(PROJECT)) == client.zcard(keys.webhook_pending(PROJECT)) == 0


def test_big_and_unicode_texts_round_trip_unchanged(store: Store) -> None:
    add_endpoint(store, description="«ß» " * 200, event_types=("user.created",) * 3)
    assert store.apply(LoadWebhookEndpoint(PROJECT, "ep-1")) == endpoint(
        "ep-1", description="«ß» " * 200, event_types=("user.created",) * 3
    )
    big = dataclasses.replace(attempt(NOW, None, "connection refused: «ünreachable»"), latency_ms=2**40)
    record_events(store, "user.created")
    run(fan_out_events(PROJECT, NOW), store)
    (claimed,) = claim(store)
    record(store, claimed, big)
    assert deliveries(store)[0].attempts == (big,)


def test_the_stores_test_event_type_is_the_events_one() -> None:
    from identity_proto import effects, events

    assert effects.TEST_EVENT_TYPE == events.TEST_EVENT_TYPE


def test_async_stores_list_events_and_run_the_delivery_steps(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> None:
        await arun(add_webhook_endpoint(PROJECT, endpoint("ep-1")), store)
        first = await store.apply(AddTestEvent(PROJECT, "ep-1", '{"n":1}', NOW))
        second = await store.apply(AddTestEvent(PROJECT, "ep-1", '{"n":2}', NOW))
        assert await store.apply(ListEvents(PROJECT)) == (first, second)
        assert await store.apply(ListEvents(PROJECT, after=first.id)) == (second,)
        assert await store.apply(ListWebhookProjects()) == (PROJECT,)
        assert await arun(fan_out_events(PROJECT, NOW), store) == 2
        claimed = await arun(claim_deliveries(PROJECT, NOW, LEASE_MS, 5, tokens(5)), store)
        assert [c.event for c in claimed] == [first, second]
        for one in claimed:
            assert await store.apply(RecordAttempt.after(PROJECT, one, attempt(NOW + 1, 200, None)))
        listed = await store.apply(ListDeliveries(PROJECT, "ep-1"))
        assert [(d.message_id, d.state) for d in listed] == [
            (second.id, DeliveryState.SUCCEEDED),
            (first.id, DeliveryState.SUCCEEDED),
        ]

    async_store.run(scenario)
