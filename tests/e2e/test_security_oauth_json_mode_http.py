"""Security regression: an OAuth flow started in `stack_response_mode=json` with someone's access token, then
completed by another person's browser, gives the starter nothing. Against a real Hypercorn, on the memory store and
on real Redis, with the service's mock provider playing GitHub.

The attack: the attacker calls authorize in json mode with `token=<their access token>` (a link, or an anonymous
user's sign-in that would upgrade it), gets `{location}` and sends it to a victim who is signed in at the provider.
The victim's browser signs in at the provider and comes back through our callback with none of our cookies (json
mode sets none). The app's redirect URI gets the outer code in the victim's browser, whose app does not hold the
attacker's PKCE verifier. Nothing may have changed for the attacker's user: no linked account (so no sign-in into it
with the victim's provider account), no provider tokens, an anonymous user still anonymous without the victim's
address. The legitimate flow (the party that holds the verifier exchanges the code) still links, stores and upgrades,
and only at that exchange: the callback alone changes no user."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.e2e.test_oauth_http import APP_CALLBACK, OAuthProject, _email, _query

pytestmark = pytest.mark.e2e

#: A provider served by the mock under its own credentials, so the app may ask for extra scopes.
PROVIDERS = [
    {"id": "github", "type": "github", "client_id": "MOCK"},
    {"id": "scoped", "type": "mock", "client_id": "scoped-client", "client_secret": "scoped-secret"},
]


@pytest.fixture
def web(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=15.0) as client:
        yield client


class Started:
    """A json-mode authorize answered: the provider's login URL, and the starter's PKCE verifier and state."""

    def __init__(self, project: OAuthProject, *, token: str | None, kind: str, provider: str, **extra: str) -> None:
        self.verifier = secrets.token_urlsafe(48)
        self.state = secrets.token_urlsafe(12)
        answer = project.authorize(
            provider=provider, verifier=self.verifier, token=token, kind=kind, mode="json", state=self.state, **extra
        )
        assert answer.status_code == 200, answer.text
        assert "set-cookie" not in answer.headers
        self.location: str = answer.json()["location"]


def _victim_completes(project: OAuthProject, started: Started, victim_email: str) -> str | None:
    """The victim's browser at the provider, then back through our callback with none of our cookies; the outer
    code the app's redirect URI got, if any."""
    back = project.follow_to_app(project.login_at_provider(started.location, victim_email), httpx.Cookies())
    if back.status_code != 303:
        return None
    landed = back.headers["location"]
    assert landed.startswith(APP_CALLBACK + "?"), landed
    code: str = _query(landed)["code"]
    return code


def _victims_app_exchanges(project: OAuthProject, code: str | None) -> None:
    """The app in the victim's browser exchanges the code with the verifier it has (not the attacker's)."""
    if code is None:
        return
    answer = project.token(code, secrets.token_urlsafe(48))
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "INVALID_AUTHORIZATION_CODE"


def _emails(project: OAuthProject, token: str) -> list[str]:
    return sorted(p["email"] for p in project.me(token)["oauth_providers"])


def _provider_token(project: OAuthProject, token: str, provider: str, account: str, **body: Any) -> httpx.Response:
    path = f"/connected-accounts/me/{provider}/{quote(account, safe='')}/access-token"
    return project.call("client", "POST", path, token=token, json=body)


def _token_holder(web: httpx.Client, provider_access_token: str) -> str:
    """Whose provider access token this is, as the mock provider's userinfo says."""
    answer = web.get("/mock-oauth/userinfo", headers={"authorization": f"Bearer {provider_access_token}"})
    assert answer.status_code == 200, answer.text
    email: str = answer.json()["email"]
    return email


def test_a_link_started_by_the_attacker_and_completed_by_the_victim_links_nothing(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    attacker_email, victim_email = _email(), _email()
    attacker = project.sign_in(attacker_email)["access_token"]

    started = Started(project, token=attacker, kind="link", provider="github")
    _victims_app_exchanges(project, _victim_completes(project, started, victim_email))

    assert _emails(project, attacker) == [attacker_email]
    # The victim's GitHub account does not sign anyone into the attacker's user: it signs up a user of its own.
    victim = project.sign_in(victim_email)
    assert victim["is_new_user"] is True
    assert project.me(victim["access_token"])["id"] != project.me(attacker)["id"]


def test_a_link_started_by_the_attacker_stores_no_provider_token_for_them(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    attacker_email, victim_email = _email(), _email()
    attacker = project.sign_in(attacker_email)["access_token"]

    for provider, extra in (("github", {}), ("scoped", {"provider_scope": "repo"})):
        started = Started(project, token=attacker, kind="link", provider=provider, **extra)
        _victims_app_exchanges(project, _victim_completes(project, started, victim_email))

    assert _emails(project, attacker) == [attacker_email]
    for provider, body in (("github", {}), ("scoped", {"scope": "repo"}), ("scoped", {})):
        answer = _provider_token(project, attacker, provider, victim_email, **body)
        assert answer.status_code in (400, 404), answer.text
        assert "access_token" not in answer.text
        # Any of the attacker's accounts of that provider: only their own (GitHub), whose token is their own.
        legacy = project.call(
            "client", "POST", f"/connected-accounts/me/{provider}/access-token", token=attacker, json={}
        )
        if legacy.status_code == 201:
            holder = _token_holder(web, legacy.json()["access_token"])
            assert (provider, holder) == ("github", attacker_email)
        else:
            assert legacy.status_code in (400, 404), legacy.text


def test_an_anonymous_sign_in_started_by_the_attacker_upgrades_nothing(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    anonymous = web.post("/api/v1/auth/anonymous/sign-up", headers=project.headers("client"), json={})
    assert anonymous.status_code == 200, anonymous.text
    tokens = anonymous.json()
    anonymous_id = project.me(tokens["access_token"])["id"]
    victim_email = _email()

    started = Started(project, token=tokens["access_token"], kind="authenticate", provider="github")
    _victims_app_exchanges(project, _victim_completes(project, started, victim_email))

    # The attacker's refresh token still names an anonymous user with no address and no provider account.
    refreshed = web.post(
        "/api/v1/auth/oauth/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": project.id,
            "client_secret": project.data["publishable_client_key"],
        },
    )
    assert refreshed.status_code == 200, refreshed.text
    me = project.me(refreshed.json()["access_token"])
    assert me["id"] == anonymous_id
    assert me["is_anonymous"] is True
    assert me["primary_email"] is None
    assert me["oauth_providers"] == []
    channels = project.call("server", "GET", f"/contact-channels?user_id={anonymous_id}").json()["items"]
    assert victim_email not in [c["value"] for c in channels]
    # The victim's address and account are free: their own sign-in makes a user of their own.
    victim = project.sign_in(victim_email)
    assert victim["is_new_user"] is True
    assert project.me(victim["access_token"])["id"] != anonymous_id


# ------------------------------------------------------------------------------------------------------------
# The legitimate flows: the party holding the verifier exchanges the code; only then does anything change.


def test_a_link_by_the_verifier_holder_links_and_stores_tokens_at_the_exchange(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    owner_email, other_email = _email(), _email()
    owner = project.sign_in(owner_email)["access_token"]

    started = Started(project, token=owner, kind="link", provider="scoped", provider_scope="repo")
    code = _victim_completes(project, started, other_email)
    assert code is not None
    assert _emails(project, owner) == [owner_email]  # the callback alone changed nothing
    exchanged = project.token(code, started.verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert exchanged.json()["is_new_user"] is False
    assert project.me(exchanged.json()["access_token"])["id"] == project.me(owner)["id"]
    assert _emails(project, owner) == sorted([owner_email, other_email])

    token = _provider_token(project, owner, "scoped", other_email, scope="repo")
    assert token.status_code == 201, token.text
    assert _token_holder(web, token.json()["access_token"]) == other_email
    # The linked account signs its owner in.
    again = Started(project, token=None, kind="authenticate", provider="scoped")
    code = _victim_completes(project, again, other_email)
    assert code is not None
    signed_in = project.token(code, again.verifier)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["is_new_user"] is False
    assert project.me(signed_in.json()["access_token"])["id"] == project.me(owner)["id"]


def test_an_anonymous_upgrade_by_the_verifier_holder_happens_at_the_exchange(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    anonymous = web.post("/api/v1/auth/anonymous/sign-up", headers=project.headers("client"), json={})
    token = anonymous.json()["access_token"]
    anonymous_id = project.me(token)["id"]
    email = _email()

    started = Started(project, token=token, kind="authenticate", provider="github")
    code = _victim_completes(project, started, email)
    assert code is not None
    still = project.me(token)
    assert (still["is_anonymous"], still["primary_email"]) == (True, None)  # the callback alone changed nothing
    exchanged = project.token(code, started.verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert exchanged.json()["is_new_user"] is True
    me = project.me(exchanged.json()["access_token"])
    assert (me["id"], me["is_anonymous"], me["primary_email"], me["primary_email_verified"]) == (
        anonymous_id,
        False,
        email,
        True,
    )
    listed = project.call("client", "GET", "/connected-accounts/me", token=exchanged.json()["access_token"])
    assert [(a["provider"], a["provider_account_id"]) for a in listed.json()["items"]] == [("github", email)]


def test_a_new_user_is_created_at_the_exchange_not_at_the_callback(web: httpx.Client) -> None:
    project = OAuthProject(web, providers=PROVIDERS)
    started = Started(project, token=None, kind="authenticate", provider="github")
    code = _victim_completes(project, started, _email())
    assert code is not None
    assert project.call("server", "GET", "/users").json()["items"] == []
    exchanged = project.token(code, started.verifier)
    assert exchanged.status_code == 200, exchanged.text
    assert exchanged.json()["is_new_user"] is True
    assert len(project.call("server", "GET", "/users").json()["items"]) == 1
