"""OAuth sign-in over real HTTP (reference part 2 §7), against a real Hypercorn on the memory store and on Redis,
with the service's own mock provider playing GitHub. Each request is the one the official SDK (§7.8) or a browser
sends: the SDK's authorize query in JSON mode with no service headers, the mock's login form, the callback, and the
form-encoded token exchange with the PKCE verifier.

Each test works in a project of its own (made through the internal project) whose provider `github` is served by
the mock (`client_id: "MOCK"`, dev mode)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import uuid
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, quote, urljoin, urlsplit

import httpx
import jwt
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.support import internal_headers

pytestmark = pytest.mark.e2e

#: Where the app's OAuth callback page is (localhost is trusted by a new project's default config).
APP_CALLBACK = "http://localhost:3000/handler/oauth-callback"
APP_ERROR = "http://localhost:3000/handler/error"
SENTINEL = "__stack_public_client__"


@pytest.fixture
def web(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=15.0) as client:
        yield client


class _Form(HTMLParser):
    """The first form of a page: its action and its inputs (name -> value; the e-mail input's name noted)."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.inputs: dict[str, str] = {}
        self.email_field: str | None = None
        self.name_field: str | None = None
        self._in_form = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action, self._in_form = found.get("action", ""), True
        elif tag == "input" and self._in_form and found.get("name"):
            name = found["name"]
            if found.get("type") == "email":
                self.email_field = name
            elif found.get("type", "text") == "text" and self.name_field is None:
                self.name_field = name
            if found.get("type") != "submit":
                self.inputs[name] = found.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _query(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query, keep_blank_values=True).items()}


class OAuthProject:
    """A fresh project with the mock provider as `github`, and the SDK's and a browser's side of the flow."""

    def __init__(self, web: httpx.Client, **config: Any) -> None:
        self.web = web
        created = web.post(
            "/api/v1/internal/projects",
            headers=internal_headers(),
            json={"display_name": f"OAuth {uuid.uuid4().hex[:6]}"},
        )
        assert created.status_code == 201, created.text
        self.data = created.json()
        self.id: str = self.data["id"]
        providers = config.pop("providers", [{"id": "github", "type": "github", "client_id": "MOCK"}])
        patched = self.call(
            "admin", "PATCH", "/projects/current", json={"config": {"oauth_providers": providers, **config}}
        )
        assert patched.status_code == 200, patched.text

    # --- the service's own API -------------------------------------------------------------------------------

    def headers(self, access: str, token: str | None = None) -> dict[str, str]:
        key_header, key = {
            "client": ("x-service-publishable-client-key", "publishable_client_key"),
            "server": ("x-service-secret-server-key", "secret_server_key"),
            "admin": ("x-service-super-secret-admin-key", "super_secret_admin_key"),
        }[access]
        headers = {"x-service-access-type": access, "x-service-project-id": self.id, key_header: self.data[key]}
        if token is not None:
            headers["x-service-access-token"] = token
        return headers

    def call(self, access: str, method: str, path: str, *, token: str | None = None, **kw: Any) -> httpx.Response:
        return self.web.request(method, f"/api/v1{path}", headers=self.headers(access, token), **kw)

    def me(self, token: str) -> dict[str, Any]:
        headers = {**self.headers("client", token), "x-service-allow-anonymous-user": "true"}
        answer = self.web.get("/api/v1/users/me", headers=headers)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    # --- the SDK's requests (§7.8) ---------------------------------------------------------------------------

    def authorize(
        self,
        *,
        provider: str = "github",
        verifier: str,
        token: str | None = None,
        kind: str = "authenticate",
        mode: str = "json",
        method: str = "S256",
        redirect_uri: str = APP_CALLBACK,
        state: str | None = None,
        **extra: str,
    ) -> httpx.Response:
        """`app.signInWithOAuth` (json mode) or a redirect-mode navigation (`linkConnectedAccount`)."""
        query = {
            "client_id": self.id,
            "client_secret": self.data["publishable_client_key"],
            "redirect_uri": redirect_uri,
            "scope": "legacy",
            "state": state or secrets.token_urlsafe(16),
            "grant_type": "authorization_code",
            "code_challenge": _challenge(verifier) if method == "S256" else verifier,
            "code_challenge_method": method,
            "response_type": "code",
            "type": kind,
            "error_redirect_url": APP_ERROR,
            **extra,
        }
        if token is not None:
            query["token"] = token
        if mode == "json":
            query["stack_response_mode"] = "json"
        return self.web.get(f"/api/v1/auth/oauth/authorize/{provider}", params=query)

    def token(self, code: str, verifier: str, redirect_uri: str = APP_CALLBACK) -> httpx.Response:
        """`app.callOAuthCallback`: the form-encoded exchange, no service headers."""
        return self.web.post(
            "/api/v1/auth/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
                "client_id": self.id,
                "client_secret": self.data["publishable_client_key"],
            },
        )

    # --- the browser at the provider -------------------------------------------------------------------------

    def login_at_provider(self, location: str, email: str, display_name: str | None = None) -> httpx.Response:
        """Open the mock's login page at `location`, fill and submit its form; the provider's answer (a 303 to the
        service's callback)."""
        page = self.web.get(location)
        assert page.status_code == 200, page.text
        assert "text/html" in page.headers["content-type"]
        form = _Form()
        form.feed(page.text)
        assert form.action is not None, page.text
        assert form.email_field is not None, page.text
        fields = {**form.inputs, form.email_field: email}
        if display_name is not None:
            assert form.name_field is not None
            fields[form.name_field] = display_name
        answer = self.web.post(urljoin(str(page.url), form.action), data=fields)
        assert answer.status_code in (302, 303), answer.text
        return answer

    def follow_to_app(self, provider_answer: httpx.Response, cookies: httpx.Cookies | None = None) -> httpx.Response:
        """The browser following the provider back to our callback (with the cookies it holds)."""
        callback = provider_answer.headers["location"]
        # Only the cookies given: the client's own jar kept what authorize set, which a test may mean to drop.
        self.web.cookies = cookies if cookies is not None else httpx.Cookies()
        try:
            return self.web.get(callback)
        finally:
            self.web.cookies = httpx.Cookies()

    def sign_in(
        self, email: str, *, token: str | None = None, kind: str = "authenticate", display_name: str | None = None
    ) -> dict[str, Any]:
        """The whole flow; the token endpoint's 200 body."""
        code = self.outer_code(email, token=token, kind=kind, display_name=display_name)
        exchanged = self.token(code, self._verifier)
        assert exchanged.status_code == 200, exchanged.text
        body: dict[str, Any] = exchanged.json()
        return body

    _verifier = "v" * 64

    def outer_code(
        self, email: str, *, token: str | None = None, kind: str = "authenticate", display_name: str | None = None
    ) -> str:
        state = secrets.token_urlsafe(12)
        started = self.authorize(verifier=self._verifier, token=token, kind=kind, state=state)
        assert started.status_code == 200, started.text
        back = self.follow_to_app(self.login_at_provider(started.json()["location"], email, display_name))
        assert back.status_code == 303, back.text
        landed = back.headers["location"]
        assert landed.startswith(APP_CALLBACK + "?"), landed
        query = _query(landed)
        assert query["state"] == state
        return query["code"]

    def error_redirect(self, email: str, **kw: Any) -> dict[str, str]:
        """The flow up to the callback, which must answer with an error redirect to the app; its query."""
        started = self.authorize(verifier=self._verifier, **kw)
        assert started.status_code == 200, started.text
        back = self.follow_to_app(self.login_at_provider(started.json()["location"], email))
        assert back.status_code == 307, back.text
        landed = back.headers["location"]
        assert landed.startswith(APP_CALLBACK + "?"), landed
        return _query(landed)

    def hook(self, name: str, **body: Any) -> None:
        answer = self.web.post(f"/mock-oauth/hooks/{name}", json=body)
        assert answer.status_code in (200, 204), answer.text


def _email() -> str:
    return f"oauth-{uuid.uuid4().hex[:10]}@example.com"


# ------------------------------------------------------------------------------------------------------------
# A new user, a returning user


def test_a_new_user_signs_up_with_the_sdks_exact_requests_and_gets_a_verifiable_session(
    web: httpx.Client, base_url: str
) -> None:
    project = OAuthProject(web)
    email = _email()
    started = project.authorize(verifier=project._verifier)
    assert started.status_code == 200, started.text
    assert set(started.json()) == {"location"}
    assert "set-cookie" not in started.headers  # json mode: no cookie
    location = started.json()["location"]
    provider_query = _query(location)
    assert location.startswith(base_url + "/mock-oauth/")
    assert provider_query["code_challenge_method"] == "S256"
    assert provider_query["redirect_uri"] == f"{base_url}/api/v1/auth/oauth/callback/github"

    back = project.follow_to_app(project.login_at_provider(location, email, "Ada Lovelace"))
    assert back.status_code == 303, back.text
    code = _query(back.headers["location"])["code"]

    exchanged = project.token(code, project._verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert "no-store" in [d.strip() for d in exchanged.headers["cache-control"].split(",")]
    assert len(exchanged.headers.get_list("cache-control")) == 1
    assert exchanged.headers["pragma"] == "no-cache"
    body = exchanged.json()
    assert body["token_type"] == "Bearer"
    assert body["scope"] == "legacy"
    assert body["is_new_user"] is True
    assert body["newUser"] is True
    assert body["after_callback_redirect_url"] is None
    assert body["afterCallbackRedirectUrl"] is None
    assert isinstance(body["expires_in"], int)
    assert body["refresh_token"]

    # The access token verifies with PyJWT against the issuer's JWKS, as a backend would check it.
    issuer = f"{base_url}/api/v1/projects/{project.id}"
    key = jwt.PyJWKClient(f"{issuer}/.well-known/jwks.json").get_signing_key_from_jwt(body["access_token"])
    claims = jwt.decode(body["access_token"], key.key, algorithms=["ES256"], audience=project.id, issuer=issuer)
    me = project.me(body["access_token"])
    assert claims["sub"] == me["id"]
    assert me["primary_email"] == email
    assert me["primary_email_verified"] is True
    assert me["display_name"] == "Ada Lovelace"
    assert [(p["id"], p["email"]) for p in me["oauth_providers"]] == [("github", email)]

    # The refresh token works with the SDK's refresh grant.
    refreshed = web.post(
        "/api/v1/auth/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": body["refresh_token"],
            "client_id": project.id,
            "client_secret": project.data["publishable_client_key"],
        },
    )
    assert refreshed.status_code == 200, refreshed.text


def test_a_returning_user_signs_in_to_the_same_account_with_a_new_session(web: httpx.Client) -> None:
    project = OAuthProject(web)
    email = _email()
    first = project.sign_in(email)
    again = project.sign_in(email)
    assert again["is_new_user"] is False
    assert again["newUser"] is False
    assert project.me(again["access_token"])["id"] == project.me(first["access_token"])["id"]
    assert again["refresh_token"] != first["refresh_token"]
    users = project.call("server", "GET", "/users").json()["items"]
    assert len(users) == 1


# ------------------------------------------------------------------------------------------------------------
# Account merging by verified e-mail


def _existing_user(project: OAuthProject, email: str, *, verified: bool = True) -> str:
    created = project.call(
        "server",
        "POST",
        "/users",
        json={"primary_email": email, "primary_email_verified": verified, "primary_email_auth_enabled": True},
    )
    assert created.status_code == 201, created.text
    user_id: str = created.json()["id"]
    return user_id


def test_link_method_merges_into_the_user_whose_verified_email_signs_in(web: httpx.Client) -> None:
    project = OAuthProject(web)
    email = _email()
    existing = _existing_user(project, email)
    body = project.sign_in(email)
    assert body["is_new_user"] is False
    me = project.me(body["access_token"])
    assert me["id"] == existing
    assert [p["id"] for p in me["oauth_providers"]] == ["github"]


def test_link_method_refuses_an_unverified_address_with_an_error_redirect(web: httpx.Client) -> None:
    project = OAuthProject(web)
    email = _email()
    _existing_user(project, email, verified=False)
    query = project.error_redirect(email)
    assert query["errorCode"] == "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"
    assert query["error"] == "server_error"
    assert query["message"]
    assert query["error_description"] == query["message"]
    assert json.loads(query["details"])["would_work_if_email_was_verified"] is True


def test_raise_error_refuses_a_taken_address(web: httpx.Client) -> None:
    project = OAuthProject(web, oauth_account_merge_strategy="raise_error")
    email = _email()
    _existing_user(project, email)
    query = project.error_redirect(email)
    assert query["errorCode"] == "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"
    assert len(project.call("server", "GET", "/users").json()["items"]) == 1


def test_allow_duplicates_makes_a_second_user_whose_address_does_not_sign_in(web: httpx.Client) -> None:
    project = OAuthProject(web, oauth_account_merge_strategy="allow_duplicates")
    email = _email()
    existing = _existing_user(project, email)
    body = project.sign_in(email)
    assert body["is_new_user"] is True
    me = project.me(body["access_token"])
    assert me["id"] != existing
    assert me["primary_email"] == email
    assert me["primary_email_auth_enabled"] is False


# ------------------------------------------------------------------------------------------------------------
# Linking while signed in, upgrading an anonymous user


def test_a_signed_in_user_links_a_provider_account(web: httpx.Client) -> None:
    project = OAuthProject(web)
    owner = project.sign_in(_email())
    other_address = _email()
    # Link mode is a redirect-mode navigation with the user's token (`user.linkConnectedAccount`).
    verifier = "w" * 50
    started = project.authorize(verifier=verifier, token=owner["access_token"], kind="link", mode="redirect")
    assert started.status_code == 307, started.text
    cookie = started.headers["set-cookie"]
    assert re.match(r"stack-oauth-inner-[^=]+=true; ", cookie)
    assert "HttpOnly" in cookie
    assert "Max-Age=600" in cookie
    back = project.follow_to_app(project.login_at_provider(started.headers["location"], other_address), started.cookies)
    assert back.status_code == 303, back.text
    exchanged = project.token(_query(back.headers["location"])["code"], verifier)
    assert exchanged.status_code == 200, exchanged.text
    me = project.me(owner["access_token"])
    assert sorted(p["email"] for p in me["oauth_providers"]) == sorted(
        [project.me(owner["access_token"])["primary_email"], other_address]
    )
    assert project.me(exchanged.json()["access_token"])["id"] == me["id"]


def test_authorize_accepts_and_ignores_the_bot_challenge_fields(web: httpx.Client) -> None:
    project = OAuthProject(web)
    fields = {"bot_challenge_token": "any", "bot_challenge_phase": "visible"}
    assert project.authorize(verifier=project._verifier, **fields).status_code == 200
    refused = project.authorize(verifier=project._verifier, bot_challenge_phase="never")
    assert (refused.status_code, refused.json()["code"]) == (400, "SCHEMA_ERROR")


def test_the_redirect_mode_callback_needs_the_inner_cookie(web: httpx.Client) -> None:
    project = OAuthProject(web)
    started = project.authorize(verifier=project._verifier, mode="redirect")
    assert started.status_code == 307, started.text
    cookie = started.headers["set-cookie"]
    name = cookie.split("=", 1)[0]
    found = re.fullmatch(rf"{name}=true; Path=/; Expires=([^;]+); Max-Age=600; HttpOnly", cookie)
    assert found, cookie  # the original's exact shape (dev mode: no Secure)
    sent_at = parsedate_to_datetime(started.headers["date"]).timestamp()
    assert abs(parsedate_to_datetime(found.group(1)).timestamp() - sent_at - 600) <= 2
    back = project.follow_to_app(project.login_at_provider(started.headers["location"], _email()))
    assert back.status_code == 400
    assert back.text.startswith("Inner OAuth cookie not found.")
    # Every answer of a redirect-mode callback deletes the cookie, errors too.
    assert back.headers["set-cookie"] == f"{name}=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"


def test_a_failed_redirect_mode_callback_deletes_the_inner_cookie(web: httpx.Client) -> None:
    project = OAuthProject(web)
    project.hook("fail-next", kind="invalid_grant")
    started = project.authorize(verifier=project._verifier, mode="redirect")
    name = started.headers["set-cookie"].split("=", 1)[0]
    provider_answer = project.login_at_provider(started.headers["location"], _email())
    back = project.follow_to_app(provider_answer, started.cookies)
    assert (back.status_code, back.text) == (400, "Inner OAuth callback failed due to invalid grant. Please try again.")
    assert back.headers["set-cookie"] == f"{name}=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"


def test_an_anonymous_user_is_upgraded_in_place(web: httpx.Client) -> None:
    project = OAuthProject(web)
    anonymous = web.post("/api/v1/auth/anonymous/sign-up", headers=project.headers("client"), json={})
    assert anonymous.status_code == 200, anonymous.text
    token = anonymous.json()["access_token"]
    anonymous_id = project.me(token)["id"]
    email = _email()
    body = project.sign_in(email, token=token)
    me = project.me(body["access_token"])
    assert me["id"] == anonymous_id
    assert me["is_anonymous"] is False
    assert me["primary_email"] == email


# ------------------------------------------------------------------------------------------------------------
# MFA, provider failures


def test_a_user_with_totp_gets_mfa_required_at_the_token_exchange(web: httpx.Client) -> None:
    project = OAuthProject(web)
    email = _email()
    first = project.sign_in(email)
    user_id = project.me(first["access_token"])["id"]
    secret = base64.b64encode(b"0123456789abcdef0123").decode()
    patched = project.call("server", "PATCH", f"/users/{user_id}", json={"totp_secret_base64": secret})
    assert patched.status_code == 200, patched.text
    answer = project.token(project.outer_code(email), project._verifier)
    assert answer.status_code == 400
    assert answer.json()["code"] == "MULTI_FACTOR_AUTHENTICATION_REQUIRED"
    assert answer.json()["details"]["attempt_code"]


@pytest.mark.parametrize(
    ("kind", "error_code"),
    [("access_denied", "OAUTH_PROVIDER_ACCESS_DENIED"), ("unavailable", "OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE")],
)
def test_a_provider_failure_comes_back_to_the_app_as_its_known_error(
    web: httpx.Client, kind: str, error_code: str
) -> None:
    project = OAuthProject(web)
    project.hook("fail-next", kind=kind)
    query = project.error_redirect(_email())
    assert query["errorCode"] == error_code
    # The provider works again for the next sign-in.
    assert project.sign_in(_email())["is_new_user"] is True


def test_an_invalid_grant_at_the_provider_is_the_plain_invalid_grant_error(web: httpx.Client) -> None:
    project = OAuthProject(web)
    project.hook("fail-next", kind="invalid_grant")
    started = project.authorize(verifier=project._verifier)
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], _email()))
    assert back.status_code == 400
    assert back.text == "Inner OAuth callback failed due to invalid grant. Please try again."


# ------------------------------------------------------------------------------------------------------------
# The outer code: single use, expiry, PKCE, redirect URI; an untrusted redirect URI; the outer timeout


def _clock(web: httpx.Client, **body: Any) -> None:
    moved = web.post("/api/v1/testing/clock", headers=internal_headers(), json=body)
    assert moved.status_code == 200, moved.text


def test_an_outer_code_is_used_once(web: httpx.Client) -> None:
    project = OAuthProject(web)
    code = project.outer_code(_email())
    assert project.token(code, project._verifier).status_code == 200
    again = project.token(code, project._verifier)
    assert again.status_code == 400
    assert again.json()["code"] == "INVALID_AUTHORIZATION_CODE"


def test_an_outer_code_expires_after_five_minutes(web: httpx.Client) -> None:
    project = OAuthProject(web)
    code = project.outer_code(_email())
    _clock(web, advance_millis=5 * 60_000 + 1_000)
    try:
        late = project.token(code, project._verifier)
    finally:
        _clock(web, reset=True)
    assert late.status_code == 400
    assert late.json()["code"] == "INVALID_AUTHORIZATION_CODE"


@pytest.mark.parametrize("method", ["S256", "plain"])
def test_a_pkce_mismatch_is_an_invalid_code(web: httpx.Client, method: str) -> None:
    project = OAuthProject(web)
    verifier = secrets.token_urlsafe(48)
    started = project.authorize(verifier=verifier, method=method)
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], _email()))
    code = _query(back.headers["location"])["code"]
    wrong = project.token(code, verifier[:-1] + ("A" if verifier[-1] != "A" else "B"))
    assert wrong.status_code == 400
    assert wrong.json()["code"] == "INVALID_AUTHORIZATION_CODE"


def test_another_redirect_uri_at_the_exchange_is_refused(web: httpx.Client) -> None:
    project = OAuthProject(web)
    code = project.outer_code(_email())
    other = project.token(code, project._verifier, redirect_uri="http://localhost:3000/elsewhere")
    assert other.status_code == 400
    assert other.text.startswith("Invalid redirect URI.")


def test_an_untrusted_redirect_uri_goes_to_the_trusted_error_redirect(web: httpx.Client) -> None:
    project = OAuthProject(web)
    started = project.authorize(verifier=project._verifier, redirect_uri="https://evil.example/steal")
    assert started.status_code == 200, started.text  # trust is checked only at the callback (§7.2)
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], _email()))
    assert back.status_code == 307, back.text
    landed = back.headers["location"]
    assert landed.startswith(APP_ERROR + "?")
    assert _query(landed)["errorCode"] == "REDIRECT_URL_NOT_WHITELISTED"
    assert "code" not in _query(landed)


def test_an_untrusted_redirect_uri_without_a_trusted_error_redirect_is_a_json_error(web: httpx.Client) -> None:
    project = OAuthProject(web)
    started = project.authorize(
        verifier=project._verifier,
        redirect_uri="https://evil.example/steal",
        error_redirect_url="https://evil.example/error",
    )
    assert started.status_code == 200, started.text
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], _email()))
    assert back.status_code == 400
    assert back.json()["code"] == "REDIRECT_URL_NOT_WHITELISTED"
    assert "location" not in back.headers


@pytest.fixture(scope="module")
def compat_web() -> Iterator[httpx.Client]:
    """The service in compatibility mode (`IDENTITY_COMPAT=stack`) on the memory store."""
    running = start_hypercorn({"IDENTITY_COMPAT": "stack"})
    try:
        with httpx.Client(base_url=running.base_url, timeout=15.0) as client:
            yield client
    finally:
        stop_server(running)


def test_in_compat_mode_an_error_redirect_carries_the_originals_words(compat_web: httpx.Client) -> None:
    project = OAuthProject(compat_web)
    started = project.authorize(verifier=project._verifier, redirect_uri="https://evil.example/steal")
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], _email()))
    assert back.status_code == 307, back.text
    query = _query(back.headers["location"])
    assert query["errorCode"] == "REDIRECT_URL_NOT_WHITELISTED"
    assert (
        query["message"]
        == query["error_description"]
        == (
            "Redirect URL not whitelisted. Did you forget to add this domain to the trusted domains list on the Stack "
            "Auth dashboard?"
        )
    )


def test_a_callback_after_ten_minutes_is_the_outer_timeout(web: httpx.Client) -> None:
    project = OAuthProject(web)
    started = project.authorize(verifier=project._verifier)
    provider_answer = project.login_at_provider(started.json()["location"], _email())
    _clock(web, advance_millis=10 * 60_000 + 1_000)
    try:
        back = project.follow_to_app(provider_answer)
    finally:
        _clock(web, reset=True)
    assert back.status_code in (307, 408), back.text
    if back.status_code == 307:
        assert _query(back.headers["location"])["errorCode"] == "OUTER_OAUTH_TIMEOUT"
    else:
        assert back.json()["code"] == "OUTER_OAUTH_TIMEOUT"


def test_sign_up_disabled_comes_back_as_an_error_redirect(web: httpx.Client) -> None:
    project = OAuthProject(web, sign_up_enabled=False)
    query = project.error_redirect(_email())
    assert query["errorCode"] == "SIGN_UP_NOT_ENABLED"
    assert json.loads(query["details"]) == {}


# ------------------------------------------------------------------------------------------------------------
# Connected accounts: the provider's own access token, stored sealed at sign-in, checked, then refreshed


def test_a_connected_account_hands_out_the_providers_token_and_refreshes_it(web: httpx.Client) -> None:
    project = OAuthProject(web)
    email = _email()
    token = project.sign_in(email)["access_token"]
    listed = project.call("client", "GET", "/connected-accounts/me", token=token)
    assert listed.status_code == 200, listed.text
    assert [(a["provider"], a["provider_account_id"]) for a in listed.json()["items"]] == [("github", email)]
    path = f"/connected-accounts/me/github/{quote(email, safe='')}/access-token"

    def provider_token() -> httpx.Response:
        return project.call("client", "POST", path, token=token, json={})

    def accepted_by_provider(access_token: str) -> bool:
        answer = web.get("/mock-oauth/userinfo", headers={"authorization": f"Bearer {access_token}"})
        return answer.status_code == 200 and answer.json()["email"] == email

    first = provider_token()
    assert first.status_code == 201, first.text
    stored = first.json()["access_token"]
    assert accepted_by_provider(stored)
    assert provider_token().json()["access_token"] == stored  # still good: the same one

    project.hook("revoke", token=stored)  # the provider no longer accepts it: the stored refresh token is used
    refreshed = provider_token()
    assert refreshed.status_code == 201, refreshed.text
    assert refreshed.json()["access_token"] != stored
    assert accepted_by_provider(refreshed.json()["access_token"])

    project.hook("revoke", token=refreshed.json()["access_token"])
    project.hook("fail-next", kind="invalid_grant")  # and now the refresh is refused too
    gone = provider_token()
    assert gone.status_code == 400
    assert gone.json()["code"] == "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE"


def test_cancelling_at_the_providers_login_page_is_access_denied(web: httpx.Client) -> None:
    project = OAuthProject(web)
    started = project.authorize(verifier=project._verifier)
    page = web.get(started.json()["location"])
    form = _Form()
    form.feed(page.text)
    assert form.action is not None
    cancel = web.post(urljoin(str(page.url), form.action), data={**form.inputs, "action": "cancel"})
    assert cancel.status_code in (302, 303), cancel.text
    assert _query(cancel.headers["location"])["error"] == "access_denied"
    back = project.follow_to_app(cancel)
    assert back.status_code == 307, back.text
    assert _query(back.headers["location"])["errorCode"] == "OAUTH_PROVIDER_ACCESS_DENIED"


# ------------------------------------------------------------------------------------------------------------
# The cross-domain handoff: a signed-in app hands its session to another of its domains with a one-time code


def _hand_off(
    project: OAuthProject, session: dict[str, Any], *, refresh: str | None = "", **body: Any
) -> httpx.Response:
    headers = project.headers("client", session.get("access_token"))
    if refresh is not None:
        headers["x-service-refresh-token"] = refresh or session["refresh_token"]
    body = {
        "redirect_uri": f"{APP_CALLBACK}?cross_domain=1",
        "state": "handoff-state",
        "code_challenge": _challenge(project._verifier),
        "after_callback_redirect_url": "http://localhost:3000/after",
        **body,
    }
    return project.web.post("/api/v1/auth/oauth/cross-domain/authorize", headers=headers, json=body)


def test_a_cross_domain_handoff_exchanges_once_for_the_same_session(web: httpx.Client) -> None:
    project = OAuthProject(web)
    session = project.sign_in(_email())
    handed = _hand_off(project, session)
    assert handed.status_code == 200, handed.text
    landed = handed.json()["redirect_url"]
    assert landed.startswith(APP_CALLBACK + "?cross_domain=1&")
    query = _query(landed)
    assert query["state"] == "handoff-state"
    redirect_uri = f"{APP_CALLBACK}?cross_domain=1"
    assert project.token(query["code"], "w" * 64, redirect_uri).json()["code"] == "INVALID_AUTHORIZATION_CODE"

    again = _query(_hand_off(project, session).json()["redirect_url"])["code"]
    exchanged = project.token(again, project._verifier, redirect_uri)
    assert exchanged.status_code == 200, exchanged.text
    body = exchanged.json()
    assert body["refresh_token"] == session["refresh_token"]  # the same session, as the original
    assert (body["is_new_user"], body["after_callback_redirect_url"]) == (False, "http://localhost:3000/after")
    assert project.me(body["access_token"])["id"] == project.me(session["access_token"])["id"]
    reused = project.token(again, project._verifier, redirect_uri)
    assert (reused.status_code, reused.json()["code"]) == (400, "INVALID_AUTHORIZATION_CODE")


def test_a_cross_domain_handoff_is_refused_without_the_callers_own_session_or_a_trusted_url(web: httpx.Client) -> None:
    project = OAuthProject(web, allow_localhost=True)
    session = project.sign_in(_email())
    other = project.sign_in(_email())
    for field in ("redirect_uri", "after_callback_redirect_url"):
        untrusted = _hand_off(project, session, **{field: "https://evil.example.com/cb"})
        assert (untrusted.status_code, untrusted.json()["code"]) == (400, "REDIRECT_URL_NOT_WHITELISTED")
    anonymous = _hand_off(project, {"refresh_token": session["refresh_token"]})
    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "USER_AUTHENTICATION_REQUIRED")
    no_token = _hand_off(project, session, refresh=None)
    assert (no_token.status_code, no_token.text) == (
        400,
        "Cross-domain auth handoff requires passing the current refresh token.",
    )
    for wrong in ("not-the-sessions-token", other["refresh_token"]):
        mismatch = _hand_off(project, session, refresh=wrong)
        assert (mismatch.status_code, mismatch.text) == (
            401,
            "Cross-domain auth handoff refresh token does not match the authenticated session.",
        )
