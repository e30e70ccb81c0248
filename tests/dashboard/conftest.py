"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium, against a real Hypercorn serving
the service on the memory store and on a real Redis.

Nothing is downloaded: the driver and the browser are the Debian packages' (scripts/setup --redis installs them),
and Selenium Manager is never asked (the driver path is explicit, and SE_OFFLINE is set)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import RedisServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Where every run writes its screenshots (ignored by git). The two the README shows are tracked one level up and
#: are rewritten only when asked: `IDENTITY_UPDATE_README_SCREENSHOTS=1 scripts/test tests/dashboard`.
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots" / "run"
README_SCREENSHOTS = ("users", "user")
WAIT_S = 10.0
CHROME_ARGUMENTS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,900",
    "--lang=en-US",
)


# ------------------------------------------------------------------------------------------------------------
# The service


@dataclass
class Backend:
    """A running service and the name of its store."""

    name: str
    server: Server

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=10.0)


BACKEND_PARAMS = [pytest.param("memory", id="memory"), pytest.param("redis", id="redis", marks=pytest.mark.redis)]


@pytest.fixture(scope="session")
def starting_backends(request: pytest.FixtureRequest) -> Iterator[dict[str, Future[Server]]]:
    """The service in real Hypercorn processes, one per store the selected tests use, started together in the
    background (while the browser starts): the memory store, and the session's real redis-server."""
    # Only this directory's tests: other suites have parameters named `backend` too (of other kinds).
    here = Path(__file__).parent
    wanted = {
        item.callspec.params["backend"]
        for item in request.session.items
        if hasattr(item, "callspec")
        and "backend" in item.callspec.params
        and Path(str(item.fspath)).is_relative_to(here)
    }
    envs: dict[str, dict[str, str]] = {}
    for name in sorted(wanted):
        env = {"IDENTITY_MAIL": "outbox"}
        if name == "redis":
            redis_server: RedisServer = request.getfixturevalue("redis_server")
            env |= {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url}
        envs[name] = env
    with ThreadPoolExecutor(max_workers=max(1, len(envs))) as pool:
        futures = {name: pool.submit(start_hypercorn, env) for name, env in envs.items()}
        try:
            yield futures
        finally:
            for future in futures.values():
                try:
                    server = future.result()
                except Exception:  # noqa: S112 - it failed to start: nothing to stop, the test already said why
                    continue
                stop_server(server)


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest, starting_backends: dict[str, Future[Server]]) -> Backend:
    """The running service on one store (waits for its start)."""
    return Backend(request.param, starting_backends[request.param].result(timeout=60))


@dataclass
class Project:
    """A fresh project of its own per test (created through the internal API): no test sees another's data."""

    id: str
    display_name: str
    publishable_client_key: str
    secret_server_key: str
    super_secret_admin_key: str

    def headers(self, access_type: str) -> dict[str, str]:
        headers = {"x-service-access-type": access_type, "x-service-project-id": self.id}
        if access_type == "client":
            headers["x-service-publishable-client-key"] = self.publishable_client_key
        elif access_type == "server":
            headers["x-service-secret-server-key"] = self.secret_server_key
        else:
            headers["x-service-super-secret-admin-key"] = self.super_secret_admin_key
        return headers


def internal_headers() -> dict[str, str]:
    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY

    return {
        "x-service-access-type": "admin",
        "x-service-project-id": "internal",
        "x-service-super-secret-admin-key": DEV_INTERNAL_ADMIN_KEY,
    }


def create_project(backend: Backend, display_name: str) -> Project:
    with backend.http() as http:
        created = http.post(
            "/api/v1/internal/projects", headers=internal_headers(), json={"display_name": display_name}
        )
    assert created.status_code == 201, created.text
    body = created.json()
    return Project(
        body["id"],
        body["display_name"],
        body["publishable_client_key"],
        body["secret_server_key"],
        body["super_secret_admin_key"],
    )


@pytest.fixture
def project(backend: Backend) -> Project:
    return create_project(backend, f"Dashboard test {uuid.uuid4().hex[:8]}")


# ------------------------------------------------------------------------------------------------------------
# The browser


def _require_chromium() -> None:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        pytest.fail(
            f"Chromium for the dashboard's browser tests is missing ({', '.join(missing)} not found). "
            "Install Debian's packages with `scripts/setup --redis` (or `apt-get install chromium chromium-driver`). "
            "These tests fail rather than skip so that CI never silently stops testing the dashboard.",
            pytrace=False,
        )


@dataclass
class Browser:
    """One headless Chromium for the session, with every request it made and every console line it printed."""

    driver: webdriver.Chrome
    requests: list[dict[str, Any]] = field(default_factory=list)
    console: list[dict[str, Any]] = field(default_factory=list)
    #: keys the test handed to the page (besides the dev keys); none may appear in a URL or the console
    secrets: list[str] = field(default_factory=list)

    def drain_logs(self) -> None:
        """Move the browser's pending performance (network) and console entries into `requests` and `console`."""
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                params = message["params"]
                self.requests.append(
                    {
                        "url": params["request"]["url"],
                        "method": params["request"]["method"],
                        "document_url": params.get("documentURL", ""),
                    }
                )
        self.console.extend(self.driver.get_log("browser"))

    def reset_logs(self) -> None:
        self.drain_logs()
        self.requests.clear()
        self.console.clear()
        self.secrets.clear()

    # -- waiting and finding ---------------------------------------------------------------------------------

    def wait(self, timeout: float = WAIT_S) -> WebDriverWait[webdriver.Chrome]:
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05)

    def find(self, css: str, timeout: float = WAIT_S) -> WebElement:
        """The element matching `css`, once it is displayed."""
        try:
            return self.wait(timeout).until(expected_conditions.visibility_of_element_located((By.CSS_SELECTOR, css)))
        except TimeoutException:
            raise AssertionError(
                f"no visible element {css!r} on {self.driver.current_url}:\n{self.page_text()}"
            ) from None

    def find_all(self, css: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text_of(self, css: str, containing: str) -> str:
        """The text of `css` once it contains `containing` (the page answers asynchronously)."""
        try:
            self.wait().until(expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css), containing))
        except TimeoutException:
            shown = [element.text for element in self.find_all(css)]
            raise AssertionError(f"{css!r} never contained {containing!r}; it shows {shown!r}") from None
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def until(self, condition: Any, message: str) -> Any:
        try:
            return self.wait().until(lambda _driver: condition())
        except TimeoutException:
            raise AssertionError(f"{message}; the page shows:\n{self.page_text()}") from None

    def page_text(self) -> str:
        return str(self.driver.find_element(By.TAG_NAME, "body").text)

    def type_into(self, css: str, text: str) -> WebElement:
        element = self.find(css)
        element.clear()
        element.send_keys(text)
        return element

    def click(self, target: str | WebElement) -> None:
        """Click an element (a CSS selector, waited for until clickable), scrolled to the middle of the window."""
        if isinstance(target, str):
            element = self.wait().until(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, target)))
        else:
            element = target
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'nearest'});", element)
        element.click()

    # -- screenshots ------------------------------------------------------------------------------------------

    def screenshot(self, name: str, *, full_page: bool = True) -> Path:
        """Save the whole page, from its top, as screenshots/<name>.png (Chromium's own full-page capture); or just
        the window as it is (a modal dialog over the part of the page it belongs to)."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        if not full_page:
            assert self.driver.save_screenshot(str(path)), f"the screenshot {path} was not written"
            return path
        self.driver.execute_script("window.scrollTo(0, 0);")
        metrics = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        width = metrics["cssLayoutViewport"]["clientWidth"]
        height = max(metrics["cssContentSize"]["height"], metrics["cssLayoutViewport"]["clientHeight"])
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, 6000), "scale": 1}
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        if name in README_SCREENSHOTS and os.environ.get("IDENTITY_UPDATE_README_SCREENSHOTS") == "1":
            (SCREENSHOTS.parent / path.name).write_bytes(path.read_bytes())
        return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    _require_chromium()
    previous_offline = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download a driver or a browser
    profile = tempfile.mkdtemp(prefix="dashboard-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (*CHROME_ARGUMENTS, f"--user-data-dir={profile}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    except Exception:
        shutil.rmtree(profile, ignore_errors=True)
        raise
    driver.implicitly_wait(0)
    driver.set_page_load_timeout(WAIT_S)
    driver.set_script_timeout(WAIT_S)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        if previous_offline is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = previous_offline


@pytest.fixture
def page(starting_backends: dict[str, Future[Server]], browser: Browser, backend: Backend) -> Iterator[Browser]:
    """The browser on a fresh tab session of the dashboard (no key stored), checked after the test: every request
    went to the test server, no URL carried a key, nothing was logged with one, no CSP violation."""
    driver = browser.driver
    driver.get(f"{backend.base_url}/dashboard")
    driver.execute_script("window.sessionStorage.clear(); window.localStorage.clear();")
    browser.reset_logs()
    driver.get(f"{backend.base_url}/dashboard")
    yield browser
    check_traffic(browser, backend)


def known_secrets(browser: Browser) -> list[str]:
    """Every key the page may hold: the dev keys, the test's, and whatever is in sessionStorage now."""
    from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_KEYS

    stored = browser.driver.execute_script(
        "return Object.keys(sessionStorage).map((name) => sessionStorage.getItem(name));"
    )
    secrets = [DEV_KEYS.super_secret_admin_key, DEV_INTERNAL_ADMIN_KEY, DEV_KEYS.secret_server_key, *browser.secrets]
    for raw in stored:
        value = json.loads(raw)
        if isinstance(value, dict) and isinstance(value.get("adminKey"), str):
            secrets.append(value["adminKey"])
    return secrets


_ALLOWED_NON_NETWORK = ("data:", "blob:")


def check_traffic(browser: Browser, backend: Backend) -> None:
    """Every request the browser made went to the test server, and no key appeared in a URL or the console."""
    browser.drain_logs()
    secrets = known_secrets(browser)
    origin = urlsplit(backend.base_url)
    assert browser.requests, "the performance log recorded no request at all"
    # The resource timing entries of the page on screen, as a second witness (the performance log has them all).
    resources = browser.driver.execute_script(
        "return performance.getEntriesByType('resource').map((entry) => entry.name)"
        ".concat(performance.getEntriesByType('navigation').map((entry) => entry.name));"
    )
    urls = [request["url"] for request in browser.requests] + [request["document_url"] for request in browser.requests]
    urls += list(resources)
    for url in urls:
        if url.startswith(_ALLOWED_NON_NETWORK):
            continue
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == (origin.scheme, origin.netloc), f"a request left the test server: {url}"
        for secret in secrets:
            assert secret not in url, f"a key appeared in a URL the browser requested: {url}"
    for line in browser.console:
        message = str(line.get("message", ""))
        for secret in secrets:
            assert secret not in message, f"a key was written to the browser console: {message}"
        assert "Content Security Policy" not in message, f"the page broke its CSP: {message}"
        assert not re.search(r"Uncaught|SyntaxError|TypeError|ReferenceError", message), f"a script failed: {message}"
    assert browser.driver.execute_script("return window.localStorage.length") == 0, "a key was put in localStorage"
    assert browser.driver.execute_script("return document.cookie") == "", "the page set a cookie"


# ------------------------------------------------------------------------------------------------------------
# A browser app on another origin


class _AppServer(ThreadingHTTPServer):
    page: bytes
    #: path -> (content type, body): files served besides the page (a script bundle)
    files: dict[str, tuple[str, bytes]]


class _AppHandler(BaseHTTPRequestHandler):
    server: _AppServer

    def do_GET(self) -> None:
        content_type, body = self.server.files.get(
            urlsplit(self.path).path, ("text/html; charset=utf-8", self.server.page)
        )
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve_page(page: str, files: dict[str, tuple[str, bytes]] | None = None) -> Iterator[str]:
    """Serve `page` at every path (but those of `files`: path -> (content type, body)) from Python's http.server on a
    free loopback port (another origin than the service's); yields its origin, and stops the server afterwards."""
    server = _AppServer(("127.0.0.1", 0), _AppHandler)
    server.page = page.encode()
    server.files = dict(files or {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
