"""Webhook endpoints over real HTTP, against a real Hypercorn on the memory store and on Redis: the admin routes
(create with the secret shown once, list, read, update, delete, rotate, deliveries, replay, test event), the
original's `POST /internal/send-test-webhook`, the refusals (unknown endpoint or message, bad bodies, access), and
the URL rules in dev mode and in production (with and without `IDENTITY_WEBHOOK_ALLOW_PRIVATE=1`). Each test works
in a project of its own, made through the internal project."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RedisServer
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.support import internal_headers

pytestmark = pytest.mark.e2e

NOWHERE = "33333333-3333-4333-8333-333333333333"
#: A receiver nobody listens on (dev mode allows loopback receivers): deliveries to it fail, which is all these
#: tests need of it.
RECEIVER = "http://127.0.0.1:9/identity-hooks"
DAY_MS = 24 * 3600 * 1000
PRODUCTION = {
    "IDENTITY_PROJECT_ID": "7a1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_webhooks_client_key_0123456789",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_webhooks_server_key_0123456789",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_webhooks_admin_key_0123456789",
}


@pytest.fixture(scope="module")
def redis_hypercorn(redis_server: RedisServer) -> Iterator[Server]:
    running = start_hypercorn({"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def base_url(request: pytest.FixtureRequest) -> str:
    name = "server" if request.param == "memory" else "redis_hypercorn"
    running: Server = request.getfixturevalue(name)
    return running.base_url


class Project:
    """A fresh project (through the internal project) and its admin calls."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        created = http.post(
            "/api/v1/internal/projects",
            headers=internal_headers(),
            json={"display_name": f"Hooks {uuid.uuid4().hex[:6]}"},
        )
        assert created.status_code == 201, created.text
        self.data = created.json()
        self.id: str = self.data["id"]

    def headers(self, access: str = "admin") -> dict[str, str]:
        key_header, key = {
            "server": ("x-service-secret-server-key", "secret_server_key"),
            "admin": ("x-service-super-secret-admin-key", "super_secret_admin_key"),
        }[access]
        return {"x-service-access-type": access, "x-service-project-id": self.id, key_header: self.data[key]}

    def admin(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.http.request(method, f"/api/v1{path}", headers=self.headers(), **kw)

    def endpoint(self, **body: Any) -> dict[str, Any]:
        created = self.admin("POST", "/webhook-endpoints", json={"url": RECEIVER, **body})
        assert created.status_code == 201, created.text
        answer: dict[str, Any] = created.json()
        return answer


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10.0) as client:
        yield client


@pytest.fixture
def project(http: httpx.Client) -> Project:
    return Project(http)


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


def _secret_key(secret: str) -> bytes:
    assert secret.startswith("whsec_")
    return base64.b64decode(secret.removeprefix("whsec_"), validate=True)


# --------------------------------------------------------------------------------------------------------------
# Create, read, list


def test_an_endpoint_is_created_with_its_secret_shown_only_then(project: Project) -> None:
    created = project.admin(
        "POST",
        "/webhook-endpoints",
        json={"url": RECEIVER, "event_types": ["user.created", "team.deleted"], "description": "CRM sync"},
    )

    assert created.status_code == 201, created.text
    body = created.json()
    secret = body.pop("secret")
    assert len(_secret_key(secret)) == 24
    assert uuid.UUID(body["id"]).version == 4
    assert body == {
        "id": body["id"],
        "url": RECEIVER,
        "description": "CRM sync",
        "event_types": ["user.created", "team.deleted"],
        "disabled": False,
        "created_at_millis": body["created_at_millis"],
        "previous_secret_expires_at_millis": None,
    }
    read = project.admin("GET", f"/webhook-endpoints/{body['id']}")
    listed = project.admin("GET", "/webhook-endpoints")
    assert read.json() == body
    assert listed.json() == {"items": [body], "is_paginated": False}
    assert secret not in read.text + listed.text


def test_the_url_is_normalised_event_types_default_to_all_and_repeat_once(project: Project) -> None:
    everything = project.endpoint(url="HTTP://Hooks.Example.COM:80")
    once = project.endpoint(event_types=["user.updated", "user.updated", "user.created"])

    assert (everything["url"], everything["event_types"], everything["description"]) == (
        "http://hooks.example.com/",
        None,
        "",
    )
    assert once["event_types"] == ["user.updated", "user.created"]
    listed = project.admin("GET", "/webhook-endpoints").json()["items"]
    assert [item["id"] for item in listed] == [everything["id"], once["id"]]


def test_two_endpoints_never_share_a_secret_and_projects_never_share_endpoints(http: httpx.Client) -> None:
    ours, theirs = Project(http), Project(http)
    first, second = ours.endpoint(), ours.endpoint()

    assert first["secret"] != second["secret"]
    assert theirs.admin("GET", "/webhook-endpoints").json()["items"] == []
    assert _error(theirs.admin("GET", f"/webhook-endpoints/{first['id']}")) == (404, "WEBHOOK_ENDPOINT_NOT_FOUND")
    assert _error(theirs.admin("DELETE", f"/webhook-endpoints/{first['id']}")) == (404, "WEBHOOK_ENDPOINT_NOT_FOUND")
    assert len(ours.admin("GET", "/webhook-endpoints").json()["items"]) == 2


# --------------------------------------------------------------------------------------------------------------
# Update, delete, rotate


def test_a_patch_changes_only_the_keys_sent(project: Project) -> None:
    endpoint = project.endpoint(description="before", event_types=["user.created"])
    path = f"/webhook-endpoints/{endpoint['id']}"

    disabled = project.admin("PATCH", path, json={"disabled": True})
    moved = project.admin("PATCH", path, json={"url": "https://hooks.example.com/v2", "description": "after"})
    all_types = project.admin("PATCH", path, json={"event_types": None})

    assert disabled.status_code == moved.status_code == all_types.status_code == 200
    assert (disabled.json()["disabled"], disabled.json()["description"]) == (True, "before")
    assert "secret" not in disabled.json()
    final = all_types.json()
    assert (final["url"], final["description"], final["disabled"], final["event_types"]) == (
        "https://hooks.example.com/v2",
        "after",
        True,
        None,
    )
    assert project.admin("GET", path).json() == final
    enabled = project.admin("PATCH", path, json={"disabled": False, "event_types": ["team.created"]})
    assert (enabled.json()["disabled"], enabled.json()["event_types"]) == (False, ["team.created"])


@pytest.mark.parametrize(
    "body",
    [
        {"disabled": None},
        {"disabled": "yes"},
        {"url": None},
        {"url": "javascript:alert(1)"},
        {"event_types": ["user.nope"]},
        {"secret": "whsec_AAAA"},
    ],
    ids=["null-disabled", "string-disabled", "null-url", "js-url", "unknown-type", "secret"],
)
def test_a_bad_patch_is_a_schema_error_and_changes_nothing(project: Project, body: dict[str, Any]) -> None:
    endpoint = project.endpoint()
    endpoint.pop("secret")

    refused = project.admin("PATCH", f"/webhook-endpoints/{endpoint['id']}", json=body)

    assert _error(refused) == (400, "SCHEMA_ERROR")
    assert project.admin("GET", f"/webhook-endpoints/{endpoint['id']}").json() == endpoint


def test_deleting_an_endpoint_removes_it_and_a_second_delete_is_not_found(project: Project) -> None:
    kept, gone = project.endpoint(), project.endpoint()
    path = f"/webhook-endpoints/{gone['id']}"

    deleted = project.admin("DELETE", path)

    assert (deleted.status_code, deleted.json()) == (200, {"success": True})
    for method in ("GET", "DELETE", "PATCH"):
        answer = project.admin(method, path, json={} if method == "PATCH" else None)
        assert _error(answer) == (404, "WEBHOOK_ENDPOINT_NOT_FOUND")
    not_found = {"code": "WEBHOOK_ENDPOINT_NOT_FOUND", "error": "Webhook endpoint not found."}
    assert project.admin("GET", path).json() == not_found
    assert [item["id"] for item in project.admin("GET", "/webhook-endpoints").json()["items"]] == [kept["id"]]


def test_rotating_shows_a_new_secret_once_and_keeps_the_old_one_signing_for_a_day(project: Project) -> None:
    endpoint = project.endpoint()
    path = f"/webhook-endpoints/{endpoint['id']}"

    rotated = project.admin("POST", f"{path}/rotate-secret")

    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert len(_secret_key(body["secret"])) == 24
    assert body["secret"] != endpoint["secret"]
    until = body["previous_secret_expires_at_millis"]
    assert until - DAY_MS - 60_000 <= endpoint["created_at_millis"] <= until - DAY_MS
    read = project.admin("GET", path)
    assert read.json()["previous_secret_expires_at_millis"] == until
    assert endpoint["secret"] not in read.text + rotated.text
    assert body["secret"] not in read.text
    assert _error(project.admin("POST", f"/webhook-endpoints/{NOWHERE}/rotate-secret")) == (
        404,
        "WEBHOOK_ENDPOINT_NOT_FOUND",
    )


# --------------------------------------------------------------------------------------------------------------
# Deliveries, replay, test events


def test_a_test_event_is_listed_in_the_endpoints_deliveries_and_can_be_replayed(project: Project) -> None:
    endpoint = project.endpoint()
    other = project.endpoint()
    path = f"/webhook-endpoints/{endpoint['id']}"
    assert project.admin("GET", f"{path}/deliveries").json() == {"items": [], "is_paginated": False}

    tested = project.admin("POST", f"{path}/test")

    assert tested.status_code == 200, tested.text
    message_id = tested.json()["message_id"]
    assert tested.json() == {
        "message_id": message_id,
        "type": "stack.test",
        "data": {"message": "Stack webhook test event triggered from the Stack dashboard.", "endpointUrl": RECEIVER},
    }
    (delivery,) = project.admin("GET", f"{path}/deliveries").json()["items"]
    assert (delivery["message_id"], delivery["event_type"]) == (message_id, "stack.test")
    assert delivery["state"] in {"pending", "failed"}
    assert set(delivery) == {
        "message_id",
        "event_type",
        "state",
        "created_at_millis",
        "next_attempt_at_millis",
        "attempts",
    }
    for attempt in delivery["attempts"]:
        assert set(attempt) == {"at_millis", "status_code", "latency_ms", "error"}
    assert project.admin("GET", f"/webhook-endpoints/{other['id']}/deliveries").json()["items"] == []

    replayed = project.admin("POST", f"{path}/deliveries/{message_id}/replay")

    assert replayed.status_code == 200, replayed.text
    assert (replayed.json()["message_id"], replayed.json()["state"]) == (message_id, "pending")
    assert len(replayed.json()["attempts"]) >= len(delivery["attempts"])
    unknown = project.admin("POST", f"{path}/deliveries/msg_000000999999/replay")
    assert _error(unknown) == (404, "WEBHOOK_MESSAGE_NOT_FOUND")
    assert unknown.json()["details"] == {"message_id": "msg_000000999999"}
    not_ours = project.admin("POST", f"/webhook-endpoints/{other['id']}/deliveries/{message_id}/replay")
    assert _error(not_ours) == (404, "WEBHOOK_MESSAGE_NOT_FOUND")


def test_deliveries_and_tests_of_an_unknown_endpoint_are_not_found(project: Project) -> None:
    for method, suffix in (("GET", "deliveries"), ("POST", "test"), ("POST", "deliveries/msg_000000000001/replay")):
        answer = project.admin(method, f"/webhook-endpoints/{NOWHERE}/{suffix}")
        assert _error(answer) == (404, "WEBHOOK_ENDPOINT_NOT_FOUND")
    too_many = project.admin("GET", f"/webhook-endpoints/{NOWHERE}/deliveries?limit=101")
    assert _error(too_many) == (400, "SCHEMA_ERROR")


def test_send_test_webhook_always_answers_200_and_says_why_it_failed(project: Project) -> None:
    endpoint = project.endpoint()

    unknown = project.admin("POST", "/internal/send-test-webhook", json={"endpoint_id": NOWHERE})
    not_a_uuid = project.admin("POST", "/internal/send-test-webhook", json={"endpoint_id": "ep_1"})
    unreachable = project.admin("POST", "/internal/send-test-webhook", json={"endpoint_id": endpoint["id"]})

    not_found = {"success": False, "error_message": "Endpoint not found. Make sure it still exists."}
    assert (unknown.status_code, unknown.json()) == (200, not_found)
    assert (not_a_uuid.status_code, not_a_uuid.json()) == (200, not_found)
    assert (unreachable.status_code, unreachable.json()) == (
        200,
        {"success": False, "error_message": "Webhook not delivered. Make sure the endpoint is configured correctly."},
    )
    (delivery,) = project.admin("GET", f"/webhook-endpoints/{endpoint['id']}/deliveries").json()["items"]
    assert delivery["event_type"] == "stack.test"
    assert _error(project.admin("POST", "/internal/send-test-webhook", json={})) == (400, "SCHEMA_ERROR")


def test_every_webhook_route_is_for_admin_access_only(project: Project) -> None:
    endpoint = project.endpoint()
    routes = [
        ("GET", "/webhook-endpoints"),
        ("POST", "/webhook-endpoints"),
        ("GET", f"/webhook-endpoints/{endpoint['id']}"),
        ("PATCH", f"/webhook-endpoints/{endpoint['id']}"),
        ("DELETE", f"/webhook-endpoints/{endpoint['id']}"),
        ("POST", f"/webhook-endpoints/{endpoint['id']}/rotate-secret"),
        ("GET", f"/webhook-endpoints/{endpoint['id']}/deliveries"),
        ("POST", f"/webhook-endpoints/{endpoint['id']}/test"),
        ("POST", "/internal/send-test-webhook"),
    ]
    for method, path in routes:
        answer = project.http.request(
            method, f"/api/v1{path}", headers=project.headers("server"), json={"url": RECEIVER}
        )
        assert _error(answer) == (401, "INSUFFICIENT_ACCESS_TYPE"), (method, path)
    assert project.admin("GET", f"/webhook-endpoints/{endpoint['id']}").status_code == 200


# --------------------------------------------------------------------------------------------------------------
# The URL rules


def test_the_service_refuses_to_call_itself_even_in_dev_mode(project: Project, base_url: str) -> None:
    port = base_url.rsplit(":", 1)[1]
    for url in (f"{base_url}/api/v1/users", f"http://localhost:{port}/hook"):
        refused = project.admin("POST", "/webhook-endpoints", json={"url": url})
        assert _error(refused) == (400, "WEBHOOK_URL_NOT_ALLOWED"), url
        assert "points at this service itself" in refused.json()["details"]["reason"]
    assert project.admin("GET", "/webhook-endpoints").json()["items"] == []
    assert project.endpoint(url=f"http://127.0.0.1:{int(port) + 1}/hook")["url"].startswith("http://127.0.0.1")


def _production_admin(server: Server) -> httpx.Client:
    headers = {
        "x-service-access-type": "admin",
        "x-service-project-id": PRODUCTION["IDENTITY_PROJECT_ID"],
        "x-service-super-secret-admin-key": PRODUCTION["IDENTITY_SUPER_SECRET_ADMIN_KEY"],
    }
    return httpx.Client(base_url=f"{server.base_url}/api/v1", headers=headers, timeout=10.0)


def test_production_refuses_private_receivers_unless_the_operator_allows_them() -> None:
    strict = start_hypercorn(PRODUCTION)
    try:
        with _production_admin(strict) as admin:
            for url in ("http://127.0.0.1:9/h", "http://10.0.0.8/h", "http://169.254.169.254/", "http://localhost:9/"):
                refused = admin.post("/webhook-endpoints", json={"url": url})
                assert _error(refused) == (400, "WEBHOOK_URL_NOT_ALLOWED"), url
                assert "IDENTITY_WEBHOOK_ALLOW_PRIVATE=1" in refused.json()["details"]["reason"]
            assert admin.get("/webhook-endpoints").json()["items"] == []
            assert admin.post("/webhook-endpoints", json={"url": "https://hooks.example.com/"}).status_code == 201
    finally:
        stop_server(strict)
    allowing = start_hypercorn({**PRODUCTION, "IDENTITY_WEBHOOK_ALLOW_PRIVATE": "1"})
    try:
        with _production_admin(allowing) as admin:
            assert admin.post("/webhook-endpoints", json={"url": "http://10.0.0.8/h"}).status_code == 201
            own = admin.post("/webhook-endpoints", json={"url": f"{allowing.base_url}/hook"})
            assert _error(own) == (400, "WEBHOOK_URL_NOT_ALLOWED")
    finally:
        stop_server(allowing)
