"""A browser app on another origin, in real headless Chromium: a page served from one loopback port calls the
service (a real Hypercorn) on another, so every call with our headers is a cross-origin request with a preflight,
and Chromium itself enforces CORS. It signs in with a code, reads the user and updates it, and reads the
known-error and request-id headers the SDK needs.

(It lives with the dashboard's browser tests to share their Chromium; the dashboard itself is same-origin.)"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from identity_hosting.settings import DEV_KEYS, DEV_PROJECT_ID
from tests.dashboard.conftest import Browser, serve_page
from tests.e2e.conftest import Server, start_hypercorn, stop_server

pytestmark = pytest.mark.e2e

EMAIL = "cross-origin@example.com"

#: The app: plain fetch calls with the service's headers (each one preflighted: they are not CORS-safelisted).
APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Cross-origin app</title></head>
<body><p id="status">ready</p>
<script>
const SERVICE = "%(service)s";
const CLIENT = {
  "x-service-access-type": "client",
  "x-service-project-id": "%(project_id)s",
  "x-service-publishable-client-key": "%(client_key)s",
};
let accessToken = null;

async function call(method, path, body) {
  const headers = { ...CLIENT };
  if (accessToken) headers["x-service-access-token"] = accessToken;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(SERVICE + "/api/v1" + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return {
    status: response.status,
    body: await response.json(),
    knownError: response.headers.get("x-service-known-error"),
    requestId: response.headers.get("x-service-request-id"),
  };
}

window.app = {
  sendCode: (email) =>
    call("POST", "/auth/otp/send-sign-in-code", { email, callback_url: location.origin + "/callback" }),
  signIn: async (code) => {
    const answer = await call("POST", "/auth/otp/sign-in", { code });
    if (answer.status === 200) accessToken = answer.body.access_token;
    return answer;
  },
  me: () => call("GET", "/users/me"),
  rename: (displayName) => call("PATCH", "/users/me", { display_name: displayName }),
};
</script></body></html>
"""


@pytest.fixture(scope="module")
def service() -> Iterator[Server]:
    """The service on its embedded defaults (memory store, dev project, outbox)."""
    running = start_hypercorn({"IDENTITY_MAIL": "outbox"})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def app_origin(service: Server) -> Iterator[str]:
    """The app's page, served by Python's http.server on another loopback port (another origin)."""
    values = {
        "service": service.base_url,
        "project_id": DEV_PROJECT_ID,
        "client_key": DEV_KEYS.publishable_client_key,
    }
    with serve_page(APP_PAGE % values) as origin:
        yield origin


def _run(browser: Browser, call: str, *args: Any) -> dict[str, Any]:
    """Await `window.app.<call>(...args)` in the page; a failed fetch (CORS refused) comes back as `error`."""
    script = (
        "const done = arguments[arguments.length - 1];"
        f"window.app.{call}(...Array.from(arguments).slice(0, -1))"
        ".then(done, (error) => done({error: String(error)}));"
    )
    result: dict[str, Any] = browser.driver.execute_async_script(script, *args)
    if "error" in result:
        console = [entry["message"] for entry in browser.driver.get_log("browser")]
        raise AssertionError(f"{call} failed in the browser: {result['error']}; console: {console}")
    return result


def _newest_code(service: Server) -> str:
    server_headers = {
        "x-service-access-type": "server",
        "x-service-project-id": DEV_PROJECT_ID,
        "x-service-secret-server-key": DEV_KEYS.secret_server_key,
    }
    outbox = httpx.get(f"{service.base_url}/api/v1/emails/outbox", headers=server_headers, params={"to": EMAIL})
    assert outbox.status_code == 200, outbox.text
    found = re.search(r"Your code is ([0-9A-Z]{6})$", outbox.json()["items"][0]["subject"])
    assert found is not None
    return found.group(1)


def test_cross_origin_browser_app_signs_in_reads_and_updates(
    browser: Browser, service: Server, app_origin: str
) -> None:
    assert app_origin.rsplit(":", 1)[1] != service.base_url.rsplit(":", 1)[1]  # two origins
    browser.reset_logs()
    browser.driver.get(app_origin)
    assert browser.driver.execute_script("return location.origin") == app_origin

    sent = _run(browser, "sendCode", EMAIL)
    assert sent["status"] == 200, sent
    assert sent["requestId"], "the request id header is not exposed to scripts"

    wrong = _run(browser, "signIn", "AAAAAA" + sent["body"]["nonce"])
    assert wrong["status"] >= 400
    assert wrong["knownError"] == wrong["body"]["code"], "the known-error header is not exposed to scripts"

    signed_in = _run(browser, "signIn", _newest_code(service) + sent["body"]["nonce"])
    assert signed_in["status"] == 200, signed_in
    assert signed_in["body"]["is_new_user"] is True

    me = _run(browser, "me")
    assert me["status"] == 200, me
    assert me["body"]["primary_email"] == EMAIL

    renamed = _run(browser, "rename", "Ada from another origin")
    assert renamed["status"] == 200, renamed
    assert renamed["body"]["display_name"] == "Ada from another origin"
    assert _run(browser, "me")["body"]["display_name"] == "Ada from another origin"
    browser.reset_logs()  # nothing of this page's traffic is left for the dashboard's checks
