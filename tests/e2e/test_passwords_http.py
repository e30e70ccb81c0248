"""Password flows over real HTTP (reference part 2 §1), against a Hypercorn process of their own on the memory store
and on Redis: every known error of the section (and the plain one) reached, the session rules, a forgotten password
reset through the mailed link, mail over SMTP only for addresses with an account, and the rate limits."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import RedisServer, free_port
from tests.smtp_server import StartServer
from tests.support import admin_headers, client_headers, internal_headers, server_headers

pytestmark = pytest.mark.e2e

RESET_URL = "http://localhost:3000/handler/password-reset"
PASSWORD = "correct horse battery"
NEW_PASSWORD = "new staple 2024!"
MAYBE = {"success": "maybe, only if user with e-mail exists"}


@pytest.fixture(scope="module", params=["memory", "redis"])
def service(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A Hypercorn of this module's own (its tests change the project's config and the clock)."""
    env = {}
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        # A database of its own on the session's redis-server: the config and clock changed here stay here.
        url = f"redis://{redis_server.host}:{redis_server.port}/{_DATABASE}"
        env = {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": url}
    running = start_hypercorn(env)
    try:
        yield running
    finally:
        stop_server(running)


_DATABASE = 7


@pytest.fixture
def http(service: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, timeout=10.0) as client:
        yield client


def _email() -> str:
    return f"pw-{uuid.uuid4().hex[:12]}@example.com"


def _user(http: httpx.Client, password: str | None = PASSWORD) -> str:
    email = _email()
    body: dict[str, Any] = {"primary_email": email, "primary_email_auth_enabled": True, "primary_email_verified": True}
    if password is not None:
        body["password"] = password
    created = http.post("/api/v1/users", headers=server_headers(), json=body)
    assert created.status_code == 201, created.text
    return email


def _sign_in(http: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    return http.post(
        "/api/v1/auth/password/sign-in", headers=client_headers(), json={"email": email, "password": password}
    )


def _tokens(http: httpx.Client, email: str, password: str = PASSWORD) -> dict[str, str]:
    reply = _sign_in(http, email, password)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _as(tokens: dict[str, str], *, refresh: bool = True) -> dict[str, str]:
    extra = {"x-service-access-token": tokens["access_token"]}
    if refresh:
        extra["x-service-refresh-token"] = tokens["refresh_token"]
    return client_headers(**extra)


def _post(http: httpx.Client, path: str, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    return http.post(f"/api/v1/auth/password/{path}", headers=headers, json=body)


def _send(http: httpx.Client, email: str, callback: str = RESET_URL) -> httpx.Response:
    return _post(http, "send-reset-code", client_headers(), {"email": email, "callback_url": callback})


def _code(http: httpx.Client, email: str) -> str:
    sent = _send(http, email)
    assert (sent.status_code, sent.json()) == (200, MAYBE)
    items = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    found = re.search(rf"{re.escape(RESET_URL)}\?code=([0-9a-z]{{45}})\b", items[0]["text"])
    assert found, items[0]["text"]
    return found.group(1)


def _error(reply: httpx.Response) -> tuple[int, str | None]:
    return reply.status_code, reply.headers.get("x-service-known-error")


def _refreshes(http: httpx.Client, tokens: dict[str, str]) -> bool:
    headers = client_headers(**{"x-service-refresh-token": tokens["refresh_token"]})
    return http.post("/api/v1/auth/sessions/current/refresh", headers=headers).status_code == 200


def _credential_sign_in(http: httpx.Client, enabled: bool) -> None:
    reply = http.patch(
        "/api/v1/projects/current", headers=admin_headers(), json={"config": {"credential_enabled": enabled}}
    )
    assert reply.status_code == 200, reply.text


def test_a_forgotten_password_is_reset_through_the_mailed_link(http: httpx.Client) -> None:
    email = _user(http)
    before = _tokens(http, email)
    code = _code(http, email)
    checked = _post(http, "reset/check-code", client_headers(), {"code": code})
    assert (checked.status_code, checked.json()) == (200, {"is_code_valid": True})
    reset = _post(http, "reset", client_headers(), {"code": code, "password": NEW_PASSWORD})
    assert (reset.status_code, reset.json()) == (200, {"success": True})
    assert _error(_sign_in(http, email)) == (400, "EMAIL_PASSWORD_MISMATCH")
    assert _sign_in(http, email, NEW_PASSWORD).status_code == 200
    assert not _refreshes(http, before)
    for path, body in (("reset", {"code": code, "password": "another one!"}), ("reset/check-code", {"code": code})):
        assert _error(_post(http, path, client_headers(), body)) == (409, "VERIFICATION_CODE_ALREADY_USED")


def test_an_unknown_address_gets_the_same_answer_and_no_mail(http: httpx.Client) -> None:
    email = _email()
    sent = _send(http, email)
    assert (sent.status_code, sent.json()) == (200, MAYBE)
    assert http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"] == []
    for known in (False, True):
        refused = _send(http, _user(http) if known else _email(), "https://evil.example.com/")
        assert _error(refused) == (400, "REDIRECT_URL_NOT_WHITELISTED")


def test_verification_code_errors(http: httpx.Client) -> None:
    email = _user(http)
    missing = _post(http, "reset", client_headers(), {"code": "0" * 45, "password": NEW_PASSWORD})
    assert _error(missing) == (404, "VERIFICATION_CODE_NOT_FOUND")
    code = _code(http, email)
    for _ in range(20):
        assert _post(http, "reset/check-code", client_headers(), {"code": code}).status_code == 200
    spent = _post(http, "reset", client_headers(), {"code": code, "password": NEW_PASSWORD})
    assert _error(spent) == (400, "VERIFICATION_CODE_MAX_ATTEMPTS_REACHED")
    code = _code(http, email)
    clock = http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": 7 * 86_400_000})
    assert clock.status_code == 200, clock.text
    try:
        expired = _post(http, "reset", client_headers(), {"code": code, "password": NEW_PASSWORD})
        assert _error(expired) == (400, "VERIFICATION_CODE_EXPIRED")
    finally:
        assert http.post("/api/v1/testing/clock", headers=internal_headers(), json={"reset": True}).status_code == 200
    assert _sign_in(http, email).status_code == 200


def test_password_rule_errors(http: httpx.Client) -> None:
    email = _user(http)
    tokens = _tokens(http, email)
    code = _code(http, email)
    for path, headers, body in (
        ("reset", client_headers(), {"code": code, "password": "short"}),
        ("update", _as(tokens), {"old_password": PASSWORD, "new_password": "short"}),
        ("set", _as(tokens), {"password": "short"}),
    ):
        reply = _post(http, path, headers, body)
        assert _error(reply) == (400, "PASSWORD_TOO_SHORT"), path
        assert reply.json()["details"] == {"min_length": 8}
        long = {k: ("x" * 71 if "password" in k else v) for k, v in body.items()}
        assert _error(_post(http, path, headers, long)) == (400, "SCHEMA_ERROR"), path
    wrong = _post(http, "update", _as(tokens), {"old_password": "wrong password", "new_password": NEW_PASSWORD})
    assert _error(wrong) == (400, "PASSWORD_CONFIRMATION_MISMATCH")
    already = _post(http, "set", _as(tokens), {"password": NEW_PASSWORD})
    assert (already.status_code, already.text) == (400, "User already has a password set.")
    assert "x-service-known-error" not in already.headers
    assert already.headers["content-type"].startswith("text/plain")
    no_user = _post(http, "set", client_headers(), {"password": NEW_PASSWORD})
    assert _error(no_user) == (400, "SCHEMA_ERROR")
    assert "auth.user must be defined" in no_user.json()["details"]["message"]
    assert _sign_in(http, email).status_code == 200  # none of it changed the password
    assert _post(http, "reset", client_headers(), {"code": code, "password": NEW_PASSWORD}).status_code == 200


def test_sign_up_accepts_and_ignores_the_bot_challenge_fields(http: httpx.Client) -> None:
    challenge = {"bot_challenge_token": "any", "bot_challenge_phase": "invisible"}
    for extra in (challenge, {"bot_challenge_unavailable": "true"}):
        email = _email()
        up = _post(http, "sign-up", client_headers(), {"email": email, "password": PASSWORD, **extra})
        assert up.status_code == 200, up.text
        assert _sign_in(http, email).status_code == 200
    for bad in ({"bot_challenge_phase": "never"}, {"bot_challenge_unavailable": "false"}):
        refused = _post(http, "sign-up", client_headers(), {"email": _email(), "password": PASSWORD, **bad})
        assert _error(refused) == (400, "SCHEMA_ERROR"), bad


def test_a_user_without_a_password_can_set_one_but_not_update_it(http: httpx.Client) -> None:
    email = _user(http, password=None)
    session = http.post(
        "/api/v1/auth/sessions", headers=server_headers(), json={"user_id": _user_id(http, email)}
    ).json()
    update = _post(http, "update", _as(session), {"old_password": PASSWORD, "new_password": NEW_PASSWORD})
    assert _error(update) == (400, "USER_DOES_NOT_HAVE_PASSWORD")
    assert _post(http, "set", _as(session), {"password": NEW_PASSWORD}).json() == {"success": True}
    assert _refreshes(http, session)
    assert _sign_in(http, email, NEW_PASSWORD).status_code == 200


def _user_id(http: httpx.Client, email: str) -> str:
    found = http.get("/api/v1/users", headers=server_headers(), params={"query": email}).json()["items"]
    return str(found[0]["id"])


def test_update_keeps_only_the_callers_session(http: httpx.Client) -> None:
    email = _user(http)
    mine, other = _tokens(http, email), _tokens(http, email)
    reply = _post(http, "update", _as(mine), {"old_password": PASSWORD, "new_password": NEW_PASSWORD})
    assert (reply.status_code, reply.json()) == (200, {"success": True})
    assert _refreshes(http, mine)
    assert not _refreshes(http, other)
    assert _error(http.get("/api/v1/users/me", headers=_as(other))) == (401, "ACCESS_TOKEN_EXPIRED")


def test_every_route_is_refused_while_password_sign_in_is_off(http: httpx.Client) -> None:
    email = _user(http)
    tokens = _tokens(http, email)
    code = _code(http, email)
    _credential_sign_in(http, False)
    try:
        for path, headers, body in (
            ("send-reset-code", client_headers(), {"email": email, "callback_url": RESET_URL}),
            ("reset", client_headers(), {"code": code, "password": NEW_PASSWORD}),
            ("update", _as(tokens), {"old_password": PASSWORD, "new_password": NEW_PASSWORD}),
            ("set", _as(tokens), {"password": NEW_PASSWORD}),
        ):
            reply = _post(http, path, headers, body)
            assert _error(reply) == (400, "PASSWORD_AUTHENTICATION_NOT_ENABLED"), path
    finally:
        _credential_sign_in(http, True)


def test_reset_mail_goes_over_smtp_only_to_addresses_with_an_account(start_smtp: StartServer) -> None:
    smtp = start_smtp()
    server = start_hypercorn({"IDENTITY_MAIL": f"smtp://{smtp.host}:{smtp.port}?from=auth@example.test"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            email = _user(http)
            for address in (email, _email()):
                sent = _send(http, address)
                assert (sent.status_code, sent.json()) == (200, MAYBE)
            assert [r.rcpt_tos for r in smtp.handler.received] == [[email]]
            assert str(smtp.handler.received[0].message["subject"]) == "Reset your password at Dev project"
            found = re.search(r"code=([0-9a-z]{45})\b", smtp.handler.received[0].message.get_content())
            assert found is not None
            reset = _post(http, "reset", client_headers(), {"code": found.group(1), "password": NEW_PASSWORD})
            assert reset.status_code == 200
    finally:
        stop_server(server)


def test_an_unreachable_smtp_server_does_not_tell_who_has_an_account() -> None:
    server = start_hypercorn({"IDENTITY_MAIL": f"smtp://127.0.0.1:{free_port()}"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=15) as http:
            for address in (_user(http), _email()):
                sent = _send(http, address)
                assert (sent.status_code, sent.json()) == (200, MAYBE)
    finally:
        stop_server(server)


def test_sending_and_resetting_are_rate_limited_over_http() -> None:
    server = start_hypercorn({"IDENTITY_RATE_LIMITS": "on"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            email = _user(http)
            answers = [_send(http, email) for _ in range(6)]
            assert [a.status_code for a in answers] == [200] * 5 + [429]
            assert answers[-1].json()["details"]["rule"] == "send_code_email"
            checks = [_post(http, "reset/check-code", client_headers(), {"code": "0" * 45}) for _ in range(31)]
            assert [c.status_code for c in checks[:30]] == [404] * 30
            assert (checks[-1].status_code, checks[-1].json()["details"]["rule"]) == (429, "sign_in_ip")
    finally:
        stop_server(server)
