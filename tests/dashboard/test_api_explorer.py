"""The API explorer and dev mode's home page in headless Chromium, served by the package as a user gets it: the wheel
installed outside the checkout (tests/installed_wheel.py), `hypercorn asgi_app:app` started from an empty directory
on a port the system picks (`--bind 127.0.0.1:0`), whose start-up log names the dashboard's and the explorer's URLs
with the real port. The page renders the operations of our OpenAPI document, "Try it out" reaches the API, and every
request the browser makes stays on the service's origin (no CDN: Swagger UI comes with the package)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.dashboard.conftest import Browser
from tests.installed_wheel import outside_environment
from tests.processes import stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

#: URLs that are no network request: inline data, and the browser's own pages (its start page, loaded with the
#: session, may still be logging).
_NOT_NETWORK = ("data:", "blob:", "chrome:", "chrome-untrusted:", "about:")
_DASHBOARD_LINE = re.compile(r"dashboard: (http://127\.0\.0\.1:(\d+))/dashboard/$")


@dataclass
class InstalledService:
    """The installed package's Hypercorn, and what it wrote to stderr."""

    base_url: str
    process: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def installed_service(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InstalledService]:
    """`hypercorn asgi_app:app --bind 127.0.0.1:0` of the installed wheel (dev mode: no IDENTITY_* variable set),
    from an empty directory. Its URL is read from its own start-up log: the port is the one the system picked."""
    empty = tmp_path_factory.mktemp("empty")
    process = subprocess.Popen(
        [str(installed / "hypercorn"), "asgi_app:app", "--bind", "127.0.0.1:0"],
        cwd=empty,
        env=outside_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    lines: list[str] = []
    announced = threading.Event()
    found: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for raw in process.stderr:  # drained while the server runs: a full pipe would stall it
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            match = _DASHBOARD_LINE.search(line)
            if match and not found:
                found.append(match.group(1))
                announced.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not announced.wait(0.05):
            assert process.poll() is None, "\n".join(lines)
            assert time.monotonic() < deadline, "no dashboard URL in the start-up log within 60 s:\n" + "\n".join(lines)
        service = InstalledService(found[0], process, lines)
        while True:
            try:
                if httpx.get(f"{service.base_url}/api/v1", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the installed service did not answer within 60 s"
            time.sleep(0.05)
        yield service
    finally:
        stop(process)
        reader.join(timeout=10)
        if process.stderr:
            process.stderr.close()


def network(entries: list[dict[str, Any]]) -> tuple[dict[str, int], list[str], list[str]]:
    """From Chromium's performance log: each response's URL and status, each request sent that failed to load, and
    every URL requested."""
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
        elif message["method"] == "Network.loadingFailed" and params["requestId"] in urls:
            # (one whose start came before the log was read last is the browser's own, from its start-up: every
            # request sent while the test's pages are open is in `urls`, checked by the caller)
            failed.append(f"{urls[params['requestId']]}: {params.get('errorText')}")
    return statuses, failed, list(urls.values())


def check_same_origin_and_quiet(
    browser: Browser, base_url: str, under: str, *, ignore: tuple[str, ...] = ()
) -> dict[str, int]:
    """Every request of the page went to `base_url`'s origin, under `under`, and loaded; the console shows no CSP
    violation and no error (but those about the URLs in `ignore`). The responses' statuses, by URL."""
    driver = browser.driver
    statuses, failed, requested = network(driver.get_log("performance"))
    resources = driver.execute_script("return performance.getEntriesByType('resource').map((entry) => entry.name);")
    origin = urlsplit(base_url)
    for url in [*requested, *resources]:
        if url.startswith(_NOT_NETWORK):
            continue
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == (origin.scheme, origin.netloc), f"a request left the service: {url}"
        assert url.startswith(under), f"a request outside {under}: {url}"
    assert failed == []
    console = driver.get_log("browser")
    for line in console:
        message = str(line.get("message", ""))
        assert "Content Security Policy" not in message, f"the page broke its CSP: {message}"
        if not message.startswith(ignore):
            assert line["level"] != "SEVERE", f"the console shows an error: {message}"
    return statuses


def open_explorer_and_try_the_welcome_endpoint(browser: Browser, service_url: str) -> None:
    """On the explorer (already loading): our operations are rendered; "Try it out" on GET /api/v1 answers 200
    from this service (under its mount point, if any), with the welcome text."""
    welcome = "#operations-default-get_meta_welcome"
    # Swagger UI renders the whole document (some 120 operations) before the first shows: on a loaded machine,
    # longer than a dashboard page takes
    operation = browser.find(welcome, timeout=30.0)
    paths = [element.text for element in browser.find_all(".opblock-summary-path")]
    assert "/api/v1/users" in paths, paths
    assert "/api/v1/openapi.json" in paths, paths
    browser.click(operation.find_element("css selector", ".opblock-summary-control"))
    browser.click(f"{welcome} .try-out__btn")
    browser.click(f"{welcome} .execute")
    status = browser.text_of(f"{welcome} .live-responses-table tbody .response-col_status", "200")
    assert status.startswith("200")
    body = browser.text_of(f"{welcome} .live-responses-table", "Welcome")
    assert "Welcome to the identity service REST API" in body
    url = browser.text_of(f"{welcome} .request-url", "/api/v1")
    assert f"{service_url}/api/v1" in url


def test_the_start_up_log_names_the_dashboard_and_the_explorer_at_the_real_address(
    installed_service: InstalledService,
) -> None:
    base = installed_service.base_url
    assert not base.endswith(":0")
    lines = installed_service.lines
    assert any(line.endswith(f"dashboard: {base}/dashboard/") for line in lines), lines
    assert any(
        line.endswith(f"API explorer: {base}/explorer/ (OpenAPI document: {base}/api/v1/openapi.json)")
        for line in lines
    ), lines


def test_the_explorer_of_the_installed_wheel_renders_our_api_from_its_own_files(
    installed_service: InstalledService, browser: Browser
) -> None:
    base = installed_service.base_url
    driver = browser.driver
    browser.reset_logs()
    driver.get_log("performance")

    driver.get(f"{base}/explorer")  # redirected to /explorer/: the page names its files relatively
    open_explorer_and_try_the_welcome_endpoint(browser, base)
    assert driver.current_url.startswith(f"{base}/explorer/")
    browser.screenshot("api-explorer")

    statuses = check_same_origin_and_quiet(browser, base, base + "/")
    for name in ("", "init.js", "explorer.css", "swagger-ui/swagger-ui-bundle.js", "swagger-ui/swagger-ui.css"):
        assert statuses[f"{base}/explorer/{name}"] == 200, statuses
    assert statuses[f"{base}/api/v1/openapi.json"] == 200
    assert statuses[f"{base}/api/v1"] == 200  # "Try it out"
    assert driver.execute_script("return window.localStorage.length") == 0
    assert driver.execute_script("return document.cookie") == ""


def test_the_dev_home_page_links_the_dashboard_the_explorer_and_the_document(
    installed_service: InstalledService, browser: Browser
) -> None:
    base = installed_service.base_url
    driver = browser.driver
    browser.reset_logs()
    driver.get_log("performance")

    driver.get(f"{base}/")
    assert browser.find("h1").text == "Identity service"
    links = {element.get_attribute("id"): element.get_attribute("href") for element in browser.find_all("a")}
    assert links == {
        "dashboard": f"{base}/dashboard/",
        "explorer": f"{base}/explorer/",
        "openapi": f"{base}/api/v1/openapi.json",
    }
    browser.click("#dashboard")
    browser.find("#connect-project-id")  # the dashboard's sign-in form
    driver.back()
    browser.click("#openapi")
    assert '"openapi":' in browser.page_text() or '"openapi": ' in driver.page_source
    driver.back()
    browser.click("#explorer")
    assert browser.find("#operations-default-get_meta_welcome")
    # The raw JSON document names no icon, so the browser asks for /favicon.ico there (a 404, as always).
    check_same_origin_and_quiet(browser, base, base + "/", ignore=(f"{base}/favicon.ico ",))

    # An API client asking for `/` gets what it always got: the core's 404.
    answer = httpx.get(f"{base}/", headers={"accept": "application/json"}, timeout=10)
    assert (answer.status_code, answer.json()["code"]) == (404, "ROUTE_NOT_FOUND")
