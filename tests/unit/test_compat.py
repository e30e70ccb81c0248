"""Compatibility mode: the original's X-Stack-* header names work beside ours, and only when it is on."""

from __future__ import annotations

from pathlib import Path
from string import Formatter

from identity_proto import Service, ServiceOptions
from identity_proto.errors import ORIGINAL_PLAIN, ErrorCode, KnownError, PlainError
from tests.support import PROJECT_ID, Harness, client_headers, server_headers

COMPAT = ServiceOptions(header_prefixes=("x-service-", "x-stack-"), password_rounds=4)


def _stack(headers: dict[str, str]) -> dict[str, str]:
    return {name.replace("x-service-", "x-stack-"): value for name, value in headers.items()}


def test_stack_headers_work_in_compat_mode_and_errors_carry_both_header_names() -> None:
    h = Harness(service=Service(COMPAT))
    ok = h.request("GET", "/api/v1/projects/current", _stack(server_headers()))
    assert (ok.status, ok.json["id"]) == (200, PROJECT_ID)
    assert ok.headers["x-stack-request-id"] == ok.headers["x-service-request-id"]
    refused = h.request(
        "GET", "/api/v1/projects/current", _stack(server_headers(**{"x-service-secret-server-key": "ssk_wrong"}))
    )
    assert (
        refused.headers["x-stack-known-error"]
        == refused.headers["x-service-known-error"]
        == "INVALID_SECRET_SERVER_KEY"
    )


def test_our_own_names_keep_working_in_compat_mode() -> None:
    h = Harness(service=Service(COMPAT))
    assert h.request("GET", "/api/v1/projects/current", client_headers()).status == 200


def test_stack_headers_are_unknown_headers_when_compat_mode_is_off() -> None:
    h = Harness()
    reply = h.request("GET", "/api/v1/projects/current", _stack(server_headers()))
    assert (reply.status, reply.known_error) == (400, "ACCESS_TYPE_REQUIRED")
    assert "x-stack-known-error" not in reply.headers


def test_anonymous_and_restricted_refusals_are_worded_as_the_originals() -> None:
    h = Harness(service=Service(COMPAT))
    token = h.request("POST", "/api/v1/auth/anonymous/sign-up", _stack(client_headers()), json={}).json["access_token"]
    refused = h.request("GET", "/api/v1/users/me", _stack(client_headers(**{"x-service-access-token": token})))
    assert (refused.known_error, refused.json["error"]) == (
        "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED",
        "X-Stack-Access-Token is for an anonymous user, but anonymous users are not enabled. Set the "
        "X-Stack-Allow-Anonymous-User header of this request to 'true' to allow anonymous users.",
    )
    default = Harness()
    token = default.request("POST", "/api/v1/auth/anonymous/sign-up", client_headers(), json={}).json["access_token"]
    ours = default.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": token}))
    assert "x-service-allow-anonymous-user" in ours.json["error"]


def test_an_untrusted_callback_is_refused_in_the_originals_words() -> None:
    body = {"email": "a@example.com", "callback_url": "https://evil.example/handler"}
    compat = Harness(service=Service(COMPAT))
    refused = compat.request("POST", "/api/v1/auth/otp/send-sign-in-code", _stack(client_headers()), json=body)
    assert (refused.status, refused.known_error, refused.json["error"]) == (
        400,
        "REDIRECT_URL_NOT_WHITELISTED",
        "Redirect URL not whitelisted. Did you forget to add this domain to the trusted domains list on the Stack "
        "Auth dashboard?",
    )
    ours = Harness().request("POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json=body)
    assert ours.json["error"].startswith("The callback URL is not trusted by this project")


ORIGINAL_CODES = frozenset(
    line
    for line in (Path(__file__).parent / "data" / "stack_known_errors.txt").read_text().split("\n")
    if line and not line.startswith("#")
)


def test_compat_mode_sends_only_codes_the_original_has() -> None:
    """The original's SDK throws on a known-error code it does not know: in compat mode every other code of ours
    is answered as plain text (`errors.ORIGINAL_PLAIN`)."""
    for code in ErrorCode:
        texts = code.template + (ORIGINAL_PLAIN.get(code) or "")
        fields = {name: "x" for _, name, _, _ in Formatter().parse(texts) if name}
        original = KnownError(code, context=fields).in_original_words()
        assert isinstance(original, PlainError) or original.code.name in ORIGINAL_CODES, code.name
        assert original.status == code.status, code.name
    assert set(ORIGINAL_PLAIN).isdisjoint(ErrorCode[name] for name in ORIGINAL_CODES if name in ErrorCode.__members__)


def test_codes_the_original_lacks_are_its_plain_text_in_compat_mode_only() -> None:
    h = Harness(service=Service(COMPAT))
    user = h.request("POST", "/api/v1/users", _stack(server_headers()), json={}).json["id"]
    session = h.request("POST", "/api/v1/auth/sessions", _stack(server_headers()), json={"user_id": user}).json
    me = _stack(client_headers(**{"x-service-access-token": session["access_token"]}))
    server = _stack(server_headers())
    for reply, status, text in (
        (h.request("DELETE", "/api/v1/users/me", me), 400, "Client user deletion is not enabled for this project"),
        (
            h.request("PATCH", f"/api/v1/users/{user}", server, json={"primary_email_verified": True}),
            400,
            "primary_email_verified cannot be true without primary_email",
        ),
        (
            h.request("POST", "/api/v1/teams", me, json={"display_name": "t", "creator_user_id": "me"}),
            403,
            "Client team creation is disabled for this project",
        ),
    ):
        assert (reply.status, reply.body.decode()) == (status, text)
        assert reply.headers["content-type"].startswith("text/plain")
        assert not {"x-stack-known-error", "x-service-known-error"} & set(reply.headers)
    default = Harness()
    user = default.request("POST", "/api/v1/users", server_headers(), json={}).json["id"]
    refused = default.request("PATCH", f"/api/v1/users/{user}", server_headers(), json={"primary_email_verified": True})
    assert (refused.status, refused.known_error) == (400, "PRIMARY_EMAIL_REQUIRED")


def test_password_answers_are_the_originals_in_compat_mode() -> None:
    """The original's password sign-up and sign-in answer no `is_new_user`, and word an untrusted callback its way."""
    h = Harness(service=Service(COMPAT))
    client = _stack(client_headers())
    credentials = {"email": "ada@example.com", "password": "correct horse"}
    up = h.request("POST", "/api/v1/auth/password/sign-up", client, json=credentials)
    signed_in = h.request("POST", "/api/v1/auth/password/sign-in", client, json=credentials)
    assert sorted(up.json) == sorted(signed_in.json) == ["access_token", "refresh_token", "user_id"]
    untrusted = {"email": "bob@example.com", "password": "correct horse", "verification_callback_url": "https://x.test"}
    refused = h.request("POST", "/api/v1/auth/password/sign-up", client, json=untrusted)
    assert (refused.known_error, refused.json["error"]) == (
        "REDIRECT_URL_NOT_WHITELISTED",
        "Redirect URL not whitelisted. Did you forget to add this domain to the trusted domains list on the Stack "
        "Auth dashboard?",
    )
    default = Harness()
    ours = default.request("POST", "/api/v1/auth/password/sign-up", client_headers(), json=credentials).json
    assert ours["is_new_user"] is True


def test_a_server_creates_users_with_the_originals_email_rule_in_compat_mode() -> None:
    """The original's user create and update take yup's `email()` (no top-level domain needed); clients, sign-up
    and every route outside compat mode keep the strict rule."""
    h = Harness(service=Service(COMPAT))
    created = h.request("POST", "/api/v1/users", _stack(server_headers()), json={"primary_email": "Invalid_Email@gmai"})
    assert (created.status, created.json["primary_email"]) == (201, "invalid_email@gmai")
    for refused in ("a b@gmai", "a@gmai.", "a@-gmai", "\u0430@gmai.com"):
        reply = h.request("POST", "/api/v1/users", _stack(server_headers()), json={"primary_email": refused})
        assert reply.status == 400, refused
    up = {"email": "bob@gmai", "password": "correct horse"}
    assert h.request("POST", "/api/v1/auth/password/sign-up", _stack(client_headers()), json=up).status == 400
    default = Harness()
    strict = default.request("POST", "/api/v1/users", server_headers(), json={"primary_email": "invalid_email@gmai"})
    assert (strict.status, strict.known_error) == (400, "SCHEMA_ERROR")
