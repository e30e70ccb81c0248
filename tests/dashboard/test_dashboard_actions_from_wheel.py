"""The dashboard's actions as a user of the package gets them: the wheel built from this checkout, installed into a
fresh virtual environment outside the checkout, its `hypercorn asgi_app:app` started from an empty directory; the
same scenarios as test_dashboard_actions_browser, in headless Chromium, each action checked through the REST API."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dashboard.conftest import Backend, Browser, Project
from tests.dashboard.test_dashboard_actions_browser import delete_project_scenario, teams_scenario, users_scenario
from tests.e2e.conftest import Server
from tests.installed_wheel import outside_environment
from tests.processes import free_port, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def wheel_server(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The installed package's `hypercorn asgi_app:app` (dev mode, memory store, outbox mail: its defaults), started
    from an empty directory with nothing of the checkout on its path."""
    where = subprocess.run(
        [str(installed / "python"), "-c", "import identity_hosting; print(identity_hosting.__file__)"],
        cwd=tmp_path_factory.mktemp("where"),
        env=outside_environment(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    # From the installed environment's site-packages: that environment is kept in the pytest cache, which may be in
    # the checkout (scripts/test), so "not under the checkout" would refuse it.
    site_packages = next((installed.parent / "lib").glob("python*/site-packages")).resolve()
    assert Path(where).resolve().is_relative_to(site_packages), f"the package was not imported from the wheel: {where}"
    empty = tmp_path_factory.mktemp("empty")
    port = free_port()
    started = time.monotonic()
    # Rate limits off, as for the suite's other servers: the scenarios sign in a few times from 127.0.0.1.
    process = subprocess.Popen(
        [str(installed / "hypercorn"), "asgi_app:app", "--bind", f"127.0.0.1:{port}"],
        cwd=empty,
        env={**outside_environment(), "IDENTITY_RATE_LIMITS": "off"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"{base_url}/api/v1", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() - started < 60, "the installed service did not answer within 60 s"
            time.sleep(0.05)
        yield Server(base_url, process, time.monotonic() - started)
    finally:
        stop(process)
        if process.stderr:
            process.stderr.close()


@pytest.fixture
def backend(wheel_server: Server) -> Backend:
    """The installed service, for the dashboard's `page` and `project` fixtures."""
    return Backend("wheel", wheel_server)


def test_the_installed_dashboard_has_the_actions(backend: Backend) -> None:
    with backend.http() as http:
        teams = http.get("/dashboard/teams.js")
    assert teams.status_code == 200
    assert "/team-memberships/" in teams.text


def test_users_from_the_wheel(page: Browser, backend: Backend, project: Project) -> None:
    users_scenario(page, backend, project)


def test_teams_from_the_wheel(page: Browser, backend: Backend, project: Project) -> None:
    teams_scenario(page, backend, project)


def test_delete_a_project_from_the_wheel(page: Browser, backend: Backend, project: Project) -> None:
    delete_project_scenario(page, backend, project)
