"""The service embedded under /auth in a user's application, served by real servers on loopback: a Starlette app and a
FastAPI app under Hypercorn (ASGI `root_path`), a Flask app and a Django project under werkzeug's server (WSGI
`SCRIPT_NAME`, through DispatcherMiddleware). Every URL the service makes follows the mount point: a code sign-in
gives a token whose `iss` leads to the JWKS that verifies it (PyJWT), and the dashboard and the API explorer load their
files and talk to the API under /auth in headless Chromium. The apps are in tests/downstream/mounted_apps.py."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from werkzeug.serving import make_server

from identity_hosting.settings import DEV_KEYS, Settings
from identity_hosting.wsgi import IdentityWSGI
from tests.dashboard.conftest import Browser
from tests.dashboard.test_api_explorer import check_same_origin_and_quiet, open_explorer_and_try_the_welcome_endpoint
from tests.downstream.mounted_apps import MOUNT_POINT, create_django_app, create_flask_app
from tests.e2e.conftest import start_hypercorn, stop_server
from tests.support import PROJECT_ID, client_headers, server_headers

pytestmark = pytest.mark.e2e


@dataclass
class Mounted:
    """A user's application on loopback with the service mounted at /auth."""

    name: str
    origin: str
    home_page: str

    @property
    def url(self) -> str:
        """The service's public URL: the application's origin and the mount point."""
        return self.origin + MOUNT_POINT


@pytest.fixture(scope="module")
def starlette_mounted() -> Iterator[Mounted]:
    server = start_hypercorn(target="tests.downstream.mounted_starlette:app", ready_path=f"{MOUNT_POINT}/api/v1")
    try:
        yield Mounted("starlette", server.base_url, "the notes app")
    finally:
        stop_server(server)


@pytest.fixture(scope="module")
def fastapi_mounted() -> Iterator[Mounted]:
    server = start_hypercorn(target="tests.downstream.mounted_fastapi:app", ready_path=f"{MOUNT_POINT}/api/v1")
    try:
        yield Mounted("fastapi", server.base_url, "the todo app")
    finally:
        stop_server(server)


def _wsgi_mounted(name: str, make_app: Callable[[IdentityWSGI], Any], home_page: str) -> Iterator[Mounted]:
    identity = IdentityWSGI(Settings(rate_limits=False))
    server = make_server("127.0.0.1", 0, make_app(identity), threaded=True)
    thread = threading.Thread(target=server.serve_forever, name=f"{name}-mounted", daemon=True)
    thread.start()
    try:
        yield Mounted(name, f"http://127.0.0.1:{server.server_port}", home_page)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        identity.close()


@pytest.fixture(scope="module")
def flask_mounted() -> Iterator[Mounted]:
    yield from _wsgi_mounted("flask", create_flask_app, "the shop")


@pytest.fixture(scope="module")
def django_mounted() -> Iterator[Mounted]:
    yield from _wsgi_mounted("django", create_django_app, "the blog")


@pytest.fixture(params=["starlette", "fastapi", "flask", "django"])
def mounted(request: pytest.FixtureRequest) -> Mounted:
    app: Mounted = request.getfixturevalue(f"{request.param}_mounted")
    return app


def test_a_code_sign_in_under_the_mount_gives_a_token_whose_issuer_leads_to_its_jwks(mounted: Mounted) -> None:
    email = f"mounted-{uuid.uuid4().hex[:12]}@example.com"
    with httpx.Client(base_url=mounted.url, timeout=10.0) as http:
        assert httpx.get(mounted.origin + "/", timeout=10.0).text == mounted.home_page  # the app's own route
        sent = http.post(
            "/api/v1/auth/otp/send-sign-in-code",
            headers=client_headers(),
            json={"email": email, "callback_url": "http://localhost:3000/cb"},
        )
        assert sent.status_code == 200, sent.text
        (mail,) = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
        signed_in = http.post(
            "/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": mail["code"] + sent.json()["nonce"]}
        )
        assert signed_in.status_code == 200, signed_in.text
    token = signed_in.json()["access_token"]

    issuer = jwt.decode(token, options={"verify_signature": False})["iss"]
    assert issuer == f"{mounted.url}/api/v1/projects/{PROJECT_ID}"
    signing_key = jwt.PyJWKClient(issuer + "/.well-known/jwks.json").get_signing_key_from_jwt(token)  # over HTTP
    claims = jwt.decode(token, signing_key, algorithms=["ES256"], audience=PROJECT_ID, issuer=issuer)
    assert claims["sub"] == signed_in.json()["user_id"]
    assert claims["email"] == email


def _network(entries: list[dict[str, Any]]) -> tuple[dict[str, int], list[str]]:
    """From Chromium's performance log: each response's URL and status, and each request that failed to load."""
    urls: dict[str, str] = {}
    statuses: dict[str, int] = {}
    failed: list[str] = []
    for entry in entries:
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.responseReceived":
            statuses[params["response"]["url"]] = params["response"]["status"]
        elif message["method"] == "Network.loadingFailed":
            failed.append(f"{urls.get(params['requestId'], '?')}: {params.get('errorText')}")
    return statuses, failed


def test_the_dashboard_under_the_mount_loads_its_files_and_uses_the_api_there(
    mounted: Mounted, browser: Browser
) -> None:
    email = f"dash-{uuid.uuid4().hex[:12]}@example.com"
    created = httpx.post(
        f"{mounted.url}/api/v1/users", headers=server_headers(), json={"primary_email": email}, timeout=10.0
    )
    assert created.status_code == 201, created.text
    driver = browser.driver
    driver.get(f"{mounted.url}/dashboard")
    driver.execute_script("window.sessionStorage.clear();")
    browser.reset_logs()
    driver.get_log("performance")

    driver.get(f"{mounted.url}/dashboard")
    browser.type_into("#connect-project-id", PROJECT_ID)
    browser.type_into("#connect-admin-key", DEV_KEYS.super_secret_admin_key)
    browser.click("#connect-submit")
    assert email in browser.text_of("#users-table", email)  # the app rendered and reached the API under /auth

    assert driver.current_url.startswith(f"{mounted.url}/dashboard/")
    statuses, failed = _network(driver.get_log("performance"))
    assert failed == []
    assert {url: status for url, status in statuses.items() if status >= 400} == {}
    for name in ("", "app.js", "api.js", "style.css"):
        assert statuses[f"{mounted.url}/dashboard/{name}"] == 200
    assert any(url.startswith(f"{mounted.url}/api/v1/users") for url in statuses), statuses
    for url in statuses:
        assert url.startswith((f"{mounted.url}/dashboard/", f"{mounted.url}/api/v1/")), f"outside the mount: {url}"
    errors = [line["message"] for line in driver.get_log("browser") if line["level"] == "SEVERE"]
    assert errors == []


def test_the_explorer_under_the_mount_loads_its_files_and_tries_the_api_there(
    mounted: Mounted, browser: Browser
) -> None:
    driver = browser.driver
    browser.reset_logs()
    driver.get_log("performance")

    driver.get(f"{mounted.url}/explorer")
    open_explorer_and_try_the_welcome_endpoint(browser, mounted.url)  # "Try it out" went to /auth/api/v1

    assert driver.current_url.startswith(f"{mounted.url}/explorer/")
    statuses = check_same_origin_and_quiet(browser, mounted.url, f"{mounted.url}/")
    for name in ("", "init.js", "swagger-ui/swagger-ui-bundle.js", "swagger-ui/swagger-ui.css"):
        assert statuses[f"{mounted.url}/explorer/{name}"] == 200, statuses
    assert statuses[f"{mounted.url}/api/v1/openapi.json"] == 200
    assert statuses[f"{mounted.url}/api/v1"] == 200


def test_the_dev_home_page_under_the_mount_links_the_pages_there(mounted: Mounted) -> None:
    page = httpx.get(f"{mounted.url}/", headers={"accept": "text/html"}, timeout=10.0)
    assert page.status_code == 200, page.text
    links = re.findall(r'<a id="(\w+)" href="([^"]+)"', page.text)
    assert links == [
        ("dashboard", f"{MOUNT_POINT}/dashboard/"),
        ("explorer", f"{MOUNT_POINT}/explorer/"),
        ("openapi", f"{MOUNT_POINT}/api/v1/openapi.json"),
    ]
    for _name, href in links:
        assert httpx.get(mounted.origin + href, timeout=10.0).status_code == 200, href
