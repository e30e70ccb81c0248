"""The official SDK, unmodified, in a real browser page: `@stackframe/js` as installed from npm (`tests/sdk`, pinned
in its lock file) is bundled by esbuild into one script, served with an app page from another loopback origin
(`localhost`, the service being on `127.0.0.1`), and driven in headless Chromium against the service in compat mode
(a real Hypercorn), on the memory store and on Redis. Chromium enforces CORS itself: every call the SDK makes
(with its `X-Stack-*` headers and `ngrok-skip-browser-warning`) is preflighted.

The page goes through what a Stack Auth app does: password sign-up, sign-out, password sign-in, code sign-in (the
code read from the outbox), sign-in through the mock OAuth provider (the SDK's `signInWithOAuth`, the provider's
login page, the SDK's `callOAuthCallback` on the app's callback page), a profile update read back through the
server API, and a passkey registered (`user.registerPasskey()`) and signed in with (`app.signInWithPasskey()`),
answered by Chromium's virtual authenticator (DevTools `WebAuthn.addVirtualAuthenticator`).

(It lives with the dashboard's browser tests to share their Chromium.)"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dashboard.conftest import Browser, create_project, serve_page
from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import RedisServer

pytestmark = pytest.mark.e2e

SDK_DIR = Path(__file__).resolve().parents[1] / "sdk"
ESBUILD = SDK_DIR / "node_modules" / ".bin" / "esbuild"
PASSWORD = "correct horse battery staple 9"

#: The app: one page at every path. It loads the SDK bundle, makes a `StackClientApp` as the SDK's docs do (cookie
#: token store, the app's own handler URLs), shows who is signed in, and on its OAuth callback path lets the SDK finish
#: the sign-in. `window.actions` are the SDK calls the test makes (each answers JSON-able values).
APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>SDK app</title><script src="/stack.js"></script></head>
<body><p id="status">loading</p><p id="user"></p>
<script>
const app = new Stack.StackClientApp({
  projectId: "%(project_id)s",
  publishableClientKey: "%(client_key)s",
  baseUrl: "%(service)s",
  tokenStore: "cookie",
  redirectMethod: "window",
  urls: {
    handler: "/handler", signIn: "/sign-in", afterSignIn: "/after-sign-in", afterSignUp: "/after-sign-up",
    afterSignOut: "/signed-out", oauthCallback: "/oauth-callback", home: "/",
  },
});

function failure(result) {
  return result.status === "ok" ? "ok" : (result.error.errorCode || String(result.error));
}

async function show() {
  const user = await app.getUser();
  document.getElementById("user").textContent = user
    ? "signed in as " + user.primaryEmail + " (" + (user.displayName || "") + ") " + user.id
    : "signed out";
}

window.actions = {
  signUp: async (email, password) => failure(await app.signUpWithCredential({ email, password, noRedirect: true })),
  signIn: async (email, password) => failure(await app.signInWithCredential({ email, password, noRedirect: true })),
  sendCode: async (email) => failure(await app.sendMagicLinkEmail(email)),
  signInWithCode: async (code) => failure(await app.signInWithMagicLink(code, { noRedirect: true })),
  me: async () => {
    const user = await app.getUser();
    return user && { id: user.id, email: user.primaryEmail, name: user.displayName };
  },
  rename: async (displayName) => {
    const user = await app.getUser({ or: "throw" });
    await user.update({ displayName });
    return (await app.getUser()).displayName;
  },
  signOut: () => { app.signOut({ redirectUrl: location.origin + "/signed-out" }); return "started"; },
  signInWithOAuth: (provider) => { app.signInWithOAuth(provider); return "started"; },
  // passkeys: the browser's WebAuthn (Chromium's virtual authenticator in the test)
  registerPasskey: async () => failure(await (await app.getUser({ or: "throw" })).registerPasskey()),
  // it goes on to the after-sign-in page when it succeeds (as the SDK's OAuth sign-in does)
  signInWithPasskey: () => {
    app.signInWithPasskey().then((r) => { window.passkeyResult = failure(r); });
    return "started";
  },
  passkeyEnabled: async () => (await app.getUser({ or: "throw" })).passkeyAuthEnabled,
};

(async () => {
  if (location.pathname === "/oauth-callback") {
    document.getElementById("status").textContent = "callback";
    await app.callOAuthCallback();  // exchanges the code, then goes on to afterSignUp / afterSignIn
    return;
  }
  await show();
  document.getElementById("status").textContent = "ready";
})().catch((error) => { document.getElementById("status").textContent = "failed: " + error; });
</script></body></html>
"""


@pytest.fixture(scope="module")
def sdk_bundle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """`@stackframe/js` bundled for the browser by the esbuild that `npm ci` installed (nothing is fetched here)."""
    if not ESBUILD.is_file():
        pytest.fail(
            f"{ESBUILD} is missing: run `scripts/setup --redis` (it runs `npm ci` in tests/sdk). This test fails "
            "rather than skips so that CI never silently stops testing the SDK in a browser.",
            pytrace=False,
        )
    out = tmp_path_factory.mktemp("sdk-bundle") / "stack.js"
    subprocess.run(
        [
            str(ESBUILD),
            "browser/entry.mjs",
            "--bundle",
            "--format=iife",
            "--platform=browser",
            "--target=chrome120",
            f"--outfile={out}",
            "--log-level=warning",
        ],
        cwd=SDK_DIR,
        check=True,
        timeout=120,
    )
    return out.read_bytes()


@dataclass
class CompatService:
    """The service in compat mode on one store, and a project of its own with the mock provider as `github`."""

    server: Server
    project_id: str
    client_key: str
    server_key: str

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def server_headers(self) -> dict[str, str]:
        return {
            "x-stack-access-type": "server",
            "x-stack-project-id": self.project_id,
            "x-stack-secret-server-key": self.server_key,
        }


@pytest.fixture(
    scope="module", params=["memory", pytest.param("redis", marks=pytest.mark.redis)], ids=["memory", "redis"]
)
def service(request: pytest.FixtureRequest) -> Iterator[CompatService]:
    env = {"IDENTITY_COMPAT": "stack", "IDENTITY_MAIL": "outbox"}
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        env |= {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url}
    server = start_hypercorn(env)
    try:
        from tests.dashboard.conftest import Backend

        project = create_project(Backend(request.param, server), f"SDK in a browser {uuid.uuid4().hex[:8]}")
        with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
            patched = http.patch(
                "/api/v1/projects/current",
                headers=project.headers("admin"),
                json={
                    "config": {
                        "oauth_providers": [{"id": "github", "type": "github", "client_id": "MOCK"}],
                        "passkey_enabled": True,
                    }
                },
            )
        assert patched.status_code == 200, patched.text
        yield CompatService(server, project.id, project.publishable_client_key, project.secret_server_key)
    finally:
        stop_server(server)


@pytest.fixture
def app_origin(service: CompatService, sdk_bundle: bytes) -> Iterator[str]:
    """The app's page and the SDK bundle on another loopback origin: `localhost`, where the service is `127.0.0.1`
    (another host, so neither sees the other's cookies)."""
    values = {"service": service.base_url, "project_id": service.project_id, "client_key": service.client_key}
    files = {"/stack.js": ("text/javascript; charset=utf-8", sdk_bundle)}
    with serve_page(APP_PAGE % values, files) as origin:
        yield origin.replace("127.0.0.1", "localhost")


def _call(browser: Browser, action: str, *args: Any) -> Any:
    """Run `window.actions[action](...args)` in the page and return what it resolved to (a rejection fails)."""
    answer = browser.driver.execute_async_script(
        """const done = arguments[arguments.length - 1];
        const [name, args] = [arguments[0], arguments[1]];
        Promise.resolve().then(() => window.actions[name](...args)).then(
          (value) => done({ ok: true, value }), (error) => done({ ok: false, error: String(error) }));""",
        action,
        list(args),
    )
    assert answer["ok"], f"{action}{args} failed in the page: {answer['error']}"
    return answer["value"]


def _open(browser: Browser, url: str) -> None:
    browser.driver.get(url)
    browser.until(
        lambda: browser.driver.find_element("id", "status").text in ("ready",) or "failed" in browser.page_text(),
        f"the app page at {url} never became ready",
    )
    status = browser.driver.find_element("id", "status").text
    assert status == "ready", status


def _fresh_page(browser: Browser, app_origin: str) -> None:
    """The app's page with nobody signed in: the SDK's cookies of an earlier test removed (they are the app
    origin's), the browser's logs emptied."""
    browser.reset_logs()
    _open(browser, app_origin + "/signed-out")
    browser.driver.delete_all_cookies()
    _open(browser, app_origin)


def _code_from_outbox(service: CompatService, email: str) -> str:
    """The code of the newest sign-in mail to `email` (what the user types: the link's 45-character code)."""
    with httpx.Client(base_url=service.base_url, timeout=10.0) as http:
        outbox = http.get("/api/v1/emails/outbox", params={"to": email}, headers=service.server_headers())
    assert outbox.status_code == 200, outbox.text
    mails = outbox.json()["items"]
    assert mails, f"no mail to {email}"
    found = re.search(r"[?&]code=([0-9A-Za-z]{45})\b", mails[0]["text"])
    assert found, mails[0]["text"]
    return found.group(1)


def _no_cors_failure(browser: Browser) -> None:
    """Chromium logs a blocked cross-origin call on the console: none may have been."""
    browser.drain_logs()
    for line in browser.console:
        message = str(line.get("message", ""))
        assert "CORS" not in message, message
        assert "Access-Control" not in message, message


def test_the_unmodified_sdk_signs_up_out_and_in_from_a_browser_page(
    browser: Browser, service: CompatService, app_origin: str
) -> None:
    email = f"browser-sdk-{uuid.uuid4().hex[:8]}@example.com"
    browser.reset_logs()
    _open(browser, app_origin)
    assert browser.text_of("#user", "signed out") == "signed out"

    # Password sign-up: the SDK signs the new user in.
    assert _call(browser, "signUp", email, PASSWORD) == "ok"
    me = _call(browser, "me")
    assert me["email"] == email

    # A profile update from the page, read back through the server API.
    assert _call(browser, "rename", "Ada from the browser") == "Ada from the browser"
    with httpx.Client(base_url=service.base_url, timeout=10.0) as http:
        read = http.get(f"/api/v1/users/{me['id']}", headers=service.server_headers())
    assert read.status_code == 200, read.text
    assert read.json()["display_name"] == "Ada from the browser"

    # Sign-out: the SDK ends the session and goes to the app's after-sign-out page, where nobody is signed in.
    assert _call(browser, "signOut") == "started"
    browser.until(lambda: "/signed-out" in browser.driver.current_url, "sign-out never reached /signed-out")
    assert browser.text_of("#user", "signed out") == "signed out"
    with httpx.Client(base_url=service.base_url, timeout=10.0) as http:
        sessions = http.get("/api/v1/auth/sessions", params={"user_id": me["id"]}, headers=service.server_headers())
    assert sessions.status_code == 200, sessions.text
    assert sessions.json()["items"] == []

    # Password sign-in: the same user again.
    assert _call(browser, "signIn", email, "a wrong password 1") == "EMAIL_PASSWORD_MISMATCH"
    assert _call(browser, "signIn", email, PASSWORD) == "ok"
    assert _call(browser, "me") == {"id": me["id"], "email": email, "name": "Ada from the browser"}
    _open(browser, app_origin + "/after-sign-in")  # a page load reads the session from the SDK's cookies
    assert browser.text_of("#user", "signed in as").startswith(f"signed in as {email} (Ada from the browser)")
    _no_cors_failure(browser)


def test_the_unmodified_sdk_signs_in_with_a_mailed_code_from_a_browser_page(
    browser: Browser, service: CompatService, app_origin: str
) -> None:
    email = f"browser-code-{uuid.uuid4().hex[:8]}@example.com"
    _fresh_page(browser, app_origin)
    assert _call(browser, "sendCode", email) == "ok"
    code = _code_from_outbox(service, email)
    assert _call(browser, "signInWithCode", code) == "ok"
    assert _call(browser, "me")["email"] == email
    assert _call(browser, "signInWithCode", code) == "VERIFICATION_CODE_ALREADY_USED"  # a code signs in once
    _no_cors_failure(browser)


def test_the_unmodified_sdk_signs_in_through_the_mock_oauth_provider_from_a_browser_page(
    browser: Browser, service: CompatService, app_origin: str
) -> None:
    email = f"browser-oauth-{uuid.uuid4().hex[:8]}@example.com"
    _fresh_page(browser, app_origin)
    assert _call(browser, "signInWithOAuth", "github") == "started"

    # The provider's login page, on the service's origin.
    email_input = browser.find("input[type=email]")
    assert browser.driver.current_url.startswith(service.base_url + "/mock-oauth/")
    email_input.send_keys(email)
    browser.find_all("input[type=text]")[0].send_keys("Grace Hopper")
    browser.click("button[type=submit], input[type=submit]")

    # Back through the service's callback to the app's callback page; the SDK exchanged the code and went on to the
    # app's after-sign-up page, where the new user is signed in.
    browser.until(lambda: "/after-sign-up" in browser.driver.current_url, "the SDK never reached after-sign-up")
    assert browser.text_of("#user", "signed in as").startswith(f"signed in as {email} (Grace Hopper)")
    browser.drain_logs()
    visited = [r["url"] for r in browser.requests]
    assert any(url.startswith(app_origin + "/oauth-callback?") for url in visited), visited
    _no_cors_failure(browser)


def test_the_unmodified_sdk_registers_a_passkey_and_signs_in_with_it_from_a_browser_page(
    browser: Browser, service: CompatService, app_origin: str
) -> None:
    # Chromium's own WebAuthn, answered by its virtual authenticator (DevTools `WebAuthn.addVirtualAuthenticator`):
    # a platform authenticator holding discoverable credentials, user verified, presence simulated.
    email = f"browser-passkey-{uuid.uuid4().hex[:8]}@example.com"
    _fresh_page(browser, app_origin)
    driver = browser.driver
    driver.execute_cdp_cmd("WebAuthn.enable", {"enableUI": False})
    options = {
        "protocol": "ctap2",
        "transport": "internal",
        "hasResidentKey": True,
        "hasUserVerification": True,
        "isUserVerified": True,
        "automaticPresenceSimulation": True,
    }
    authenticator = driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": options})["authenticatorId"]
    try:
        assert _call(browser, "signUp", email, PASSWORD) == "ok"
        user_id = _call(browser, "me")["id"]
        assert _call(browser, "registerPasskey") == "ok"
        assert _call(browser, "passkeyEnabled") is True
        (credential,) = driver.execute_cdp_cmd("WebAuthn.getCredentials", {"authenticatorId": authenticator})[
            "credentials"
        ]
        assert credential["rpId"] == "localhost"

        assert _call(browser, "signOut") == "started"
        browser.until(lambda: "/signed-out" in driver.current_url, "sign-out never reached /signed-out")
        _open(browser, app_origin + "/signed-out")
        assert browser.text_of("#user", "signed out") == "signed out"
        assert _call(browser, "signInWithPasskey") == "started"
        browser.until(
            lambda: "/after-sign-in" in driver.current_url, "the passkey sign-in never reached /after-sign-in"
        )
        _open(browser, driver.current_url)
        assert _call(browser, "me")["id"] == user_id
        (used,) = driver.execute_cdp_cmd("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
        with httpx.Client(base_url=service.base_url, timeout=10.0) as http:
            listed = http.get(f"/api/v1/users/{user_id}/passkeys", headers=service.server_headers()).json()["items"]
        assert [item["rp_id"] for item in listed] == ["localhost"]
        assert listed[0]["sign_count"] == used["signCount"]
        _no_cors_failure(browser)
    finally:
        driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator})
        driver.execute_cdp_cmd("WebAuthn.disable", {})
