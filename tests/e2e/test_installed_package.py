"""The package as a user gets it: a wheel built from this checkout, installed with pip into a fresh virtual
environment outside the checkout (dependencies from the package index), then used from other directories:
`hypercorn asgi_app:app` serves the API and the dashboard, and another project's test suite keeps its own module
names and pays nothing for our pytest plugin until it uses a fixture.

Building and installing takes a while the first time; the environment is kept in the pytest cache, keyed by the
wheel's contents, so later runs reuse it until the package changes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from identity_hosting.settings import DEV_PROJECT_ID
from tests.e2e.conftest import NOT_SOURCE, ROOT
from tests.processes import free_port, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

#: What the wheel may install at the top level of site-packages: these, and names starting with `identity_`.
TOP_LEVEL = {"identity_proto", "backends", "asgi_app"}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a clean copy of the checkout (a build/ directory left in the checkout by an earlier
    build could otherwise slip stale modules into it)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = (work / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel: Path, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin` directory of a fresh virtual environment where pip installed the wheel (and pytest, for the
    downstream suite). Reused across runs while the wheel's contents are the same."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            digest.update(name.encode() + b"\0" + archive.read(name) + b"\0")
    key = digest.hexdigest()[:16]
    cache = getattr(request.config, "cache", None)
    root = cache.mkdir("installed-wheel") if cache is not None else tmp_path_factory.mktemp("installed-wheel")
    for old in root.iterdir():  # environments of earlier versions of the package
        if old.name != key:
            shutil.rmtree(old, ignore_errors=True)
    venv = root / key
    done = venv / ".installed"
    if not done.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel), "pytest"],
            check=True,
            capture_output=True,
            timeout=600,
        )
        done.touch()
    return venv / "bin"


def _outside_environment() -> dict[str, str]:
    """This process's environment without the service's variables or anything that points back at the checkout."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}
    return {k: v for k, v in os.environ.items() if not k.startswith("IDENTITY_") and k not in drop}


def test_the_wheel_installs_only_our_top_level_names(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = {Path(name).parts[0].removesuffix(".py") for name in archive.namelist()}
    names = {name for name in names if not name.endswith((".dist-info", ".data"))}
    assert {name for name in names if name not in TOP_LEVEL and not name.startswith("identity_")} == set()
    with zipfile.ZipFile(wheel) as archive:
        assert "identity_hosting/dashboard/index.html" in archive.namelist()


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
        env=_outside_environment(),
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
        env=_outside_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "3 passed" in finished.stdout
