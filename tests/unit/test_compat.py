"""Compatibility mode: the original's X-Stack-* header names work beside ours, and only when it is on."""

from __future__ import annotations

from identity_proto import Service, ServiceOptions
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
