"""Password resets over real HTTP (a real Hypercorn, on the memory store and on Redis): whoever proves a mailbox by
a reset ends up in an account nobody else can still enter, and a reset code dies with the address and the password
it was sent for.

- A reset code goes only to an address that is verified, or that is the only way into its account (its only auth
  channel, no OAuth account); otherwise the answer is the one for an unknown address and no mail goes out. So an
  account that added someone else's address as an unverified auth channel, or that signed up through a provider
  reporting the address unverified (the mock provider's `email_verified=false`), cannot be handed to that
  address's owner by a reset (pre-hijacking), and the rule is checked again when the code is used.
- A completed reset marks the address it went to verified and ends every session of the account.
- A code fails (404 VERIFICATION_CODE_NOT_FOUND, the answer for an invalid code) once the address is no longer a
  sign-in address of its user, or once the password changed (update, reset, or an admin's write)."""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from tests.e2e.test_oauth_http import APP_CALLBACK, OAuthProject, _Form, _query
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

RESET_URL = "http://localhost:3000/handler/password-reset"
CHANNELS = "/api/v1/contact-channels"
PASSWORD = "correct horse battery"
NEW_PASSWORD = "new staple 2024!"
MAYBE = {"success": "maybe, only if user with e-mail exists"}


@pytest.fixture
def http(base_url: str) -> Any:
    with httpx.Client(base_url=base_url, timeout=10.0) as client:
        yield client


def _email(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


def _error(reply: httpx.Response) -> tuple[int, str | None]:
    return reply.status_code, reply.headers.get("x-service-known-error")


def _post(http: httpx.Client, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    return http.post(f"/api/v1/auth/password/{path}", headers=headers or client_headers(), json=body)


def _as(tokens: dict[str, str]) -> dict[str, str]:
    return client_headers(
        **{"x-service-access-token": tokens["access_token"], "x-service-refresh-token": tokens["refresh_token"]}
    )


def _sign_up(http: httpx.Client, email: str) -> dict[str, str]:
    """A password sign-up: the address is the account's only way in, and nobody has verified it."""
    reply = _post(http, "sign-up", {"email": email, "password": PASSWORD, "verification_callback_url": RESET_URL})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _verified_user(http: httpx.Client, email: str) -> dict[str, str]:
    body = {"primary_email": email, "primary_email_verified": True, "primary_email_auth_enabled": True}
    created = http.post("/api/v1/users", headers=server_headers(), json={**body, "password": PASSWORD})
    assert created.status_code == 201, created.text
    return _sign_in(http, email)


def _sign_in(http: httpx.Client, email: str, password: str = PASSWORD) -> dict[str, str]:
    reply = _post(http, "sign-in", {"email": email, "password": password})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _outbox(http: httpx.Client, email: str) -> list[dict[str, Any]]:
    items = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    return [item for item in items if item["subject"].startswith("Reset your password")]


def _send(http: httpx.Client, email: str) -> None:
    sent = _post(http, "send-reset-code", {"email": email, "callback_url": RESET_URL})
    assert (sent.status_code, sent.json()) == (200, MAYBE)


def _code(http: httpx.Client, email: str) -> str:
    before = len(_outbox(http, email))
    _send(http, email)
    items = _outbox(http, email)
    assert len(items) == before + 1, f"no reset mail went to {email}"
    found = re.search(rf"{re.escape(RESET_URL)}\?code=([0-9a-z]{{45}})\b", items[0]["text"])
    assert found, items[0]["text"]
    return found.group(1)


def _add_channel(http: httpx.Client, tokens: dict[str, str], value: str) -> dict[str, Any]:
    body = {"user_id": "me", "type": "email", "value": value, "used_for_auth": True}
    created = http.post(CHANNELS, headers=_as(tokens), json=body)
    assert created.status_code == 201, created.text
    assert created.json()["is_verified"] is False
    return dict(created.json())


def _refreshes(http: httpx.Client, tokens: dict[str, str]) -> bool:
    headers = client_headers(**{"x-service-refresh-token": tokens["refresh_token"]})
    return http.post("/api/v1/auth/sessions/current/refresh", headers=headers).status_code == 200


def _me(http: httpx.Client, tokens: dict[str, str]) -> dict[str, Any]:
    reply = http.get("/api/v1/users/me", headers=_as(tokens))
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _channel(http: httpx.Client, user_id: str, value: str) -> dict[str, Any]:
    items = http.get(CHANNELS, headers=server_headers(), params={"user_id": user_id}).json()["items"]
    return next(c for c in items if c["value"] == value)


def _refused_code(http: httpx.Client, code: str) -> None:
    """The code answers as an invalid one does, on both routes, and resets nothing."""
    not_found = (404, "VERIFICATION_CODE_NOT_FOUND")
    assert _error(_post(http, "reset/check-code", {"code": code})) == not_found
    assert _error(_post(http, "reset", {"code": code, "password": NEW_PASSWORD})) == not_found


# --------------------------------------------------------------------------------------------------------------
# Finding 2: pre-hijacking through a reset mailed to an address nobody verified


def test_an_address_another_account_added_unverified_gets_no_reset_mail(http: httpx.Client) -> None:
    attacker_email, victim_email = _email("attacker"), _email("victim")
    attacker = _verified_user(http, attacker_email)
    _add_channel(http, attacker, victim_email)
    # The victim cannot sign up (the address is taken) and asks for a reset: the answer is the unknown address's,
    # and nothing reaches the victim, so the victim never signs in to an account the attacker can enter.
    _send(http, victim_email)
    _send(http, _email("nobody"))
    assert _outbox(http, victim_email) == []
    # The attacker still signs in at their own address; nothing of theirs changed.
    assert _refreshes(http, attacker)
    _sign_in(http, attacker_email)


class _UnverifiedAtProvider(OAuthProject):
    """A project whose mock provider (playing GitHub) reports the address `email_verified: false`."""

    def login_at_provider(self, location: str, email: str, display_name: str | None = None) -> httpx.Response:
        page = self.web.get(location)
        assert page.status_code == 200, page.text
        form = _Form()
        form.feed(page.text)
        assert form.action is not None, page.text
        assert form.email_field is not None, page.text
        fields = {**form.inputs, form.email_field: email, "email_verified": "false"}
        answer = self.web.post(urljoin(str(page.url), form.action), data=fields)
        assert answer.status_code in (302, 303), answer.text
        return answer


def test_an_address_an_oidc_provider_reports_unverified_gets_no_reset_mail(http: httpx.Client) -> None:
    # The attacker signs up through a provider that reports the victim's address unverified: the account has the
    # address (unverified, used for sign-in) and the attacker's provider account as another way in.
    project = _UnverifiedAtProvider(http)
    victim_email = _email("victim")
    state, verifier = secrets.token_urlsafe(12), "v" * 64
    started = project.authorize(verifier=verifier, state=state)
    assert started.status_code == 200, started.text
    back = project.follow_to_app(project.login_at_provider(started.json()["location"], victim_email))
    assert back.status_code == 303, back.text
    assert back.headers["location"].startswith(APP_CALLBACK), back.headers["location"]
    exchanged = project.token(_query(back.headers["location"])["code"], verifier)
    assert exchanged.status_code == 200, exchanged.text
    me = project.me(exchanged.json()["access_token"])
    assert (me["primary_email"], me["primary_email_verified"]) == (victim_email, False)
    # The victim asks for a reset: the unknown address's answer, and no mail.
    for address in (victim_email, _email("nobody")):
        body = {"email": address, "callback_url": RESET_URL}
        sent = project.call("client", "POST", "/auth/password/send-reset-code", json=body)
        assert (sent.status_code, sent.json()) == (200, MAYBE)
    outbox = project.call("server", "GET", "/emails/outbox", params={"to": victim_email})
    assert outbox.status_code == 200, outbox.text
    assert outbox.json()["items"] == []


def test_a_pending_code_dies_when_the_account_gains_another_way_in(http: httpx.Client) -> None:
    # The attacker signs up with the victim's address (unverified, the account's only way in: a reset may go to
    # it, and would lock the attacker out). Before the victim uses the link, the attacker adds an address of
    # their own: the link no longer resets, so the victim never lands in an account the attacker can enter.
    victim_email = _email("victim")
    attacker = _sign_up(http, victim_email)
    code = _code(http, victim_email)
    _add_channel(http, attacker, _email("attacker"))
    _refused_code(http, code)
    _sign_in(http, victim_email)  # the password the attacker chose is unchanged


def test_a_completed_reset_verifies_the_address_and_ends_every_session(http: httpx.Client) -> None:
    email = _email("only")
    first = _sign_up(http, email)
    second = _sign_in(http, email)
    assert _me(http, first)["primary_email_verified"] is False
    code = _code(http, email)  # the address is the account's only way in: the mail goes out
    reset = _post(http, "reset", {"code": code, "password": NEW_PASSWORD})
    assert (reset.status_code, reset.json()) == (200, {"success": True})
    assert not _refreshes(http, first)
    assert not _refreshes(http, second)
    after = _sign_in(http, email, NEW_PASSWORD)
    assert _me(http, after)["primary_email_verified"] is True


def test_a_reset_through_an_auth_channel_that_is_not_primary_verifies_that_channel(http: httpx.Client) -> None:
    primary, other = _email("primary"), _email("other")
    body = {"primary_email": primary, "primary_email_verified": False, "primary_email_auth_enabled": False}
    created = http.post("/api/v1/users", headers=server_headers(), json={**body, "password": PASSWORD})
    assert created.status_code == 201, created.text
    user_id = created.json()["id"]
    channel = {"user_id": user_id, "type": "email", "value": other, "used_for_auth": True, "is_verified": False}
    assert http.post(CHANNELS, headers=server_headers(), json=channel).status_code == 201
    tokens = _sign_in(http, other)
    code = _code(http, other)  # its only auth channel, unverified: the mail goes out
    assert _post(http, "reset", {"code": code, "password": NEW_PASSWORD}).status_code == 200
    assert not _refreshes(http, tokens)
    assert _channel(http, user_id, other)["is_verified"] is True
    assert _channel(http, user_id, primary)["is_verified"] is False


# --------------------------------------------------------------------------------------------------------------
# Finding 6: reset codes bound to the address and to the password


def test_a_code_sent_to_an_old_primary_address_fails_after_the_primary_changed(http: httpx.Client) -> None:
    old, new = _email("old"), _email("new")
    tokens = _verified_user(http, old)
    user_id = _me(http, tokens)["id"]
    code = _code(http, old)
    changed = http.patch(f"/api/v1/users/{user_id}", headers=server_headers(), json={"primary_email": new})
    assert changed.status_code == 200, changed.text
    _refused_code(http, code)
    _sign_in(http, new)  # the password is unchanged


def test_a_code_sent_before_the_primary_was_cleared_or_moved_to_another_channel_fails(http: httpx.Client) -> None:
    # The old primary stays a verified sign-in channel of the user (as in the original), yet a code mailed to it
    # while it was the primary dies when the primary moves: to none, or to another of the user's channels.
    old, other = _email("cleared"), _email("other")
    tokens = _verified_user(http, old)
    user_id = _me(http, tokens)["id"]
    body = {"user_id": user_id, "type": "email", "value": other, "used_for_auth": True, "is_verified": True}
    assert http.post(CHANNELS, headers=server_headers(), json=body).status_code == 201
    to_old, to_other = _code(http, old), _code(http, other)
    cleared = http.patch(f"/api/v1/users/{user_id}", headers=server_headers(), json={"primary_email": None})
    assert cleared.status_code == 200, cleared.text
    _refused_code(http, to_old)
    _refused_code(http, to_other)  # every code stored before the move: bound to the primary, not to its address
    kept = _channel(http, user_id, old)
    assert (kept["is_primary"], kept["is_verified"], kept["used_for_auth"]) == (False, True, True)
    fresh = _code(http, old)  # a code sent now, to the kept channel, resets
    promoted = http.patch(f"/api/v1/users/{user_id}", headers=server_headers(), json={"primary_email": other})
    assert promoted.status_code == 200, promoted.text
    assert (promoted.json()["primary_email"], promoted.json()["primary_email_verified"]) == (other, True)
    _refused_code(http, fresh)
    last = _code(http, old)
    assert _post(http, "reset", {"code": last, "password": NEW_PASSWORD}).status_code == 200
    _sign_in(http, old, NEW_PASSWORD)


def test_a_code_issued_before_a_password_update_fails_after_it(http: httpx.Client) -> None:
    email = _email("update")
    tokens = _verified_user(http, email)
    code = _code(http, email)
    updated = _post(http, "update", {"old_password": PASSWORD, "new_password": NEW_PASSWORD}, _as(tokens))
    assert updated.status_code == 200, updated.text
    _refused_code(http, code)
    _sign_in(http, email, NEW_PASSWORD)


def test_a_code_issued_before_another_reset_fails_after_it(http: httpx.Client) -> None:
    email = _email("twice")
    _verified_user(http, email)
    first, second = _code(http, email), _code(http, email)
    assert _post(http, "reset", {"code": second, "password": NEW_PASSWORD}).status_code == 200
    _refused_code(http, first)
    _sign_in(http, email, NEW_PASSWORD)
