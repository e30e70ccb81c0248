"""Sign-in with a one-time code, the second factor, passwords, sessions and tokens, in process with a frozen clock."""

from __future__ import annotations

import base64
import logging
import re
import threading
from typing import Any

import orjson
import pyotp
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet
from passlib.hash import bcrypt

from identity_proto import Request, Service, ServiceOptions
from identity_proto.effects import ComputeEffect, VerifyPassword
from identity_proto.records import User
from tests.contract.factories import patched_user
from tests.support import PROJECT_ID, Harness, Reply, admin_headers, client_headers, server_headers

DAY_MS = 24 * 3600 * 1000
CALLBACK = "http://localhost:3000/handler/magic-link-callback"


def send_code(h: Harness, email: str = "ada@example.com", callback: str = CALLBACK) -> Reply:
    return h.request(
        "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json={"email": email, "callback_url": callback}
    )


def otp_of(h: Harness, email: str = "ada@example.com") -> str:
    subject = h.outbox(email)[0].subject
    found = re.search(r"Your code is ([0-9A-Z]{6})$", subject)
    assert found, subject
    return found.group(1)


def code_for(h: Harness, email: str = "ada@example.com") -> str:
    """Send a code and return OTP + nonce, as a person would type it."""
    reply = send_code(h, email)
    assert reply.status == 200, reply.body
    return otp_of(h, email) + reply.json["nonce"]


def sign_in(h: Harness, code: str, headers: dict[str, str] | None = None) -> Reply:
    return h.request("POST", "/api/v1/auth/otp/sign-in", headers or client_headers(), json={"code": code})


def decode(h: Harness, token: str) -> dict[str, Any]:
    keys = h.request("GET", f"/api/v1/projects/{PROJECT_ID}/.well-known/jwks.json").json
    return dict(jwt.decode(token, KeySet.import_key_set(keys), algorithms=["ES256"]).claims)


# --- sending --------------------------------------------------------------------------------------------------


def test_the_code_goes_out_by_mail_and_only_the_nonce_comes_back() -> None:
    h = Harness()
    reply = send_code(h, " Ada@Example.com ")
    assert reply.status == 200
    nonce = reply.json["nonce"]
    assert len(nonce) == 39
    (mail,) = h.outbox("ada@example.com")
    otp = otp_of(h)
    assert mail.subject == f"Sign in to Dev project: Your code is {otp}"
    assert f"{CALLBACK}?code={otp.lower()}{nonce}" in mail.text
    assert otp in mail.text


@pytest.mark.parametrize(
    ("email", "ok"),
    [
        ("a@b.co", True),
        ("test@localhost", False),
        ("test@gmail", False),
        ("test@gmail.a", False),
        (".a@b.co", False),
        ("a..b@c.co", False),
    ],
)
def test_addresses_are_checked_strictly(email: str, ok: bool) -> None:
    reply = send_code(Harness(), email)
    if ok:
        assert reply.status == 200
    else:
        assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
        assert "body.email must be a valid email" in reply.json["details"]["message"]


@pytest.mark.parametrize(
    ("callback", "config", "trusted"),
    [
        ("http://localhost:3000/cb", {}, True),
        ("http://127.0.0.1:8080/cb", {}, True),
        ("http://localhost:3000/cb", {"allow_localhost": False}, False),
        ("https://evil.example/cb", {}, False),
        ("https://app.example.com/cb", {"domains": [{"domain": "https://app.example.com"}]}, True),
        ("http://app.example.com/cb", {"domains": [{"domain": "https://app.example.com"}]}, False),
        ("https://app.example.com:8443/cb", {"domains": [{"domain": "https://app.example.com"}]}, False),
        ("https://eu.example.com/cb", {"domains": [{"domain": "https://*.example.com"}]}, True),
    ],
)
def test_callback_urls_must_be_trusted(callback: str, config: dict[str, Any], trusted: bool) -> None:
    h = Harness()
    if config:
        assert h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": config}).status == 200
    reply = send_code(h, callback=callback)
    assert reply.status == (200 if trusted else 400)
    if not trusted:
        assert reply.known_error == "REDIRECT_URL_NOT_WHITELISTED"
        assert h.outbox("ada@example.com") == []


def test_code_sign_in_can_be_disabled() -> None:
    h = Harness()
    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"magic_link_enabled": False}})
    reply = send_code(h)
    assert (reply.status, reply.known_error) == (403, "OTP_SIGN_IN_NOT_ENABLED")


# --- signing in -----------------------------------------------------------------------------------------------


def test_a_new_address_signs_up_then_signs_in_again() -> None:
    h = Harness()
    first = sign_in(h, code_for(h))
    assert first.status == 200, first.body
    assert first.json["is_new_user"] is True
    user_id = first.json["user_id"]
    user = h.user(user_id)
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (
        "ada@example.com",
        True,
        True,
    )
    second = sign_in(h, code_for(h))
    assert (second.json["is_new_user"], second.json["user_id"]) == (False, user_id)
    assert len(second.json["refresh_token"]) == 45


def test_the_otp_is_case_insensitive_and_the_magic_link_code_works() -> None:
    h = Harness()
    upper = code_for(h)
    assert sign_in(h, upper[:6].upper() + upper[6:]).status == 200
    nonce = send_code(h).json["nonce"]
    link_code = re.search(r"code=([0-9a-z]{45})", h.outbox("ada@example.com")[0].text)
    assert link_code is not None
    assert link_code.group(1).endswith(nonce)
    assert sign_in(h, link_code.group(1)).status == 200


def test_verification_errors_in_order() -> None:
    h = Harness()
    code = code_for(h)
    wrong = ("AAAAAA" if not code.startswith("AAAAAA") else "BBBBBB") + code[6:]
    assert (sign_in(h, wrong).status, sign_in(h, wrong).known_error) == (404, "VERIFICATION_CODE_NOT_FOUND")
    assert sign_in(h, code).status == 200
    reused = sign_in(h, code)
    assert (reused.status, reused.known_error) == (409, "VERIFICATION_CODE_ALREADY_USED")


def test_a_code_lives_exactly_seven_days() -> None:
    h = Harness()
    code, later = code_for(h), code_for(h)
    h.advance(7 * DAY_MS - 1)
    assert sign_in(h, code).status == 200
    h.advance(1)
    expired = sign_in(h, later)
    assert (expired.status, expired.known_error) == (400, "VERIFICATION_CODE_EXPIRED")


def test_twenty_attempts_per_nonce_then_even_the_right_code_fails() -> None:
    h = Harness()
    code = code_for(h)
    for i in range(25):
        guess = f"{i:06d}"[-6:] + code[6:]
        if guess.upper() != code.upper():
            assert sign_in(h, guess).known_error == "VERIFICATION_CODE_NOT_FOUND"
    blocked = sign_in(h, code)
    assert (blocked.status, blocked.known_error) == (400, "VERIFICATION_CODE_MAX_ATTEMPTS_REACHED")


def test_check_code_counts_an_attempt_but_consumes_nothing() -> None:
    h = Harness()
    code = code_for(h)
    for _ in range(19):
        assert h.request("POST", "/api/v1/auth/otp/sign-in/check-code", client_headers(), json={"code": code}).json == {
            "is_code_valid": True
        }
    assert sign_in(h, code).status == 200  # the 20th attempt is still allowed
    assert (
        h.request("POST", "/api/v1/auth/otp/sign-in/check-code", client_headers(), json={"code": code}).known_error
        == "VERIFICATION_CODE_ALREADY_USED"
    )


def test_two_codes_sent_before_use_both_work() -> None:
    h = Harness()
    first, second = code_for(h), code_for(h)
    assert sign_in(h, second).status == 200
    assert sign_in(h, first).status == 200


HOW_TO_SEND_A_CODE = (
    "must be exactly 45 characters: the 6-character code from the e-mail followed by the nonce returned when it "
    "was sent (or the code parameter of the magic link)"
)


def test_a_code_must_be_45_characters() -> None:
    reply = sign_in(Harness(), "x" * 44)
    assert reply.json["details"]["message"].endswith(f"  - body.code {HOW_TO_SEND_A_CODE}")


@pytest.mark.parametrize("path", ["/api/v1/auth/otp/sign-in", "/api/v1/auth/otp/sign-in/check-code"])
def test_a_six_character_code_alone_is_told_to_append_the_nonce(path: str) -> None:
    h = Harness()
    code = code_for(h)
    reply = h.request("POST", path, client_headers(), json={"code": code[:6]})

    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
    assert reply.json["details"]["message"].endswith(f"  - body.code {HOW_TO_SEND_A_CODE}")
    assert sign_in(h, code).status == 200  # the refused request counted no attempt and consumed nothing


def test_of_twenty_concurrent_sign_ins_with_one_code_exactly_one_succeeds() -> None:
    h = Harness()
    code = code_for(h)
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def attempt() -> None:
        barrier.wait()
        statuses.append(sign_in(h, code).status)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] + [409] * 19


def test_sign_up_can_be_disabled_but_existing_users_still_sign_in() -> None:
    h = Harness()
    assert sign_in(h, code_for(h)).status == 200
    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"sign_up_enabled": False}})
    refused = send_code(h, "new@example.com")
    assert (refused.status, refused.known_error) == (400, "SIGN_UP_NOT_ENABLED")
    assert sign_in(h, code_for(h)).status == 200


def _put_user(h: Harness, **fields: Any) -> User:
    user = User(
        id=f"00000000-0000-4000-8000-{len(h.store.tenant(PROJECT_ID).users):012d}",
        signed_up_at_millis=h.now_ms,
        last_active_at_millis=h.now_ms,
        **fields,
    )
    h.store.tenant(PROJECT_ID).users[user.id] = user
    if user.auth_email:
        h.store.tenant(PROJECT_ID).email_index[user.auth_email] = user.id
    return user


def test_an_address_without_auth_does_not_match_so_a_second_user_is_created() -> None:
    h = Harness()
    existing = _put_user(
        h, primary_email="ada@example.com", primary_email_verified=True, primary_email_auth_enabled=False
    )
    reply = sign_in(h, code_for(h))
    assert reply.json["is_new_user"] is True
    assert reply.json["user_id"] != existing.id


def test_an_unverified_auth_address_cannot_sign_in_by_code() -> None:
    h = Harness()
    _put_user(h, primary_email="ada@example.com", primary_email_verified=False, primary_email_auth_enabled=True)
    reply = send_code(h)
    assert (reply.status, reply.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    assert reply.json["details"] == {"email": "ada@example.com", "would_work_if_email_was_verified": True}


def test_an_untrusted_callback_is_reported_after_the_address_and_stores_no_code() -> None:
    h = Harness()
    _put_user(h, primary_email="ada@example.com", primary_email_verified=False, primary_email_auth_enabled=True)
    refused = send_code(h, callback="https://evil.example/cb")
    assert (refused.status, refused.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    untrusted = send_code(h, "new@example.com", callback="https://evil.example/cb")
    assert (untrusted.status, untrusted.known_error) == (400, "REDIRECT_URL_NOT_WHITELISTED")
    assert h.store.tenant(PROJECT_ID).codes == {}


def test_the_address_is_judged_again_at_sign_in() -> None:
    # A code sent while the address could sign in, used after it no longer can: refused, nobody signed in.
    h = Harness()
    new_address = code_for(h, "new@example.com")
    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"sign_up_enabled": False}})
    refused = sign_in(h, new_address)
    assert (refused.status, refused.known_error) == (400, "SIGN_UP_NOT_ENABLED")
    assert h.store.tenant(PROJECT_ID).users == {}

    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"sign_up_enabled": True}})
    user_id = sign_in(h, code_for(h)).json["user_id"]
    code = code_for(h)
    h.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"primary_email_verified": False})
    unverified = sign_in(h, code)
    assert (unverified.status, unverified.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    assert len(h.store.tenant(PROJECT_ID).sessions) == 1  # the first sign-in's only


def test_signing_in_by_code_marks_the_method_and_the_activity() -> None:
    h = Harness()
    existing = _put_user(
        h, primary_email="ada@example.com", primary_email_verified=True, primary_email_auth_enabled=True
    )
    assert existing.otp_auth_enabled is False
    h.advance(5_000)
    reply = sign_in(h, code_for(h))
    assert (reply.status, reply.json["user_id"], reply.json["is_new_user"]) == (200, existing.id, False)
    user = h.user(existing.id)
    assert (user.otp_auth_enabled, user.last_active_at_millis) == (True, h.now_ms)


# --- access tokens --------------------------------------------------------------------------------------------


def test_the_access_token_verifies_against_the_jwks_and_carries_the_claims() -> None:
    h = Harness()
    reply = sign_in(h, code_for(h))
    claims = decode(h, reply.json["access_token"])
    assert claims["sub"] == reply.json["user_id"]
    assert claims["aud"] == PROJECT_ID
    assert claims["iss"] == f"http://localhost/api/v1/projects/{PROJECT_ID}"
    assert claims["exp"] - claims["iat"] == 600
    assert claims["role"] == "authenticated"
    assert claims["email"] == "ada@example.com"
    assert claims["email_verified"] is True
    assert claims["branch_id"] == "main"
    assert claims["project_id"] == PROJECT_ID
    assert claims["is_anonymous"] is False
    assert claims["is_restricted"] is False
    assert claims["restricted_reason"] is None
    assert claims["requires_totp_mfa"] is False
    assert claims["name"] is None
    assert claims["selected_team_id"] is None
    assert claims["signed_up_at"] == h.now_ms // 1000
    assert isinstance(claims["refresh_token_id"], str)


def test_the_access_token_expires_after_ten_minutes() -> None:
    h = Harness()
    token = sign_in(h, code_for(h)).json["access_token"]
    headers = client_headers(**{"x-service-access-token": token})
    h.advance(600_000 - 1)
    assert h.request("GET", "/api/v1", headers).status == 200
    h.advance(1)
    assert h.request("GET", "/api/v1", headers).known_error == "ACCESS_TOKEN_EXPIRED"


def test_jwks_of_an_unknown_project_is_404() -> None:
    reply = Harness().request("GET", "/api/v1/projects/11111111-1111-4111-8111-111111111111/.well-known/jwks.json")
    assert (reply.status, reply.known_error) == (404, "PROJECT_NOT_FOUND")


# --- the second factor ----------------------------------------------------------------------------------------


def _with_totp(h: Harness, user_id: str) -> pyotp.TOTP:
    secret = bytes(range(20))
    result = patched_user(h.store, PROJECT_ID, user_id, (("totp_secret_base64", base64.b64encode(secret).decode()),))
    assert isinstance(result[0], User)
    return pyotp.TOTP(base64.b32encode(secret).decode())


def _mfa(h: Harness, attempt_code: str, totp: str) -> Reply:
    return h.request(
        "POST", "/api/v1/auth/mfa/sign-in", client_headers(), json={"type": "totp", "totp": totp, "code": attempt_code}
    )


def test_mfa_round_trip() -> None:
    h = Harness()
    user_id = sign_in(h, code_for(h)).json["user_id"]
    totp = _with_totp(h, user_id)
    required = sign_in(h, code_for(h))
    assert (required.status, required.known_error) == (400, "MULTI_FACTOR_AUTHENTICATION_REQUIRED")
    attempt_code = required.json["details"]["attempt_code"]
    assert len(attempt_code) == 45
    wrong = _mfa(h, attempt_code, "000000" if totp.at(h.now_ms // 1000) != "000000" else "111111")
    assert (wrong.status, wrong.known_error) == (400, "INVALID_TOTP_CODE")
    ok = _mfa(h, attempt_code, totp.at(h.now_ms // 1000))
    assert ok.status == 200, ok.body
    assert (ok.json["user_id"], ok.json["is_new_user"]) == (user_id, False)
    assert decode(h, ok.json["access_token"])["requires_totp_mfa"] is True
    again = _mfa(h, attempt_code, totp.at(h.now_ms // 1000))
    assert again.known_error == "VERIFICATION_CODE_ALREADY_USED"


def test_an_mfa_attempt_code_lives_five_minutes() -> None:
    h = Harness()
    user_id = sign_in(h, code_for(h)).json["user_id"]
    totp = _with_totp(h, user_id)
    first = sign_in(h, code_for(h)).json["details"]["attempt_code"]
    second = sign_in(h, code_for(h)).json["details"]["attempt_code"]
    h.advance(5 * 60_000 - 1)
    assert _mfa(h, first, totp.at(h.now_ms // 1000)).status == 200
    h.advance(1)
    assert _mfa(h, second, totp.at(h.now_ms // 1000)).known_error == "VERIFICATION_CODE_EXPIRED"


def test_an_mfa_attempt_code_does_not_sign_in_as_an_otp() -> None:
    h = Harness()
    _with_totp(h, sign_in(h, code_for(h)).json["user_id"])
    attempt_code = sign_in(h, code_for(h)).json["details"]["attempt_code"]
    assert sign_in(h, attempt_code).known_error == "VERIFICATION_CODE_NOT_FOUND"


# --- passwords ------------------------------------------------------------------------------------------------


def _password(h: Harness, action: str, email: str, password: str) -> Reply:
    return h.request(
        "POST", f"/api/v1/auth/password/{action}", client_headers(), json={"email": email, "password": password}
    )


def test_password_sign_up_and_sign_in() -> None:
    h = Harness()
    up = _password(h, "sign-up", "Bob@Example.com", "correct horse")
    assert up.status == 200, up.body
    user = h.user(up.json["user_id"])
    assert user.password_hash is not None
    assert user.password_hash.startswith("$2b$04$")
    assert (user.primary_email_verified, user.primary_email_auth_enabled) == (False, True)
    assert _password(h, "sign-in", "bob@example.com", "correct horse").json["user_id"] == user.id
    assert _password(h, "sign-in", "bob@example.com", "wrong horse").known_error == "EMAIL_PASSWORD_MISMATCH"
    assert _password(h, "sign-in", "nobody@example.com", "correct horse").known_error == "EMAIL_PASSWORD_MISMATCH"
    taken = _password(h, "sign-up", "bob@example.com", "another one")
    assert (taken.status, taken.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")


@pytest.mark.parametrize(
    ("password", "code", "details"),
    [
        ("short", "PASSWORD_TOO_SHORT", {"min_length": 8}),
        ("x" * 71, "PASSWORD_TOO_LONG", {"maxLength": 70}),
        ("é" * 40, "PASSWORD_TOO_LONG", {"maxLength": 70}),  # 40 characters but 80 bytes: bcrypt reads 72
    ],
)
def test_password_length_rules(password: str, code: str, details: dict[str, int]) -> None:
    reply = _password(Harness(), "sign-up", "bob@example.com", password)
    assert (reply.status, reply.known_error, reply.json["details"]) == (400, code, details)


def test_a_user_without_password_and_a_project_without_passwords() -> None:
    h = Harness()
    sign_in(h, code_for(h))
    # Not USER_DOES_NOT_HAVE_PASSWORD (the original's answer): that would tell who has an account.
    assert _password(h, "sign-in", "ada@example.com", "whatever1").known_error == "EMAIL_PASSWORD_MISMATCH"
    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"credential_enabled": False}})
    assert (
        _password(h, "sign-up", "new@example.com", "long enough").known_error == "PASSWORD_AUTHENTICATION_NOT_ENABLED"
    )


def test_password_sign_in_asks_for_the_second_factor() -> None:
    h = Harness()
    user_id = _password(h, "sign-up", "bob@example.com", "correct horse").json["user_id"]
    _with_totp(h, user_id)
    assert (
        _password(h, "sign-in", "bob@example.com", "correct horse").known_error
        == "MULTI_FACTOR_AUTHENTICATION_REQUIRED"
    )


def test_password_sign_in_failures_are_indistinguishable() -> None:
    h = Harness()
    _password(h, "sign-up", "bob@example.com", "correct horse")
    sign_in(h, code_for(h, "ada@example.com"))  # ada signs in by code only: she has no password
    failures = [
        _password(h, "sign-in", "nobody@example.com", "correct horse"),  # unknown address
        _password(h, "sign-in", "ada@example.com", "correct horse"),  # a user without a password
        _password(h, "sign-in", "bob@example.com", "wrong horse"),  # a wrong password
    ]
    assert [(f.status, f.known_error) for f in failures] == [(400, "EMAIL_PASSWORD_MISMATCH")] * 3
    assert failures[0].body == failures[1].body == failures[2].body


def _verified_hashes(h: Harness, email: str, password: str) -> list[str]:
    """Drive a failing password sign-in by hand against the harness's store; the hash of every password
    verification it asked for."""
    request = Request(
        "POST",
        "/api/v1/auth/password/sign-in",
        (*client_headers().items(), ("content-type", "application/json")),
        orjson.dumps({"email": email, "password": password}),
    )
    flow = h.service.handle(request, h.now_ms, h.entropy)
    verified: list[str] = []
    effect = next(flow)
    while True:
        if isinstance(effect, VerifyPassword):
            verified.append(effect.password_hash)
        result = effect.compute() if isinstance(effect, ComputeEffect) else h.store.apply(effect)
        try:
            effect = flow.send(result)
        except StopIteration as done:
            response = done.value
            break
    assert Reply.of(response).known_error == "EMAIL_PASSWORD_MISMATCH"
    return verified


@pytest.mark.parametrize("rounds", [5, 6])
def test_unknown_and_passwordless_addresses_verify_a_decoy_at_the_configured_cost(rounds: int) -> None:
    h = Harness(service=Service(ServiceOptions(password_rounds=rounds)))
    _password(h, "sign-up", "bob@example.com", "correct horse")
    sign_in(h, code_for(h, "ada@example.com"))
    real = _verified_hashes(h, "bob@example.com", "wrong horse")
    unknown = _verified_hashes(h, "nobody@example.com", "correct horse")
    passwordless = _verified_hashes(h, "ada@example.com", "correct horse")
    assert len(real) == len(unknown) == len(passwordless) == 1
    costs = {bcrypt.from_string(found).rounds for found in (*real, *unknown, *passwordless)}
    assert costs == {rounds}
    assert unknown == passwordless != real


# --- sessions -------------------------------------------------------------------------------------------------


def _signed_in(h: Harness) -> dict[str, Any]:
    reply = sign_in(h, code_for(h))
    assert reply.status == 200
    return dict(reply.json)


def _refresh(h: Harness, refresh_token: str) -> Reply:
    return h.request(
        "POST", "/api/v1/auth/sessions/current/refresh", client_headers(**{"x-service-refresh-token": refresh_token})
    )


def _oauth(h: Harness, refresh_token: str, secret: str | None = None) -> Reply:
    from urllib.parse import urlencode

    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": PROJECT_ID}
    form["client_secret"] = secret or "pck_dev_publishable_client_key_not_secret"
    return h.request(
        "POST",
        "/api/v1/auth/oauth/token",
        {"content-type": "application/x-www-form-urlencoded;charset=UTF-8"},
        body=urlencode(form).encode(),
    )


def test_refresh_with_the_header_and_with_the_oauth_grant() -> None:
    h = Harness()
    tokens = _signed_in(h)
    refreshed = _refresh(h, tokens["refresh_token"])
    assert refreshed.status == 200
    assert decode(h, refreshed.json["access_token"])["sub"] == tokens["user_id"]
    grant = _oauth(h, tokens["refresh_token"])
    assert grant.status == 200, grant.body
    assert grant.json["token_type"] == "Bearer"
    assert grant.json["expires_in"] == 600
    assert (
        decode(h, grant.json["access_token"])["refresh_token_id"]
        == decode(h, tokens["access_token"])["refresh_token_id"]
    )
    assert _oauth(h, tokens["refresh_token"], "__stack_public_client__").status == 200
    assert _oauth(h, tokens["refresh_token"], "pck_wrong").known_error == "INVALID_PUBLISHABLE_CLIENT_KEY"
    assert _oauth(h, "not-a-token").known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"


def test_refresh_needs_the_header() -> None:
    reply = Harness().request("POST", "/api/v1/auth/sessions/current/refresh", client_headers())
    assert reply.json["details"]["message"].endswith("  - headers.x-service-refresh-token must be defined")


def test_sign_out_ends_the_session() -> None:
    h = Harness()
    tokens = _signed_in(h)
    headers = client_headers(**{"x-service-access-token": tokens["access_token"]})
    assert h.request("DELETE", "/api/v1/auth/sessions/current", headers, json={}).json == {"success": True}
    assert _refresh(h, tokens["refresh_token"]).known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    assert (
        h.request("DELETE", "/api/v1/auth/sessions/current", headers).known_error
        == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    )


def test_refreshing_with_the_access_token_of_an_ended_session_answers_as_its_refresh_token() -> None:
    # The refresh route uses only the refresh token, as the original does: an ended session's access token sent
    # along is not refused first (ACCESS_TOKEN_EXPIRED), the refresh token answers; another live session's refresh
    # token still refreshes (an access token grants nothing there). Every other route still refuses that token.
    h = Harness()
    ended, live = _signed_in(h), _signed_in(h)
    with_access = client_headers(**{"x-service-access-token": ended["access_token"]})
    assert h.request("DELETE", "/api/v1/auth/sessions/current", with_access, json={}).status == 200
    path = "/api/v1/auth/sessions/current/refresh"
    own = h.request("POST", path, {**with_access, "x-service-refresh-token": ended["refresh_token"]})
    assert (own.status, own.known_error) == (401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED")
    other = h.request("POST", path, {**with_access, "x-service-refresh-token": live["refresh_token"]})
    assert other.status == 200
    assert decode(h, other.json["access_token"])["sub"] == live["user_id"]
    assert h.request("GET", "/api/v1/users/me", with_access).known_error == "ACCESS_TOKEN_EXPIRED"


def test_a_session_lives_exactly_365_days_and_not_after_its_user() -> None:
    h = Harness()
    tokens = _signed_in(h)
    h.advance(365 * DAY_MS - 1)
    assert _refresh(h, tokens["refresh_token"]).status == 200
    h.advance(1)
    assert _refresh(h, tokens["refresh_token"]).known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    other = _signed_in(h)
    del h.store.tenant(PROJECT_ID).users[other["user_id"]]
    assert _refresh(h, other["refresh_token"]).known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"


def test_server_signs_a_user_in_directly() -> None:
    h = Harness()
    user_id = _signed_in(h)["user_id"]
    reply = h.request(
        "POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": user_id, "expires_in_millis": 60_000}
    )
    assert reply.status == 200
    assert set(reply.json) == {"refresh_token", "access_token"}
    h.advance(60_000)
    assert _refresh(h, reply.json["refresh_token"]).known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    too_long = h.request(
        "POST",
        "/api/v1/auth/sessions",
        server_headers(),
        json={"user_id": user_id, "expires_in_millis": 31_708_800_001},
    )
    assert "body.expires_in_millis must be less than or equal to 31708800000" in too_long.json["details"]["message"]
    unknown = h.request(
        "POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": "11111111-1111-4111-8111-111111111111"}
    )
    assert (unknown.status, unknown.known_error) == (400, "USER_ID_DOES_NOT_EXIST")
    client = h.request("POST", "/api/v1/auth/sessions", client_headers(), json={"user_id": user_id})
    assert client.known_error == "INSUFFICIENT_ACCESS_TYPE"


def test_listing_and_revoking_sessions() -> None:
    h = Harness()
    first = _signed_in(h)
    h.advance(1000)
    second = _signed_in(h)
    me = client_headers(**{"x-service-access-token": second["access_token"]})
    listed = h.request("GET", "/api/v1/auth/sessions", me, query="user_id=me").json["items"]
    assert [s["is_current_session"] for s in listed] == [True, False]
    assert listed[0]["created_at"] > listed[1]["created_at"]
    current_id, other_id = listed[0]["id"], listed[1]["id"]
    assert h.request("DELETE", f"/api/v1/auth/sessions/{current_id}", me).known_error == "CANNOT_DELETE_CURRENT_SESSION"
    assert h.request("DELETE", f"/api/v1/auth/sessions/{other_id}", me).json == {"success": True}
    assert _refresh(h, first["refresh_token"]).known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    not_mine = h.request("GET", "/api/v1/auth/sessions", me, query="user_id=11111111-1111-4111-8111-111111111111")
    assert (not_mine.status, not_mine.known_error) == (403, "CLIENT_CAN_ONLY_LIST_OWN_SESSIONS")
    missing = h.request("GET", "/api/v1/auth/sessions", server_headers())
    assert "query.user_id must be defined" in missing.json["details"]["message"]


# --- secrets --------------------------------------------------------------------------------------------------


def test_no_plaintext_code_refresh_token_or_password_is_stored_or_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    h = Harness()
    code = code_for(h)
    tokens = sign_in(h, code).json
    password_reply = _password(h, "sign-up", "bob@example.com", "correct horse battery")
    stored = repr(h.store.projects) + repr(h.store.tenants)
    secrets = [
        code.lower(),
        code[6:],
        tokens["refresh_token"],
        password_reply.json["refresh_token"],
        "correct horse battery",
    ]
    # (the outbox is the mail itself: it must hold the code, and it is the only place that does)
    tenant = h.store.tenant(PROJECT_ID)
    without_outbox = (
        repr(h.store.projects)
        + repr(tenant.users)
        + repr(tenant.codes)
        + repr(tenant.sessions)
        + repr(tenant.session_by_token)
        + repr(tenant.nonce_attempts)
    )
    for secret in secrets:
        assert secret not in without_outbox
        assert secret not in caplog.text
    assert code[:6] in stored  # the mail in the outbox
