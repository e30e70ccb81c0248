"""Password flows (reference part 2 §1), in process with a frozen clock: sending a reset code (the same answer and
the same storage work whatever the address), resetting and checking the code, changing and setting a password,
their order of checks, their session rules and their rate limits."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from backends.memory import MemoryStore
from identity_proto import Request, run
from identity_proto.effects import ListContactChannels, StorageEffect, Together
from identity_proto.records import CodePurpose
from tests.support import Harness, Reply, admin_headers, client_headers, server_headers

CALLBACK = "http://localhost:3000/handler/password-reset"
DAY_MS = 24 * 3600 * 1000
PASSWORD = "correct horse battery"
NEW_PASSWORD = "new staple 2024!"
MAYBE = {"success": "maybe, only if user with e-mail exists"}


# --- helpers --------------------------------------------------------------------------------------------------


def make_user(h: Harness, email: str = "ada@example.com", password: str | None = PASSWORD) -> str:
    body: dict[str, Any] = {"primary_email": email, "primary_email_auth_enabled": True, "primary_email_verified": True}
    if password is not None:
        body["password"] = password
    created = h.request("POST", "/api/v1/users", server_headers(), json=body)
    assert created.status == 201, created.body
    return str(created.json["id"])


def password_sign_in(h: Harness, email: str = "ada@example.com", password: str = PASSWORD) -> Reply:
    return h.request(
        "POST", "/api/v1/auth/password/sign-in", client_headers(), json={"email": email, "password": password}
    )


def signed_in(h: Harness, email: str = "ada@example.com", password: str = PASSWORD) -> dict[str, str]:
    reply = password_sign_in(h, email, password)
    assert reply.status == 200, reply.body
    return dict(reply.json)


def send_reset(h: Harness, email: str = "ada@example.com", callback: str = CALLBACK, **kw: Any) -> Reply:
    return h.request(
        "POST",
        "/api/v1/auth/password/send-reset-code",
        client_headers(),
        json={"email": email, "callback_url": callback},
        **kw,
    )


def reset_code(h: Harness, email: str = "ada@example.com") -> str:
    """Ask for a reset and read the code from the mailed link."""
    assert send_reset(h, email).json == MAYBE
    found = re.search(r"[?&]code=([0-9a-z]{45})\b", h.outbox(email)[0].text)
    assert found, h.outbox(email)[0].text
    return found.group(1)


def reset(h: Harness, code: str, password: str = NEW_PASSWORD, **kw: Any) -> Reply:
    return h.request(
        "POST", "/api/v1/auth/password/reset", client_headers(), json={"code": code, "password": password}, **kw
    )


def check(h: Harness, code: str, **kw: Any) -> Reply:
    return h.request("POST", "/api/v1/auth/password/reset/check-code", client_headers(), json={"code": code}, **kw)


def as_user(tokens: dict[str, str], *, with_refresh: bool = True) -> dict[str, str]:
    extra = {"x-service-access-token": tokens["access_token"]}
    if with_refresh:
        extra["x-service-refresh-token"] = tokens["refresh_token"]
    return client_headers(**extra)


def update(h: Harness, headers: dict[str, str], old: str = PASSWORD, new: str = NEW_PASSWORD) -> Reply:
    return h.request("POST", "/api/v1/auth/password/update", headers, json={"old_password": old, "new_password": new})


def set_password(h: Harness, headers: dict[str, str], password: str = NEW_PASSWORD) -> Reply:
    return h.request("POST", "/api/v1/auth/password/set", headers, json={"password": password})


def refreshes(h: Harness, tokens: dict[str, str]) -> bool:
    headers = client_headers(**{"x-service-refresh-token": tokens["refresh_token"]})
    return h.request("POST", "/api/v1/auth/sessions/current/refresh", headers).status == 200


def otp_user(h: Harness, email: str = "otto@example.com") -> dict[str, str]:
    sent = h.request(
        "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json={"email": email, "callback_url": CALLBACK}
    )
    found = re.search(r"Your code is ([0-9A-Z]{6})$", h.outbox(email)[0].subject)
    assert found
    reply = h.request(
        "POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": found[1] + sent.json["nonce"]}
    )
    assert reply.status == 200, reply.body
    return dict(reply.json)


def configure(h: Harness, **config: Any) -> None:
    assert h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": config}).status == 200


def schema_lines(reply: Reply) -> str:
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), reply.body
    return str(reply.json["details"]["message"])


# --- send-reset-code ------------------------------------------------------------------------------------------


def test_a_known_address_gets_a_link_carrying_the_whole_code_and_the_answer_says_maybe() -> None:
    h = Harness()
    make_user(h)
    reply = send_reset(h, " Ada@Example.com ")
    assert (reply.status, reply.json) == (200, MAYBE)
    (mail,) = h.outbox("ada@example.com")
    assert mail.subject == "Reset your password at Dev project"
    code = re.search(r"code=([0-9a-z]+)", mail.text)
    assert code is not None
    assert len(code[1]) == 45
    assert mail.magic_link == f"{CALLBACK}?code={code[1]}"
    assert mail.code is None
    assert code[1] not in reply.body.decode()
    stored = [c for c in h.store.tenant(h.project().id).codes.values() if c.purpose == CodePurpose.PASSWORD_RESET]
    assert [(c.email, c.user_id is not None, c.expires_at_millis - c.created_at_millis) for c in stored] == [
        ("ada@example.com", True, 7 * DAY_MS)
    ]
    assert code[1] not in repr(stored)  # hashes only


def test_an_unknown_address_gets_the_same_answer_and_nothing_is_stored_or_mailed() -> None:
    h = Harness()
    reply = send_reset(h, "nobody@example.com")
    assert (reply.status, reply.json) == (200, MAYBE)
    assert h.outbox("nobody@example.com") == []
    assert h.store.tenant(h.project().id).codes == {}


class _Recording:
    """A store that records the type of every storage effect it performs."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seen = inner, []

    def apply(self, effect: StorageEffect[Any]) -> Any:
        self.seen.append(type(effect).__name__)
        return self.inner.apply(effect)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("client", ["203.0.113.9", None])
def test_known_and_unknown_addresses_take_the_same_storage_steps_without_sleeping(client: str | None) -> None:
    """The constant-cost path: both branches make and hash a code and take the same storage steps (the code and
    its mail are stored inside the one commit, only for a known address); no step waits."""
    h = Harness()
    make_user(h)
    seen = {}
    for email in ("ada@example.com", "nobody@example.com"):
        recording = _Recording(h.store)
        body = orjson_body({"email": email, "callback_url": CALLBACK})
        request = Request(
            "POST",
            "/api/v1/auth/password/send-reset-code",
            tuple({**client_headers(), "content-type": "application/json"}.items()),
            body,
            "",
            client,
        )
        response = run(h.service.handle(request, h.now_ms, h.entropy), recording)
        assert response.status == 200
        assert response.body == orjson_body(MAYBE)
        seen[email] = recording.seen
    assert seen["ada@example.com"] == seen["nobody@example.com"]
    assert seen["ada@example.com"].count("FindAuthAddressHolder") == 1
    assert seen["ada@example.com"].count("Commit") == 1
    assert "AppendOutbox" not in seen["ada@example.com"]  # the mail went in the same step
    assert len(h.outbox("ada@example.com")) == 1


def orjson_body(value: Any) -> bytes:
    return orjson.dumps(value)


def test_an_untrusted_callback_is_refused_for_known_and_unknown_addresses_alike() -> None:
    h = Harness()
    make_user(h)
    for email in ("ada@example.com", "nobody@example.com"):
        refused = send_reset(h, email, "https://evil.example.com/steal")
        assert (refused.status, refused.known_error) == (400, "REDIRECT_URL_NOT_WHITELISTED"), email
    assert h.outbox("ada@example.com") == []


def test_sending_is_refused_when_password_sign_in_is_off_and_bad_input_is_a_schema_error() -> None:
    h = Harness()
    make_user(h)
    configure(h, credential_enabled=False)
    off = send_reset(h)
    assert (off.status, off.known_error) == (400, "PASSWORD_AUTHENTICATION_NOT_ENABLED")
    assert off.json["error"] == "Password authentication is not enabled for this project."
    configure(h, credential_enabled=True)
    assert "body.email" in schema_lines(send_reset(h, "not an address"))
    assert "body.callback_url is not a valid URL" in schema_lines(send_reset(h, callback="javascript:alert(1)"))
    extra = h.request(
        "POST",
        "/api/v1/auth/password/send-reset-code",
        client_headers(),
        json={"email": "ada@example.com", "callback_url": CALLBACK, "x": 1},
    )
    assert "unknown properties: x" in schema_lines(extra)
    assert h.outbox("ada@example.com") == []


def test_two_sends_make_two_codes_and_a_reset_with_one_ends_the_other() -> None:
    # Each code is bound to the password it was sent for: the first reset changes it, so the other code is dead
    # (the original lets it reset again; README: departures).
    h = Harness()
    make_user(h)
    first, second = reset_code(h), reset_code(h)
    assert first != second
    assert check(h, first).status == 200
    assert check(h, second).status == 200
    assert reset(h, second, "another pass 42").status == 200
    assert reset(h, first).status == 404
    assert password_sign_in(h, password="another pass 42").status == 200


# --- reset and check-code -------------------------------------------------------------------------------------


def test_a_reset_replaces_the_password_and_ends_every_session() -> None:
    h = Harness()
    make_user(h)
    one, two = signed_in(h), signed_in(h)
    code = reset_code(h)
    reply = reset(h, code)
    assert (reply.status, reply.json) == (200, {"success": True})
    assert password_sign_in(h).known_error == "EMAIL_PASSWORD_MISMATCH"
    assert password_sign_in(h, password=NEW_PASSWORD).status == 200
    assert not refreshes(h, one)
    assert not refreshes(h, two)
    me = h.request("GET", "/api/v1/users/me", as_user(one))
    assert (me.status, me.known_error) == (401, "ACCESS_TOKEN_EXPIRED")


def test_a_reset_gives_a_code_only_user_a_password() -> None:
    h = Harness()
    otto = otp_user(h)
    reply = reset(h, reset_code(h, "otto@example.com"))
    assert reply.status == 200, reply.body
    assert password_sign_in(h, "otto@example.com", NEW_PASSWORD).json["user_id"] == otto["user_id"]


def test_check_code_consumes_nothing_and_a_used_code_is_already_used_everywhere() -> None:
    h = Harness()
    make_user(h)
    code = reset_code(h)
    for _ in range(2):
        assert (check(h, code).status, check(h, code).json) == (200, {"is_code_valid": True})
    assert reset(h, code).status == 200
    for reply in (reset(h, code, "yet another one"), check(h, code)):
        assert (reply.status, reply.known_error) == (409, "VERIFICATION_CODE_ALREADY_USED")
    assert password_sign_in(h, password=NEW_PASSWORD).status == 200


def test_codes_of_other_purposes_are_not_found_both_ways() -> None:
    h = Harness()
    make_user(h)
    sent = h.request(
        "POST",
        "/api/v1/auth/otp/send-sign-in-code",
        client_headers(),
        json={"email": "ada@example.com", "callback_url": CALLBACK},
    )
    link = h.outbox("ada@example.com")[0].magic_link
    assert link is not None
    assert sent.status == 200
    sign_in_code = link.rsplit("code=", 1)[1]
    for reply in (reset(h, sign_in_code), check(h, sign_in_code)):
        assert (reply.status, reply.known_error) == (404, "VERIFICATION_CODE_NOT_FOUND")
    code = reset_code(h)
    signed = h.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": code})
    assert (signed.status, signed.known_error) == (404, "VERIFICATION_CODE_NOT_FOUND")
    assert reset(h, code).status == 200  # the refused attempts did not use it


def test_a_code_expires_after_seven_days() -> None:
    h = Harness()
    make_user(h)
    code = reset_code(h)
    h.advance(7 * DAY_MS - 1)
    assert check(h, code).status == 200
    h.advance(1)
    for reply in (check(h, code), reset(h, code)):
        assert (reply.status, reply.known_error) == (400, "VERIFICATION_CODE_EXPIRED")
    assert password_sign_in(h).status == 200


def test_a_code_takes_twenty_attempts_then_none() -> None:
    h = Harness()
    make_user(h)
    code = reset_code(h)
    for _ in range(19):
        assert check(h, code).status == 200
    assert reset(h, code, "short").known_error == "PASSWORD_TOO_SHORT"  # the 20th attempt
    refused = reset(h, code)
    assert (refused.status, refused.known_error) == (400, "VERIFICATION_CODE_MAX_ATTEMPTS_REACHED")
    assert password_sign_in(h).status == 200


def test_password_rules_run_after_the_code_and_a_refused_password_leaves_the_code_usable() -> None:
    """Inferred in the reference (the original burns the code first); here a too-short password is retried
    with the same link."""
    h = Harness()
    make_user(h)
    code = reset_code(h)
    short = reset(h, code, "1234567")
    assert (short.status, short.known_error) == (400, "PASSWORD_TOO_SHORT")
    assert short.json == {
        "code": "PASSWORD_TOO_SHORT",
        "error": "Password too short. Minimum length is 8.",
        "details": {"min_length": 8},
    }
    assert "body.password must be at most 70 characters" in schema_lines(reset(h, code, "x" * 71))
    configure(h, credential_enabled=False)
    assert reset(h, code).known_error == "PASSWORD_AUTHENTICATION_NOT_ENABLED"
    bad = reset(h, "0" * 45, "1")  # the code is checked first
    assert (bad.status, bad.known_error) == (404, "VERIFICATION_CODE_NOT_FOUND")
    configure(h, credential_enabled=True)
    assert password_sign_in(h).status == 200  # nothing changed
    assert reset(h, code, "x" * 70).status == 200
    assert password_sign_in(h, password="x" * 70).status == 200


def test_codes_must_have_45_characters() -> None:
    h = Harness()
    assert "body.code must be exactly 45 characters" in schema_lines(check(h, "abc"))
    assert "body.code must be exactly 45 characters" in schema_lines(reset(h, "abc"))
    assert "unknown properties: password" in schema_lines(
        h.request(
            "POST", "/api/v1/auth/password/reset/check-code", client_headers(), json={"code": "0" * 45, "password": "x"}
        )
    )


def test_a_code_whose_user_was_deleted_resets_nothing() -> None:
    h = Harness()
    user_id = make_user(h)
    code = reset_code(h)
    assert h.request("DELETE", f"/api/v1/users/{user_id}", server_headers()).status == 200
    gone = reset(h, code)
    assert (gone.status, gone.known_error) == (404, "USER_NOT_FOUND")
    assert reset(h, code).known_error == "VERIFICATION_CODE_ALREADY_USED"


class _Interleaved(MemoryStore):
    """A memory store that, once armed, runs `meanwhile` just before the next read of a user's channels: another
    request lands between a reset's code check and its read of the user, as it can on a shared Redis."""

    meanwhile: Callable[[], None] | None = None

    def apply(self, effect: StorageEffect[Any]) -> Any:
        parts = effect.effects if isinstance(effect, Together) else (effect,)
        if self.meanwhile is not None and any(isinstance(part, ListContactChannels) for part in parts):
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return super().apply(effect)


@pytest.mark.parametrize("path", ["reset", "check-code"])
def test_a_reset_that_lands_between_a_code_check_and_its_user_read_answers_the_loser_409_already_used(
    path: str,
) -> None:
    h = Harness(store=_Interleaved())
    make_user(h)
    code = reset_code(h)
    won: list[Reply] = []
    assert isinstance(h.store, _Interleaved)
    h.store.meanwhile = lambda: won.append(reset(h, code, "winner's password"))

    lost = reset(h, code) if path == "reset" else check(h, code)

    assert [r.status for r in won] == [200]
    assert (lost.status, lost.known_error) == (409, "VERIFICATION_CODE_ALREADY_USED")
    assert password_sign_in(h, password="winner's password").status == 200


# --- update ---------------------------------------------------------------------------------------------------


def test_update_changes_the_password_and_keeps_only_the_callers_session() -> None:
    h = Harness()
    make_user(h)
    mine, other = signed_in(h), signed_in(h)
    reply = update(h, as_user(mine))
    assert (reply.status, reply.json) == (200, {"success": True})
    assert refreshes(h, mine)
    assert not refreshes(h, other)
    assert h.request("GET", "/api/v1/users/me", as_user(mine)).status == 200
    assert password_sign_in(h).known_error == "EMAIL_PASSWORD_MISMATCH"
    assert password_sign_in(h, password=NEW_PASSWORD).status == 200


def test_update_without_a_refresh_token_ends_every_session() -> None:
    h = Harness()
    make_user(h)
    mine, other = signed_in(h), signed_in(h)
    assert update(h, as_user(mine, with_refresh=False)).status == 200
    assert not refreshes(h, mine)
    assert not refreshes(h, other)


def test_update_keeps_no_session_of_another_user_named_by_the_refresh_token() -> None:
    h = Harness()
    make_user(h)
    make_user(h, "bob@example.com")
    mine, bobs = signed_in(h), signed_in(h, "bob@example.com")
    headers = client_headers(
        **{"x-service-access-token": mine["access_token"], "x-service-refresh-token": bobs["refresh_token"]}
    )
    assert update(h, headers).status == 200
    assert not refreshes(h, mine)
    assert refreshes(h, bobs)


def test_update_errors_in_the_originals_order() -> None:
    h = Harness()
    make_user(h)
    tokens = signed_in(h)
    missing = h.request("POST", "/api/v1/auth/password/update", as_user(tokens), json={"new_password": "x"})
    assert "body.old_password must be defined" in schema_lines(missing)
    no_user = update(h, client_headers())
    assert "auth.user must be defined" in schema_lines(no_user)
    assert "auth.user must be defined" in schema_lines(update(h, server_headers()))
    short = update(h, as_user(tokens), old="wrong password", new="short")
    assert (short.status, short.known_error) == (400, "PASSWORD_TOO_SHORT")
    wrong = update(h, as_user(tokens), old="wrong password")
    assert (wrong.status, wrong.known_error, wrong.json["error"]) == (
        400,
        "PASSWORD_CONFIRMATION_MISMATCH",
        "Passwords do not match.",
    )
    configure(h, credential_enabled=False)
    assert update(h, as_user(tokens)).known_error == "PASSWORD_AUTHENTICATION_NOT_ENABLED"
    configure(h, credential_enabled=True)
    assert refreshes(h, tokens)
    assert password_sign_in(h).status == 200


def test_update_for_a_user_without_a_password() -> None:
    h = Harness()
    otto = otp_user(h)
    reply = update(h, as_user(otto))
    assert (reply.status, reply.known_error, reply.json["error"]) == (
        400,
        "USER_DOES_NOT_HAVE_PASSWORD",
        "This user does not have password authentication enabled.",
    )


def test_wrong_old_passwords_count_toward_the_accounts_sign_in_failures() -> None:
    h = Harness()
    make_user(h)
    tokens = signed_in(h)
    for _ in range(5):
        assert password_sign_in(h, password="wrong password").known_error == "EMAIL_PASSWORD_MISMATCH"
    for _ in range(5):
        assert update(h, as_user(tokens), old="wrong password").known_error == "PASSWORD_CONFIRMATION_MISMATCH"
    limited = update(h, as_user(tokens))  # right this time, but the account's budget is spent
    assert (limited.status, limited.known_error, limited.json["details"]["rule"]) == (
        429,
        "RATE_LIMITED",
        "sign_in_failures",
    )
    assert password_sign_in(h).known_error == "RATE_LIMITED"
    h.advance(600_000)  # the next window (the access token has expired meanwhile: refresh it)
    headers = client_headers(**{"x-service-refresh-token": tokens["refresh_token"]})
    fresh = h.request("POST", "/api/v1/auth/sessions/current/refresh", headers).json["access_token"]
    assert update(h, as_user({**tokens, "access_token": fresh})).status == 200


# --- set ------------------------------------------------------------------------------------------------------


def test_set_gives_a_code_only_user_a_password_and_keeps_their_sessions() -> None:
    h = Harness()
    otto = otp_user(h)
    reply = set_password(h, as_user(otto))
    assert (reply.status, reply.json) == (200, {"success": True})
    assert refreshes(h, otto)
    assert password_sign_in(h, "otto@example.com", NEW_PASSWORD).json["user_id"] == otto["user_id"]


def test_set_when_a_password_exists_is_a_plain_error_and_changes_nothing() -> None:
    h = Harness()
    make_user(h)
    tokens = signed_in(h)
    reply = set_password(h, as_user(tokens))
    assert (reply.status, reply.known_error, reply.body) == (400, None, b"User already has a password set.")
    assert reply.headers["content-type"].startswith("text/plain")
    assert password_sign_in(h).status == 200
    assert refreshes(h, tokens)


def test_set_errors_in_the_originals_order() -> None:
    h = Harness()
    otto = otp_user(h)
    assert "auth.user must be defined" in schema_lines(set_password(h, client_headers()))
    assert "body.password must be at most 70 characters" in schema_lines(set_password(h, as_user(otto), "x" * 71))
    configure(h, credential_enabled=False)
    assert set_password(h, as_user(otto), "short").known_error == "PASSWORD_AUTHENTICATION_NOT_ENABLED"
    configure(h, credential_enabled=True)
    short = set_password(h, as_user(otto), "short")
    assert (short.status, short.known_error, short.json["details"]) == (400, "PASSWORD_TOO_SHORT", {"min_length": 8})
    assert h.user(otto["user_id"]).password_hash is None


# --- rate limits ----------------------------------------------------------------------------------------------


def test_reset_codes_per_address_are_limited_alike_for_known_and_unknown_addresses() -> None:
    h = Harness()
    make_user(h)
    for email in ("ada@example.com", "nobody@example.com"):
        for i in range(5):
            assert send_reset(h, email, client=f"198.51.100.{i}").status == 200
        limited = send_reset(h, email, client="198.51.100.99")
        assert (limited.status, limited.json["details"]["rule"]) == (429, "send_code_email"), email
    assert len(h.outbox("ada@example.com")) == 5


def test_sending_resetting_and_checking_are_limited_per_client_address() -> None:
    h = Harness()
    for i in range(10):
        assert send_reset(h, f"n{i}@example.com", client="203.0.113.7").status == 200
    assert send_reset(h, "n10@example.com", client="203.0.113.7").json["details"]["rule"] == "send_code_ip"
    for _ in range(15):
        assert check(h, "0" * 45, client="203.0.113.8").status == 404
        assert reset(h, "0" * 45, client="203.0.113.8").status == 404
    limited = check(h, "0" * 45, client="203.0.113.8")
    assert (limited.status, limited.json["details"]["rule"]) == (429, "sign_in_ip")
