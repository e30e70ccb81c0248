"""The whole OAuth sign-in in real headless Chromium, as a browser app lives it: a page on one loopback origin starts
sign-in the way the SDK's `signInWithOAuth` does (JSON-mode authorize, PKCE S256 made by WebCrypto, then a
navigation), the service's mock provider shows its login page on the service's origin, the test fills and submits
it, the browser comes back through the service's callback to the page with the code, and the page exchanges the code
(form-encoded, as the SDK's `callOAuthCallback`) and reads the signed-in user. On the memory store and on Redis.

(It lives with the dashboard's browser tests to share their Chromium.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.dashboard.conftest import Backend, Browser, Project, serve_page

pytestmark = pytest.mark.e2e

#: The app: one page that starts sign-in, and handles the callback when it is loaded with `code` and `state`.
APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>OAuth app</title></head>
<body><p id="status">ready</p><p id="user"></p>
<script>
const SERVICE = "%(service)s";
const PROJECT = "%(project_id)s";
const CLIENT_KEY = "%(client_key)s";
const CALLBACK = location.origin + "/callback";

function b64url(bytes) {
  const text = btoa(String.fromCharCode(...new Uint8Array(bytes)));
  return text.replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
}

async function start(provider) {
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem("verifier", verifier);
  sessionStorage.setItem("state", state);
  const query = new URLSearchParams({
    client_id: PROJECT, client_secret: CLIENT_KEY, redirect_uri: CALLBACK, scope: "legacy", state,
    grant_type: "authorization_code", code_challenge: challenge, code_challenge_method: "S256",
    response_type: "code", type: "authenticate", error_redirect_url: location.origin + "/error",
    stack_response_mode: "json",
  });
  const answer = await fetch(SERVICE + "/api/v1/auth/oauth/authorize/" + provider + "?" + query);
  const body = await answer.json();
  location.href = body.location;
}

async function finish() {
  const params = new URLSearchParams(location.search);
  if (params.get("state") !== sessionStorage.getItem("state")) throw new Error("state mismatch");
  const form = new URLSearchParams({
    grant_type: "authorization_code", code: params.get("code"), redirect_uri: CALLBACK,
    code_verifier: sessionStorage.getItem("verifier"), client_id: PROJECT, client_secret: CLIENT_KEY,
  });
  const tokens = await (await fetch(SERVICE + "/api/v1/auth/oauth/token", { method: "POST", body: form })).json();
  const me = await fetch(SERVICE + "/api/v1/users/me", { headers: {
    "x-service-access-type": "client", "x-service-project-id": PROJECT,
    "x-service-publishable-client-key": CLIENT_KEY, "x-service-access-token": tokens.access_token,
  }});
  const user = await me.json();
  const who = user.primary_email + " (" + user.display_name + ")";
  document.getElementById("user").textContent = "signed in as " + who + (tokens.is_new_user ? " new" : " returning");
  document.getElementById("status").textContent = "done";
}

window.app = { start };
if (location.pathname === "/callback") {
  finish().catch((error) => { document.getElementById("status").textContent = "failed: " + error; });
}
</script></body></html>
"""


@pytest.fixture
def app_origin(backend: Backend, project: Project) -> Iterator[str]:
    """The app's page, served by Python's http.server on another loopback port (another origin)."""
    with backend.http() as http:
        patched = http.patch(
            "/api/v1/projects/current",
            headers=project.headers("admin"),
            json={"config": {"oauth_providers": [{"id": "github", "type": "github", "client_id": "MOCK"}]}},
        )
    assert patched.status_code == 200, patched.text
    values = {"service": backend.base_url, "project_id": project.id, "client_key": project.publishable_client_key}
    with serve_page(APP_PAGE % values) as origin:
        yield origin


def test_a_browser_app_signs_in_through_the_mock_providers_login_page(
    browser: Browser, backend: Backend, app_origin: str
) -> None:
    assert app_origin.rsplit(":", 1)[1] != backend.base_url.rsplit(":", 1)[1]  # two origins
    email = f"browser-{uuid.uuid4().hex[:8]}@example.com"
    browser.reset_logs()
    browser.driver.get(app_origin)
    browser.driver.execute_script("window.app.start('github')")

    # The provider's login page, on the service's origin.
    email_input = browser.find("input[type=email]")
    assert browser.driver.current_url.startswith(backend.base_url + "/mock-oauth/")
    email_input.send_keys(email)
    name_inputs = browser.find_all("input[type=text]")
    assert name_inputs, "the login page has no display-name field"
    name_inputs[0].send_keys("Grace Hopper")
    browser.click("button[type=submit], input[type=submit]")

    # Back on the app, through the service's callback, with the code: the page exchanged it and read the user.
    shown = browser.text_of("#user", "signed in as")
    assert shown == f"signed in as {email} (Grace Hopper) new"
    assert browser.driver.current_url.startswith(app_origin + "/callback?")
    browser.drain_logs()
    visited = [r["url"] for r in browser.requests if r["method"] in ("GET", "POST")]
    assert any(url.startswith(backend.base_url + "/api/v1/auth/oauth/callback/github?") for url in visited), visited
    browser.reset_logs()
