"""pytest fixtures for the in-process identity fake (registered through the `pytest11` entry point).

| fixture | scope | what |
|---|---|---|
| `identity_fake` | session | an `IdentityFake` (memory store, dev/test mode) shared by the session's tests |
| `identity_project` | test | a fresh, empty project of that fake (deleted afterwards) |
| `identity_clock` | test | the fake's clock; back to real time after the test |
| `identity_outbox` | test | `identity_outbox(to=None)`: the project's sent mail, newest first |
| `identity_client`, `identity_server_client`, `identity_admin_client` | test | in-process `httpx.Client`s |
| `identity_direct`, `identity_server_direct` | test | the fastest clients: `DirectClient`s (see `direct.py`) |
| `identity_events` | test | `identity_events(*types)`: the project's webhook events, `{"id", "type", "data"}` |
| `identity_webhook_receiver` | test | a `RecordingReceiver` of every event, delivered after each request |
| `identity_passkey_authenticator` | test | passkeys on for the project; a `PasskeyAuthenticator` at localhost:3000 |

Each pytest-xdist worker is its own process with its own fake, and each test its own project, so tests never see
each other's users.

pytest loads this plugin in every suite where the package is installed: it imports only pytest and the standard
library, and the service only when a test uses one of its fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import httpx

    from identity_testing.direct import DirectClient
    from identity_testing.fake import FakeClock, IdentityFake, TestProject
    from identity_testing.passkeys import PasskeyAuthenticator
    from identity_testing.webhooks import RecordingReceiver


@pytest.fixture(scope="session")
def identity_fake() -> IdentityFake:
    """The in-process identity service for this test session."""
    from identity_testing.fake import IdentityFake

    return IdentityFake()


@pytest.fixture
def identity_project(identity_fake: IdentityFake) -> Iterator[TestProject]:
    """A fresh project for one test."""
    project = identity_fake.create_project()
    yield project
    project.delete()


@pytest.fixture
def identity_clock(identity_fake: IdentityFake) -> Iterator[FakeClock]:
    """The service's clock (freeze, set, advance); real time again after the test."""
    yield identity_fake.clock
    identity_fake.clock.reset()


@pytest.fixture
def identity_outbox(identity_project: TestProject) -> Callable[..., list[dict[str, Any]]]:
    """The project's outbox: `identity_outbox(to=None)`."""
    return identity_project.outbox


@pytest.fixture
def identity_client(identity_project: TestProject) -> Iterator[httpx.Client]:
    """A client-access `httpx.Client` for the test's project (add an access token per request)."""
    with identity_project.client("client") as client:
        yield client


@pytest.fixture
def identity_server_client(identity_project: TestProject) -> Iterator[httpx.Client]:
    """A server-access `httpx.Client` for the test's project."""
    with identity_project.client("server") as client:
        yield client


@pytest.fixture
def identity_admin_client(identity_project: TestProject) -> Iterator[httpx.Client]:
    """An admin-access `httpx.Client` for the test's project."""
    with identity_project.client("admin") as client:
        yield client


@pytest.fixture
def identity_direct(identity_project: TestProject) -> DirectClient:
    """A client-access `DirectClient` for the test's project: the same answers as `identity_client`'s, without an
    HTTP client (`identity_testing.direct`), several times cheaper per request."""
    return identity_project.direct_client("client")


@pytest.fixture
def identity_server_direct(identity_project: TestProject) -> DirectClient:
    """A server-access `DirectClient` for the test's project."""
    return identity_project.direct_client("server")


# --- webhooks ---


@pytest.fixture
def identity_events(identity_project: TestProject) -> Callable[..., list[dict[str, Any]]]:
    """The project's webhook events: `identity_events(*types)`, oldest first, whatever the endpoints."""
    return identity_project.events


@pytest.fixture
def identity_webhook_receiver(
    identity_fake: IdentityFake, identity_project: TestProject
) -> Iterator[RecordingReceiver]:
    """A receiver of every event type of the test's project, which verifies each POST with `standardwebhooks`
    (`received`, `events`, `types()`; `rejected` what did not verify; set `status` to make deliveries fail). For
    the test, the fake delivers after every request made through its clients ("sync" mode); `identity_fake.
    deliver_webhooks()` delivers what is due at other times (a retry after `identity_clock.advance(...)`)."""
    from identity_testing.webhooks import RecordingReceiver

    receiver = RecordingReceiver()
    identity_project.add_webhook_receiver(receiver)
    mode, identity_fake.webhooks = identity_fake.webhooks, "sync"
    yield receiver
    identity_fake.webhooks = mode


# --- end webhooks ---


# --- passkeys ---


@pytest.fixture
def identity_passkey_authenticator(identity_project: TestProject) -> PasskeyAuthenticator:
    """Passkeys turned on for the test's project (`passkey_enabled`), and a software passkey authenticator in a page
    at http://localhost:3000 (`identity_testing.passkeys`): `register(client)` for a signed-in user's client,
    `sign_in(client)`."""
    with identity_project.client("admin") as http:
        answer = http.patch("/api/v1/projects/current", json={"config": {"passkey_enabled": True}})
    if answer.status_code != 200:
        raise AssertionError(f"turning passkeys on: {answer.status_code} {answer.text}")
    return identity_project.passkey_authenticator()


# --- end passkeys ---
