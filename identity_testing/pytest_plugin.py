"""pytest fixtures for the in-process identity fake (registered through the `pytest11` entry point).

| fixture | scope | what |
|---|---|---|
| `identity_fake` | session | an `IdentityFake` (memory store, dev/test mode) shared by the session's tests |
| `identity_project` | test | a fresh, empty project of that fake (deleted afterwards) |
| `identity_clock` | test | the fake's clock; back to real time after the test |
| `identity_outbox` | test | `identity_outbox(to=None)`: the project's sent mail, newest first |
| `identity_client`, `identity_server_client`, `identity_admin_client` | test | in-process `httpx.Client`s |

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

    from identity_testing.fake import FakeClock, IdentityFake, TestProject


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
