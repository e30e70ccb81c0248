"""Dev mode, then production, on one Redis database, through real Hypercorn processes: the README's dev keys work
in dev mode and are refused once production mode has started on the same store, which logs that it disabled the
dev project."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
import redis

from identity_hosting.settings import DEV_PROJECT_ID
from tests.conftest import spawn_redis_server
from tests.contract.test_production_start_contract import (
    DEV_ADMIN,
    DEV_CLIENT,
    DEV_INTERNAL,
    DEV_SERVER,
    PRODUCTION_ENV,
)
from tests.e2e.conftest import start_hypercorn, stop_server
from tests.processes import RedisServer, stop

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

#: A database of the session's redis-server no other test uses (they use 0): production mode here must not disable
#: the dev project under their feet.
DATABASE = 7


def test_dev_project_is_disabled_when_production_starts_on_its_store(redis_server: RedisServer) -> None:
    url = f"redis://{redis_server.host}:{redis_server.port}/{DATABASE}"
    flush = redis.Redis(host=redis_server.host, port=redis_server.port, db=DATABASE)
    flush.flushdb()
    flush.close()
    store = {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": url}

    dev = start_hypercorn(store)
    try:
        with httpx.Client(base_url=dev.base_url, timeout=10.0) as http:
            created = http.post("/api/v1/users", headers=DEV_SERVER, json={"primary_email": "ada@example.com"})
            assert created.status_code == 201, created.text
            assert http.get("/api/v1/projects/current", headers=DEV_CLIENT).status_code == 200
    finally:
        stop_server(dev)

    production = start_hypercorn({**store, **PRODUCTION_ENV})
    try:
        with httpx.Client(base_url=production.base_url, timeout=10.0) as http:
            answers = {
                "client": http.get("/api/v1/projects/current", headers=DEV_CLIENT),
                "server": http.get("/api/v1/users", headers=DEV_SERVER),
                "admin": http.get("/api/v1/projects/current", headers=DEV_ADMIN),
                "internal": http.get("/api/v1/internal/projects", headers=DEV_INTERNAL),
                "sign-up": http.post(
                    "/api/v1/auth/password/sign-up",
                    headers={"x-service-access-type": "client", "x-service-project-id": DEV_PROJECT_ID},
                    json={"email": "mallory@example.com", "password": "correct horse battery"},
                ),
            }
            for name, answer in answers.items():
                assert answer.status_code == 401, (name, answer.text)
                assert answer.headers["x-service-known-error"].startswith(("INVALID_", "PUBLISHABLE_CLIENT_KEY_"))
            own = {
                "x-service-access-type": "server",
                "x-service-project-id": PRODUCTION_ENV["IDENTITY_PROJECT_ID"],
                "x-service-secret-server-key": PRODUCTION_ENV["IDENTITY_SECRET_SERVER_KEY"],
            }
            assert http.get("/api/v1/users", headers=own).status_code == 200
    finally:
        stop(production.process)
        assert production.process.stderr is not None
        log = production.process.stderr.read().decode(errors="replace")
        production.process.stderr.close()
    lines = [line for line in log.splitlines() if DEV_PROJECT_ID in line]
    assert len(lines) == 1, log
    assert "disabled" in lines[0]
    assert "WARNING" in lines[0]


@pytest.fixture
def own_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for one test: it is emptied under the service."""
    yield from spawn_redis_server(tmp_path_factory)


def test_in_dev_mode_a_store_emptied_under_the_service_gets_its_projects_again(own_redis_server: RedisServer) -> None:
    # A Redis restarted without persistence (or FLUSHALL) took the dev project: the service made it again at the
    # next request naming it, as a restart would, instead of answering CURRENT_PROJECT_NOT_FOUND until one.
    url = f"redis://{own_redis_server.host}:{own_redis_server.port}/0"
    dev = start_hypercorn({"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": url})
    try:
        with httpx.Client(base_url=dev.base_url, timeout=10.0) as http:
            assert http.get("/api/v1/projects/current", headers=DEV_CLIENT).status_code == 200
            admin = redis.Redis(host=own_redis_server.host, port=own_redis_server.port)
            admin.flushall()
            admin.close()
            time.sleep(1.1)  # past the project cache's second
            again = http.get("/api/v1/projects/current", headers=DEV_CLIENT)
            assert again.status_code == 200, again.text
            assert again.json()["id"] == DEV_PROJECT_ID
            created = http.post("/api/v1/users", headers=DEV_SERVER, json={"primary_email": "ada@example.com"})
            assert created.status_code == 201, created.text
            assert http.get("/api/v1/internal/projects", headers=DEV_INTERNAL).status_code == 200
    finally:
        stop(dev.process)
        log = dev.process.stderr.read().decode() if dev.process.stderr else ""
        stop_server(dev)
    assert f"project {DEV_PROJECT_ID} is missing from the store (was it emptied?): made again" in log
