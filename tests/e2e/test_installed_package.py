"""The package as a user gets it: a wheel built from this checkout, installed with pip into a fresh virtual
environment outside the checkout (dependencies from the package index), then used from other directories:
`hypercorn asgi_app:app` serves the API and the dashboard, and another project's test suite keeps its own module
names and pays nothing for our pytest plugin until it uses a fixture.

The wheel and its environment are the fixtures of tests/installed_wheel.py (kept in the pytest cache, keyed by the
wheel's contents, so later runs reuse the environment until the package changes)."""

from __future__ import annotations

import subprocess
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from identity_hosting.settings import DEV_PROJECT_ID
from tests.installed_wheel import outside_environment
from tests.processes import free_port, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

#: What the wheel may install at the top level of site-packages: these, and names starting with `identity_`.
TOP_LEVEL = {"identity_proto", "backends", "asgi_app"}


def test_the_wheel_installs_only_our_top_level_names(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = {Path(name).parts[0].removesuffix(".py") for name in archive.namelist()}
    names = {name for name in names if not name.endswith((".dist-info", ".data"))}
    assert {name for name in names if name not in TOP_LEVEL and not name.startswith("identity_")} == set()
    with zipfile.ZipFile(wheel) as archive:
        assert "identity_hosting/dashboard/index.html" in archive.namelist()
        # The API explorer: Swagger UI comes with the package (nothing is fetched at run time), its licence beside it.
        for name in ("index.html", "init.js", "swagger-ui/swagger-ui-bundle.js", "swagger-ui/LICENSE"):
            assert f"identity_hosting/explorer/{name}" in archive.namelist(), name


@pytest.fixture(params=["hypercorn", "identity-service"])
def hypercorn_from_install(installed: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """`hypercorn asgi_app:app` of the installed package, or the installed production command `identity-service`
    (Hypercorn kept running), started from an empty directory; its base URL."""
    empty = tmp_path / "empty"
    empty.mkdir()
    port = free_port()
    app = ["asgi_app:app"] if request.param == "hypercorn" else []
    process = subprocess.Popen(
        [str(installed / request.param), *app, "--bind", f"127.0.0.1:{port}"],
        cwd=empty,
        env=outside_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                if httpx.get(f"{base_url}/api/v1", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the installed service did not answer within 60 s"
            time.sleep(0.05)
        yield base_url
    finally:
        stop(process)
        if process.stderr:
            process.stderr.close()


def test_wheel_install_serves_api_and_dashboard(hypercorn_from_install: str) -> None:
    with httpx.Client(base_url=hypercorn_from_install, timeout=10) as http:
        jwks = http.get(f"/api/v1/projects/{DEV_PROJECT_ID}/.well-known/jwks.json")
        assert jwks.status_code == 200
        assert jwks.json()["keys"][0]["kty"] == "EC"
        page = http.get("/dashboard", follow_redirects=True)  # to /dashboard/: the page names its files relatively
        assert (page.status_code, page.url.path) == (200, "/dashboard/")
        assert page.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="app.js">' in page.text
        script = http.get("/dashboard/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert "import" in script.text
        # The mock OAuth provider of dev mode (the installed service's default) is there too.
        discovery = http.get("/mock-oauth/.well-known/openid-configuration")
        assert discovery.status_code == 200
        assert discovery.json()["issuer"] == f"{hypercorn_from_install}/mock-oauth"


DOWNSTREAM_TESTS = """
import sys

import hosting
import mailers
import wsgi_app


def test_own_modules_and_the_plugin_imported_nothing_of_the_service():
    assert (hosting.OWNER, mailers.OWNER, wsgi_app.OWNER) == ("downstream", "downstream", "downstream")
    service = {"identity_proto", "asgi_app", "backends", "identity_hosting", "identity_testing.fake"}
    assert sorted(service & set(sys.modules)) == []


def test_a_fixture_of_the_plugin_works(identity_project, identity_server_client):
    user = identity_project.create_user("ada@example.com")
    listed = identity_server_client.get("/api/v1/users").json()["items"]
    assert [u["id"] for u in listed] == [user["id"]]
    assert "identity_proto" in sys.modules


def test_oauth_sign_in_through_the_mock_provider(identity_project):
    identity_project.use_mock_oauth("github")
    tokens = identity_project.oauth_sign_in("github", email="grace@example.com", display_name="Grace")
    assert tokens["is_new_user"] is True
    with identity_project.client("client", access_token=tokens["access_token"]) as http:
        me = http.get("/api/v1/users/me").json()
    assert (me["primary_email"], me["display_name"]) == ("grace@example.com", "Grace")
    assert [p["id"] for p in me["oauth_providers"]] == ["github"]


def test_passkey_sign_in_with_the_software_authenticator(identity_project, identity_passkey_authenticator):
    user = identity_project.create_user("ada@example.com")
    tokens = identity_project.sign_in(user["id"])
    with identity_project.client("client", access_token=tokens["access_token"]) as http:
        identity_passkey_authenticator.register(http)
    with identity_project.client("client") as http:
        assert identity_passkey_authenticator.sign_in(http)["user_id"] == user["id"]
"""


def test_downstream_project_with_generic_module_names(installed: Path, tmp_path: Path) -> None:
    project = tmp_path / "downstream"
    project.mkdir()
    for name in ("hosting", "mailers", "wsgi_app"):
        (project / f"{name}.py").write_text(f'"""The downstream project\'s own {name}."""\n\nOWNER = "downstream"\n')
    (project / "test_downstream.py").write_text(textwrap.dedent(DOWNSTREAM_TESTS))
    finished = subprocess.run(
        [str(installed / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_downstream.py"],
        cwd=project,
        env=outside_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "4 passed" in finished.stdout


@pytest.mark.parametrize("command", ["identity-service", "hypercorn"])
def test_the_installed_commands_refuse_a_bad_environment_in_one_line(
    installed: Path, tmp_path: Path, command: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    app = ["asgi_app:app"] if command == "hypercorn" else []
    finished = subprocess.run(
        [str(installed / command), *app, "--bind", f"127.0.0.1:{free_port()}"],
        cwd=empty,
        env={**outside_environment(), "IDENTITY_PASSWORD_ROUNDS": "99"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode != 0, output
    assert "Traceback" not in output
    assert output.splitlines()[0] == (
        "identity service: configuration error: IDENTITY_PASSWORD_ROUNDS must be between 4 and 16"
    )
    if command == "identity-service":  # it checks before starting Hypercorn: that line alone, status 3
        assert (finished.returncode, output.splitlines()) == (3, [output.splitlines()[0]])
