"""Dev mode, then production, on one Redis database, through real Hypercorn processes: the README's dev keys work
in dev mode and are refused once production mode has started on the same store, which logs that it disabled the
dev project."""

from __future__ import annotations

import httpx
import pytest
import redis

from identity_hosting.settings import DEV_PROJECT_ID
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
