"""The contact-channel rules through the whole service over every store: which address signs in, and whether the
matched address is verified, are decided once in the core (`identity_proto.effects.contact_channels`), so every
route that asks gets the same answer."""

from __future__ import annotations

from identity_proto.drivers import Store
from tests.contract.service import CALLBACK, ServiceOver
from tests.support import client_headers, server_headers

PRIMARY = "primary@example.com"
SECOND = "second@example.com"


def _user_with_an_unverified_primary_and_a_verified_second_address(service: ServiceOver) -> str:
    made = service.request(
        "POST",
        "/api/v1/users",
        server_headers(),
        {"primary_email": PRIMARY, "primary_email_verified": False, "primary_email_auth_enabled": True},
    )
    assert made.status == 201, made.body
    user_id = str(made.json["id"])
    added = service.request(
        "POST",
        "/api/v1/contact-channels",
        server_headers(),
        {"user_id": user_id, "type": "email", "value": SECOND, "is_verified": True, "used_for_auth": True},
    )
    assert added.status == 201, added.body
    return user_id


def _send_code(service: ServiceOver, email: str, callback: str) -> tuple[int, str | None]:
    sent = service.request(
        "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), {"email": email, "callback_url": callback}
    )
    return sent.status, sent.known_error


def test_send_code_judges_the_matched_address_not_the_primary(store: Store) -> None:
    """The issue's drift: the verified second address gets a code with a trusted callback, and the untrusted
    callback's error with an untrusted one (it answered 409 USER_EMAIL_ALREADY_EXISTS, judging the primary)."""
    service = ServiceOver(store)
    _user_with_an_unverified_primary_and_a_verified_second_address(service)
    assert _send_code(service, SECOND, CALLBACK) == (200, None)
    assert _send_code(service, SECOND, "https://evil.example.com/cb") == (400, "REDIRECT_URL_NOT_WHITELISTED")
    # The unverified primary is refused either way, with the refusal first (reference §2.2 steps 2 and 4).
    assert _send_code(service, PRIMARY, CALLBACK) == (409, "USER_EMAIL_ALREADY_EXISTS")
    assert _send_code(service, PRIMARY, "https://evil.example.com/cb") == (409, "USER_EMAIL_ALREADY_EXISTS")
