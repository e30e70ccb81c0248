"""Webhook delivery over real HTTP: a real Hypercorn (memory store and Redis) delivers to real receivers on loopback
ports (`tests.webhook_receivers`) that verify the signatures with the `svix` and `standardwebhooks` libraries.

Faults: a receiver down, answering 500, hanging past the timeout: attempts recorded, retries due on the Svix
schedule under the dev clock, delivery once it recovers; the service process SIGKILLed right after a write: the
event delivered after a restart on the same Redis; two Hypercorn workers on one Redis: every message delivered once.
Every process and receiver here is started by the test and stopped by it; all traffic stays on loopback."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from identity_proto.events import EVENT_TYPES
from tests.conftest import RedisServer
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import free_port
from tests.support import admin_headers, internal_headers, server_headers
from tests.webhook_receivers import (
    Receiver,
    running_receiver,
    signed_at_its_timestamp,
    standard_verifier,
    svix_verifier,
)

pytestmark = pytest.mark.e2e

#: The delivery loop polls fast and gives up on a receiver after 1 s, so that the tests are quick.
#: Quick polls, and a timeout short enough for the hanging receiver's test yet long enough that a receiver slowed
#: by a loaded machine (the whole suite on two cores) is not taken for a hanging one.
FAST = {"IDENTITY_WEBHOOK_POLL_SECONDS": "0.05", "IDENTITY_WEBHOOK_TIMEOUT_SECONDS": "3"}


def _redis_env(redis_server: RedisServer, database: int = 0) -> dict[str, str]:
    """The service on the session's redis-server; a test that needs a store of its own takes another database."""
    url = redis_server.url.rsplit("/", 1)[0] + f"/{database}"
    return {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": url}


@pytest.fixture(scope="module")
def memory_webhook_server() -> Iterator[Server]:
    running = start_hypercorn(FAST)
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def redis_webhook_server(redis_server: RedisServer) -> Iterator[Server]:
    running = start_hypercorn({**FAST, **_redis_env(redis_server)})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def http(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    running: Server = request.getfixturevalue(f"{request.param}_webhook_server")
    with httpx.Client(base_url=running.base_url, timeout=10.0) as client:
        yield client


class Endpoints:
    """Endpoints made through the admin routes, deleted at the end of the test (so later tests' events do not go
    to receivers that are gone)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.made: list[str] = []

    def add(self, receiver_or_url: Receiver | str, **fields: Any) -> dict[str, Any]:
        url = receiver_or_url if isinstance(receiver_or_url, str) else receiver_or_url.url
        created = self.http.post("/api/v1/webhook-endpoints", headers=admin_headers(), json={"url": url, **fields})
        assert created.status_code == 201, created.text
        body: dict[str, Any] = created.json()
        self.made.append(body["id"])
        return body

    def test_event(self, endpoint_id: str) -> str:
        sent = self.http.post(f"/api/v1/webhook-endpoints/{endpoint_id}/test", headers=admin_headers(), json={})
        assert sent.status_code == 200, sent.text
        message_id: str = sent.json()["message_id"]
        return message_id

    def deliveries(self, endpoint_id: str) -> list[dict[str, Any]]:
        listed = self.http.get(f"/api/v1/webhook-endpoints/{endpoint_id}/deliveries", headers=admin_headers())
        assert listed.status_code == 200, listed.text
        items: list[dict[str, Any]] = listed.json()["items"]
        return items

    def close(self) -> None:
        for endpoint_id in self.made:
            self.http.delete(f"/api/v1/webhook-endpoints/{endpoint_id}", headers=admin_headers())


@pytest.fixture
def endpoints(http: httpx.Client) -> Iterator[Endpoints]:
    made = Endpoints(http)
    try:
        yield made
    finally:
        made.close()


@contextmanager
def frozen_clock(http: httpx.Client) -> Iterator[Callable[[int], None]]:
    """Freeze the service's clock for the block; yields `advance(ms)`. The clock is reset afterwards."""
    assert http.post("/api/v1/testing/clock", headers=internal_headers(), json={"freeze": True}).status_code == 200

    def advance(ms: int) -> None:
        moved = http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": ms})
        assert moved.status_code == 200, moved.text

    try:
        yield advance
    finally:
        http.post("/api/v1/testing/clock", headers=internal_headers(), json={"reset": True})


def _posts(receiver: Receiver, n: int) -> list[Any]:
    return receiver.wait_for(lambda got: len(got) >= n)


def test_a_test_event_reaches_its_endpoint_only_and_both_libraries_verify_it(
    http: httpx.Client, endpoints: Endpoints
) -> None:
    with running_receiver() as first, running_receiver() as second:
        one = endpoints.add(first)
        two = endpoints.add(second)
        first.verify = svix_verifier(one["secret"])
        second.verify = standard_verifier(two["secret"])
        message_id = endpoints.test_event(one["id"])
        (got,) = _posts(first, 1)
        assert got.rejected is None
        assert got.message_id == got.headers["svix-id"] == message_id
        assert got.payload == {
            "type": "stack.test",
            "data": {
                "message": "Stack webhook test event triggered from the Stack dashboard.",
                "endpointUrl": first.url,
            },
        }
        assert got.headers["content-type"] == "application/json"
        message_two = endpoints.test_event(two["id"])
        (got_two,) = _posts(second, 1)
        assert (got_two.rejected, got_two.message_id) == (None, message_two)
        assert len(first.received) == 1
        (delivery,) = endpoints.deliveries(one["id"])
        assert delivery["state"] == "succeeded"
        assert [(a["status_code"], a["error"]) for a in delivery["attempts"]] == [(200, None)]


def _every_kind_of_change(http: httpx.Client) -> dict[str, str]:
    """One change of each kind the events table names, through the server and admin routes; returns the ids."""
    tag = uuid.uuid4().hex[:8]
    ok = {200, 201}

    def call(method: str, path: str, headers: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
        reply = http.request(method, path, headers=headers or server_headers(), **kw)
        assert reply.status_code in ok, (method, path, reply.status_code, reply.text)
        return dict(reply.json())

    user = call("POST", "/api/v1/users", json={"display_name": f"Ada {tag}"})["id"]
    other = call("POST", "/api/v1/users", json={"display_name": f"Bob {tag}"})["id"]
    call("PATCH", f"/api/v1/users/{user}", json={"display_name": f"Ada L. {tag}"})
    team = call("POST", "/api/v1/teams", json={"display_name": f"Crew {tag}"})["id"]
    call("PATCH", f"/api/v1/teams/{team}", json={"display_name": f"Crew II {tag}"})
    call("POST", f"/api/v1/team-memberships/{team}/{other}", json={})
    team_permission, project_permission = f"tp_{tag}", f"pp_{tag}"
    call("POST", "/api/v1/team-permission-definitions", admin_headers(), json={"id": team_permission})
    call("POST", "/api/v1/project-permission-definitions", admin_headers(), json={"id": project_permission})
    call("POST", f"/api/v1/team-permissions/{team}/{other}/{team_permission}", json={})
    call("DELETE", f"/api/v1/team-permissions/{team}/{other}/{team_permission}")
    call("POST", f"/api/v1/project-permissions/{other}/{project_permission}", json={})
    call("DELETE", f"/api/v1/project-permissions/{other}/{project_permission}")
    call("DELETE", f"/api/v1/team-memberships/{team}/{other}")
    call("POST", f"/api/v1/team-memberships/{team}/{user}", json={})
    call("DELETE", f"/api/v1/users/{user}")
    call("DELETE", f"/api/v1/teams/{team}")
    call("DELETE", f"/api/v1/users/{other}")
    return {"user": user, "other": other, "team": team}


def _membership(team_id: str, user_id: str) -> dict[str, str]:
    return {"team_id": team_id, "user_id": user_id}


def test_receivers_verifying_with_svix_and_with_standardwebhooks_accept_every_event_type(
    http: httpx.Client, endpoints: Endpoints
) -> None:
    with running_receiver() as with_svix, running_receiver() as with_standard:
        with_svix.verify = svix_verifier(endpoints.add(with_svix)["secret"])
        with_standard.verify = standard_verifier(endpoints.add(with_standard)["secret"])
        ids = _every_kind_of_change(http)
        for receiver in (with_svix, with_standard):
            # Every event the assertions below name, not only one of each type: a first POST that timed out on a
            # loaded machine arrives with its retry, seconds after the others.
            got = receiver.wait_for(
                lambda got: (
                    {item.payload["type"] for item in got} >= set(EVENT_TYPES)
                    and any(
                        item.payload == {"type": "user.deleted", "data": {"id": ids["other"], "teams": []}}
                        for item in got
                    )
                    and any(
                        item.payload["type"] == "user.created" and item.payload["data"]["id"] == ids["user"]
                        for item in got
                    )
                    and any(
                        item.payload
                        == {"type": "team_membership.created", "data": _membership(ids["team"], ids["other"])}
                        for item in got
                    )
                    and any(item.payload == {"type": "team.deleted", "data": {"id": ids["team"]}} for item in got)
                ),
                timeout_s=30.0,
            )
            assert [item.rejected for item in got] == [None] * len(got)
            assert len({item.message_id for item in got}) == len(got)  # each message once
            by_type: dict[str, list[Any]] = {}
            for item in got:
                by_type.setdefault(item.payload["type"], []).append(item.payload["data"])
            (created,) = [data for data in by_type["user.created"] if data["id"] == ids["user"]]
            assert created["display_name"].startswith("Ada ")
            assert {"team_id": ids["team"], "user_id": ids["other"]} in by_type["team_membership.created"]
            assert {"id": ids["team"]} in by_type["team.deleted"]


def test_a_receiver_answering_500_is_retried_on_the_svix_schedule_then_delivered(
    http: httpx.Client, endpoints: Endpoints
) -> None:
    with running_receiver() as receiver, frozen_clock(http) as advance:
        endpoint = endpoints.add(receiver)
        receiver.verify = signed_at_its_timestamp(endpoint["secret"])
        receiver.status = 500
        message_id = endpoints.test_event(endpoint["id"])
        _posts(receiver, 1)
        receiver.wait_for(lambda _: bool(endpoints.deliveries(endpoint["id"])[0]["attempts"]))
        (delivery,) = endpoints.deliveries(endpoint["id"])
        (attempt,) = delivery["attempts"]
        assert (attempt["status_code"], attempt["error"]) == (500, "HTTP 500")
        assert delivery["state"] == "pending"
        assert delivery["next_attempt_at_millis"] == attempt["at_millis"] + 5_000
        advance(4_000)
        with pytest.raises(AssertionError):
            receiver.wait_for(lambda got: len(got) >= 2, timeout_s=0.5)  # not due yet
        advance(1_000)
        _posts(receiver, 2)
        receiver.status = 200
        advance(300_000)
        _posts(receiver, 3)
        receiver.wait_for(lambda _: endpoints.deliveries(endpoint["id"])[0]["state"] == "succeeded")
        (delivery,) = endpoints.deliveries(endpoint["id"])
        assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 200]
        assert {got.message_id for got in receiver.received} == {message_id}
        assert all(got.rejected is None for got in receiver.received)


def test_a_receiver_that_is_down_gets_the_message_once_it_is_back(http: httpx.Client, endpoints: Endpoints) -> None:
    port = free_port()
    with frozen_clock(http) as advance:
        endpoint = endpoints.add(f"http://127.0.0.1:{port}/hook")
        message_id = endpoints.test_event(endpoint["id"])
        with running_receiver() as waiter:  # only for its bounded wait
            waiter.wait_for(lambda _: bool(endpoints.deliveries(endpoint["id"])[0]["attempts"]))
        (delivery,) = endpoints.deliveries(endpoint["id"])
        assert [(a["status_code"], a["error"]) for a in delivery["attempts"]] == [(None, "connection refused")]
        with running_receiver(signed_at_its_timestamp(endpoint["secret"]), port=port) as receiver:
            advance(5_000)
            (got,) = _posts(receiver, 1)
            assert (got.message_id, got.rejected) == (message_id, None)
            receiver.wait_for(lambda _: endpoints.deliveries(endpoint["id"])[0]["state"] == "succeeded")


def test_a_receiver_hanging_past_the_timeout_is_retried_and_delivered_when_it_answers(
    http: httpx.Client, endpoints: Endpoints
) -> None:
    with running_receiver() as receiver, frozen_clock(http) as advance:
        endpoint = endpoints.add(receiver)
        receiver.hang_s = 6.0  # the service waits 3 s (IDENTITY_WEBHOOK_TIMEOUT_SECONDS)
        endpoints.test_event(endpoint["id"])
        _posts(receiver, 1)
        receiver.wait_for(lambda _: bool(endpoints.deliveries(endpoint["id"])[0]["attempts"]), timeout_s=10)
        (delivery,) = endpoints.deliveries(endpoint["id"])
        (attempt,) = delivery["attempts"]
        assert (attempt["status_code"], attempt["error"]) == (None, "timeout")
        assert 2_900 <= attempt["latency_ms"] < 6_000
        receiver.hang_s = 0
        advance(5_000)
        _posts(receiver, 2)
        receiver.wait_for(lambda _: endpoints.deliveries(endpoint["id"])[0]["state"] == "succeeded")
        assert len({got.message_id for got in receiver.received}) == 1


def _create_endpoint(base_url: str, url: str) -> dict[str, Any]:
    created = httpx.post(f"{base_url}/api/v1/webhook-endpoints", headers=admin_headers(), json={"url": url})
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


def _delete_endpoint(base_url: str, endpoint_id: str) -> None:
    httpx.delete(f"{base_url}/api/v1/webhook-endpoints/{endpoint_id}", headers=admin_headers())


@pytest.mark.redis
def test_a_service_killed_right_after_a_write_delivers_its_event_after_a_restart(redis_server: RedisServer) -> None:
    # The first process polls once a minute, on a store of its own (no earlier work to keep its loop busy): its
    # loop ran at start-up, before the write, and not again before the kill, so the event is in the store only.
    slow = start_hypercorn({"IDENTITY_WEBHOOK_POLL_SECONDS": "60", **_redis_env(redis_server, 5)}, workers=0)
    with running_receiver() as receiver:
        try:
            endpoint = _create_endpoint(slow.base_url, receiver.url)
            receiver.verify = svix_verifier(endpoint["secret"])
            created = httpx.post(
                f"{slow.base_url}/api/v1/users", headers=server_headers(), json={"display_name": "Written then killed"}
            )
            assert created.status_code == 201, created.text
            os.kill(slow.process.pid, signal.SIGKILL)
            slow.process.wait(10)
        finally:
            stop_server(slow)
        assert receiver.received == []
        restarted = start_hypercorn({**FAST, **_redis_env(redis_server, 5)})
        try:
            got = receiver.wait_for(
                lambda got: any(item.payload["type"] == "user.created" for item in got), timeout_s=20
            )
            users = [item for item in got if item.payload["type"] == "user.created"]
            assert [item.payload["data"]["id"] for item in users] == [created.json()["id"]]
            assert all(item.rejected is None for item in got)
        finally:
            _delete_endpoint(restarted.base_url, endpoint["id"])
            stop_server(restarted)


@pytest.mark.redis
def test_two_workers_on_one_redis_deliver_every_message_exactly_once(redis_server: RedisServer) -> None:
    n = 40
    running = start_hypercorn({**FAST, **_redis_env(redis_server, 6)}, workers=2)
    with running_receiver() as receiver:
        endpoint = _create_endpoint(running.base_url, receiver.url)
        receiver.verify = standard_verifier(endpoint["secret"])
        try:
            with httpx.Client(base_url=running.base_url, timeout=10) as http:
                sent = {
                    http.post(f"/api/v1/webhook-endpoints/{endpoint['id']}/test", headers=admin_headers()).json()[
                        "message_id"
                    ]
                    for _ in range(n)
                }
            got = receiver.wait_for(lambda got: len({item.message_id for item in got}) >= n, timeout_s=30)
            # A short wait for a duplicate that would come late.
            with pytest.raises(AssertionError):
                receiver.wait_for(lambda got: len(got) > n, timeout_s=1.0)
            ids = [item.message_id for item in receiver.received]
            assert sorted(ids) == sorted(sent)
            assert all(item.rejected is None for item in got)
        finally:
            _delete_endpoint(running.base_url, endpoint["id"])
            stop_server(running)


@pytest.mark.parametrize("n", [40, pytest.param(500, marks=pytest.mark.slow)])
def test_soak_n_changes_make_exactly_n_events_and_every_one_is_delivered_once(
    http: httpx.Client, endpoints: Endpoints, n: int
) -> None:
    with running_receiver() as receiver:
        receiver.verify = standard_verifier(endpoints.add(receiver, event_types=["user.updated"])["secret"])
        user = http.post("/api/v1/users", headers=server_headers(), json={"display_name": "Soak"}).json()["id"]
        for i in range(n):
            patched = http.patch(f"/api/v1/users/{user}", headers=server_headers(), json={"display_name": f"S{i}"})
            assert patched.status_code == 200

        def mine(got: list[Any]) -> list[Any]:
            return [item for item in got if item.payload["data"]["id"] == user]

        receiver.wait_for(lambda got: len(mine(got)) >= n, timeout_s=30 + n / 20)
        with pytest.raises(AssertionError):  # nothing more comes
            receiver.wait_for(lambda got: len(mine(got)) > n, timeout_s=1.0)
        got = mine(receiver.received)
        assert len({item.message_id for item in got}) == n
        assert sorted(item.payload["data"]["display_name"] for item in got) == sorted(f"S{i}" for i in range(n))
        assert all(item.rejected is None for item in got)
