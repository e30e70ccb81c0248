"""Sign-in over real HTTP against a real Hypercorn process (memory store, dev project, outbox mail)."""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
from typing import Any

import httpx
import pyotp
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.support import PROJECT_ID, client_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/magic-link-callback"


def _new_email() -> str:
    return f"user-{uuid.uuid4().hex[:12]}@example.com"


def _code(http: httpx.Client, email: str) -> str:
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code", headers=client_headers(), json={"email": email, "callback_url": CALLBACK}
    )
    assert sent.status_code == 200, sent.text
    outbox = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox[0]["subject"])
    assert otp is not None
    return otp.group(1) + sent.json()["nonce"]


def _sign_in(http: httpx.Client, code: str) -> httpx.Response:
    return http.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": code})


def test_new_then_returning_user_with_an_upper_case_otp(http: httpx.Client) -> None:
    email = _new_email()
    first = _sign_in(http, _code(http, email))
    assert first.status_code == 200, first.text
    assert first.json()["is_new_user"] is True
    code = _code(http, email)
    second = _sign_in(http, code[:6].upper() + code[6:])
    assert second.json()["is_new_user"] is False
    assert second.json()["user_id"] == first.json()["user_id"]


def test_wrong_reused_and_guessed_codes(http: httpx.Client) -> None:
    email = _new_email()
    code = _code(http, email)
    wrong = ("AAAAAA" if not code.startswith("AAAAAA") else "BBBBBB") + code[6:]
    assert _sign_in(http, wrong).headers["x-service-known-error"] == "VERIFICATION_CODE_NOT_FOUND"
    assert _sign_in(http, code).status_code == 200
    reused = _sign_in(http, code)
    assert (reused.status_code, reused.headers["x-service-known-error"]) == (409, "VERIFICATION_CODE_ALREADY_USED")

    guessed = _code(http, email)
    for i in range(25):
        guess = f"{i:06d}" + guessed[6:]
        if guess != guessed:
            assert _sign_in(http, guess).status_code == 404
    blocked = _sign_in(http, guessed)
    assert (blocked.status_code, blocked.headers["x-service-known-error"]) == (
        400,
        "VERIFICATION_CODE_MAX_ATTEMPTS_REACHED",
    )


def test_two_codes_sent_before_use_both_work(http: httpx.Client) -> None:
    email = _new_email()
    first, second = _code(http, email), _code(http, email)
    assert _sign_in(http, second).status_code == 200
    assert _sign_in(http, first).status_code == 200


def test_twenty_concurrent_sign_ins_with_one_code_yield_exactly_one_success(http: httpx.Client) -> None:
    code = _code(http, _new_email())
    base_url = str(http.base_url)
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def attempt() -> None:
        with httpx.Client(base_url=base_url, timeout=10) as own:
            barrier.wait()
            statuses.append(_sign_in(own, code).status_code)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] + [409] * 19


def test_refresh_sign_out_and_revocation(http: httpx.Client) -> None:
    tokens: dict[str, Any] = _sign_in(http, _code(http, _new_email())).json()
    refreshed = http.post(
        "/api/v1/auth/sessions/current/refresh",
        headers=client_headers(**{"x-service-refresh-token": tokens["refresh_token"]}),
    )
    assert refreshed.status_code == 200
    form = {
        "grant_type": "refresh_token",
        "refresh_token": tokens["refresh_token"],
        "client_id": PROJECT_ID,
        "client_secret": client_headers()["x-service-publishable-client-key"],
    }
    grant = http.post("/api/v1/auth/oauth/token", data=form)
    assert (grant.status_code, grant.json()["token_type"]) == (200, "Bearer")

    other = _sign_in(http, _code(http, _new_email())).json()
    sessions = http.get("/api/v1/auth/sessions", headers=server_headers(), params={"user_id": other["user_id"]}).json()[
        "items"
    ]
    assert len(sessions) == 1
    assert http.delete(f"/api/v1/auth/sessions/{sessions[0]['id']}", headers=server_headers()).json() == {
        "success": True
    }
    revoked = http.post(
        "/api/v1/auth/sessions/current/refresh",
        headers=client_headers(**{"x-service-refresh-token": other["refresh_token"]}),
    )
    assert (revoked.status_code, revoked.headers["x-service-known-error"]) == (
        401,
        "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED",
    )

    signed_out = http.request(
        "DELETE",
        "/api/v1/auth/sessions/current",
        headers={
            **client_headers(**{"x-service-access-token": tokens["access_token"]}),
            "content-type": "application/json",
        },
        content=b"{}",
    )
    assert signed_out.json() == {"success": True}
    after = http.post("/api/v1/auth/oauth/token", data=form)
    assert (after.status_code, after.headers["x-service-known-error"]) == (401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED")


def test_the_access_token_verifies_with_a_standard_jose_library_against_the_served_jwks(http: httpx.Client) -> None:
    tokens = _sign_in(http, _code(http, _new_email())).json()
    served = http.get(f"/api/v1/projects/{PROJECT_ID}/.well-known/jwks.json")
    # One Cache-Control, the documented one: caches given two take the stricter `no-store`.
    assert served.headers.get_list("cache-control") == ["public, max-age=3600"]
    keys = KeySet.import_key_set(served.json())
    token = jwt.decode(tokens["access_token"], keys, algorithms=["ES256"])
    assert token.header["alg"] == "ES256"
    assert token.claims["sub"] == tokens["user_id"]
    assert token.claims["aud"] == PROJECT_ID
    assert token.claims["iss"].endswith(f"/api/v1/projects/{PROJECT_ID}")


def test_mfa_round_trip_with_a_real_totp(http: httpx.Client) -> None:
    email = _new_email()
    first = _sign_in(http, _code(http, email)).json()
    secret = b"0123456789abcdefghij"
    me = client_headers(**{"x-service-access-token": first["access_token"]})
    assert (
        http.patch(
            "/api/v1/users/me", headers=me, json={"totp_secret_base64": base64.b64encode(secret).decode()}
        ).json()["requires_totp_mfa"]
        is True
    )
    required = _sign_in(http, _code(http, email))
    assert (required.status_code, required.headers["x-service-known-error"]) == (
        400,
        "MULTI_FACTOR_AUTHENTICATION_REQUIRED",
    )
    attempt_code = required.json()["details"]["attempt_code"]
    totp = pyotp.TOTP(base64.b32encode(secret).decode())
    wrong = http.post(
        "/api/v1/auth/mfa/sign-in",
        headers=client_headers(),
        json={"type": "totp", "totp": "000000" if totp.now() != "000000" else "111111", "code": attempt_code},
    )
    assert (wrong.status_code, wrong.headers["x-service-known-error"]) == (400, "INVALID_TOTP_CODE")
    ok = http.post(
        "/api/v1/auth/mfa/sign-in",
        headers=client_headers(),
        json={"type": "totp", "totp": totp.at(time.time()), "code": attempt_code},
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["user_id"] == first["user_id"]


def _claim_with_client_access(http: httpx.Client, owner: str) -> tuple[str, str]:
    """An attacker signs up with a password, then sets `owner` as her primary e-mail with client access; her id
    and password."""
    password = "mallory's password"
    signed_up = http.post(
        "/api/v1/auth/password/sign-up",
        headers=client_headers(),
        json={"email": _new_email(), "password": password},
    )
    assert signed_up.status_code == 200, signed_up.text
    me = client_headers(**{"x-service-access-token": signed_up.json()["access_token"]})
    claimed = http.patch("/api/v1/users/me", headers=me, json={"primary_email": owner})
    assert claimed.status_code == 200, claimed.text
    assert (claimed.json()["primary_email"], claimed.json()["primary_email_verified"]) == (owner, False)
    return signed_up.json()["user_id"], password


def test_client_email_change_is_unverified_and_not_for_sign_in(http: httpx.Client) -> None:
    owner = _new_email()
    attacker_id, password = _claim_with_client_access(http, owner)
    seen = http.get(f"/api/v1/users/{attacker_id}", headers=server_headers()).json()
    assert (seen["primary_email_verified"], seen["primary_email_auth_enabled"]) == (False, False)
    as_owner = http.post(
        "/api/v1/auth/password/sign-in", headers=client_headers(), json={"email": owner, "password": password}
    )
    assert (as_owner.status_code, as_owner.headers["x-service-known-error"]) == (400, "EMAIL_PASSWORD_MISMATCH")


def test_real_owner_signs_in_over_an_unverified_claim(http: httpx.Client) -> None:
    owner = _new_email()
    attacker_id, _ = _claim_with_client_access(http, owner)
    signed_in = _sign_in(http, _code(http, owner))
    assert signed_in.status_code == 200, signed_in.text
    assert signed_in.json()["is_new_user"] is True
    assert signed_in.json()["user_id"] != attacker_id
    me = http.get(
        "/api/v1/users/me", headers=server_headers(**{"x-service-access-token": signed_in.json()["access_token"]})
    )
    assert (me.json()["primary_email"], me.json()["primary_email_verified"]) == (owner, True)
    assert me.json()["primary_email_auth_enabled"] is True


def test_the_outbox_item_carries_the_code_to_type_and_the_magic_link(http: httpx.Client) -> None:
    email = _new_email()
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code",
        headers=client_headers(),
        json={"email": email, "callback_url": CALLBACK + "?next=%2Fhome"},
    )
    nonce = sent.json()["nonce"]
    (mail,) = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]

    assert re.fullmatch(r"[0-9A-Z]{6}", mail["code"])
    assert mail["subject"].endswith(mail["code"])
    assert mail["magic_link"] in mail["text"]
    link = httpx.URL(mail["magic_link"])
    assert str(link.copy_with(query=None)) == CALLBACK
    assert link.params["next"] == "/home"
    assert link.params["code"] == mail["code"].lower() + nonce
    checked = http.post(
        "/api/v1/auth/otp/sign-in/check-code", headers=client_headers(), json={"code": link.params["code"]}
    )
    assert checked.json() == {"is_code_valid": True}
    assert _sign_in(http, mail["code"] + nonce).status_code == 200


def test_a_six_character_code_alone_is_told_to_append_the_nonce_over_http(http: httpx.Client) -> None:
    email = _new_email()
    code = _code(http, email)
    refused = _sign_in(http, code[:6])

    assert refused.status_code == 400
    assert refused.headers["x-service-known-error"] == "SCHEMA_ERROR"
    assert refused.json()["details"]["message"].endswith(
        "body.code must be exactly 45 characters: the 6-character code from the e-mail followed by the nonce "
        "returned when it was sent (or the code parameter of the magic link)"
    )
    assert _sign_in(http, code).status_code == 200
