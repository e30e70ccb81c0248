"""The mock OAuth provider's storage over every store: its signing keys, authorization codes, tokens and failure
hooks are short-lived values (`PutShortLived` / `TakeShortLived`, the mock's kinds), kept and taken as the core's
`flows.mock_oauth` does; relative TTLs on the Redis stores; one slot for all of its keys."""

from __future__ import annotations

from typing import Any

from backends.redis import RedisStore
from backends.redis.keys import OAUTH_GRACE_MS
from identity_proto.drivers import Store, arun, run
from identity_proto.effects import MockAuthorization, MockSigningKeys, MockToken, ShortLived, TakeShortLived, perform
from identity_proto.effects.oauth import put_record, take_record
from identity_proto.flows.mock_oauth import HOOK_LIFETIME_MS, MockFailure, take_failure
from tests.contract.conftest import AsyncBackend
from tests.contract.factories import T0, in_threads

KEYS_A = MockSigningKeys(es256='{"kid": "a-es"}', rs256='{"kid": "a-rs"}')
KEYS_B = MockSigningKeys(es256='{"kid": "b-es"}', rs256='{"kid": "b-rs"}')


def authorization(**changes: Any) -> MockAuthorization:
    fields: dict[str, Any] = {
        "client_id": "github",
        "redirect_uri": "http://localhost:8000/api/v1/auth/oauth/callback/github",
        "scope": "openid email",
        "email": "ada@example.com",
        "display_name": "Ada",
        "code_challenge": "challenge",
        "code_challenge_method": "S256",
        "nonce": "n-1",
        "alg": "ES256",
        "expires_at_millis": T0 + 300_000,
    }
    fields.update(changes)
    return MockAuthorization(**fields)


def token(kind: str = "access", **changes: Any) -> MockToken:
    fields: dict[str, Any] = {
        "kind": kind,
        "client_id": "github",
        "scope": "openid email",
        "email": "ada@example.com",
        "display_name": None,
        "alg": "RS256",
        "expires_at_millis": T0 + 3_600_000,
    }
    fields.update(changes)
    return MockToken(**fields)


def ensure_keys(store: Store, keys: MockSigningKeys) -> MockSigningKeys | None:
    """What `flows.mock_oauth.signing_keys` does with fresh keys: keep them unless some are kept; the kept ones."""
    run(put_record(ShortLived.MOCK_KEYS, "", keys, T0, only_if_absent=True), store)
    return load_keys(store)


def load_keys(store: Store) -> MockSigningKeys | None:
    return run(take_record(MockSigningKeys, ShortLived.MOCK_KEYS, "", keep=True), store)


def save_code(store: Store, code_hash: str, grant: MockAuthorization, now_ms: int = T0) -> None:
    assert run(put_record(ShortLived.MOCK_CODE, code_hash, grant, now_ms), store) is True


def redeem(store: Store, code_hash: str) -> MockAuthorization | None:
    return run(take_record(MockAuthorization, ShortLived.MOCK_CODE, code_hash), store)


def save_token(store: Store, token_hash: str, record: MockToken, now_ms: int = T0) -> None:
    assert run(put_record(ShortLived.MOCK_TOKEN, token_hash, record, now_ms), store) is True


def load_token(store: Store, token_hash: str) -> MockToken | None:
    return run(take_record(MockToken, ShortLived.MOCK_TOKEN, token_hash, keep=True), store)


def revoke(store: Store, token_hash: str) -> bool:
    return run(perform(TakeShortLived(ShortLived.MOCK_TOKEN, token_hash)), store) is not None


def set_failure(store: Store, kind: Any, client_id: str | None, now_ms: int, expires_at: int) -> None:
    run(put_record(ShortLived.MOCK_FAILURE, client_id or "", MockFailure(kind, expires_at), now_ms), store)


def test_signing_keys_first_stored_are_kept(store: Store) -> None:
    assert load_keys(store) is None
    assert ensure_keys(store, KEYS_A) == KEYS_A
    assert ensure_keys(store, KEYS_B) == KEYS_A
    assert load_keys(store) == KEYS_A


def test_concurrent_first_keys_agree_on_one(store: Store) -> None:
    results = in_threads(*(lambda k=k: ensure_keys(store, k) for k in (KEYS_A, KEYS_B) * 4))
    assert len(set(results)) == 1
    assert load_keys(store) == results[0]


def test_a_code_is_redeemed_once_with_all_it_stands_for(store: Store) -> None:
    grant = authorization(display_name=None, code_challenge=None, code_challenge_method=None, nonce=None)
    save_code(store, "h1", grant)
    save_code(store, "h2", authorization())
    assert redeem(store, "h1") == grant
    assert redeem(store, "h1") is None
    assert redeem(store, "unknown") is None
    assert redeem(store, "h2") == authorization()


def test_concurrent_redemptions_of_one_code_give_it_to_exactly_one(store: Store) -> None:
    save_code(store, "race", authorization())
    results = in_threads(*(lambda: redeem(store, "race") for _ in range(8)))
    assert [r for r in results if r is not None] == [authorization()]


def test_tokens_are_saved_loaded_and_revoked(store: Store) -> None:
    save_token(store, "a1", token())
    save_token(store, "r1", token("refresh", expires_at_millis=T0 + 86_400_000))
    assert load_token(store, "a1") == token()
    assert load_token(store, "r1") == token("refresh", expires_at_millis=T0 + 86_400_000)
    assert revoke(store, "r1") is True
    assert revoke(store, "r1") is False
    assert load_token(store, "r1") is None
    assert load_token(store, "a1") == token()
    assert load_token(store, "never") is None


def test_a_value_expired_when_put_is_not_kept(store: Store) -> None:
    assert run(put_record(ShortLived.MOCK_TOKEN, "old", token(expires_at_millis=T0), T0), store) is False
    assert load_token(store, "old") is None


def test_a_failure_hook_fires_once_for_its_client_before_any_clients(store: Store) -> None:
    later = T0 + 600_000
    set_failure(store, "invalid_grant", None, T0, later)
    set_failure(store, "access_denied", "github", T0, later)
    set_failure(store, "unavailable", "github", T0, later)  # replaces the one before
    assert run(take_failure("google", T0), store) == "invalid_grant"
    assert run(take_failure("google", T0), store) is None
    assert run(take_failure("github", T0), store) == "unavailable"
    assert run(take_failure("github", T0), store) is None


def test_an_expired_failure_hook_does_not_fire(store: Store) -> None:
    set_failure(store, "access_denied", "github", T0, T0 + 1_000)
    assert run(take_failure("github", T0 + 1_000), store) is None


def test_async_mock_storage_through_arun(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[Any]:
        await arun(put_record(ShortLived.MOCK_CODE, "c", authorization(), T0), store)
        await arun(put_record(ShortLived.MOCK_TOKEN, "t", token(), T0), store)
        await arun(put_record(ShortLived.MOCK_KEYS, "", KEYS_A, T0, only_if_absent=True), store)
        return [
            await arun(take_record(MockSigningKeys, ShortLived.MOCK_KEYS, "", keep=True), store),
            await arun(take_record(MockAuthorization, ShortLived.MOCK_CODE, "c"), store),
            await arun(take_record(MockAuthorization, ShortLived.MOCK_CODE, "c"), store),
            await arun(take_record(MockToken, ShortLived.MOCK_TOKEN, "t", keep=True), store),
        ]

    assert async_store.run(scenario) == [KEYS_A, authorization(), None, token()]


def test_redis_ttls_are_the_lifetimes_counted_from_the_requests_clock(redis_store: RedisStore) -> None:
    # The core's clock (here far from Redis's, as a moved dev clock may be) counts the lifetime; Redis keeps it.
    now = 1_000
    save_code(redis_store, "c", authorization(expires_at_millis=now + 300_000), now)
    save_token(redis_store, "t", token(expires_at_millis=now + 3_600_000), now)
    set_failure(redis_store, "invalid_grant", "github", now, now + HOOK_LIFETIME_MS)
    mock = redis_store.keys.mock_oauth
    for key, expected in (
        (mock("code:c"), 300_000 + OAUTH_GRACE_MS),
        (mock("token:t"), 3_600_000 + OAUTH_GRACE_MS),
        (mock("fail:github"), HOOK_LIFETIME_MS + OAUTH_GRACE_MS),
    ):
        pttl = redis_store.client.pttl(key)
        assert expected - 2_000 <= pttl <= expected, (key, pttl)
    assert redis_store.client.pttl(mock("keys")) == -2  # no keys yet
    ensure_keys(redis_store, KEYS_A)
    assert redis_store.client.pttl(mock("keys")) == -1  # kept


def test_redis_mock_keys_share_one_slot_and_hold_no_secret(redis_store: RedisStore) -> None:
    save_code(redis_store, "code-hash", authorization())
    save_token(redis_store, "token-hash", token())
    set_failure(redis_store, "invalid_grant", None, T0, T0 + 60_000)
    names = sorted(key.decode() for key in redis_store.client.scan_iter(match=redis_store.keys.mock_oauth("*")))
    assert names == [
        redis_store.keys.mock_oauth("code:code-hash"),
        redis_store.keys.mock_oauth("fail:"),
        redis_store.keys.mock_oauth("token:token-hash"),
    ]
    assert all("{mock-oauth}" in name for name in names)
