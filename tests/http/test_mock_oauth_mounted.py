"""The mock OAuth provider served in process when the service is mounted under a prefix: a user's Flask app with the
service at /auth (WSGI `SCRIPT_NAME`, werkzeug's DispatcherMiddleware) and a Starlette app with it at /auth (ASGI
`root_path`), no base URL configured. The whole redirect flow runs through the user's app: the provider's endpoints
are under the service's own public URL (`http://shop.test/auth/mock-oauth`), and the host's provider client hands
its token, userinfo and JWKS requests to the service in process, with the path as the user's app would hand it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from asgi_app import IdentityASGI
from backends.memory import AsyncMemoryStore, MemoryStore
from identity_hosting.settings import Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import arun, run
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import update_project
from identity_proto.records import OAuthProviderConfig
from tests.downstream.mounted_apps import MOUNT_POINT, create_flask_app, create_starlette_app
from tests.support import KEYS, PROJECT_ID

ORIGIN = "http://shop.test"
SERVICE = ORIGIN + MOUNT_POINT
APP = "http://localhost:3000/oauth-callback"
VERIFIER = base64.urlsafe_b64encode(b"the shop's own verifier, 32 bytes").rstrip(b"=").decode()
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
PROVIDERS = ProjectConfigChanges.of(
    [("oauth_providers", (OAuthProviderConfig(id="github", type="github", client_id="MOCK"),))]
)
AUTHORIZE = httpx.URL(
    f"{SERVICE}/api/v1/auth/oauth/authorize/github",
    params={
        "client_id": PROJECT_ID,
        "client_secret": KEYS.publishable_client_key,
        "redirect_uri": APP,
        "scope": "legacy",
        "state": "shop-state",
        "grant_type": "authorization_code",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "response_type": "code",
    },
)
EXCHANGE = {
    "grant_type": "authorization_code",
    "client_id": PROJECT_ID,
    "client_secret": KEYS.publishable_client_key,
    "redirect_uri": APP,
    "code_verifier": VERIFIER,
}


class LoginForm(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.hidden: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.action = named["action"]
        elif tag == "input" and named.get("type") == "hidden":
            self.hidden[named["name"]] = named["value"]


def login(page: httpx.Response) -> tuple[str, dict[str, Any]]:
    form = LoginForm()
    form.feed(page.text)
    return form.action, {**form.hidden, "email": "ada@example.com", "display_name": "Ada", "action": "sign_in"}


def test_the_flow_runs_under_a_wsgi_mount_point() -> None:
    store = MemoryStore()
    identity = IdentityWSGI(Settings(), store=store)
    identity.startup()
    run(update_project(PROJECT_ID, config=PROVIDERS), store)
    with httpx.Client(transport=httpx.WSGITransport(app=create_flask_app(identity)), base_url=ORIGIN) as browser:
        to_provider = browser.get(AUTHORIZE)
        assert to_provider.status_code == 307, to_provider.text
        assert to_provider.headers["location"].startswith(f"{SERVICE}/mock-oauth/authorize?")
        page = browser.get(to_provider.headers["location"])
        action, fields = login(page)
        assert action == f"{SERVICE}/mock-oauth/authorize"
        back = browser.post(action, data=fields)
        assert back.headers["location"].startswith(f"{SERVICE}/api/v1/auth/oauth/callback/github?")
        to_app = browser.get(back.headers["location"])
        assert to_app.status_code == 303, to_app.headers.get("location")
        code = parse_qs(urlsplit(to_app.headers["location"]).query)["code"][0]
        tokens = browser.post(f"{SERVICE}/api/v1/auth/oauth/token", data={**EXCHANGE, "code": code})
    identity.close()
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["is_new_user"] is True


def test_the_flow_runs_under_an_asgi_mount_point() -> None:
    store = MemoryStore()
    identity = IdentityASGI(Settings(), store=AsyncMemoryStore(store))

    async def flow() -> httpx.Response:
        await identity.startup()
        await arun(update_project(PROJECT_ID, config=PROVIDERS), AsyncMemoryStore(store))
        transport = httpx.ASGITransport(app=create_starlette_app(identity))
        async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as browser:
            to_provider = await browser.get(AUTHORIZE)
            assert to_provider.status_code == 307, to_provider.text
            page = await browser.get(to_provider.headers["location"])
            action, fields = login(page)
            assert action == f"{SERVICE}/mock-oauth/authorize"
            back = await browser.post(action, data=fields)
            to_app = await browser.get(back.headers["location"])
            assert to_app.status_code == 303, to_app.headers.get("location")
            code = parse_qs(urlsplit(to_app.headers["location"]).query)["code"][0]
            tokens = await browser.post(f"{SERVICE}/api/v1/auth/oauth/token", data={**EXCHANGE, "code": code})
        await identity.shutdown()
        return tokens

    tokens = asyncio.run(flow())
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["is_new_user"] is True
