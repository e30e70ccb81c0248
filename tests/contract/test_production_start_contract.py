"""A store once used in dev mode keeps the dev project, whose id and keys are public (they are in the README). When
production mode starts on that store, start-up disables it: none of its keys, tokens or sessions authenticate
anything, its data is kept, and one log line says so. Over every store (memory, fakeredis, a real redis-server)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest

from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_KEYS, DEV_PROJECT, DEV_PROJECT_ID, Settings
from identity_proto import Request, SeededEntropy, Service, ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import LoadUser
from identity_proto.flows.sessions import PUBLIC_CLIENT_SECRET
from tests.contract.factories import T0

PRODUCTION_ENV = {
    "IDENTITY_PROJECT_ID": "22222222-2222-4222-8222-222222222222",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_production_client_key_0000",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_production_server_key_0000",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_production_admin_key_00000",
    "IDENTITY_INTERNAL_ADMIN_KEY": "sak_production_internal_key_000",
    "IDENTITY_PASSWORD_ROUNDS": "4",
}


def _headers(access_type: str, project_id: str = DEV_PROJECT_ID, **extra: str) -> dict[str, str]:
    return {"x-service-access-type": access_type, "x-service-project-id": project_id, **extra}


DEV_CLIENT = _headers("client", **{"x-service-publishable-client-key": DEV_KEYS.publishable_client_key})
DEV_SERVER = _headers("server", **{"x-service-secret-server-key": DEV_KEYS.secret_server_key})
DEV_ADMIN = _headers("admin", **{"x-service-super-secret-admin-key": DEV_KEYS.super_secret_admin_key})
DEV_INTERNAL = _headers("admin", "internal", **{"x-service-super-secret-admin-key": DEV_INTERNAL_ADMIN_KEY})


def _call(
    service: Service,
    store: Store,
    method: str,
    path: str,
    headers: dict[str, str],
    json: Any = None,
    *,
    form: str | None = None,
) -> tuple[int, str | None, Any]:
    raw = dict(headers)
    body = b""
    if json is not None:
        body, raw["content-type"] = orjson.dumps(json), "application/json"
    if form is not None:
        body, raw["content-type"] = form.encode(), "application/x-www-form-urlencoded"
    request = Request(method, path, tuple(raw.items()), body)
    response = run(service.handle(request, T0, SeededEntropy(5)), store)
    parsed = orjson.loads(response.body) if response.body[:1] == b"{" else response.body
    return response.status, response.header("x-service-known-error"), parsed


def _start_production(store: Store, caplog: pytest.LogCaptureFixture) -> tuple[Service, list[str]]:
    """What a host does at start in production mode: bootstrap, then log the projects it disabled."""
    settings = Settings.from_env(PRODUCTION_ENV)
    service = Service(settings.service_options())
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="identity_service"):
        disabled = run(
            service.bootstrap(
                settings.default_project,
                settings.internal_admin_key,
                now_ms=T0,
                entropy=SeededEntropy(2),
                disable=settings.disabled_projects,
            ),
            store,
        )
        settings.announce_disabled(disabled)
    return service, [record.getMessage() for record in caplog.records if DEV_PROJECT_ID in record.getMessage()]


def test_dev_project_is_disabled_when_production_starts_on_its_store(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # dev mode: the README's keys work; a user and a session are made with them
    dev = Service(ServiceOptions(dev_mode=True, password_rounds=4))
    run(dev.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=T0, entropy=SeededEntropy(1)), store)
    status, _, user = _call(dev, store, "POST", "/api/v1/users", DEV_SERVER, {"primary_email": "ada@example.com"})
    assert status == 201
    status, _, tokens = _call(dev, store, "POST", "/api/v1/auth/sessions", DEV_SERVER, {"user_id": user["id"]})
    assert status == 200
    assert (
        _call(dev, store, "GET", "/api/v1/users/me", {**DEV_CLIENT, "x-service-access-token": tokens["access_token"]})[
            0
        ]
        == 200
    )

    production, lines = _start_production(store, caplog)
    assert len(lines) == 1, lines
    assert "disabled" in lines[0]
    for secret in (DEV_KEYS.secret_server_key, DEV_KEYS.super_secret_admin_key, DEV_INTERNAL_ADMIN_KEY):
        assert secret not in caplog.text

    access = {"x-service-access-token": tokens["access_token"]}
    refresh = {"x-service-refresh-token": tokens["refresh_token"]}
    refused = {
        "client key": (
            _call(production, store, "GET", "/api/v1/projects/current", DEV_CLIENT),
            401,
            "INVALID_PUBLISHABLE_CLIENT_KEY",
        ),
        "no client key": (
            _call(production, store, "GET", "/api/v1/projects/current", _headers("client")),
            401,
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        ),
        "access token": (
            _call(production, store, "GET", "/api/v1/users/me", {**_headers("client"), **access}),
            401,
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        ),
        "refresh token": (
            _call(
                production, store, "POST", "/api/v1/auth/sessions/current/refresh", {**_headers("client"), **refresh}
            ),
            401,
            "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT",
        ),
        "refresh grant": (
            _call(
                production,
                store,
                "POST",
                "/api/v1/auth/oauth/token",
                {},
                form=f"grant_type=refresh_token&refresh_token={tokens['refresh_token']}"
                f"&client_id={DEV_PROJECT_ID}&client_secret={PUBLIC_CLIENT_SECRET}",
            ),
            401,
            "INVALID_PUBLISHABLE_CLIENT_KEY",
        ),
        "server key": (_call(production, store, "GET", "/api/v1/users", DEV_SERVER), 401, "INVALID_SECRET_SERVER_KEY"),
        "admin key": (
            _call(production, store, "GET", "/api/v1/projects/current", DEV_ADMIN),
            401,
            "INVALID_SUPER_SECRET_ADMIN_KEY",
        ),
        "internal key": (
            _call(production, store, "GET", "/api/v1/internal/projects", DEV_INTERNAL),
            401,
            "INVALID_SUPER_SECRET_ADMIN_KEY",
        ),
    }
    for name, ((status, code, _), want_status, want_code) in refused.items():
        assert (status, code) == (want_status, want_code), name

    # its data is kept; the configured project works; a second production start disables nothing new but says so
    assert store.apply(LoadUser(DEV_PROJECT_ID, user["id"])) is not None
    production_client = _headers(
        "client",
        PRODUCTION_ENV["IDENTITY_PROJECT_ID"],
        **{"x-service-publishable-client-key": PRODUCTION_ENV["IDENTITY_PUBLISHABLE_CLIENT_KEY"]},
    )
    assert _call(production, store, "GET", "/api/v1/projects/current", production_client)[0] == 200
    again, lines = _start_production(store, caplog)
    assert len(lines) == 1
    assert _call(again, store, "GET", "/api/v1/users", DEV_SERVER)[1] == "INVALID_SECRET_SERVER_KEY"

    # back in dev mode (the dev project configured again), its keys are its own again
    run(dev.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=T0, entropy=SeededEntropy(1)), store)
    assert _call(dev, store, "GET", "/api/v1/users", DEV_SERVER)[0] == 200


def test_production_start_on_a_store_without_the_dev_project_creates_none(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    production, lines = _start_production(store, caplog)
    assert lines == []
    assert _call(production, store, "GET", "/api/v1/projects/current", DEV_SERVER)[1] == "CURRENT_PROJECT_NOT_FOUND"
