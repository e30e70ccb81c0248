"""The write path over HTTP against a real Hypercorn (memory store and real Redis): a sign-up is one `Commit` (the
user, its address, its personal team and membership, its default permissions, its events), so concurrent sign-ups of
one address resolve to one account (the others conflict, re-run and see the winner: 409), concurrent updates of
different fields of one team both survive, and a worker SIGKILLed in the middle of sign-ups leaves no part of one
without the rest."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.processes import RedisServer
from tests.support import admin_headers, server_headers

pytestmark = pytest.mark.e2e

PASSWORD = "a long enough password 1"
#: The dev project, configured by this module for what a sign-up writes besides the user (restored afterwards).
SIGN_UP_CONFIG = {"create_team_on_sign_up": True, "user_default_permissions": ["write_path_reader"]}


def _client_headers() -> dict[str, str]:
    from tests.support import client_headers

    return client_headers()


def _configure(base_url: str) -> dict[str, Any]:
    """Give new users a personal team and a default project permission; return the config to restore."""
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        before = http.get("/api/v1/projects/current", headers=admin_headers()).json()["config"]
        defined = http.post(
            "/api/v1/project-permission-definitions", headers=admin_headers(), json={"id": "write_path_reader"}
        )
        assert defined.status_code in (201, 400), defined.text  # 400: defined by an earlier run on this store
        patched = http.patch("/api/v1/projects/current", headers=admin_headers(), json={"config": SIGN_UP_CONFIG})
        assert patched.status_code == 200, patched.text
    return {name: before[name] for name in SIGN_UP_CONFIG}


def _restore(base_url: str, config: dict[str, Any]) -> None:
    with httpx.Client(base_url=base_url, timeout=10.0) as http:
        restored = http.patch("/api/v1/projects/current", headers=admin_headers(), json={"config": config})
        assert restored.status_code == 200, restored.text


def _sign_up(http: httpx.Client, email: str) -> httpx.Response:
    return http.post(
        "/api/v1/auth/password/sign-up", headers=_client_headers(), json={"email": email, "password": PASSWORD}
    )


def _users_with(http: httpx.Client, email: str) -> list[dict[str, Any]]:
    listed = http.get("/api/v1/users", params={"query": email, "limit": 100}, headers=server_headers())
    assert listed.status_code == 200, listed.text
    return [user for user in listed.json()["items"] if user["primary_email"] == email]


def _assert_whole(http: httpx.Client, user: dict[str, Any]) -> None:
    """The user has everything a sign-up gives: its personal team, selected, with the user as member, and the
    default project permission."""
    team_id = user["selected_team_id"]
    assert team_id is not None, user
    members = http.get("/api/v1/users", params={"team_id": team_id}, headers=server_headers())
    assert members.status_code == 200, members.text
    assert [member["id"] for member in members.json()["items"]] == [user["id"]]
    granted = http.get(
        "/api/v1/project-permissions",
        params={"user_id": user["id"], "permission_id": "write_path_reader"},
        headers=server_headers(),
    )
    assert granted.status_code == 200, granted.text
    assert [item["id"] for item in granted.json()["items"]] == ["write_path_reader"], (user["id"], granted.text)


def test_of_concurrent_sign_ups_of_one_address_exactly_one_account_is_made(base_url: str) -> None:
    restore = _configure(base_url)
    try:
        email = f"race-{uuid.uuid4().hex[:8]}@example.com"
        with httpx.Client(base_url=base_url, timeout=30.0) as http, ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda _n: _sign_up(http, email), range(12)))
            statuses = sorted(answer.status_code for answer in answers)
            assert statuses == [200] + [409] * 11, [a.text for a in answers]
            assert {a.headers.get("x-service-known-error") for a in answers if a.status_code == 409} == {
                "USER_EMAIL_ALREADY_EXISTS"
            }
            users = _users_with(http, email)
            assert len(users) == 1
            winner = next(a for a in answers if a.status_code == 200).json()["user_id"]
            assert users[0]["id"] == winner
            _assert_whole(http, users[0])
            teams = http.get("/api/v1/teams", params={"user_id": winner}, headers=server_headers())
            assert teams.status_code == 200, teams.text
            assert len(teams.json()["items"]) == 1  # one personal team: the losers wrote nothing
    finally:
        _restore(base_url, restore)


def test_concurrent_updates_of_different_fields_of_a_team_both_survive(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        created = http.post("/api/v1/teams", headers=server_headers(), json={"display_name": "Race team"})
        assert created.status_code == 201, created.text
        team_id = created.json()["id"]

        def patch(body: dict[str, Any]) -> int:
            return http.patch(f"/api/v1/teams/{team_id}", headers=server_headers(), json=body).status_code

        with ThreadPoolExecutor(8) as pool:
            for n in range(10):
                bodies = [{"display_name": f"name {n}"}, {"client_metadata": {"n": n}}] * 4
                assert set(pool.map(patch, bodies)) == {200}
                team = http.get(f"/api/v1/teams/{team_id}", headers=server_headers()).json()
                assert (team["display_name"], team["client_metadata"]) == (f"name {n}", {"n": n})


@pytest.mark.redis
def test_a_worker_killed_during_sign_ups_leaves_no_partial_sign_up(redis_server: RedisServer) -> None:
    """Sign-ups run against Hypercorn on a Redis database of its own; the serving process is SIGKILLed in the middle,
    three times over. Then every user that exists has its team, membership and permission: none was half written
    (before sign-ups were one commit, a kill between the user's write and its team's left a user without a team)."""
    env = {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url.rsplit("/", 1)[0] + "/7"}
    tag = uuid.uuid4().hex[:8]
    acknowledged = 0
    for cycle in range(3):
        acknowledged += _sign_up_until_killed(env, f"kill-{tag}-{cycle}")

    server = start_hypercorn(env)
    try:
        with httpx.Client(base_url=server.base_url, timeout=30.0) as http:
            listed = http.get(
                "/api/v1/users", params={"query": f"kill-{tag}-", "limit": 1000}, headers=server_headers()
            )
            users = [u for u in listed.json()["items"] if (u["primary_email"] or "").startswith(f"kill-{tag}-")]
            assert len(users) >= acknowledged  # every acknowledged sign-up is there (and maybe unacknowledged ones)
            for user in users:
                _assert_whole(http, user)
            teams = http.get("/api/v1/teams", headers=server_headers())
            assert teams.status_code == 200, teams.text
            personal = [t for t in teams.json()["items"] if t["display_name"].startswith(f"kill-{tag}-")]
            assert len(personal) == len(users)  # no team whose user is missing
    finally:
        stop_server(server)


def _sign_up_until_killed(env: dict[str, str], prefix: str) -> int:
    """Eight clients sign up new addresses until the serving process is SIGKILLed (after 20 acknowledged
    sign-ups); returns how many were acknowledged."""
    server = start_hypercorn(env, workers=0)
    answered: list[int] = []
    stop = threading.Event()
    try:
        _configure(server.base_url)

        def load(worker: int) -> None:
            with httpx.Client(base_url=server.base_url, timeout=5.0) as http:
                for n in range(400):
                    if stop.is_set():
                        return
                    try:
                        answered.append(_sign_up(http, f"{prefix}-{worker}-{n}@example.com").status_code)
                    except httpx.TransportError:
                        return

        workers = [threading.Thread(target=load, args=(n,)) for n in range(8)]
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 10
        while answered.count(200) < 20 and time.monotonic() < deadline:
            time.sleep(0.005)
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)
        stop.set()
        for worker in workers:
            worker.join(10)
    finally:
        stop.set()
        stop_server(server)
    assert answered.count(200) >= 20, answered
    return answered.count(200)
