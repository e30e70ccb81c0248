"""OAuth sign-in (reference part 2 §7.2-7.5) in process on the memory store, with a scripted provider client: the
provider is a boundary we do not own, so the client that talks to it is the one double here."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import orjson
import pytest

from identity_proto import Request, Service, ServiceOptions, run
from identity_proto.effects import OuterCode, update_project
from identity_proto.effects.oauth_provider import (
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderEffect,
    ProviderEndpoints,
    ProviderFailure,
    ProviderGrant,
    ProviderIdentity,
    ProviderTokens,
)
from identity_proto.provider_tokens import unseal
from identity_proto.records import OAuthProviderConfig, TrustedDomain, User
from tests.contract.factories import patched_user
from tests.support import KEYS, PROJECT_ID, Harness, Reply, client_headers

REDIRECT = "http://localhost:3000/handler/oauth-callback"
VERIFIER = "a-verifier-of-forty-three-characters-at-least-0123"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")
GITHUB = OAuthProviderConfig(id="github", type="github", client_id="gh-client", client_secret="gh-secret-value")
ADA = ProviderIdentity(account_id="1001", email="ada@example.com", email_verified=True, display_name="Ada")


@dataclass
class ScriptedProvider:
    """Answers provider effects as a test sets them: the identity that signed in, or a failure."""

    identity: ProviderIdentity = ADA
    failure: str | None = None
    calls: list[ProviderEffect[Any]] = field(default_factory=list)

    def perform(self, effect: ProviderEffect[object]) -> object:
        self.calls.append(effect)
        if isinstance(effect, DiscoverProvider):
            return ProviderEndpoints("https://idp.example/authorize", "https://idp.example/token")
        assert isinstance(effect, ExchangeProviderCode)
        if self.failure is not None:
            raise ProviderFailure(self.failure)  # type: ignore[arg-type]
        tokens = ProviderTokens("provider-access", "provider-refresh", None, effect.scope)
        return ProviderGrant(tokens, self.identity)


@dataclass
class World:
    h: Harness = field(default_factory=Harness)
    provider: ScriptedProvider = field(default_factory=ScriptedProvider)

    def configure(self, **config: Any) -> None:
        config.setdefault("oauth_providers", (GITHUB,))
        run(update_project(PROJECT_ID, config=tuple(config.items())), self.h.store)
        self.h.service.projects.forget(PROJECT_ID)

    def call(self, method: str, path: str, query: dict[str, str] | None = None, **kw: Any) -> Reply:
        headers = dict(kw.pop("headers", {}))
        body = b""
        if "form" in kw:
            body = urlencode(kw.pop("form")).encode()
            headers["content-type"] = "application/x-www-form-urlencoded"
        if "json" in kw:
            body = orjson.dumps(kw.pop("json"))
            headers["content-type"] = "application/json"
        request = Request(method, path, tuple(headers.items()), body, urlencode(query or {}), "10.0.0.1")
        h = self.h
        return Reply.of(run(h.service.handle(request, h.now_ms, h.entropy), h.store, provider=self.provider))

    def authorize(self, provider_id: str = "github", **overrides: str) -> Reply:
        query = {
            "client_id": PROJECT_ID,
            "client_secret": KEYS.publishable_client_key,
            "redirect_uri": REDIRECT,
            "scope": "legacy",
            "state": "outer-state",
            "grant_type": "authorization_code",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "response_type": "code",
            "stack_response_mode": "json",
        }
        query.update(overrides)
        query = {k: v for k, v in query.items() if v != "<absent>"}
        return self.call("GET", f"/api/v1/auth/oauth/authorize/{provider_id}", query)

    def inner_state(self, reply: Reply) -> str:
        location = reply.json["location"] if reply.status == 200 else reply.headers["location"]
        return parse_qs(urlsplit(location).query)["state"][0]

    def callback(self, state: str, provider_id: str = "github", **kw: Any) -> Reply:
        return self.call(
            "GET", f"/api/v1/auth/oauth/callback/{provider_id}", {"code": "provider-code", "state": state}, **kw
        )

    def outer_code(self, reply: Reply) -> str:
        assert reply.status == 303, reply.body
        return parse_qs(urlsplit(reply.headers["location"]).query)["code"][0]

    def exchange(self, outer: str, **overrides: str) -> Reply:
        form = {
            "grant_type": "authorization_code",
            "code": outer,
            "redirect_uri": REDIRECT,
            "code_verifier": VERIFIER,
            "client_id": PROJECT_ID,
            "client_secret": KEYS.publishable_client_key,
        }
        form.update(overrides)
        return self.call("POST", "/api/v1/auth/oauth/token", form={k: v for k, v in form.items() if v != "<absent>"})

    def sign_in(self, **authorize: str) -> Reply:
        reply = self.authorize(**authorize)
        assert reply.status == 200, reply.body
        return self.exchange(self.outer_code(self.callback(self.inner_state(reply))))

    def users(self) -> list[User]:
        return list(self.h.store.tenant(PROJECT_ID).users.values())


@pytest.fixture
def w() -> World:
    world = World()
    world.configure()
    return world


# --- the whole flow -------------------------------------------------------------------------------------------


def test_a_new_provider_account_signs_up_a_user_with_the_providers_verified_email(w: World) -> None:
    reply = w.sign_in()
    assert reply.status == 200, reply.body
    body = reply.json
    assert set(body) == {
        "access_token",
        "token_type",
        "expires_in",
        "refresh_token",
        "scope",
        "is_new_user",
        "newUser",
        "after_callback_redirect_url",
        "afterCallbackRedirectUrl",
    }
    assert (body["token_type"], body["scope"], body["is_new_user"], body["newUser"]) == ("Bearer", "legacy", True, True)
    assert body["after_callback_redirect_url"] is None
    assert "no-store" in reply.headers["cache-control"].split(", ")
    assert reply.headers["pragma"] == "no-cache"
    me = w.call("GET", "/api/v1/users/me", headers=client_headers(**{"x-service-access-token": body["access_token"]}))
    assert me.status == 200, me.body
    assert me.json["primary_email"] == "ada@example.com"
    assert me.json["primary_email_verified"] is True
    assert me.json["display_name"] == "Ada"
    assert me.json["oauth_providers"] == [{"id": "github", "account_id": "1001", "email": "ada@example.com"}]


def test_the_same_provider_account_signs_in_again_as_the_same_user_with_a_new_session(w: World) -> None:
    first = w.sign_in().json
    second = w.sign_in().json
    assert second["is_new_user"] is False
    assert second["refresh_token"] != first["refresh_token"]
    assert len(w.users()) == 1


def test_redirect_mode_sets_the_inner_cookie_and_the_callback_requires_and_deletes_it(w: World) -> None:
    reply = w.authorize(stack_response_mode="redirect")
    assert reply.status == 307
    state = w.inner_state(reply)
    expires = formatdate(w.h.now_ms // 1000 + 600, usegmt=True)
    assert reply.headers["set-cookie"] == (
        f"stack-oauth-inner-{state}=true; Path=/; Expires={expires}; Max-Age=600; Secure; HttpOnly"
    )
    done = w.callback(state, headers={"cookie": f"other=1; stack-oauth-inner-{state}=true"})
    assert done.status == 303, done.body
    assert done.headers["set-cookie"] == f"stack-oauth-inner-{state}=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"
    assert parse_qs(urlsplit(done.headers["location"]).query)["state"] == ["outer-state"]


def test_redirect_mode_without_the_cookie_is_the_plain_cookie_error(w: World) -> None:
    state = w.inner_state(w.authorize(stack_response_mode="redirect"))
    reply = w.callback(state)
    assert (reply.status, reply.known_error) == (400, None)
    assert reply.body.decode().startswith("Inner OAuth cookie not found.")
    assert reply.headers["set-cookie"] == f"stack-oauth-inner-{state}=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"


def test_json_mode_answers_the_provider_url_with_our_pkce_and_callback(w: World) -> None:
    reply = w.authorize()
    assert reply.status == 200
    assert "set-cookie" not in reply.headers
    location = urlsplit(reply.json["location"])
    params = {k: v[0] for k, v in parse_qs(location.query).items()}
    assert location.netloc == "github.com"
    assert params["client_id"] == "gh-client"
    assert params["redirect_uri"] == "http://localhost/api/v1/auth/oauth/callback/github"
    assert params["code_challenge_method"] == "S256"
    assert params["scope"] == "user:email"


def test_the_callback_works_once_per_state(w: World) -> None:
    state = w.inner_state(w.authorize())
    assert w.callback(state).status == 303
    again = w.callback(state)
    assert (again.status, again.body) == (400, b"Invalid OAuth state. Please try signing in again.")


def test_an_unknown_state_is_the_plain_state_error(w: World) -> None:
    reply = w.callback("nobody-made-this-state")
    assert (reply.status, reply.known_error, reply.body) == (
        400,
        None,
        b"Invalid OAuth state. Please try signing in again.",
    )


def test_a_callback_on_another_providers_path_is_the_state_error_and_sends_the_code_nowhere(w: World) -> None:
    w.configure(oauth_providers=(GITHUB, dataclasses.replace(GITHUB, id="gitlab", type="gitlab")))
    state = w.inner_state(w.authorize(stack_response_mode="redirect"))
    reply = w.callback(state, "gitlab", headers={"cookie": f"stack-oauth-inner-{state}=true"})
    assert (reply.status, reply.body) == (400, b"Invalid OAuth state. Please try signing in again.")
    assert "set-cookie" not in reply.headers
    assert not [c for c in w.provider.calls if isinstance(c, ExchangeProviderCode)]


def test_compat_a_callback_on_another_providers_path_is_the_originals_invalid_grant() -> None:
    """The original looks the path's provider up: one the project has refuses a code it did not issue (the
    invalid-grant text, the inner cookie deleted), one it has not is redirected as OAUTH_PROVIDER_NOT_FOUND...;
    here the code is sent to no provider, and the state is used up either way."""
    w = World(h=Harness(service=Service(ServiceOptions(header_prefixes=("x-service-", "x-stack-")))))
    w.configure(oauth_providers=(GITHUB, dataclasses.replace(GITHUB, id="gitlab", type="gitlab")))
    state = w.inner_state(w.authorize(stack_response_mode="redirect"))
    reply = w.callback(state, "gitlab", headers={"cookie": f"stack-oauth-inner-{state}=true"})
    assert (reply.status, reply.known_error, reply.body) == (
        400,
        None,
        b"Inner OAuth callback failed due to invalid grant. Please try again.",
    )
    assert reply.headers["set-cookie"] == f"stack-oauth-inner-{state}=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"
    assert not [c for c in w.provider.calls if isinstance(c, ExchangeProviderCode)]
    again = w.callback(state, headers={"cookie": f"stack-oauth-inner-{state}=true"})
    assert (again.status, again.body) == (400, b"Invalid OAuth state. Please try signing in again.")
    state = w.inner_state(w.authorize())
    unknown = w.callback(state, "discord")
    assert unknown.status == 307
    assert parse_qs(urlsplit(unknown.headers["location"]).query)["errorCode"] == [
        "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED"
    ]


def test_after_ten_minutes_the_callback_redirects_the_outer_timeout(w: World) -> None:
    state = w.inner_state(w.authorize())
    w.h.advance(10 * 60 * 1000)
    reply = w.callback(state)
    assert reply.status == 307
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["errorCode"] == ["OUTER_OAUTH_TIMEOUT"]
    assert query["error"] == ["server_error"]
    assert query["details"] == ["{}"]
    assert not [c for c in w.provider.calls if isinstance(c, ExchangeProviderCode)]


# --- authorize: errors in order ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"redirect_uri": "not a url"}, 400, "SCHEMA_ERROR"),
        ({"client_id": "no-such-project"}, 400, "INVALID_OAUTH_CLIENT_ID_OR_SECRET"),
        ({"client_id": f"{PROJECT_ID}#other-branch"}, 400, "INVALID_OAUTH_CLIENT_ID_OR_SECRET"),
        ({"client_secret": "pck_wrong"}, 401, "INVALID_PUBLISHABLE_CLIENT_KEY"),
        ({"after_callback_redirect_url": "https://evil.example/x"}, 400, "REDIRECT_URL_NOT_WHITELISTED"),
        ({"token": "not-a-token"}, 401, "UNPARSABLE_ACCESS_TOKEN"),
        ({"code_challenge_method": "S512"}, 400, "SCHEMA_ERROR"),
    ],
)
def test_authorize_refuses_bad_requests_and_keeps_nothing(
    w: World, overrides: dict[str, str], status: int, code: str
) -> None:
    reply = w.authorize(**overrides)
    assert (reply.status, reply.known_error) == (status, code), reply.body
    assert w.h.store.short_lived == {}


@pytest.mark.parametrize(
    ("redirect_uri", "problems"),
    [
        ("this is an invalid URL string", ["contains spaces", "is not a valid URL"]),
        ("http://localhost:3000/a b", ["contains spaces"]),
        ("not-a-url", ["is not a valid URL"]),
    ],
)
def test_a_redirect_uri_with_spaces_is_refused_with_each_of_the_originals_problems(
    w: World, redirect_uri: str, problems: list[str]
) -> None:
    """The original checks for spaces, then whether it is a URL, and names every check that fails."""
    reply = w.authorize(redirect_uri=redirect_uri)
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
    assert reply.json["error"].splitlines()[1:] == [f"  - query.redirect_uri {p}" for p in problems]


def test_the_public_sentinel_is_refused_in_the_originals_words_in_compat_mode() -> None:
    for compat in (False, True):
        prefixes = ("x-service-", "x-stack-") if compat else ("x-service-",)
        w = World(h=Harness(service=Service(ServiceOptions(header_prefixes=prefixes))))
        w.configure(require_publishable_client_key=True)
        authorize = w.authorize(client_secret="__stack_public_client__")
        token = w.exchange("no-such-code", client_secret="<absent>")
        for reply in (authorize, token):
            assert (reply.status, reply.known_error) == (401, "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT")
            assert reply.json["error"] == (
                "Publishable client keys are required for this project. Create one in Project Keys, or disable "
                "this requirement there to allow keyless client access."
                if compat
                else f"Publishable client keys are required for project {PROJECT_ID}."
            )


def test_authorize_names_the_client_id_it_does_not_know(w: World) -> None:
    reply = w.authorize(client_id="no-such-project")
    assert reply.json["details"] == {"client_id": "no-such-project"}


def test_the_public_sentinel_is_refused_when_the_project_requires_keys(w: World) -> None:
    assert w.authorize(client_secret="__stack_public_client__").status == 200
    w.configure(require_publishable_client_key=True)
    reply = w.authorize(client_secret="__stack_public_client__")
    assert (reply.status, reply.known_error) == (401, "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT")


def test_an_unconfigured_provider_is_not_found(w: World) -> None:
    reply = w.authorize("gitlab")
    assert (reply.status, reply.known_error) == (400, "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED")


def test_a_mock_provider_exists_only_in_dev_mode(w: World) -> None:
    w.configure(oauth_providers=(OAuthProviderConfig(id="spotify", type="spotify", client_id="MOCK"),))
    reply = w.authorize("spotify")
    assert (reply.status, reply.known_error) == (400, "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED")


def test_link_without_a_token_is_the_plain_error(w: World) -> None:
    reply = w.authorize(type="link")
    assert (reply.status, reply.known_error, reply.body) == (
        400,
        None,
        b"?token= query parameter is required for link type",
    )


def test_a_scope_other_than_legacy_is_the_plain_scope_error(w: World) -> None:
    reply = w.authorize(scope="openid")
    assert (reply.status, reply.known_error) == (400, None)
    assert reply.body == b"Invalid scope requested. Please check the scopes you are requesting."


def test_oidc_providers_are_discovered_from_their_issuer(w: World) -> None:
    oidc = OAuthProviderConfig(id="corp", type="oidc", client_id="c", issuer_url="https://idp.example")
    w.configure(oauth_providers=(oidc,))
    reply = w.authorize("corp")
    assert reply.json["location"].startswith("https://idp.example/authorize?")
    assert "nonce=" in reply.json["location"]
    assert w.provider.calls == [DiscoverProvider("https://idp.example")]


# --- callback: provider failures and redirects ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "code"),
    [("access_denied", "OAUTH_PROVIDER_ACCESS_DENIED"), ("unavailable", "OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE")],
)
def test_provider_failures_are_redirected_to_the_app(w: World, failure: str, code: str) -> None:
    w.provider.failure = failure
    reply = w.callback(w.inner_state(w.authorize()))
    assert reply.status == 307
    assert reply.headers["location"].startswith(REDIRECT + "?")
    assert parse_qs(urlsplit(reply.headers["location"]).query)["errorCode"] == [code]
    assert w.users() == []


def test_an_invalid_grant_is_the_plain_error(w: World) -> None:
    w.provider.failure = "invalid_grant"
    reply = w.callback(w.inner_state(w.authorize()))
    assert (reply.status, reply.known_error) == (400, None)
    assert reply.body == b"Inner OAuth callback failed due to invalid grant. Please try again."


def test_a_provider_that_says_access_denied_in_the_callback_is_redirected(w: World) -> None:
    state = w.inner_state(w.authorize())
    reply = w.call("GET", "/api/v1/auth/oauth/callback/github", {"error": "access_denied", "state": state})
    assert parse_qs(urlsplit(reply.headers["location"]).query)["errorCode"] == ["OAUTH_PROVIDER_ACCESS_DENIED"]


def test_an_untrusted_redirect_uri_is_refused_at_the_callback(w: World) -> None:
    w.configure(allow_localhost=False)
    reply = w.callback(w.inner_state(w.authorize()))
    assert (reply.status, reply.known_error) == (400, "REDIRECT_URL_NOT_WHITELISTED")
    assert w.users() == []


def test_an_untrusted_redirect_uri_goes_to_a_trusted_error_redirect(w: World) -> None:
    w.configure(allow_localhost=False, domains=(TrustedDomain("https://app.example", "/handler"),))
    reply = w.callback(w.inner_state(w.authorize(error_redirect_url="https://app.example/oops")))
    assert reply.status == 307
    assert reply.headers["location"].startswith("https://app.example/oops?")


def test_sign_up_disabled_is_redirected_with_its_code_and_message(w: World) -> None:
    w.configure(sign_up_enabled=False)
    reply = w.callback(w.inner_state(w.authorize()))
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["errorCode"] == ["SIGN_UP_NOT_ENABLED"]
    assert query["message"] == query["error_description"]
    assert w.users() == []


# --- finding the user: merge strategies, link, anonymous upgrade -------------------------------------------------


def _existing_user(w: World, *, verified: bool = True) -> str:
    reply = w.call(
        "POST",
        "/api/v1/users",
        headers={
            "x-service-access-type": "server",
            "x-service-project-id": PROJECT_ID,
            "x-service-secret-server-key": KEYS.secret_server_key,
        },
        json={
            "primary_email": "ada@example.com",
            "primary_email_verified": verified,
            "primary_email_auth_enabled": True,
        },
    )
    assert reply.status == 201, reply.body
    return str(reply.json["id"])


def test_link_method_attaches_the_account_to_the_verified_email_owner(w: World) -> None:
    user_id = _existing_user(w)
    reply = w.sign_in()
    assert reply.json["is_new_user"] is False
    assert [u.id for u in w.users()] == [user_id]
    assert [a.account_id for a in w.h.user(user_id).oauth_accounts] == ["1001"]


@pytest.mark.parametrize(
    ("owner_verified", "provider_verified", "would_work"), [(False, True, True), (True, False, False)]
)
def test_link_method_refuses_unverified_emails(
    w: World, owner_verified: bool, provider_verified: bool, would_work: bool
) -> None:
    _existing_user(w, verified=owner_verified)
    w.provider.identity = ProviderIdentity("1001", "ada@example.com", provider_verified)
    reply = w.callback(w.inner_state(w.authorize()))
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["errorCode"] == ["CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"]
    assert orjson.loads(query["details"][0]) == {
        "type": "email",
        "contact_channel_value": "ada@example.com",
        "would_work_if_email_was_verified": would_work,
    }


def test_raise_error_refuses_an_email_in_use(w: World) -> None:
    w.configure(oauth_account_merge_strategy="raise_error")
    _existing_user(w)
    reply = w.callback(w.inner_state(w.authorize()))
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["errorCode"] == ["CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE"]


def test_allow_duplicates_signs_up_a_second_user_whose_email_does_not_sign_in(w: World) -> None:
    w.configure(oauth_account_merge_strategy="allow_duplicates")
    first = _existing_user(w)
    reply = w.sign_in()
    assert reply.json["is_new_user"] is True
    (new,) = [u for u in w.users() if u.id != first]
    assert (new.primary_email, new.primary_email_auth_enabled) == ("ada@example.com", False)


def test_link_adds_the_account_to_the_tokens_user(w: World) -> None:
    w.provider.identity = ProviderIdentity("1001", "ada@example.com", True)
    tokens = w.sign_in().json
    w.provider.identity = ProviderIdentity("2002", "other@example.com", True)
    reply = w.sign_in(type="link", token=tokens["access_token"])
    assert reply.json["is_new_user"] is False
    (user,) = w.users()
    assert [a.account_id for a in user.oauth_accounts] == ["1001", "2002"]


def test_link_of_another_users_account_is_refused(w: World) -> None:
    w.sign_in()  # Ada's account 1001
    w.provider.identity = ProviderIdentity("3003", "bob@example.com", True)
    bob = w.sign_in().json
    w.provider.identity = ADA
    reply = w.callback(w.inner_state(w.authorize(type="link", token=bob["access_token"])))
    query = parse_qs(urlsplit(reply.headers["location"]).query)
    assert query["errorCode"] == ["OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER"]


def test_an_anonymous_user_is_upgraded_in_place(w: World) -> None:
    anon = w.call("POST", "/api/v1/auth/anonymous/sign-up", headers=client_headers()).json
    reply = w.sign_in(token=anon["access_token"])
    assert reply.json["is_new_user"] is True
    (user,) = w.users()
    assert (user.id, user.is_anonymous, user.primary_email) == (anon["user_id"], False, "ada@example.com")
    assert [a.account_id for a in user.oauth_accounts] == ["1001"]


def test_a_deleted_users_account_signs_up_a_new_user(w: World) -> None:
    first = w.sign_in().json
    (user,) = w.users()
    deleted = w.call(
        "DELETE",
        f"/api/v1/users/{user.id}",
        headers={
            "x-service-access-type": "server",
            "x-service-project-id": PROJECT_ID,
            "x-service-secret-server-key": KEYS.secret_server_key,
        },
    )
    assert deleted.status == 200, deleted.body
    again = w.sign_in().json
    assert again["is_new_user"] is True
    assert again["refresh_token"] != first["refresh_token"]


def test_new_users_get_the_default_project_permissions_and_a_personal_team(w: World) -> None:
    w.configure(create_team_on_sign_up=True)
    w.sign_in()
    (user,) = w.users()
    assert user.selected_team_id is not None


def test_provider_tokens_are_stored_sealed_for_the_account_with_the_scope_asked_for() -> None:
    key = bytes(range(32))
    w = World(Harness(service=Service(ServiceOptions(password_rounds=4, oauth_token_key=key))))
    w.configure()
    w.sign_in(provider_scope="repo")
    (user,) = w.users()
    (account,) = user.oauth_accounts
    sealed = w.h.store.tenant(PROJECT_ID).provider_tokens[account.id]
    assert "provider-access" not in sealed
    opened = unseal(sealed, key, project_id=PROJECT_ID, account_row_id=account.id)
    assert opened == ProviderTokens("provider-access", "provider-refresh", None, "user:email repo")


def test_without_a_key_outside_dev_mode_no_provider_token_is_stored(w: World) -> None:
    w.sign_in()
    assert w.h.service.options.dev_mode is False
    assert w.h.store.tenant(PROJECT_ID).provider_tokens == {}


# --- the token exchange ----------------------------------------------------------------------------------------


def _code(w: World, **authorize: str) -> str:
    return w.outer_code(w.callback(w.inner_state(w.authorize(**authorize))))


def test_an_outer_code_works_once(w: World) -> None:
    code = _code(w)
    assert w.exchange(code).status == 200
    again = w.exchange(code)
    assert (again.status, again.known_error) == (400, "INVALID_AUTHORIZATION_CODE")


def test_an_outer_code_expires_after_five_minutes(w: World) -> None:
    code = _code(w)
    w.h.advance(5 * 60 * 1000)
    assert w.exchange(code).known_error == "INVALID_AUTHORIZATION_CODE"


def test_a_wrong_s256_verifier_is_refused_and_burns_the_code(w: World) -> None:
    code = _code(w)
    assert w.exchange(code, code_verifier="x" * 43).known_error == "INVALID_AUTHORIZATION_CODE"
    assert w.exchange(code).known_error == "INVALID_AUTHORIZATION_CODE"


def test_plain_pkce_compares_the_verifier_itself(w: World) -> None:
    assert (
        w.exchange(
            _code(w, code_challenge="some-code-challenge", code_challenge_method="plain"),
            code_verifier="some-code-challenge",
        ).status
        == 200
    )
    wrong = w.exchange(
        _code(w, code_challenge="some-code-challenge", code_challenge_method="plain"), code_verifier="other"
    )
    assert wrong.known_error == "INVALID_AUTHORIZATION_CODE"


def test_another_redirect_uri_is_the_plain_error(w: World) -> None:
    reply = w.exchange(_code(w), redirect_uri="http://localhost:3000/elsewhere")
    assert (reply.status, reply.known_error) == (400, None)
    assert reply.body.startswith(b"Invalid redirect URI.")


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"client_secret": "pck_wrong"}, 400, "INVALID_OAUTH_CLIENT_ID_OR_SECRET"),
        ({"client_id": "no-such-project"}, 400, "INVALID_OAUTH_CLIENT_ID_OR_SECRET"),
        ({"code": "0" * 64}, 400, "INVALID_AUTHORIZATION_CODE"),
        ({"code": "<absent>"}, 400, "SCHEMA_ERROR"),
    ],
)
def test_token_exchange_errors(w: World, overrides: dict[str, str], status: int, code: str) -> None:
    outer = _code(w)
    reply = w.exchange(outer, **overrides)
    assert (reply.status, reply.known_error) == (status, code), reply.body


def test_a_missing_secret_is_refused_only_when_keys_are_required(w: World) -> None:
    assert w.exchange(_code(w), client_secret="<absent>").status == 200
    outer = _code(w)
    w.configure(require_publishable_client_key=True)
    reply = w.exchange(outer, client_secret="<absent>")
    assert (reply.status, reply.known_error) == (401, "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT")


def test_after_callback_redirect_url_comes_back_with_the_tokens(w: World) -> None:
    after = "http://localhost:3000/after"
    body = w.exchange(_code(w, after_callback_redirect_url=after)).json
    assert body["after_callback_redirect_url"] == body["afterCallbackRedirectUrl"] == after


def test_a_totp_user_gets_mfa_required_with_an_attempt_code(w: World) -> None:
    w.sign_in()
    (user,) = w.users()
    secret = base64.b64encode(b"0123456789abcdefghij").decode()
    patched_user(w.h.store, PROJECT_ID, user.id, (("totp_secret_base64", secret),))
    reply = w.exchange(_code(w))
    assert (reply.status, reply.known_error) == (400, "MULTI_FACTOR_AUTHENTICATION_REQUIRED")
    assert len(reply.json["details"]["attempt_code"]) == 45


def test_the_refresh_grant_still_works_on_the_same_route(w: World) -> None:
    tokens = w.sign_in().json
    reply = w.call(
        "POST",
        "/api/v1/auth/oauth/token",
        form={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": PROJECT_ID,
            "client_secret": KEYS.publishable_client_key,
        },
    )
    assert reply.status == 200, reply.body
    assert set(reply.json) == {"access_token", "token_type", "expires_in"}


# --- the callback writes nothing; the exchange acts (see `identity_proto.flows.oauth`) ------------------------


def test_the_callback_creates_links_and_stores_nothing_until_the_exchange() -> None:
    key = bytes(range(32))
    w = World(Harness(service=Service(ServiceOptions(password_rounds=4, oauth_token_key=key))))
    w.configure()
    owner = w.sign_in().json
    w.provider.identity = ProviderIdentity("2002", "other@example.com", True)
    code = _code(w, type="link", token=owner["access_token"])
    tenant = w.h.store.tenant(PROJECT_ID)
    (user,) = w.users()
    assert [a.account_id for a in user.oauth_accounts] == ["1001"]
    assert len(tenant.provider_tokens) == 1  # the owner's own sign-in's
    ((kept_text, _),) = tenant.short_lived.values()
    kept = OuterCode(**orjson.loads(kept_text))
    assert "provider-access" not in kept_text
    assert kept.sealed_tokens is not None
    assert "provider-access" not in kept.sealed_tokens
    assert "provider-access" not in repr(kept)

    assert w.exchange(code).status == 200
    (user,) = w.users()
    assert [a.account_id for a in user.oauth_accounts] == ["1001", "2002"]
    sealed = tenant.provider_tokens[user.oauth_accounts[1].id]
    opened = unseal(sealed, key, project_id=PROJECT_ID, account_row_id=user.oauth_accounts[1].id)
    assert opened.access_token == "provider-access"


def test_a_refusal_met_only_at_the_exchange_is_its_known_error_and_links_nothing(w: World) -> None:
    owner = w.sign_in().json
    w.provider.identity = ProviderIdentity("2002", "other@example.com", True)
    code = _code(w, type="link", token=owner["access_token"])  # the callback's check passes
    w.sign_in()  # meanwhile account 2002 signs up a user of its own
    reply = w.exchange(code)
    assert (reply.status, reply.known_error) == (409, "OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER")
    owner_user = next(u for u in w.users() if u.primary_email == "ada@example.com")
    assert [a.account_id for a in owner_user.oauth_accounts] == ["1001"]


def test_an_anonymous_upgrade_waits_for_the_exchange(w: World) -> None:
    anon = w.call("POST", "/api/v1/auth/anonymous/sign-up", headers=client_headers()).json
    code = _code(w, token=anon["access_token"])
    (user,) = w.users()
    assert (user.is_anonymous, user.primary_email, user.oauth_accounts) == (True, None, ())
    assert w.exchange(code, code_verifier="x" * 43).known_error == "INVALID_AUTHORIZATION_CODE"
    (user,) = w.users()
    assert (user.is_anonymous, user.primary_email, user.oauth_accounts) == (True, None, ())


def test_tokens_kept_under_a_key_since_replaced_are_not_stored_and_the_sign_in_goes_on() -> None:
    harness = Harness(service=Service(ServiceOptions(password_rounds=4, oauth_token_key=bytes(range(32)))))
    w = World(harness)
    w.configure()
    code = _code(w)
    harness.service = Service(ServiceOptions(password_rounds=4, oauth_token_key=bytes(32)))
    reply = w.exchange(code)
    assert reply.status == 200, reply.body
    assert reply.json["is_new_user"] is True
    assert harness.store.tenant(PROJECT_ID).provider_tokens == {}
