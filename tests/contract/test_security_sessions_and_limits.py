"""Security properties of sessions and rate limits, through the service on every store (memory, fakeredis, a real
redis-server): a revoked session's access token is refused at once; refused code requests spend nobody's budget;
IPv6 clients are counted by /64; the app's backend has a budget of its own; failed sign-ins are limited per account.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyotp
import pytest

from identity_proto import Request, Service, ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import Commit, HitRateLimits, LoadSession, LoadUserWithTeam, Together, perform
from identity_proto.effects.commit import SessionIsLive
from identity_proto.ratelimits import address_bucket
from tests.contract.conftest import BACKENDS, _open_sync
from tests.support import Harness, Reply, admin_headers, client_headers, server_headers

CALLBACK = "http://localhost:3000/handler/magic-link-callback"
JSON = ("content-type", "application/json")


@dataclass
class StoreHarness(Harness):
    """The in-process harness on any store; mail is read through the server's outbox route. Its clock starts at
    the wall clock's minute: Redis expires keys by the real clock."""

    now_ms: int = field(default_factory=lambda: int(time.time() // 60 * 60_000))

    def otp(self, email: str) -> str:
        reply = self.request("GET", "/api/v1/emails/outbox", server_headers(), query=f"to={email}&limit=1")
        found = re.search(r"Your code is ([0-9A-Z]{6})$", reply.json["items"][0]["subject"])
        assert found, reply.body
        return found.group(1)

    def mails_to(self, email: str) -> int:
        reply = self.request("GET", "/api/v1/emails/outbox", server_headers(), query=f"to={email}")
        return len(reply.json["items"])

    def send_code(self, email: str, callback: str = CALLBACK, client: str | None = None) -> Reply:
        body = {"email": email, "callback_url": callback}
        return self.request("POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json=body, client=client)

    def sign_in(self, email: str) -> dict[str, Any]:
        sent = self.send_code(email)
        assert sent.status == 200, sent.body
        code = self.otp(email) + sent.json["nonce"]
        reply = self.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": code})
        assert reply.status == 200, reply.body
        return dict(reply.json)


@pytest.fixture(params=BACKENDS)
def h(request: pytest.FixtureRequest) -> Iterator[StoreHarness]:
    store: Store = _open_sync(request.param, request)
    yield StoreHarness(store=store)  # type: ignore[arg-type]
    store.close()


def _me(h: StoreHarness, access_token: str, method: str = "GET", json: Any = None) -> Reply:
    return h.request(method, "/api/v1/users/me", client_headers(**{"x-service-access-token": access_token}), json=json)


# --- revoked sessions --------------------------------------------------------------------------------------------


def _signed_out(h: StoreHarness, tokens: dict[str, Any]) -> None:
    reply = h.request(
        "DELETE",
        "/api/v1/auth/sessions/current",
        client_headers(**{"x-service-access-token": tokens["access_token"]}),
        json={},
    )
    assert reply.status == 200, reply.body


def _session_revoked(h: StoreHarness, tokens: dict[str, Any]) -> None:
    sessions = h.request("GET", "/api/v1/auth/sessions", server_headers(), query=f"user_id={tokens['user_id']}")
    for session in sessions.json["items"]:
        deleted = h.request("DELETE", f"/api/v1/auth/sessions/{session['id']}", server_headers())
        assert deleted.status == 200, deleted.body


def _password_changed(h: StoreHarness, tokens: dict[str, Any]) -> None:
    reply = h.request("PATCH", f"/api/v1/users/{tokens['user_id']}", server_headers(), json={"password": "n3w-Secret!"})
    assert reply.status == 200, reply.body


def _user_deleted(h: StoreHarness, tokens: dict[str, Any]) -> None:
    reply = h.request("DELETE", f"/api/v1/users/{tokens['user_id']}", server_headers())
    assert reply.status == 200, reply.body


@pytest.mark.parametrize(
    "revoke",
    [_signed_out, _session_revoked, _password_changed, _user_deleted],
    ids=["sign-out", "session-revoke", "password-change", "user-deleted"],
)
def test_revoked_sessions_access_token_is_refused_at_once(h: StoreHarness, revoke: Any) -> None:
    tokens = h.sign_in("ada@example.com")
    assert _me(h, tokens["access_token"]).status == 200
    revoke(h, tokens)
    for method, body in (("GET", None), ("PATCH", {"display_name": "Mallory"})):
        refused = _me(h, tokens["access_token"], method, body)
        assert (refused.status, refused.known_error) == (401, "ACCESS_TOKEN_EXPIRED"), (method, refused.body)
        assert refused.json["details"]["user_id"] == tokens["user_id"]
    if revoke is not _user_deleted:
        user = h.request("GET", f"/api/v1/users/{tokens['user_id']}", server_headers()).json
        assert user["display_name"] is None  # the refused PATCH changed nothing


def test_other_sessions_of_the_user_keep_working_after_one_signs_out(h: StoreHarness) -> None:
    first = h.sign_in("ada@example.com")
    second = h.sign_in("ada@example.com")
    _signed_out(h, first)
    assert _me(h, first["access_token"]).known_error == "ACCESS_TOKEN_EXPIRED"
    assert _me(h, second["access_token"]).status == 200


def test_the_session_check_rides_along_with_the_first_read() -> None:
    """No extra trip to the store: a GET of the signed-in user is one `Together` (counters, session, user)."""
    h = StoreHarness()
    tokens = h.sign_in("ada@example.com")
    headers = tuple(client_headers(**{"x-service-access-token": tokens["access_token"]}).items())
    flow = h.service.handle(Request("GET", "/api/v1/users/me", headers, b"", "", "192.0.2.1"), h.now_ms, h.entropy)
    effects: list[Any] = []
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as done:
            response = done.value
            break
        effects.append(effect)
        value = run(perform(effect), h.store)
    assert response.status == 200
    assert [type(e) for e in effects] == [Together]
    assert {type(e) for e in effects[0].effects} == {HitRateLimits, LoadSession, LoadUserWithTeam}


# --- code sending budget -----------------------------------------------------------------------------------------


def test_refused_code_requests_do_not_spend_the_address_budget(h: StoreHarness) -> None:
    # An attacker's requests with an untrusted callback send no mail: they must not lock the owner out.
    for _ in range(20):
        refused = h.send_code("victim@example.com", callback="https://evil.example/handler")
        assert refused.known_error == "REDIRECT_URL_NOT_WHITELISTED"
    assert h.mails_to("victim@example.com") == 0
    for _ in range(5):
        assert h.send_code("victim@example.com").status == 200
    assert h.mails_to("victim@example.com") == 5
    over = h.send_code("victim@example.com")
    assert (over.status, over.json["details"]["rule"]) == (429, "send_code_email")
    assert h.mails_to("victim@example.com") == 5


# --- who counts against which budget -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "bucket"),
    [
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("192.0.2.7", "192.0.2.7"),
        ("[2001:db8::1]", "2001:db8::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("unix-socket-peer", "unix-socket-peer"),
    ],
)
def test_ipv6_clients_are_counted_by_their_64(address: str, bucket: str) -> None:
    assert address_bucket(address) == bucket


def test_ipv6_addresses_of_one_64_share_one_budget(h: StoreHarness) -> None:
    h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"ip": {"limit": 3, "window_seconds": 60}}}},
    )
    statuses = [
        h.request("GET", "/api/v1/projects/current", client_headers(), client=f"2001:db8:7:7::{i:x}").status
        for i in range(1, 5)
    ]
    assert statuses == [200, 200, 200, 429]
    assert h.request("GET", "/api/v1/projects/current", client_headers(), client="2001:db8:7:8::1").status == 200


def test_a_client_flood_cannot_lock_out_the_apps_backend(h: StoreHarness) -> None:
    h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"project": {"limit": 5, "window_seconds": 60}}}},
    )
    clients = [
        h.request("GET", "/api/v1/projects/current", client_headers(), client=f"198.51.100.{i}").status
        for i in range(8)
    ]
    assert clients.count(429) == 3
    for _ in range(10):
        assert h.request("GET", "/api/v1/users", server_headers()).status == 200
        assert h.request("GET", "/api/v1/projects/current", admin_headers()).status == 200


def test_the_server_budget_is_its_own_rule() -> None:
    h = StoreHarness(service=Service(ServiceOptions(password_rounds=4)))
    h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"rate_limits": {"project_server": {"limit": 4, "window_seconds": 60}}}},
    )  # this request is the budget's first
    statuses = [h.request("GET", "/api/v1/users", server_headers()).status for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert h.request("GET", "/api/v1/projects/current", client_headers()).status == 200


# --- failed sign-ins per account ---------------------------------------------------------------------------------


def _password_user(h: StoreHarness, email: str, password: str = "correct horse") -> str:
    created = h.request(
        "POST",
        "/api/v1/users",
        server_headers(),
        json={"primary_email": email, "primary_email_auth_enabled": True, "password": password},
    )
    assert created.status == 201, created.body
    return str(created.json["id"])


def _password_sign_in(h: StoreHarness, email: str, password: str, client: str) -> Reply:
    body = {"email": email, "password": password}
    return h.request("POST", "/api/v1/auth/password/sign-in", client_headers(), json=body, client=client)


def test_password_guessing_is_limited_per_account_from_any_address(h: StoreHarness) -> None:
    _password_user(h, "victim@example.com")
    _password_user(h, "bystander@example.com")
    guesses = [_password_sign_in(h, "victim@example.com", f"guess-{i}", f"203.0.113.{i}") for i in range(10)]
    assert {g.known_error for g in guesses} == {"EMAIL_PASSWORD_MISMATCH"}
    limited = _password_sign_in(h, "victim@example.com", "correct horse", "198.51.100.77")
    assert (limited.status, limited.known_error, limited.json["details"]["rule"]) == (
        429,
        "RATE_LIMITED",
        "sign_in_failures",
    )
    # Unknown addresses are limited alike (a 429 tells nobody whether an account exists), others are not touched.
    unknown = [_password_sign_in(h, "nobody@example.com", "x" * 8, f"192.0.2.{i}").status for i in range(11)]
    assert unknown == [400] * 10 + [429]
    assert _password_sign_in(h, "bystander@example.com", "correct horse", "203.0.113.1").status == 200
    h.advance(600_000)
    assert _password_sign_in(h, "victim@example.com", "correct horse", "198.51.100.77").status == 200


def test_a_right_password_does_not_count_as_a_failure(h: StoreHarness) -> None:
    _password_user(h, "ada@example.com")
    for i in range(15):
        assert _password_sign_in(h, "ada@example.com", "correct horse", f"203.0.113.{i}").status == 200


def test_totp_guessing_is_limited_per_user(h: StoreHarness) -> None:
    user_id = _password_user(h, "ada@example.com")
    secret = base64.b64encode(bytes(range(20))).decode()
    assert (
        h.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"totp_secret_base64": secret}).status
        == 200
    )
    totp = pyotp.TOTP(base64.b32encode(bytes(range(20))).decode())
    right = totp.at(h.now_ms // 1000)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"

    def attempt_code() -> str:
        first = _password_sign_in(h, "ada@example.com", "correct horse", "203.0.113.9")
        assert first.known_error == "MULTI_FACTOR_AUTHENTICATION_REQUIRED", first.body
        return str(first.json["details"]["attempt_code"])

    def mfa(code: str, value: str) -> Reply:
        body = {"type": "totp", "totp": value, "code": code}
        return h.request("POST", "/api/v1/auth/mfa/sign-in", client_headers(), json=body, client="198.51.100.5")

    codes = [attempt_code() for _ in range(2)]
    failures = [mfa(codes[i % 2], wrong).known_error for i in range(10)]
    assert set(failures) == {"INVALID_TOTP_CODE"}
    limited = mfa(attempt_code(), right)
    assert (limited.status, limited.json["details"]["rule"]) == (429, "sign_in_failures")
    h.advance(600_000)
    assert mfa(attempt_code(), totp.at(h.now_ms // 1000)).status == 200


def _effects_of(h: StoreHarness, request: Request) -> tuple[list[Any], Any]:
    """Drive the service by hand: the effects it yields, and its response."""
    flow = h.service.handle(request, h.now_ms, h.entropy)
    effects: list[Any] = []
    value: Any = None
    while True:
        try:
            effect = flow.send(value)
        except StopIteration as done:
            return effects, done.value
        effects.append(effect)
        value = run(perform(effect), h.store)


@pytest.fixture(params=BACKENDS)
def unlimited(request: pytest.FixtureRequest) -> Iterator[StoreHarness]:
    """A harness on each store with rate limits off (as load tests and other suites run it)."""
    store: Store = _open_sync(request.param, request)
    service = Service(ServiceOptions(password_rounds=4, rate_limits_enabled=False))
    yield StoreHarness(service=service, store=store)  # type: ignore[arg-type]
    store.close()


def test_a_patch_checks_its_session_inside_its_one_write(unlimited: StoreHarness) -> None:
    """With no counters to send first, a PATCH's session check is part of its write: one trip, and a signed-out
    session's PATCH writes nothing."""
    h = unlimited
    tokens = h.sign_in("ada@example.com")
    headers = (*client_headers(**{"x-service-access-token": tokens["access_token"]}).items(), JSON)
    patch = Request("PATCH", "/api/v1/users/me", headers, b'{"display_name": "Ada"}', "", "192.0.2.1")
    effects, response = _effects_of(h, patch)
    assert response.status == 200
    assert [type(e) for e in effects] == [Commit]
    assert any(isinstance(g, SessionIsLive) for g in effects[0].guards)
    _signed_out(h, tokens)
    refused_patch = Request("PATCH", "/api/v1/users/me", headers, b'{"display_name": "Mallory"}', "", "192.0.2.1")
    effects, refused = _effects_of(h, refused_patch)
    assert (refused.status, dict(refused.headers)["x-service-known-error"]) == (401, "ACCESS_TOKEN_EXPIRED")
    assert [type(e) for e in effects] == [Commit]
    user = h.request("GET", f"/api/v1/users/{tokens['user_id']}", server_headers()).json
    assert user["display_name"] == "Ada"
