"""Webhooks in the in-process fake, as a user's test suite meets them through the pytest plugin: every event the
service records (`identity_events`), a receiver verified with `standardwebhooks` (`identity_webhook_receiver`),
receivers that are a callable, a WSGI app or an ASGI app (no port), retries driven by the fake's clock, and the
deliveries as the service keeps them."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook
from svix.webhooks import Webhook as SvixWebhook

from identity_testing import FakeClock, IdentityFake, TestProject
from identity_testing.webhooks import RecordingReceiver, WebhookReceiver


def _send_test_event(project: TestProject, receiver: WebhookReceiver) -> dict[str, Any]:
    """The dashboard's "send test": a `stack.test` event for this receiver's endpoint only."""
    with project.client("admin") as http:
        sent = http.post(f"/api/v1/webhook-endpoints/{receiver.endpoint_id}/test")
    assert sent.status_code == 200, sent.text
    answer: dict[str, Any] = sent.json()
    return answer


def test_a_failing_receiver_is_retried_on_the_schedule_of_the_fakes_clock(
    identity_fake: IdentityFake, identity_project: TestProject, identity_clock: FakeClock
) -> None:
    answers = iter([500, 503, 200])
    got: list[bytes] = []

    def receiver(headers: Mapping[str, str], body: bytes) -> int:
        got.append(body)
        return next(answers)

    registered = identity_project.add_webhook_receiver(receiver)
    identity_clock.freeze()
    _send_test_event(identity_project, registered)

    assert identity_fake.deliver_webhooks() == 1
    identity_clock.advance(seconds=4)
    assert identity_fake.deliver_webhooks() == 0  # the first retry is due 5 s after the attempt
    identity_clock.advance(seconds=1)
    assert identity_fake.deliver_webhooks() == 1
    identity_clock.advance(minutes=5)
    assert identity_fake.deliver_webhooks() == 1

    assert len(got) == 3
    assert len(set(got)) == 1  # the same message each time
    (delivery,) = identity_project.webhook_deliveries()
    assert delivery["state"] == "succeeded"
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 503, 200]
    assert [a["error"] for a in delivery["attempts"]] == ["HTTP 500", "HTTP 503", None]


def test_a_wsgi_app_receives_webhooks_at_its_path(identity_fake: IdentityFake, identity_project: TestProject) -> None:
    from flask import Flask, request

    app = Flask("receiver")
    seen: list[dict[str, Any]] = []
    receiver = identity_project.add_webhook_receiver(app, path="/hooks/identity")

    @app.post("/hooks/identity")
    def hook() -> tuple[str, int]:
        payload = Webhook(receiver.secret).verify(request.get_data(), dict(request.headers))
        seen.append(payload)
        return "", 204

    sent = _send_test_event(identity_project, receiver)
    identity_fake.deliver_webhooks()

    assert receiver.kind == "wsgi"
    assert seen == [{"type": "stack.test", "data": sent["data"]}]
    assert identity_project.webhook_deliveries()[0]["state"] == "succeeded"


def test_an_asgi_app_receives_webhooks(identity_fake: IdentityFake, identity_project: TestProject) -> None:
    bodies: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert (scope["method"], scope["path"]) == ("POST", "/in")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    receiver = identity_project.add_webhook_receiver(app, path="/in")
    _send_test_event(identity_project, receiver)
    identity_fake.deliver_webhooks()

    assert receiver.kind == "asgi"
    assert [json.loads(body)["type"] for body in bodies] == ["stack.test"]


def test_a_receiver_that_raises_fails_its_attempt_and_the_error_is_kept(
    identity_fake: IdentityFake, identity_project: TestProject
) -> None:
    def broken(headers: Mapping[str, str], body: bytes) -> int:
        raise KeyError("oops")

    _send_test_event(identity_project, identity_project.add_webhook_receiver(broken))
    identity_fake.deliver_webhooks()

    (delivery,) = identity_project.webhook_deliveries()
    assert delivery["state"] == "pending"
    assert delivery["attempts"][0]["error"] == "receiver raised KeyError: 'oops'"
    assert isinstance(identity_fake.webhook_sender.errors[-1], KeyError)


def test_a_sync_fake_delivers_after_every_request() -> None:
    project = IdentityFake(webhooks="sync").create_project()
    receiver = RecordingReceiver()
    registered = project.add_webhook_receiver(receiver)

    sent = _send_test_event(project, registered)

    assert receiver.events == [{"id": sent["message_id"], "type": "stack.test", "data": sent["data"]}]
    assert receiver.rejected == []
    with pytest.raises(ValueError, match="webhooks must be one of manual, sync"):
        IdentityFake(webhooks="later")


def test_the_receiver_fixture_verifies_and_records_what_the_service_sends(
    identity_admin_client: httpx.Client, identity_webhook_receiver: RecordingReceiver
) -> None:
    sent = identity_admin_client.post(f"/api/v1/webhook-endpoints/{identity_webhook_receiver.endpoint_id}/test")

    assert identity_webhook_receiver.types() == ["stack.test"]  # delivered right after the request
    (got,) = identity_webhook_receiver.received
    assert (got.id, got.data) == (sent.json()["message_id"], sent.json()["data"])
    assert got.headers["svix-id"] == got.headers["webhook-id"] == got.id
    secret = identity_webhook_receiver.secret
    assert secret is not None
    SvixWebhook(secret).verify(got.body, dict(got.headers))  # raises unless the signature verifies
    assert identity_webhook_receiver.rejected == []


def test_every_change_is_an_event_in_order_without_any_endpoint(
    identity_project: TestProject, identity_events: Callable[..., list[dict[str, Any]]]
) -> None:
    user = identity_project.create_user("ada@example.com", display_name="Ada")
    with identity_project.client("server") as http:
        assert http.patch(f"/api/v1/users/{user['id']}", json={"display_name": "Ada L."}).status_code == 200
        team = http.post("/api/v1/teams", json={"display_name": "Crew"}).json()

    events = identity_events()

    assert [e["type"] for e in events][:1] == ["user.created"]
    assert "team.created" in [e["type"] for e in events]
    updated = identity_events("user.updated")
    assert [(e["data"]["id"], e["data"]["display_name"]) for e in updated] == [(user["id"], "Ada L.")]
    assert identity_events("team.created")[-1]["data"]["id"] == team["id"]
    assert [e["id"] for e in events] == sorted({e["id"] for e in events}, key=[e["id"] for e in events].index)


def test_the_receiver_fixture_gets_each_change_signed_right_after_the_request(
    identity_project: TestProject, identity_webhook_receiver: RecordingReceiver
) -> None:
    user = identity_project.create_user("grace@example.com")

    assert identity_webhook_receiver.types() == ["user.created"]
    (got,) = identity_webhook_receiver.received
    assert got.data["id"] == user["id"]
    assert got.data["primary_email"] == "grace@example.com"
    assert identity_webhook_receiver.rejected == []
    # The POST carries both header families, and the svix verifier accepts it too.
    assert got.headers["svix-id"] == got.headers["webhook-id"] == got.id
    secret = identity_webhook_receiver.secret
    assert secret is not None
    SvixWebhook(secret).verify(got.body, dict(got.headers))
    with identity_project.client("server") as http:
        http.delete(f"/api/v1/users/{user['id']}")
    assert identity_webhook_receiver.types()[-1] == "user.deleted"


def test_only_the_types_asked_for_are_delivered_and_the_test_event_reaches_its_endpoint(
    identity_fake: IdentityFake, identity_project: TestProject
) -> None:
    teams, everything = RecordingReceiver(), RecordingReceiver()
    team_receiver = identity_project.add_webhook_receiver(teams, event_types=["team.created"])
    identity_project.add_webhook_receiver(everything)
    identity_project.create_user("types@example.com")
    with identity_project.client("admin") as http:
        http.post("/api/v1/teams", json={"display_name": "Typed"})
        tested = http.post(f"/api/v1/webhook-endpoints/{team_receiver.endpoint_id}/test").json()
    identity_fake.deliver_webhooks()

    assert sorted(teams.types()) == ["stack.test", "team.created"]  # no ordering guarantee between messages
    test_event = next(e for e in teams.events if e["type"] == "stack.test")
    assert test_event == {"id": tested["message_id"], "type": "stack.test", "data": tested["data"]}
    assert everything.types()[0] == "user.created"
    assert "stack.test" not in everything.types()


def test_a_sync_fake_delivers_each_change_after_its_request() -> None:
    project = IdentityFake(webhooks="sync").create_project()
    receiver = RecordingReceiver()
    project.add_webhook_receiver(receiver)

    project.create_user("sync@example.com")

    assert receiver.types() == ["user.created"]
    with pytest.raises(ValueError, match="webhooks must be one of manual, sync"):
        IdentityFake(webhooks="later")


def test_the_recording_receiver_names_the_missing_verifier_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without `standardwebhooks` every delivery would fail inside the receiver and a test would see `received ==
    # []` with no reason: the receiver refuses to be built instead, naming the package.
    monkeypatch.setitem(sys.modules, "standardwebhooks", None)
    with pytest.raises(ImportError, match="pip install standardwebhooks"):
        RecordingReceiver()
