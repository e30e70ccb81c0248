"""One e-mail rule for every route that takes an address: a lookalike of an address (an invisible character, a
Cyrillic letter, a trailing dot) is refused everywhere alike, and a compatibility form (full-width letters) names
the plain address everywhere alike, so no second account of an address can exist."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from identity_proto.users import checked_email
from tests.support import Reply, admin_headers, client_headers, server_headers
from tests.unit.test_sign_in import code_for, sign_in
from tests.unit.test_users import Signed

VICTIM = "victim@example.com"

#: Addresses that look like VICTIM (or like any address) but are not one: refused by every route.
LOOKALIKES = {
    "zero-width-space": "victim@example.com\u200b",
    "zero-width-joiner-inside": "vic\u200dtim@example.com",
    "cyrillic-e": "victim@\u0435xample.com",
    "trailing-dot": "victim@example.com.",
    "soft-hyphen": "vic\u00adtim@example.com",
    "no-tld": "victim@example",
    "inner-space": "vic tim@example.com",
}


@dataclass(frozen=True)
class EmailRoute:
    """One route that takes an address: how to send `email` to it, and where the field is named."""

    name: str
    send: Callable[[Signed, str], Reply]
    where: str


def _sign_up(s: Signed, email: str) -> Reply:
    body = {"email": email, "password": "a long password"}
    return s.h.request("POST", "/api/v1/auth/password/sign-up", client_headers(), json=body)


def _password_sign_in(s: Signed, email: str) -> Reply:
    body = {"email": email, "password": "a long password"}
    return s.h.request("POST", "/api/v1/auth/password/sign-in", client_headers(), json=body)


def _send_code(s: Signed, email: str) -> Reply:
    body = {"email": email, "callback_url": "http://localhost:3000/cb"}
    return s.h.request("POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json=body)


def _create_user(s: Signed, email: str) -> Reply:
    return s.h.request("POST", "/api/v1/users", server_headers(), json={"primary_email": email})


def _outbox(s: Signed, email: str) -> Reply:
    return s.h.request("GET", "/api/v1/emails/outbox", server_headers(), query=f"to={email}".replace(" ", "%20"))


ROUTES = [
    EmailRoute("send-sign-in-code", _send_code, "body.email"),
    EmailRoute("password-sign-up", _sign_up, "body.email"),
    EmailRoute("password-sign-in", _password_sign_in, "body.email"),
    EmailRoute("patch-me-client", lambda s, e: s.patch_me({"primary_email": e}), "body.primary_email"),
    EmailRoute(
        "patch-me-server",
        lambda s, e: s.h.request(
            "PATCH",
            "/api/v1/users/me",
            server_headers(**{"x-service-access-token": s.tokens["access_token"]}),
            json={"primary_email": e},
        ),
        "body.primary_email",
    ),
    EmailRoute("patch-user-server", lambda s, e: s.patch({"primary_email": e}), "body.primary_email"),
    EmailRoute("patch-user-admin", lambda s, e: s.patch({"primary_email": e}, admin_headers()), "body.primary_email"),
    EmailRoute("create-user-server", _create_user, "body.primary_email"),
    EmailRoute("outbox-filter", _outbox, "query.to"),
]


def _signed_as(email: str = "ada@example.com") -> Signed:
    s = Signed(email)
    patch = {"config": {"credential_enabled": True}}
    assert s.h.request("PATCH", "/api/v1/projects/current", admin_headers(), json=patch).status == 200
    return s


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
@pytest.mark.parametrize("email", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_every_email_input_uses_one_validator(route: EmailRoute, email: str) -> None:
    s = _signed_as()
    tenant = s.h.store.tenant(s.h.project().id)
    users_before, mail_before = dict(tenant.users), len(tenant.outbox)
    reply = route.send(s, email)
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), reply.body
    assert f"  - {route.where} must be a valid email" in reply.json["details"]["message"].splitlines()
    assert (tenant.users, len(tenant.outbox)) == (users_before, mail_before)


FULL_WIDTH_VICTIM = "\uff56\uff49\uff43\uff54\uff49\uff4d@\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com"


def test_a_full_width_address_names_the_plain_address() -> None:
    victim = _signed_as(VICTIM)
    h = victim.h
    body = {"primary_email": FULL_WIDTH_VICTIM, "primary_email_auth_enabled": True}
    created = h.request("POST", "/api/v1/users", server_headers(), json=body)
    assert (created.status, created.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    signed_up = _sign_up(victim, FULL_WIDTH_VICTIM)
    assert (signed_up.status, signed_up.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    before = len(h.outbox(VICTIM))
    assert _send_code(victim, FULL_WIDTH_VICTIM).status == 200
    assert len(h.outbox(VICTIM)) == before + 1  # the victim's inbox: the only one there is


def test_a_client_cannot_take_another_users_address_in_a_lookalike_form() -> None:
    """Lookalikes are refused; the plain address (in any spelling) may be written, but a client's address is
    unverified and signs nobody in, so the victim still signs in as themselves."""
    victim = _signed_as(VICTIM)
    h = victim.h
    attacker = sign_in(h, code_for(h, "attacker@example.com")).json
    headers = client_headers(**{"x-service-access-token": attacker["access_token"]})
    for form in LOOKALIKES.values():
        reply = h.request("PATCH", "/api/v1/users/me", headers, json={"primary_email": form})
        assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), (form, reply.body)
        assert h.user(attacker["user_id"]).primary_email == "attacker@example.com"
    for form in (FULL_WIDTH_VICTIM, " VICTIM@Example.com "):
        reply = h.request("PATCH", "/api/v1/users/me", headers, json={"primary_email": form})
        assert reply.status == 200, reply.body
        assert (reply.json["primary_email"], reply.json["primary_email_verified"]) == (VICTIM, False)
        assert reply.json["primary_email_auth_enabled"] is False
    signed_in = sign_in(h, code_for(h, VICTIM)).json
    assert signed_in["user_id"] != attacker["user_id"]


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("Ada@Example.com", "ada@example.com"),
        ("  ada@example.com\t", "ada@example.com"),
        ("\uff41\uff44\uff41@example.com", "ada@example.com"),
        ("ada@\uff45xample\uff0ecom", "ada@example.com"),
        ("o'brien+tag@mail.example.co.uk", "o'brien+tag@mail.example.co.uk"),
    ],
)
def test_checked_email_answers_the_stored_form(given: str, stored: str) -> None:
    assert checked_email(given) == stored


@pytest.mark.parametrize(
    "given",
    [
        *LOOKALIKES.values(),
        "",
        "@example.com",
        "ada@",
        ".ada@example.com",
        "a..b@example.com",
        "a@b.c",
        "x" * 260 + "@e.com",
    ],
)
def test_checked_email_refuses_what_is_not_a_plain_address(given: str) -> None:
    with pytest.raises(ValueError, match="must be a valid email"):
        checked_email(given)
