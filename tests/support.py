"""Test support shared by the unit, http and e2e suites: a service on the memory store, driven in process."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from backends.memory import MemoryStore
from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import Request, Response, SeededEntropy, Service, ServiceOptions, run
from identity_proto.records import Email, Project, User

PROJECT_ID = DEV_PROJECT.id
KEYS = DEV_PROJECT.keys
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def client_headers(**extra: str) -> dict[str, str]:
    """Headers of a client request to the dev project."""
    return {
        "x-service-access-type": "client",
        "x-service-project-id": PROJECT_ID,
        "x-service-publishable-client-key": KEYS.publishable_client_key,
        **extra,
    }


def server_headers(**extra: str) -> dict[str, str]:
    """Headers of a server request to the dev project."""
    return {
        "x-service-access-type": "server",
        "x-service-project-id": PROJECT_ID,
        "x-service-secret-server-key": KEYS.secret_server_key,
        **extra,
    }


def admin_headers(**extra: str) -> dict[str, str]:
    """Headers of an admin request to the dev project."""
    return {
        "x-service-access-type": "admin",
        "x-service-project-id": PROJECT_ID,
        "x-service-super-secret-admin-key": KEYS.super_secret_admin_key,
        **extra,
    }


def internal_headers(**extra: str) -> dict[str, str]:
    """Headers of an admin request to the internal project."""
    return {
        "x-service-access-type": "admin",
        "x-service-project-id": "internal",
        "x-service-super-secret-admin-key": DEV_INTERNAL_ADMIN_KEY,
        **extra,
    }


@dataclass
class Reply:
    """A response, decoded for assertions."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def known_error(self) -> str | None:
        return self.headers.get("x-service-known-error")

    @classmethod
    def of(cls, response: Response) -> Reply:
        return cls(response.status, dict(response.headers), response.body)


@dataclass
class Harness:
    """A service on a fresh memory store with the dev project, a frozen clock and seeded entropy."""

    #: bcrypt at its minimum cost: tests check behaviour, not hashing strength.
    service: Service = field(default_factory=lambda: Service(ServiceOptions(password_rounds=4)))
    store: MemoryStore = field(default_factory=MemoryStore)
    now_ms: int = START_MS
    entropy: SeededEntropy = field(default_factory=lambda: SeededEntropy(7))

    def __post_init__(self) -> None:
        run(
            self.service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=self.now_ms, entropy=self.entropy),
            self.store,
        )

    def request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        *,
        json: Any = None,
        body: bytes = b"",
        query: str = "",
        client: str | None = None,
    ) -> Reply:
        raw_headers = dict(headers or {})
        if json is not None:
            body = orjson.dumps(json)
            raw_headers.setdefault("content-type", "application/json")
        request = Request(method, path, tuple(raw_headers.items()), body, query, client)
        return Reply.of(run(self.service.handle(request, self.now_ms, self.entropy), self.store))

    def project(self, project_id: str = PROJECT_ID) -> Project:
        project = self.store.projects.get(project_id)
        assert project is not None
        return project

    def outbox(self, to: str, project_id: str = PROJECT_ID) -> list[Email]:
        return [e for e in self.store.tenant(project_id).outbox if e.to == to]

    def user(self, user_id: str, project_id: str = PROJECT_ID) -> User:
        return self.store.tenant(project_id).users[user_id]

    def advance(self, ms: int) -> None:
        self.now_ms += ms
