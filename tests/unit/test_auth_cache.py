"""The authentication cache (`auth.AuthCache`): a repeated request skips the key check, and never answers
differently from an uncached authentication."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from identity_hosting.settings import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import IssuedKeys, Service, ServiceOptions, auth, run
from identity_proto.tokens import SeededEntropy, SigningKey, VerifiedTokenCache, new_signing_key
from tests.support import Harness, admin_headers, client_headers, server_headers
from tests.unit.test_auth import _token


@pytest.fixture
def key_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key `authenticate` compares with a stored hash (a cache hit compares none)."""
    checked: list[str] = []
    real = auth.secret_matches

    def spy(given: str, stored_hash: str | None) -> bool:
        checked.append(given)
        return real(given, stored_hash)

    monkeypatch.setattr(auth, "secret_matches", spy)
    return checked


def test_a_repeated_request_is_authenticated_from_the_cache(key_checks: list[str]) -> None:
    harness = Harness()
    headers = client_headers(**{"x-service-access-token": _token(harness)})
    for _ in range(3):
        assert harness.request("GET", "/api/v1", headers).status == 200
    assert len(key_checks) == 1


def test_headers_authentication_ignores_do_not_split_the_cache(key_checks: list[str]) -> None:
    # The original's SDK sends a fresh random nonce on every request: it must not make every request a miss.
    harness = Harness()
    for nonce in ("a1", "b2", "c3"):
        headers = client_headers(**{"x-stack-random-nonce": nonce, "user-agent": f"agent {nonce}"})
        assert harness.request("GET", "/api/v1/projects/current", headers).status == 200
    assert len(key_checks) == 1


def test_failures_are_never_cached(key_checks: list[str]) -> None:
    harness = Harness()
    wrong = client_headers(**{"x-service-publishable-client-key": "pck_wrong"})
    for _ in range(2):
        reply = harness.request("GET", "/api/v1/projects/current", wrong)
        assert (reply.status, reply.known_error) == (401, "INVALID_PUBLISHABLE_CLIENT_KEY")
    assert len(key_checks) == 2


def test_a_cached_authentication_ends_when_its_access_token_expires() -> None:
    harness = Harness()
    headers = client_headers(**{"x-service-access-token": _token(harness)})
    assert harness.request("GET", "/api/v1", headers).status == 200
    harness.advance(600_000)  # the token's exp, while the project is still in the cache
    harness.service.projects.ttl_ms = 10**9
    reply = harness.request("GET", "/api/v1", headers)
    assert (reply.status, reply.known_error) == (401, "ACCESS_TOKEN_EXPIRED")


def test_the_opt_in_headers_are_part_of_the_cached_request() -> None:
    harness = Harness()
    token = _token(harness, is_anonymous=True, restricted_reason={"type": "anonymous"})
    opted_in = client_headers(**{"x-service-access-token": token, "x-service-allow-anonymous-user": "true"})
    assert harness.request("GET", "/api/v1", opted_in).status == 200
    reply = harness.request("GET", "/api/v1", client_headers(**{"x-service-access-token": token}))
    assert (reply.status, reply.known_error) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")


def test_a_project_this_worker_changes_is_authenticated_afresh_at_once() -> None:
    harness = Harness()
    assert harness.request("GET", "/api/v1/projects/current", client_headers()).status == 200
    no_key = {k: v for k, v in client_headers().items() if not k.endswith("publishable-client-key")}
    assert harness.request("GET", "/api/v1/projects/current", no_key).status == 200
    changed = harness.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"require_publishable_client_key": True}}
    )
    assert changed.status == 200, changed.body
    reply = harness.request("GET", "/api/v1/projects/current", no_key)
    assert (reply.status, reply.known_error) == (401, "PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT")


def test_keys_rotated_by_another_worker_stop_working_within_the_project_cache_ttl() -> None:
    harness = Harness()
    other_worker = Service(ServiceOptions(password_rounds=4))
    old = server_headers()
    assert harness.request("GET", "/api/v1/projects/current", old).status == 200
    rotated = IssuedKeys("pck_rotated_key_000000000", "ssk_rotated_key_000000000", "sak_rotated_key_000000000")
    seed = dataclasses.replace(DEV_PROJECT, keys=rotated)
    boot: Any = other_worker.bootstrap(seed, DEV_INTERNAL_ADMIN_KEY, now_ms=harness.now_ms, entropy=harness.entropy)
    run(boot, harness.store)
    # Within the project cache's ttl this worker may still accept the old key (the documented bound)...
    harness.advance(harness.service.projects.ttl_ms)
    # ...and not a millisecond after it: the project is read again and the cached authentication is dropped.
    reply = harness.request("GET", "/api/v1/projects/current", old)
    assert (reply.status, reply.known_error) == (401, "INVALID_SECRET_SERVER_KEY")
    new = server_headers(**{"x-service-secret-server-key": rotated.secret_server_key})
    assert harness.request("GET", "/api/v1/projects/current", new).status == 200


def test_the_cache_is_bounded() -> None:
    cache = auth.AuthCache(("x-service-",), max_entries=2)
    harness = Harness()
    project = harness.project()
    entry = auth.Auth(auth.AccessType.SERVER, project, "main")
    for index in range(5):
        cache.put((("x-service-project-id", f"p{index}"),), entry)
    assert len(cache._entries) <= 2


def test_the_verified_token_cache_is_bounded_and_forgets_expired_tokens() -> None:
    # Every sign-in and refresh makes a new access token: the memo of their signatures must not grow with them.
    key = SigningKey.from_scalar(new_signing_key(SeededEntropy(1)))
    now_ms = 1_000_000_000
    cache = VerifiedTokenCache(max_entries=3)
    tokens = [key.sign({"sub": f"u{n}", "exp": 1_000_600 + n}) for n in range(5)]
    for n, token in enumerate(tokens):
        assert cache.verify(key, token, now_ms=now_ms) == {"sub": f"u{n}", "exp": 1_000_600 + n}
    assert len(cache) == 3  # the least recently used went
    assert cache.seen(tokens[0]) is None
    assert cache.seen(tokens[4]) is not None
    seen = cache.seen(tokens[4])
    assert seen is not None
    assert cache.verify(key, tokens[4], seen) == {"sub": "u4", "exp": 1_000_604}
    now_ms = 1_000_604_000  # u2 and u3 have expired; a new token makes them leave
    cache.verify(key, key.sign({"sub": "u5", "exp": 1_000_700}), now_ms=now_ms)
    assert cache.seen(tokens[2]) is None
    assert cache.seen(tokens[3]) is None
    assert len(cache) == 2


def test_an_access_token_this_service_issues_is_taken_on_the_next_request_without_a_signature_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Signed here, so what verifying it would find is known: the first request carrying it skips ECDSA. A token
    # whose bytes differ in any way (another signature, another payload) is still checked, and refused.
    harness = Harness()
    created = harness.request("POST", "/api/v1/users", server_headers(), json={"display_name": "Ada"})
    tokens = harness.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": created.json["id"]})
    assert tokens.status == 200, tokens.body
    token = tokens.json["access_token"]
    verified: list[str] = []
    real = SigningKey.verify

    def spy(self: SigningKey, given: str) -> Any:
        verified.append(given)
        return real(self, given)

    monkeypatch.setattr(SigningKey, "verify", spy)
    me = harness.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": token}))
    assert me.status == 200, me.body
    assert me.json["id"] == created.json["id"]
    assert verified == []
    head, payload, signature = token.split(".")
    other = "A" if signature[0] != "A" else "B"
    forged = f"{head}.{payload}.{other}{signature[1:]}"
    refused = harness.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": forged}))
    assert refused.status == 401, refused.body
    assert verified == [forged]
