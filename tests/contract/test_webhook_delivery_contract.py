"""The delivery pass (`flows.webhook_delivery.WebhookDelivery`) over every store, with a scripted sender in place
of the network: what is POSTed (signed payloads), retries on the Svix schedule as the clock moves, FAILED after
the last attempt, success ending the retries, a stale claim changing nothing, two workers sharing the work,
endpoints' event filters, the dev clock, and retention."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import orjson
import pytest
import standardwebhooks.webhooks as standard
import svix.webhooks as svix

from identity_proto import ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import (
    RETRY_SCHEDULE_MS,
    DeliveryState,
    ListDeliveries,
    ListEvents,
    SendWebhooks,
    SetClockOverride,
    WebhookResult,
    create_project,
)
from identity_proto.flows.projects import new_project
from identity_proto.flows.webhook_delivery import PassReport, WebhookDelivery
from identity_proto.records import ClockOverride
from identity_proto.tokens import SeededEntropy
from tests.contract.factories import PROJECT
from tests.contract.test_webhook_store import SECRET, add_endpoint, record_events

ENTROPY = SeededEntropy(7)
#: The service's time in these passes: the real time (the stores date events by theirs, which retention compares).
T0 = time.time_ns() // 1_000_000


class ScriptedSender:
    """The network as a test scripts it: `answer(request) -> WebhookResult` (200 unless told), every request kept."""

    def __init__(self, answer: Callable[[int], WebhookResult] | None = None) -> None:
        self.sent: list[tuple[str, dict[str, str], bytes]] = []
        self.answer = answer or (lambda n: WebhookResult(200, 3))

    def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
        results = []
        for request in effect.requests:
            self.sent.append((request.url, dict(request.headers), request.body))
            results.append(self.answer(len(self.sent)))
        return tuple(results)


def failing(status: int | None = 500) -> ScriptedSender:
    error = "connection refused" if status is None else f"HTTP {status}"
    return ScriptedSender(lambda n: WebhookResult(status, 5, error))


@pytest.fixture
def project_store(store: Store) -> Store:
    project, _ = new_project(ENTROPY, T0, "Hooks", project_id=PROJECT)
    run(create_project(project), store)
    return store


def deliver(store: Store, sender: ScriptedSender, now: int, worker: WebhookDelivery | None = None) -> PassReport:
    worker = worker or WebhookDelivery(ServiceOptions())
    return run(worker.run_pass(now, ENTROPY), store, webhooks=sender)


def states(store: Store, endpoint_id: str = "ep-1") -> list[tuple[DeliveryState, int]]:
    return [(d.state, len(d.attempts)) for d in store.apply(ListDeliveries(PROJECT, endpoint_id))]


def test_an_event_is_posted_signed_to_every_endpoint_once_and_succeeds(project_store: Store) -> None:
    add_endpoint(project_store, "ep-1")
    add_endpoint(project_store, "ep-2")
    record_events(project_store, "team.deleted", ids=("team-9",))
    sender = ScriptedSender()
    report = deliver(project_store, sender, T0)
    assert (report.fanned_out, report.attempted, report.succeeded) == (1, 2, 2)
    assert sorted(url for url, _, _ in sender.sent) == [
        "https://hooks.example.com/ep-1",
        "https://hooks.example.com/ep-2",
    ]
    (event,) = project_store.apply(ListEvents(PROJECT))
    for _, headers, body in sender.sent:
        assert orjson.loads(body) == {"type": "team.deleted", "data": {"id": "team-9"}}
        assert headers["svix-id"] == headers["webhook-id"] == event.id
        assert headers["svix-timestamp"] == str(T0 // 1000)
        svix.Webhook(SECRET).verify(body, headers)
        standard.Webhook(SECRET).verify(body, headers)
    assert states(project_store, "ep-1") == [(DeliveryState.SUCCEEDED, 1)]
    assert deliver(project_store, sender, T0 + 10 * 3_600_000).attempted == 0


def test_failed_attempts_are_retried_on_the_svix_schedule_then_the_delivery_fails(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, "team.deleted", ids=("team-1",))
    sender = failing(500)
    now = T0
    assert deliver(project_store, sender, now).attempted == 1
    for n, step in enumerate(RETRY_SCHEDULE_MS, start=1):
        # Not due a millisecond before the step has passed; due once it has.
        assert deliver(project_store, sender, now + step - 1).attempted == 0
        now += step
        assert deliver(project_store, sender, now).attempted == 1
        expected = DeliveryState.FAILED if n == len(RETRY_SCHEDULE_MS) else DeliveryState.PENDING
        assert states(project_store) == [(expected, n + 1)]
    assert len(sender.sent) == 8
    assert len({headers["webhook-id"] for _, headers, _ in sender.sent}) == 1  # one message id throughout
    (delivery,) = project_store.apply(ListDeliveries(PROJECT, "ep-1"))
    assert [a.error for a in delivery.attempts] == ["HTTP 500"] * 8
    assert [a.status_code for a in delivery.attempts] == [500] * 8
    assert deliver(project_store, sender, now + RETRY_SCHEDULE_MS[-1]).attempted == 0


def test_a_success_after_failures_ends_the_retries(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, "team.deleted")
    deliver(project_store, failing(None), T0)
    deliver(project_store, failing(503), T0 + RETRY_SCHEDULE_MS[0])
    sender = ScriptedSender()
    assert deliver(project_store, sender, T0 + RETRY_SCHEDULE_MS[0] + RETRY_SCHEDULE_MS[1]).succeeded == 1
    assert states(project_store) == [(DeliveryState.SUCCEEDED, 3)]
    (delivery,) = project_store.apply(ListDeliveries(PROJECT, "ep-1"))
    assert [a.error for a in delivery.attempts] == ["connection refused", "HTTP 503", None]
    assert deliver(project_store, sender, T0 + 100 * 3_600_000).attempted == 0


def test_a_worker_whose_lease_ended_records_its_attempt_but_the_new_claim_decides(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, "team.deleted")
    slow = WebhookDelivery(ServiceOptions(), lease_ms=1_000)
    stalled: list[SendWebhooks] = []

    class Stalling(ScriptedSender):
        """Claims, then (as if stalled past its lease) lets another worker deliver before answering 500."""

        def send(self, effect: SendWebhooks) -> tuple[WebhookResult, ...]:
            stalled.append(effect)
            assert deliver(project_store, ScriptedSender(), T0 + 1_000).succeeded == 1
            return (WebhookResult(500, 900, "HTTP 500"),)

    deliver(project_store, Stalling(), T0, slow)
    assert len(stalled) == 1
    (delivery,) = project_store.apply(ListDeliveries(PROJECT, "ep-1"))
    assert delivery.state is DeliveryState.SUCCEEDED
    assert len(delivery.attempts) == 2
    assert deliver(project_store, ScriptedSender(), T0 + 100 * 3_600_000).attempted == 0


def test_two_workers_share_the_work_and_each_message_is_posted_once(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, *["team.deleted"] * 30)
    sender = ScriptedSender()
    first, second = WebhookDelivery(ServiceOptions(), claim_limit=7), WebhookDelivery(ServiceOptions(), claim_limit=7)
    for _ in range(5):
        deliver(project_store, sender, T0, first)
        deliver(project_store, sender, T0, second)
    ids = [headers["webhook-id"] for _, headers, _ in sender.sent]
    assert len(ids) == len(set(ids)) == 30


def test_a_pass_at_its_limits_says_there_is_more(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, *["team.deleted"] * 5)
    worker = WebhookDelivery(ServiceOptions(), fan_out_limit=3, claim_limit=2)
    report = deliver(project_store, ScriptedSender(), T0, worker)
    assert (report.fanned_out, report.attempted, report.more) == (3, 2, True)
    while deliver(project_store, ScriptedSender(), T0, worker).more:
        pass
    assert [state for state, _ in states(project_store)] == [DeliveryState.SUCCEEDED] * 5


def test_an_endpoint_gets_only_the_event_types_it_asked_for(project_store: Store) -> None:
    add_endpoint(project_store, "ep-teams", event_types=("team.deleted",))
    add_endpoint(project_store, "ep-all")
    record_events(project_store, "team.deleted", "team_membership.deleted", ids=("t1", "u1"))
    sender = ScriptedSender()
    deliver(project_store, sender, T0)
    by_url: dict[str, list[str]] = {}
    for url, _, body in sender.sent:
        by_url.setdefault(url.rsplit("/", 1)[1], []).append(orjson.loads(body)["type"])
    assert by_url["ep-teams"] == ["team.deleted"]
    assert sorted(by_url["ep-all"]) == ["team.deleted", "team_membership.deleted"]


def test_a_disabled_endpoint_gets_nothing(project_store: Store) -> None:
    add_endpoint(project_store, "ep-off", disabled=True)
    record_events(project_store, "team.deleted")
    sender = ScriptedSender()
    deliver(project_store, sender, T0)
    assert sender.sent == []


def test_in_dev_mode_the_moved_clock_makes_retries_due(project_store: Store) -> None:
    add_endpoint(project_store)
    record_events(project_store, "team.deleted")
    dev = WebhookDelivery(dataclasses.replace(ServiceOptions(), dev_mode=True))
    deliver(project_store, failing(500), T0, dev)
    assert deliver(project_store, failing(500), T0 + 1, dev).attempted == 0
    project_store.apply(SetClockOverride(ClockOverride(offset_ms=RETRY_SCHEDULE_MS[0])))
    sender = ScriptedSender()
    assert deliver(project_store, sender, T0 + 1, dev).succeeded == 1
    # The headers carry the service's (moved) time.
    assert sender.sent[0][1]["webhook-timestamp"] == str((T0 + 1 + RETRY_SCHEDULE_MS[0]) // 1000)


def test_retention_trims_events_at_most_once_a_minute(project_store: Store) -> None:
    add_endpoint(project_store)
    options = dataclasses.replace(ServiceOptions(), webhook_keep_events=2)
    worker = WebhookDelivery(options)
    record_events(project_store, *["team.deleted"] * 4)
    deliver(project_store, ScriptedSender(), T0, worker)
    assert len(project_store.apply(ListEvents(PROJECT))) == 2
    record_events(project_store, *["team.deleted"] * 3)
    deliver(project_store, ScriptedSender(), T0 + 1_000, worker)
    assert len(project_store.apply(ListEvents(PROJECT))) == 5  # trimmed a second ago: not yet
    deliver(project_store, ScriptedSender(), T0 + 61_000, worker)
    assert len(project_store.apply(ListEvents(PROJECT))) == 2


def test_a_project_without_endpoints_costs_one_read_per_pass(project_store: Store) -> None:
    record_events(project_store, "team.deleted")
    sender = ScriptedSender()
    assert deliver(project_store, sender, T0) == PassReport()
    assert sender.sent == []
