"""The mock OAuth provider's storage contract (signing keys, authorization codes, tokens, failure hooks) over every
store; relative TTLs on the Redis stores; one slot for all of its keys."""

from __future__ import annotations

from typing import Any

from backends.redis import RedisStore
from backends.redis.keys import MOCK_GRACE_MS
from identity_proto.drivers import Store, arun
from identity_proto.effects import (
    EnsureMockSigningKeys,
    LoadMockSigningKeys,
    LoadMockToken,
    MockAuthorization,
    MockSigningKeys,
    MockToken,
    RedeemMockCode,
    RevokeMockToken,
    SaveMockCode,
    SaveMockTokens,
    SetMockFailure,
    TakeMockFailure,
    perform,
)
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


def test_signing_keys_first_stored_are_kept(store: Store) -> None:
    assert store.apply(LoadMockSigningKeys()) is None
    assert store.apply(EnsureMockSigningKeys(KEYS_A)) == KEYS_A
    assert store.apply(EnsureMockSigningKeys(KEYS_B)) == KEYS_A
    assert store.apply(LoadMockSigningKeys()) == KEYS_A


def test_concurrent_first_keys_agree_on_one(store: Store) -> None:
    results = in_threads(*(lambda k=k: store.apply(EnsureMockSigningKeys(k)) for k in (KEYS_A, KEYS_B) * 4))
    assert len(set(results)) == 1
    assert store.apply(LoadMockSigningKeys()) == results[0]


def test_a_code_is_redeemed_once_with_all_it_stands_for(store: Store) -> None:
    grant = authorization(display_name=None, code_challenge=None, code_challenge_method=None, nonce=None)
    store.apply(SaveMockCode("h1", grant, now_ms=T0))
    store.apply(SaveMockCode("h2", authorization(), now_ms=T0))
    assert store.apply(RedeemMockCode("h1")) == grant
    assert store.apply(RedeemMockCode("h1")) is None
    assert store.apply(RedeemMockCode("unknown")) is None
    assert store.apply(RedeemMockCode("h2")) == authorization()


def test_concurrent_redemptions_of_one_code_give_it_to_exactly_one(store: Store) -> None:
    store.apply(SaveMockCode("race", authorization(), now_ms=T0))
    results = in_threads(*(lambda: store.apply(RedeemMockCode("race")) for _ in range(8)))
    assert [r for r in results if r is not None] == [authorization()]


def test_tokens_are_saved_together_loaded_and_revoked(store: Store) -> None:
    store.apply(SaveMockTokens((("a1", token()), ("r1", token("refresh", expires_at_millis=T0 + 86_400_000))), T0))
    assert store.apply(LoadMockToken("a1")) == token()
    assert store.apply(LoadMockToken("r1")) == token("refresh", expires_at_millis=T0 + 86_400_000)
    assert store.apply(RevokeMockToken("r1")) is True
    assert store.apply(RevokeMockToken("r1")) is False
    assert store.apply(LoadMockToken("r1")) is None
    assert store.apply(LoadMockToken("a1")) == token()
    assert store.apply(LoadMockToken("never")) is None


def test_a_failure_hook_fires_once_for_its_client_before_any_clients(store: Store) -> None:
    later = T0 + 600_000
    store.apply(SetMockFailure("invalid_grant", None, T0, later))
    store.apply(SetMockFailure("access_denied", "github", T0, later))
    store.apply(SetMockFailure("unavailable", "github", T0, later))  # replaces the one before
    assert store.apply(TakeMockFailure("google", T0)) == "invalid_grant"
    assert store.apply(TakeMockFailure("google", T0)) is None
    assert store.apply(TakeMockFailure("github", T0)) == "unavailable"
    assert store.apply(TakeMockFailure("github", T0)) is None


def test_an_expired_failure_hook_does_not_fire(store: Store) -> None:
    store.apply(SetMockFailure("access_denied", "github", T0, T0 + 1_000))
    assert store.apply(TakeMockFailure("github", T0 + 1_000)) is None


def test_async_mock_storage_through_arun(async_store: AsyncBackend) -> None:
    async def scenario(store: Any) -> list[Any]:
        await arun(perform(SaveMockCode("c", authorization(), now_ms=T0)), store)
        await arun(perform(SaveMockTokens((("t", token()),), T0)), store)
        return [
            await arun(perform(EnsureMockSigningKeys(KEYS_A)), store),
            await arun(perform(RedeemMockCode("c")), store),
            await arun(perform(RedeemMockCode("c")), store),
            await arun(perform(LoadMockToken("t")), store),
        ]

    assert async_store.run(scenario) == [KEYS_A, authorization(), None, token()]


def test_redis_ttls_are_the_lifetimes_counted_from_the_requests_clock(redis_store: RedisStore) -> None:
    # The core's clock (here far from Redis's, as a moved dev clock may be) counts the lifetime; Redis keeps it.
    now = 1_000
    redis_store.apply(SaveMockCode("c", authorization(expires_at_millis=now + 300_000), now_ms=now))
    redis_store.apply(SaveMockTokens((("t", token(expires_at_millis=now + 3_600_000)),), now))
    redis_store.apply(SetMockFailure("invalid_grant", "github", now, now + 60_000))
    mock = redis_store.keys.mock_oauth
    for key, expected in (
        (mock("code:c"), 300_000 + MOCK_GRACE_MS),
        (mock("token:t"), 3_600_000 + MOCK_GRACE_MS),
        (mock("fail:github"), 60_000 + MOCK_GRACE_MS),
    ):
        pttl = redis_store.client.pttl(key)
        assert expected - 2_000 <= pttl <= expected, (key, pttl)
    assert redis_store.client.pttl(mock("keys")) == -2  # no keys yet
    redis_store.apply(EnsureMockSigningKeys(KEYS_A))
    assert redis_store.client.pttl(mock("keys")) == -1  # kept


def test_redis_mock_keys_share_one_slot_and_hold_no_secret(redis_store: RedisStore) -> None:
    redis_store.apply(SaveMockCode("code-hash", authorization(), now_ms=T0))
    redis_store.apply(SaveMockTokens((("token-hash", token()),), T0))
    redis_store.apply(SetMockFailure("invalid_grant", None, T0, T0 + 60_000))
    names = sorted(key.decode() for key in redis_store.client.scan_iter(match=redis_store.keys.mock_oauth("*")))
    assert names == [
        redis_store.keys.mock_oauth("code:code-hash"),
        redis_store.keys.mock_oauth("fail:"),
        redis_store.keys.mock_oauth("token:token-hash"),
    ]
    assert all("{mock-oauth}" in name for name in names)
