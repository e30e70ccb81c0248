"""OAuth sign-in in the in-process fake, as a user's test suite meets it: one call configures a provider served by
the fake's mock (`use_mock_oauth`), one call runs the whole redirect flow (`oauth_sign_in`), and the backend under
test verifies the tokens it gives with the fake's JWKS. The same flow also runs with the suite's own httpx clients
(sync, following redirects and keeping cookies; and async, on the ASGI host)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from identity_testing import TestProject
from identity_testing.fake import OAuthFlowError

ALLOW = {"x-service-allow-anonymous-user": "true"}
APP = "http://localhost:3000/oauth-callback"


def me(project: TestProject, access_token: str, **headers: str) -> dict[str, object]:
    with project.client("client", access_token=access_token) as http:
        answer = http.get("/api/v1/users/me", headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def pkce() -> tuple[str, str]:
    verifier = base64.urlsafe_b64encode(b"a verifier of the app under test, 32b").rstrip(b"=").decode()
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class LoginForm(HTMLParser):
    """What a browser reads of the mock's login page: the form's action and its hidden inputs."""

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


def test_a_new_user_signs_up_with_the_mock_github(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    tokens = identity_project.oauth_sign_in("github", email="ada@example.com", display_name="Ada Lovelace")
    assert tokens["is_new_user"] is True
    assert tokens["token_type"] == "Bearer"
    user = me(identity_project, tokens["access_token"])
    assert (user["primary_email"], user["primary_email_verified"], user["display_name"]) == (
        "ada@example.com",
        True,
        "Ada Lovelace",
    )
    assert user["oauth_providers"] == [{"id": "github", "account_id": "ada@example.com", "email": "ada@example.com"}]


def test_a_returning_user_signs_in_as_the_same_user(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    first = identity_project.oauth_sign_in("github", email="ada@example.com")
    again = identity_project.oauth_sign_in("github", email="ada@example.com")
    assert (first["is_new_user"], again["is_new_user"]) == (True, False)
    assert me(identity_project, again["access_token"])["id"] == me(identity_project, first["access_token"])["id"]
    other = identity_project.oauth_sign_in("github", email="bob@example.com")
    assert other["is_new_user"] is True
    assert me(identity_project, other["access_token"])["id"] != me(identity_project, first["access_token"])["id"]


def test_a_backend_verifies_the_oauth_users_token_with_the_fakes_jwks(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("google")
    token = identity_project.oauth_sign_in("google", email="grace@example.com")["access_token"]
    claims = jwt.decode(
        token,
        identity_project.jwk_client().get_signing_key_from_jwt(token),
        algorithms=["ES256"],
        audience=identity_project.audience,
        issuer=identity_project.issuer,
    )
    assert (claims["email"], claims["email_verified"], claims["is_anonymous"]) == ("grace@example.com", True, False)


def test_an_anonymous_user_is_upgraded_in_place(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("mock")
    anonymous = identity_project.sign_up_anonymous()
    tokens = identity_project.oauth_sign_in("mock", email="ada@example.com", access_token=anonymous["access_token"])
    assert tokens["is_new_user"] is True
    user = me(identity_project, tokens["access_token"])
    assert (user["id"], user["is_anonymous"], user["primary_email"]) == (
        anonymous["user_id"],
        False,
        "ada@example.com",
    )


def test_a_provider_account_is_linked_to_the_signed_in_user(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    ada = identity_project.create_user("ada@example.com")
    tokens = identity_project.sign_in(ada["id"])
    linked = identity_project.oauth_sign_in(
        "github", email="ada-at-work@example.com", access_token=tokens["access_token"], link=True
    )
    assert linked["is_new_user"] is False
    user = me(identity_project, linked["access_token"])
    assert (user["id"], user["primary_email"]) == (ada["id"], "ada@example.com")
    assert [p["account_id"] for p in user["oauth_providers"]] == ["ada-at-work@example.com"]  # type: ignore[attr-defined]


def test_an_error_redirect_is_raised_with_its_error_code(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    with identity_project.client("client") as http:  # the mock's test hook: the next code exchange is refused
        assert http.post("/mock-oauth/hooks/fail-next", json={"kind": "access_denied"}).status_code == 200
    with pytest.raises(OAuthFlowError) as refused:
        identity_project.oauth_sign_in("github", email="ada@example.com")
    assert refused.value.error_code == "OAUTH_PROVIDER_ACCESS_DENIED"
    assert refused.value.step == "the callback"
    assert refused.value.message


def test_an_unknown_provider_is_raised_at_authorize(identity_project: TestProject) -> None:
    with pytest.raises(OAuthFlowError) as refused:
        identity_project.oauth_sign_in("github", email="ada@example.com")
    assert (refused.value.step, refused.value.status) == ("authorize", 400)
    assert refused.value.error_code == "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED"


def test_an_httpx_client_following_redirects_runs_the_same_flow(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    verifier, challenge = pkce()
    url = identity_project.oauth_authorize_url("github", code_challenge=challenge, state="s-42")
    with identity_project.fake.client() as browser:
        browser.follow_redirects = True
        page = browser.get(url)
        assert page.status_code == 200
        form = LoginForm()
        form.feed(page.text)
        landed = browser.post(form.action, data={**form.hidden, "email": "ada@example.com", "action": "sign_in"})
    # The app's redirect URI (not served by the fake): the code and the app's state are in its URL.
    assert str(landed.url).startswith(APP)
    query = parse_qs(urlsplit(str(landed.url)).query)
    assert query["state"] == ["s-42"]
    with identity_project.client("client") as app:
        tokens = app.post(
            "/api/v1/auth/oauth/token",
            data={
                "grant_type": "authorization_code",
                "client_id": identity_project.id,
                "client_secret": identity_project.keys.publishable_client_key,
                "code": query["code"][0],
                "redirect_uri": APP,
                "code_verifier": verifier,
            },
        )
    assert tokens.status_code == 200, tokens.text
    assert me(identity_project, tokens.json()["access_token"])["primary_email"] == "ada@example.com"


def test_the_async_client_runs_the_flow_on_the_asgi_host(identity_project: TestProject) -> None:
    identity_project.use_mock_oauth("github")
    verifier, challenge = pkce()
    url = identity_project.oauth_authorize_url("github", code_challenge=challenge)

    async def flow() -> httpx.Response:
        async with identity_project.fake.async_client() as browser:
            to_provider = await browser.get(url)
            assert to_provider.status_code == 307
            page = await browser.get(to_provider.headers["location"])
            form = LoginForm()
            form.feed(page.text)
            fields = {**form.hidden, "email": "ada@example.com", "action": "sign_in"}
            back = await browser.post(form.action, data=fields)
            assert back.status_code == 303
            # The callback exchanges the mock's code from the ASGI host: its provider client, in process.
            to_app = await browser.get(back.headers["location"])
            assert to_app.status_code == 303, to_app.text
            code = parse_qs(urlsplit(to_app.headers["location"]).query)["code"][0]
            return await browser.post(
                "/api/v1/auth/oauth/token",
                data={
                    "grant_type": "authorization_code",
                    "client_id": identity_project.id,
                    "client_secret": identity_project.keys.publishable_client_key,
                    "code": code,
                    "redirect_uri": APP,
                    "code_verifier": verifier,
                },
            )

    tokens = asyncio.run(flow())
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["is_new_user"] is True
    assert me(identity_project, tokens.json()["access_token"])["primary_email"] == "ada@example.com"
