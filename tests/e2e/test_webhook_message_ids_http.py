"""Webhook message ids over real HTTP, against a real Hypercorn on the memory store and on Redis: receivers
deduplicate on the id (`webhook-id` / `svix-id`), so two different messages must never share one, whatever project
wrote them, in whichever process, before or after a restart; and a resend (a retry, a replay) keeps the id of the
message it resends. Receivers here verify every POST with the `svix` library."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import RedisServer
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.support import internal_headers
from tests.webhook_receivers import Receiver, running_receiver, svix_verifier

pytestmark = pytest.mark.e2e

FAST = {"IDENTITY_WEBHOOK_POLL_SECONDS": "0.05", "IDENTITY_WEBHOOK_TIMEOUT_SECONDS": "3"}
USERS_PER_PROJECT = 25


def _env(store: str, redis_server: RedisServer | None) -> dict[str, str]:
    if store == "memory":
        return dict(FAST)
    assert redis_server is not None
    return {**FAST, "IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url.rsplit("/", 1)[0] + "/3"}


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def redis_or_none(store: str, request: pytest.FixtureRequest) -> RedisServer | None:
    return request.getfixturevalue("redis_server") if store == "redis" else None


class Project:
    """A project of its own (through the internal project), with an endpoint at `receiver`."""

    def __init__(self, base_url: str, receiver: Receiver) -> None:
        self.http = httpx.Client(base_url=f"{base_url}/api/v1", timeout=15.0)
        created = self.http.post(
            "/internal/projects", headers=internal_headers(), json={"display_name": f"Ids {uuid.uuid4().hex[:6]}"}
        )
        assert created.status_code == 201, created.text
        data = created.json()
        self.admin = {
            "x-service-access-type": "admin",
            "x-service-project-id": data["id"],
            "x-service-super-secret-admin-key": data["super_secret_admin_key"],
        }
        endpoint = self.http.post("/webhook-endpoints", headers=self.admin, json={"url": receiver.url})
        assert endpoint.status_code == 201, endpoint.text
        self.endpoint: dict[str, Any] = endpoint.json()
        receiver.verify = svix_verifier(self.endpoint["secret"]) if receiver.verify is None else receiver.verify

    def create_user(self) -> None:
        made = self.http.post("/users", headers=self.admin, json={"primary_email": f"{uuid.uuid4().hex}@ids.test"})
        assert made.status_code == 201, made.text

    def close(self) -> None:
        self.http.close()


def _ids(receiver: Receiver, n: int) -> list[str]:
    got = receiver.wait_for(lambda received: len(received) >= n, timeout_s=30)
    return [item.message_id for item in got]


@pytest.fixture
def server(store: str, redis_or_none: RedisServer | None) -> Iterator[Server]:
    running = start_hypercorn(_env(store, redis_or_none))
    try:
        yield running
    finally:
        stop_server(running)


def test_two_projects_writing_at_once_never_share_a_message_id(server: Server) -> None:
    with running_receiver() as first_receiver, running_receiver() as second_receiver:
        first, second = Project(server.base_url, first_receiver), Project(server.base_url, second_receiver)
        try:
            barrier = threading.Barrier(2)

            def write(project: Project) -> None:
                barrier.wait()
                for _ in range(USERS_PER_PROJECT):
                    project.create_user()

            threads = [threading.Thread(target=write, args=(p,)) for p in (first, second)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            # One user.created each.
            first_ids = _ids(first_receiver, USERS_PER_PROJECT)
            second_ids = _ids(second_receiver, USERS_PER_PROJECT)
        finally:
            first.close()
            second.close()
    assert all(item.rejected is None for item in first_receiver.received + second_receiver.received)
    assert len(set(first_ids)) == len(first_ids)
    assert len(set(second_ids)) == len(second_ids)
    assert set(first_ids).isdisjoint(second_ids)


def test_a_restarted_service_never_reuses_a_message_id(store: str, redis_or_none: RedisServer | None) -> None:
    before: list[str] = []
    after: list[str] = []
    with running_receiver() as receiver:
        for ids in (before, after):
            running = start_hypercorn(_env(store, redis_or_none))
            try:
                receiver.verify = None
                project = Project(running.base_url, receiver)
                try:
                    seen = len(receiver.received)
                    project.create_user()
                    ids.extend(_ids(receiver, seen + 1)[seen:])
                finally:
                    project.close()
            finally:
                stop_server(running)
    assert before
    assert after
    assert set(before).isdisjoint(after), (before, after)


def test_a_replay_and_a_retry_keep_the_message_id(server: Server) -> None:
    with running_receiver() as receiver:
        project = Project(server.base_url, receiver)
        test_path = f"/webhook-endpoints/{project.endpoint['id']}/test"
        try:
            receiver.status = 500  # the first attempt fails: the retry resends the same message
            sent = project.http.post(test_path, headers=project.admin, json={})
            assert sent.status_code == 200, sent.text
            message_id = sent.json()["message_id"]
            receiver.wait_for(lambda received: len(received) >= 1)
            receiver.status = 200
            path = f"/webhook-endpoints/{project.endpoint['id']}/deliveries/{message_id}/replay"
            replayed = project.http.post(path, headers=project.admin, json={})
            assert replayed.status_code == 200, replayed.text
            got = receiver.wait_for(lambda received: any(item.headers["x-answered"] == "1" for item in received))
            other = project.http.post(test_path, headers=project.admin, json={})
            assert other.status_code == 200, other.text
        finally:
            project.close()
    assert {item.message_id for item in got} == {message_id}
    assert other.json()["message_id"] != message_id
