"""Contact channels over real HTTP against a real Hypercorn process (memory store, dev project, outbox mail): CRUD
with its ownership rules, every known error and plain error of reference part 2 §2, the primary channel as the
user's `primary_email*`, verification by the mailed code, sign-in by any auth channel, and the rate limits."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/email-verification"
CHANNELS = "/api/v1/contact-channels"


def new_email(tag: str = "user") -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


class Person:
    """A user created by a server, signed in (its access token), with helpers for its requests."""

    def __init__(self, http: httpx.Client, *, email: str | None = None, verified: bool = True) -> None:
        self.http = http
        self.email = email or new_email()
        body = {"primary_email": self.email, "primary_email_verified": verified, "primary_email_auth_enabled": True}
        created = http.post("/api/v1/users", headers=server_headers(), json={**body, "otp_auth_enabled": True})
        assert created.status_code == 201, created.text
        self.id: str = created.json()["id"]
        session = http.post("/api/v1/auth/sessions", headers=server_headers(), json={"user_id": self.id})
        self.token: str = session.json()["access_token"]

    def headers(self) -> dict[str, str]:
        return client_headers(**{"x-service-access-token": self.token})

    def request(self, method: str, path: str, json: Any = None, **kw: Any) -> httpx.Response:
        return self.http.request(method, path, headers=self.headers(), json=json, **kw)

    def create(self, value: str, **fields: Any) -> httpx.Response:
        body = {"user_id": "me", "type": "email", "value": value, "used_for_auth": True, **fields}
        return self.request("POST", CHANNELS, body)

    def channels(self) -> list[dict[str, Any]]:
        listed = self.request("GET", CHANNELS, params={"user_id": "me"})
        assert listed.status_code == 200, listed.text
        return list(listed.json()["items"])

    def me(self) -> dict[str, Any]:
        return dict(self.request("GET", "/api/v1/users/me").json())

    def primary(self) -> dict[str, Any]:
        return next(c for c in self.channels() if c["is_primary"])


def plain(response: httpx.Response, status: int, text: str) -> None:
    assert response.status_code == status, response.text
    assert response.text == text
    assert response.headers["content-type"].startswith("text/plain")
    assert "x-service-known-error" not in response.headers


def known(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["x-service-known-error"] == code
    return dict(response.json())


def mailed_code(http: httpx.Client, email: str) -> str:
    mail = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"][0]
    assert mail["subject"].startswith("Verify your email at ")
    return dict(parse_qsl(urlsplit(mail["magic_link"]).query))["code"]


@pytest.fixture
def ada(http: httpx.Client) -> Person:
    return Person(http)


# --------------------------------------------------------------------------------------------------------------
# CRUD


def test_a_user_lists_their_primary_email_as_a_channel(ada: Person) -> None:
    [primary] = ada.channels()
    assert primary == {
        "id": primary["id"],
        "user_id": ada.id,
        "type": "email",
        "value": ada.email,
        "is_primary": True,
        "is_verified": True,
        "used_for_auth": True,
    }
    assert ada.request("GET", f"{CHANNELS}/me/{primary['id']}").json() == primary


def test_a_client_creates_an_unverified_channel_stored_lower_cased(ada: Person) -> None:
    value = new_email("work")
    created = ada.create("  " + value.upper() + " ")
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["value"], body["is_primary"], body["is_verified"], body["used_for_auth"]) == (
        value,
        False,
        False,
        True,
    )
    assert [c["value"] for c in ada.channels()] == [ada.email, value]
    refused = ada.create(new_email(), is_verified=True)
    assert known(refused, 400, "SCHEMA_ERROR")["details"]["message"].endswith(
        "body contains unknown properties: is_verified"
    )


def test_a_server_may_create_a_verified_channel_for_anyone(http: httpx.Client, ada: Person) -> None:
    value = new_email()
    body = {"user_id": ada.id, "type": "email", "value": value, "used_for_auth": False, "is_verified": True}
    created = http.post(CHANNELS, headers=server_headers(), json=body)
    assert created.status_code == 201, created.text
    assert created.json()["is_verified"] is True
    everyone = http.get(CHANNELS, headers=server_headers()).json()["items"]
    assert {c["value"] for c in everyone} >= {ada.email, value}


def test_the_same_address_twice_for_one_user_is_a_plain_400(ada: Person) -> None:
    plain(ada.create(ada.email.upper(), used_for_auth=False), 400, "Contact channel already exists")


def test_an_address_another_user_signs_in_with_is_a_409(http: httpx.Client, ada: Person) -> None:
    bob = Person(http)
    error = known(bob.create(ada.email), 409, "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE")
    assert error["error"] == f'This email "({ada.email})" is already used for authentication by another account.'
    assert error["details"] == {
        "type": "email",
        "contact_channel_value": ada.email,
        "would_work_if_email_was_verified": False,
    }
    quiet = bob.create(ada.email, used_for_auth=False)  # not for sign-in: anyone may hold it
    assert quiet.status_code == 201
    update = bob.request("PATCH", f"{CHANNELS}/me/{quiet.json()['id']}", {"used_for_auth": True})
    error = known(update, 409, "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE")
    assert error["error"] == "This email  is already used for authentication by another account."
    assert error["details"]["contact_channel_value"] is None


def test_a_client_acts_only_on_its_own_channels(http: httpx.Client, ada: Person) -> None:
    bob = Person(http)
    bobs = bob.primary()["id"]
    body = {"user_id": bob.id, "type": "email", "value": new_email(), "used_for_auth": False}
    plain(ada.request("POST", CHANNELS, body), 403, "Client can only create contact channels for their own user.")
    plain(
        ada.request("GET", f"{CHANNELS}/{bob.id}/{bobs}"),
        403,
        "Client can only read contact channels for their own user.",
    )
    plain(
        ada.request("PATCH", f"{CHANNELS}/{bob.id}/{bobs}", {"used_for_auth": False}),
        403,
        "Client can only update contact channels for their own user.",
    )
    plain(
        ada.request("DELETE", f"{CHANNELS}/{bob.id}/{bobs}"),
        403,
        "Client can only delete contact channels for their own user.",
    )
    for params in ({"user_id": bob.id}, {}):
        plain(
            ada.request("GET", CHANNELS, params=params),
            403,
            "Client can only list contact channels for their own user.",
        )
    assert bob.primary()["value"] == bob.email


def test_a_client_without_a_user_cannot_use_me(http: httpx.Client, ada: Person) -> None:
    for method, path in (("GET", f"{CHANNELS}?user_id=me"), ("GET", f"{CHANNELS}/me/{uuid.uuid4()}")):
        known(http.request(method, path, headers=client_headers()), 400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    body = {"user_id": ada.id, "type": "email", "value": new_email(), "used_for_auth": False}
    known(http.post(CHANNELS, headers=client_headers(), json=body), 400, "CANNOT_GET_OWN_USER_WITHOUT_USER")


def test_missing_channels_are_plain_errors(http: httpx.Client, ada: Person) -> None:
    missing = f"{CHANNELS}/me/{uuid.uuid4()}"
    plain(ada.request("GET", missing), 404, "Contact channel not found.")
    plain(ada.request("PATCH", missing, {"used_for_auth": False}), 400, "Contact channel not found")
    plain(ada.request("DELETE", missing), 400, "Contact channel not found")
    known(ada.request("GET", f"{CHANNELS}/me/not-a-uuid"), 400, "SCHEMA_ERROR")
    body = {"user_id": str(uuid.uuid4()), "type": "email", "value": new_email(), "used_for_auth": False}
    assert known(http.post(CHANNELS, headers=server_headers(), json=body), 400, "USER_ID_DOES_NOT_EXIST")[
        "details"
    ] == {"user_id": body["user_id"]}


def test_making_a_channel_primary_shows_at_once_in_the_user(ada: Person) -> None:
    value = new_email("work")
    created = ada.create(value, is_primary=True).json()
    me = ada.me()
    # Unverified and made primary by a client: not for sign-in (README "Contact-channel claims").
    assert (me["primary_email"], me["primary_email_verified"], me["primary_email_auth_enabled"]) == (
        value,
        False,
        False,
    )
    assert [(c["value"], c["is_primary"]) for c in ada.channels()] == [(ada.email, False), (value, True)]
    old = next(c for c in ada.channels() if c["value"] == ada.email)
    assert ada.request("PATCH", f"{CHANNELS}/me/{old['id']}", {"is_primary": True}).json()["is_primary"] is True
    assert ada.me()["primary_email"] == ada.email
    assert ada.me()["primary_email_verified"] is True
    demoted = ada.request("PATCH", f"{CHANNELS}/me/{old['id']}", {"is_primary": False})
    assert demoted.json()["is_primary"] is False
    me = ada.me()
    assert (me["primary_email"], me["primary_email_verified"]) == (None, False)
    assert {c["id"] for c in ada.channels()} == {old["id"], created["id"]}


def test_a_new_value_is_unverified_unless_a_server_says_otherwise(http: httpx.Client, ada: Person) -> None:
    primary = ada.primary()
    value = new_email("new")
    changed = ada.request("PATCH", f"{CHANNELS}/me/{primary['id']}", {"value": value}).json()
    assert (changed["value"], changed["is_verified"]) == (value, False)
    assert (ada.me()["primary_email"], ada.me()["primary_email_verified"]) == (value, False)
    again = new_email("again")
    by_server = http.patch(
        f"{CHANNELS}/{ada.id}/{primary['id']}", headers=server_headers(), json={"value": again, "is_verified": True}
    )
    assert (by_server.json()["value"], by_server.json()["is_verified"]) == (again, True)


def test_deleting_the_primary_leaves_the_sign_in_methods(ada: Person) -> None:
    primary = ada.primary()
    assert ada.request("DELETE", f"{CHANNELS}/me/{primary['id']}").json() == {"success": True}
    me = ada.me()
    assert (me["primary_email"], me["otp_auth_enabled"]) == (None, True)
    assert ada.channels() == []


# --------------------------------------------------------------------------------------------------------------
# PATCH /users primary_email: the original's channel moves


def _flags(channel: dict[str, Any]) -> tuple[str, bool, bool, bool]:
    return channel["value"], channel["is_primary"], channel["is_verified"], channel["used_for_auth"]


def test_a_new_primary_email_keeps_the_old_one_as_a_channel(http: httpx.Client, ada: Person) -> None:
    old = ada.primary()
    new = new_email("new")
    changed = ada.request("PATCH", "/api/v1/users/me", {"primary_email": new})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["primary_email"], changed.json()["primary_email_verified"]) == (new, False)
    channels = {c["value"]: c for c in ada.channels()}
    assert _flags(channels[ada.email]) == (ada.email, False, True, True)  # kept, id and flags too
    assert channels[ada.email]["id"] == old["id"]
    assert _flags(channels[new]) == (new, True, False, False)  # a client's new address does not sign in
    assert sign_in(http, ada.email)["user_id"] == ada.id  # the old address still does


def test_a_null_primary_email_keeps_the_address_as_a_channel(http: httpx.Client, ada: Person) -> None:
    changed = ada.request("PATCH", "/api/v1/users/me", {"primary_email": None})
    assert changed.status_code == 200, changed.text
    me = changed.json()
    assert (me["primary_email"], me["primary_email_verified"], me["primary_email_auth_enabled"]) == (None, False, False)
    assert [_flags(c) for c in ada.channels()] == [(ada.email, False, True, True)]
    assert sign_in(http, ada.email)["user_id"] == ada.id


def test_a_primary_email_naming_an_own_channel_promotes_it_with_its_verification(
    http: httpx.Client, ada: Person
) -> None:
    verified, unverified = new_email("verified"), new_email("unverified")
    body = {"user_id": ada.id, "type": "email", "value": verified, "used_for_auth": False, "is_verified": True}
    assert http.post(CHANNELS, headers=server_headers(), json=body).status_code == 201
    assert ada.create(unverified, used_for_auth=False).status_code == 201
    ids = {c["value"]: c["id"] for c in ada.channels()}

    changed = ada.request("PATCH", "/api/v1/users/me", {"primary_email": verified})
    assert changed.status_code == 200, changed.text
    me = changed.json()
    # verified kept; used for auth as the old primary was (a verified address: it signs in, as in the original)
    assert (me["primary_email"], me["primary_email_verified"], me["primary_email_auth_enabled"]) == (
        verified,
        True,
        True,
    )
    assert sign_in(http, verified)["user_id"] == ada.id
    changed = ada.request("PATCH", "/api/v1/users/me", {"primary_email": unverified})
    me = changed.json()
    # unverified stays so, and a client's unverified primary does not sign in
    assert (me["primary_email"], me["primary_email_verified"], me["primary_email_auth_enabled"]) == (
        unverified,
        False,
        False,
    )
    channels = ada.channels()
    assert {c["value"]: c["id"] for c in channels} == ids  # no channel made or lost
    assert [_flags(c) for c in channels] == [
        (ada.email, False, True, True),
        (verified, False, True, True),
        (unverified, True, False, False),
    ]
    # a server may set the flags in the same request
    body = {"primary_email": verified, "primary_email_verified": False, "primary_email_auth_enabled": False}
    server = http.patch(f"/api/v1/users/{ada.id}", headers=server_headers(), json=body).json()
    assert (server["primary_email"], server["primary_email_verified"], server["primary_email_auth_enabled"]) == (
        verified,
        False,
        False,
    )


def test_a_primary_email_another_user_signs_in_with_is_refused(http: httpx.Client, ada: Person) -> None:
    bob = Person(http)
    assert ada.create(bob.email, used_for_auth=False).status_code == 201  # a channel of ada's, not for auth
    before = ada.channels()
    body = {"primary_email": bob.email, "primary_email_verified": True}
    known(http.patch(f"/api/v1/users/{ada.id}", headers=server_headers(), json=body), 409, "USER_EMAIL_ALREADY_EXISTS")
    assert ada.channels() == before


# --------------------------------------------------------------------------------------------------------------
# Verification


def test_a_channel_is_verified_through_the_mailed_code(http: httpx.Client, ada: Person) -> None:
    value = new_email("work")
    channel = ada.create(value).json()
    sent = ada.request("POST", f"{CHANNELS}/me/{channel['id']}/send-verification-code", {"callback_url": CALLBACK})
    assert sent.json() == {"success": True}
    code = mailed_code(http, value)
    assert len(code) == 45
    checked = http.post(f"{CHANNELS}/verify/check-code", headers=client_headers(), json={"code": code})
    assert checked.json() == {"is_code_valid": True}
    assert http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": code}).json() == {"success": True}
    assert next(c for c in ada.channels() if c["id"] == channel["id"])["is_verified"] is True
    known(
        http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": code}),
        409,
        "VERIFICATION_CODE_ALREADY_USED",
    )
    again = ada.request("POST", f"{CHANNELS}/me/{channel['id']}/send-verification-code", {"callback_url": CALLBACK})
    assert known(again, 409, "EMAIL_ALREADY_VERIFIED")["error"] == "The e-mail is already verified."


def test_verification_codes_are_checked_like_every_code(http: httpx.Client, ada: Person) -> None:
    known(
        http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": "x" * 45}),
        404,
        "VERIFICATION_CODE_NOT_FOUND",
    )
    known(http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": "x" * 6}), 400, "SCHEMA_ERROR")
    checked = http.post(f"{CHANNELS}/verify/check-code", headers=client_headers(), json={"code": "y" * 45, "x": 1})
    known(checked, 400, "SCHEMA_ERROR")


def test_verifying_a_deleted_channel_is_a_plain_400(http: httpx.Client, ada: Person) -> None:
    value = new_email("gone")
    channel = ada.create(value).json()
    ada.request("POST", f"{CHANNELS}/me/{channel['id']}/send-verification-code", {"callback_url": CALLBACK})
    code = mailed_code(http, value)
    ada.request("DELETE", f"{CHANNELS}/me/{channel['id']}")
    verified = http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": code})
    plain(verified, 400, "Contact channel not found. Was your contact channel deleted?")


def test_sending_a_verification_code_refuses_what_the_reference_refuses(http: httpx.Client, ada: Person) -> None:
    bob = Person(http, verified=False)
    bobs = bob.primary()["id"]
    body = {"callback_url": CALLBACK}
    plain(
        ada.request("POST", f"{CHANNELS}/{bob.id}/{bobs}/send-verification-code", body),
        400,
        "Can only send verification code for your own user",
    )
    no_user = http.post(f"{CHANNELS}/{bob.id}/{bobs}/send-verification-code", headers=client_headers(), json=body)
    known(no_user, 400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    nobody = str(uuid.uuid4())
    unknown = http.post(f"{CHANNELS}/{nobody}/{bobs}/send-verification-code", headers=server_headers(), json=body)
    assert known(unknown, 400, "USER_ID_DOES_NOT_EXIST")["details"] == {"user_id": nobody}
    plain(
        bob.request("POST", f"{CHANNELS}/me/{uuid.uuid4()}/send-verification-code", body),
        404,
        "Contact channel not found",
    )
    untrusted = bob.request(
        "POST", f"{CHANNELS}/me/{bobs}/send-verification-code", {"callback_url": "https://evil.example/cb"}
    )
    known(untrusted, 400, "REDIRECT_URL_NOT_WHITELISTED")
    by_server = http.post(f"{CHANNELS}/{bob.id}/{bobs}/send-verification-code", headers=server_headers(), json=body)
    assert by_server.json() == {"success": True}


def test_the_legacy_form_verifies_the_primary_email(http: httpx.Client) -> None:
    carol = Person(http, verified=False)
    legacy = f"{CHANNELS}/send-verification-code"
    no_user = http.post(legacy, headers=client_headers(), json={"email": carol.email, "callback_url": CALLBACK})
    assert "auth.user must be defined" in known(no_user, 400, "SCHEMA_ERROR")["details"]["message"]
    other = new_email()
    error = known(
        carol.request("POST", legacy, {"email": other, "callback_url": CALLBACK}), 400, "EMAIL_IS_NOT_PRIMARY_EMAIL"
    )
    assert error["details"] == {"email": other, "primary_email": carol.email}
    assert error["error"] == f"The given e-mail ({other}) must equal the user's primary e-mail ({carol.email})."
    assert carol.request("POST", legacy, {"email": carol.email, "callback_url": CALLBACK}).json() == {"success": True}
    assert carol.me()["primary_email_verified"] is False
    http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": mailed_code(http, carol.email)})
    assert carol.me()["primary_email_verified"] is True
    known(
        carol.request("POST", legacy, {"email": carol.email, "callback_url": CALLBACK}), 409, "EMAIL_ALREADY_VERIFIED"
    )


# --------------------------------------------------------------------------------------------------------------
# Sign-in by any auth channel


def send_sign_in_code(http: httpx.Client, email: str) -> httpx.Response:
    return http.post(
        "/api/v1/auth/otp/send-sign-in-code", headers=client_headers(), json={"email": email, "callback_url": CALLBACK}
    )


def sign_in(http: httpx.Client, email: str) -> dict[str, Any]:
    sent = send_sign_in_code(http, email)
    assert sent.status_code == 200, sent.text
    mail = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"][0]
    signed = http.post(
        "/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": mail["code"] + sent.json()["nonce"]}
    )
    assert signed.status_code == 200, signed.text
    return dict(signed.json())


def test_a_verified_auth_channel_signs_its_user_in_and_one_not_for_auth_never(http: httpx.Client, ada: Person) -> None:
    work = new_email("work")
    channel = ada.create(work).json()
    # Unverified and added by a client: not ada's sign-in address yet (a code would make its owner a new account).
    assert send_sign_in_code(http, work).status_code == 200
    http.patch(f"{CHANNELS}/{ada.id}/{channel['id']}", headers=server_headers(), json={"is_verified": True})
    assert sign_in(http, work)["user_id"] == ada.id
    quiet = new_email("quiet")
    ada.create(quiet, used_for_auth=False)
    assert sign_in(http, quiet)["is_new_user"] is True


def test_an_address_held_by_a_channel_cannot_become_another_users_primary_email(
    http: httpx.Client, ada: Person
) -> None:
    work = new_email("work")
    body = {"user_id": ada.id, "type": "email", "value": work, "used_for_auth": True}
    assert http.post(CHANNELS, headers=server_headers(), json=body).status_code == 201  # a server's: it holds it
    taken = http.post(
        "/api/v1/users", headers=server_headers(), json={"primary_email": work, "primary_email_auth_enabled": True}
    )
    known(taken, 409, "USER_EMAIL_ALREADY_EXISTS")


# --------------------------------------------------------------------------------------------------------------
# Rate limits


def test_verification_mail_is_rate_limited_per_address() -> None:
    server = start_hypercorn({"IDENTITY_RATE_LIMITS": "on"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            dave = Person(http, verified=False)
            channel = dave.primary()["id"]
            path = f"{CHANNELS}/{dave.id}/{channel}/send-verification-code"
            answers = [http.post(path, headers=server_headers(), json={"callback_url": CALLBACK}) for _ in range(6)]
            assert [a.status_code for a in answers] == [200] * 5 + [429]
            assert answers[-1].headers["x-service-known-error"] == "RATE_LIMITED"
            assert answers[-1].json()["details"]["rule"] == "send_code_email"
            mails = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": dave.email}).json()
            assert len(mails["items"]) == 5
    finally:
        stop_server(server)
