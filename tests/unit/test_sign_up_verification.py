"""Password sign-up with `verification_callback_url` mails the new address a verification code (reference part 2
§2), which verifies the user's primary e-mail; an untrusted callback refuses the sign-up before anything exists."""

from __future__ import annotations

import re

from tests.support import Harness, client_headers, server_headers

CALLBACK = "http://localhost:3000/handler/email-verification"


def _sign_up(h: Harness, email: str, **extra: str) -> tuple[int, dict[str, object]]:
    reply = h.request(
        "POST",
        "/api/v1/auth/password/sign-up",
        client_headers(),
        json={"email": email, "password": "correct horse", **extra},
    )
    return reply.status, reply.json


def test_a_sign_up_with_a_verification_callback_mails_a_code_that_verifies_the_address() -> None:
    h = Harness()
    status, body = _sign_up(h, "ada@example.com", verification_callback_url=CALLBACK)
    assert status == 200, body
    mails = h.outbox("ada@example.com")
    assert [m.subject for m in mails] == [f"Verify your email at {h.project().display_name}"]
    found = re.search(r"[?&]code=([0-9a-z]{45})", mails[0].text)
    assert found is not None
    assert not h.user(str(body["user_id"])).primary_email_verified
    verified = h.request("POST", "/api/v1/contact-channels/verify", client_headers(), json={"code": found.group(1)})
    assert verified.status == 200, verified.body
    assert h.user(str(body["user_id"])).primary_email_verified


def test_a_sign_up_without_a_callback_mails_nothing() -> None:
    h = Harness()
    status, _ = _sign_up(h, "ada@example.com")
    assert status == 200
    assert h.outbox("ada@example.com") == []


def test_an_untrusted_verification_callback_refuses_the_sign_up_before_creating_anyone() -> None:
    h = Harness()
    status, body = _sign_up(h, "ada@example.com", verification_callback_url="https://evil.example/steal")
    assert (status, body["code"]) == (400, "REDIRECT_URL_NOT_WHITELISTED")
    users = h.request("GET", "/api/v1/users", server_headers()).json["items"]
    assert users == []
    assert h.outbox("ada@example.com") == []
