"""Address squatting through contact channels, over real HTTP against a real Hypercorn (memory store and real
Redis): an unverified auth channel added by a client (an anonymous user's or a signed-in user's) holds no sign-in
address, so the address's owner still signs up and in by code or by password and gets an account of their own;
once the owner holds the address, the squatter's claim signs nobody in; and channel creation is limited per user
and per address (429 RATE_LIMITED), with at most 20 channels per user."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.processes import RedisServer
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/email-verification"
CHANNELS = "/api/v1/contact-channels"
ALLOW = {"x-service-allow-anonymous-user": "true"}
PASSWORD = "the owner's password"
SQUATTER_PASSWORD = "the squatter's password"


def _email(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


def _as(token: str) -> dict[str, str]:
    return client_headers(**{"x-service-access-token": token}, **ALLOW)


def _anonymous(http: httpx.Client) -> str:
    reply = http.post("/api/v1/auth/anonymous/sign-up", headers=client_headers())
    assert reply.status_code == 200, reply.text
    return str(reply.json()["access_token"])


def _password(http: httpx.Client, action: str, email: str, password: str) -> httpx.Response:
    return http.post(
        f"/api/v1/auth/password/{action}", headers=client_headers(), json={"email": email, "password": password}
    )


def _squatter(http: httpx.Client, password: str = SQUATTER_PASSWORD) -> tuple[str, str]:
    """A user signed up by password at an address of their own: (user id, access token)."""
    reply = _password(http, "sign-up", _email("user"), password)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["user_id"]), str(reply.json()["access_token"])


def _squat(http: httpx.Client, token: str, address: str, **fields: Any) -> dict[str, Any]:
    body = {"user_id": "me", "type": "email", "value": address, "used_for_auth": True, **fields}
    created = http.post(CHANNELS, headers=_as(token), json=body)
    assert created.status_code == 201, created.text
    assert created.json()["is_verified"] is False
    return dict(created.json())


def _code_sign_in(http: httpx.Client, email: str) -> httpx.Response:
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code", headers=client_headers(), json={"email": email, "callback_url": CALLBACK}
    )
    assert sent.status_code == 200, sent.text
    mails = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    code = next(m["code"] for m in mails if m.get("code"))
    return http.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": code + sent.json()["nonce"]})


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10.0) as client:
        yield client


# --------------------------------------------------------------------------------------------------------------
# The owner is not locked out


def test_an_anonymous_users_claim_does_not_lock_the_owner_out_of_code_sign_in(http: httpx.Client) -> None:
    owner = _email("ceo")
    anonymous = _anonymous(http)
    _squat(http, anonymous, owner)
    signed_in = _code_sign_in(http, owner)
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["is_new_user"] is True
    me = http.get("/api/v1/users/me", headers=_as(signed_in.json()["access_token"])).json()
    assert (me["primary_email"], me["primary_email_verified"], me["is_anonymous"]) == (owner, True, False)
    assert http.get("/api/v1/users/me", headers=_as(anonymous)).json()["is_anonymous"] is True


def test_a_users_claim_does_not_block_the_owners_password_sign_up(http: httpx.Client) -> None:
    owner = _email("ceo")
    squatter_id, squatter = _squatter(http)
    _squat(http, squatter, owner)
    signed_up = _password(http, "sign-up", owner, PASSWORD)
    assert signed_up.status_code == 200, signed_up.text
    assert signed_up.json()["user_id"] != squatter_id
    signed_in = _password(http, "sign-in", owner, PASSWORD)
    assert signed_in.json()["user_id"] == signed_up.json()["user_id"]
    # Neither does an anonymous user's claim.
    other = _email("cfo")
    _squat(http, _anonymous(http), other)
    assert _password(http, "sign-up", other, PASSWORD).status_code == 200


def test_a_claim_made_primary_by_a_client_does_not_block_the_owner(http: httpx.Client) -> None:
    owner = _email("ceo")
    _, squatter = _squatter(http)
    claimed = _squat(http, squatter, owner, is_primary=True)
    assert claimed["is_primary"] is True
    signed_in = _code_sign_in(http, owner)
    assert (signed_in.status_code, signed_in.json()["is_new_user"]) == (200, True)


def test_an_unverified_claim_never_signs_the_squatter_in(http: httpx.Client) -> None:
    owner = _email("ceo")
    _, squatter = _squatter(http)
    _squat(http, squatter, owner)
    # Before the owner shows up: the claim is not a sign-in address of the squatter.
    assert _error(_password(http, "sign-in", owner, SQUATTER_PASSWORD)) == (400, "EMAIL_PASSWORD_MISMATCH")
    signed_in = _code_sign_in(http, owner)
    assert signed_in.status_code == 200, signed_in.text
    owner_id = signed_in.json()["user_id"]
    # After: the address signs the owner in, by code and (once they have one) by password; never the squatter.
    assert _error(_password(http, "sign-in", owner, SQUATTER_PASSWORD)) == (400, "EMAIL_PASSWORD_MISMATCH")
    again = _code_sign_in(http, owner)
    assert (again.json()["user_id"], again.json()["is_new_user"]) == (owner_id, False)


def test_the_first_verification_wins(http: httpx.Client) -> None:
    """Two users claim one address; the one who proves the mailbox (channel verification) holds it, and the other
    claim signs nobody in and cannot be made to."""
    address = _email("shared")
    squatter_id, squatter = _squatter(http)
    _squat(http, squatter, address)
    owner_id, owner = _squatter(http, PASSWORD)
    channel = _squat(http, owner, address)
    sent = http.post(
        f"{CHANNELS}/me/{channel['id']}/send-verification-code", headers=_as(owner), json={"callback_url": CALLBACK}
    )
    assert sent.status_code == 200, sent.text
    mail = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": address}).json()["items"][0]
    code = dict(parse_qsl(urlsplit(mail["magic_link"]).query))["code"]
    verified = http.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": code})
    assert verified.status_code == 200, verified.text
    assert _code_sign_in(http, address).json()["user_id"] == owner_id
    assert _password(http, "sign-in", address, PASSWORD).json()["user_id"] == owner_id
    assert _error(_password(http, "sign-in", address, SQUATTER_PASSWORD)) == (400, "EMAIL_PASSWORD_MISMATCH")
    squatted = next(
        c
        for c in http.get(CHANNELS, headers=_as(squatter), params={"user_id": "me"}).json()["items"]
        if c["value"] == address
    )
    toggled = http.patch(f"{CHANNELS}/me/{squatted['id']}", headers=_as(squatter), json={"used_for_auth": True})
    assert _error(toggled) == (409, "CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE")
    assert _code_sign_in(http, address).json()["user_id"] == owner_id
    assert squatter_id != owner_id


def test_a_user_has_at_most_20_channels(http: httpx.Client) -> None:
    _, token = _squatter(http)  # one channel: the primary
    answers = [
        http.post(
            CHANNELS,
            headers=_as(token),
            json={"user_id": "me", "type": "email", "value": _email("c"), "used_for_auth": False},
        )
        for _ in range(20)
    ]
    assert [a.status_code for a in answers] == [201] * 19 + [400]
    assert answers[-1].text == "A user can have at most 20 contact channels"
    assert len(http.get(CHANNELS, headers=_as(token), params={"user_id": "me"}).json()["items"]) == 20


# --------------------------------------------------------------------------------------------------------------
# Rate limits


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def limited(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """A service with rate limits on, on the memory store, then on the session's real Redis."""
    env = {"IDENTITY_RATE_LIMITS": "on"}
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        env.update(IDENTITY_BACKEND="redis", IDENTITY_REDIS_URL=redis_server.url)
    server = start_hypercorn(env)
    try:
        with httpx.Client(base_url=server.base_url, timeout=10.0) as client:
            yield client
    finally:
        stop_server(server)


def test_a_channel_flood_from_one_user_is_refused(limited: httpx.Client) -> None:
    token = _anonymous(limited)
    body = {"user_id": "me", "type": "email", "used_for_auth": True}
    answers = [limited.post(CHANNELS, headers=_as(token), json={**body, "value": _email("flood")}) for _ in range(11)]
    assert [a.status_code for a in answers] == [201] * 10 + [429]
    assert _error(answers[-1]) == (429, "RATE_LIMITED")
    assert answers[-1].json()["details"]["rule"] == "contact_channel_user"
    assert int(answers[-1].headers["retry-after"]) > 0


def test_claims_of_one_address_by_many_users_are_refused(limited: httpx.Client) -> None:
    address = _email("ceo")
    body = {"user_id": "me", "type": "email", "value": address, "used_for_auth": True}
    answers = [limited.post(CHANNELS, headers=_as(_anonymous(limited)), json=body) for _ in range(6)]
    assert [a.status_code for a in answers] == [201] * 5 + [429]
    assert answers[-1].json()["details"]["rule"] == "contact_channel_address"
    # The owner is not locked out by any of them.
    owner = _code_sign_in(limited, address)
    assert (owner.status_code, owner.json()["is_new_user"]) == (200, True)
