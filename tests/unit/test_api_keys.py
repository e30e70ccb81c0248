"""API keys in process (reference part 2 §5): what is stored, expiry against the service's clock, the rate limit on
checks, and the key's text."""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from identity_proto.flows.api_keys import api_key_text
from identity_proto.records import ApiKeyType
from identity_proto.tokens import SeededEntropy
from tests.support import PROJECT_ID, Harness, Reply, admin_headers, server_headers


def _harness(**config: Any) -> Harness:
    h = Harness()
    switched = h.request(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        json={"config": {"allow_user_api_keys": True, "allow_team_api_keys": True, **config}},
    )
    assert switched.status == 200, switched.body
    return h


def _user(h: Harness) -> str:
    created = h.request("POST", "/api/v1/users", server_headers(), json={})
    assert created.status == 201
    return str(created.json["id"])


def _key(h: Harness, user_id: str, **body: Any) -> dict[str, Any]:
    created = h.request(
        "POST",
        "/api/v1/user-api-keys",
        server_headers(),
        json={"user_id": user_id, "description": "d", "expires_at_millis": None, **body},
    )
    assert created.status == 200, created.body
    return dict(created.json)


def _check(h: Harness, key: str, client: str | None = None) -> Reply:
    return h.request("POST", "/api/v1/user-api-keys/check", server_headers(), json={"api_key": key}, client=client)


def test_the_store_keeps_the_keys_hash_and_last_four_never_the_key() -> None:
    h = _harness()
    key = _key(h, _user(h))

    (stored,) = h.store.tenant(PROJECT_ID).api_keys.values()

    assert stored.key_hash == hashlib.sha256(key["value"].encode()).hexdigest()
    assert stored.last_four == key["value"][-4:]
    assert key["value"] not in repr(h.store.tenant(PROJECT_ID))


def test_a_key_is_valid_until_the_millisecond_of_its_expiry() -> None:
    h = _harness()
    key = _key(h, _user(h), expires_at_millis=h.now_ms + 1_000)["value"]

    h.advance(999)
    assert _check(h, key).status == 200
    h.advance(1)
    assert (_check(h, key).status, _check(h, key).known_error) == (401, "API_KEY_EXPIRED")


def test_an_expiry_of_zero_means_none_as_in_the_original() -> None:
    h = _harness()
    key = _key(h, _user(h), expires_at_millis=0)

    assert "expires_at_millis" not in key
    assert _check(h, key["value"]).status == 200


def test_checks_are_rate_limited_per_address_by_a_rule_the_project_can_set() -> None:
    h = _harness(rate_limits={"api_key_check_ip": {"limit": 2, "window_seconds": 60}})
    key = _key(h, _user(h))["value"]

    assert [_check(h, key, "203.0.113.7").status for _ in range(2)] == [200, 200]
    limited = _check(h, key, "203.0.113.7")

    assert (limited.status, limited.known_error) == (429, "RATE_LIMITED")
    assert limited.json["details"]["rule"] == "api_key_check_ip"
    assert _check(h, key, "203.0.113.8").status == 200  # another address
    h.advance(60_000)
    assert _check(h, key, "203.0.113.7").status == 200


def test_the_key_text_is_the_originals_layout_with_a_crc32_of_the_rest() -> None:
    key_id = "0f8fad5b-d9cb-469f-a165-70867728950e"

    text = api_key_text(SeededEntropy(1), key_id, ApiKeyType.TEAM, is_public=False)

    assert len(text) == 102
    assert text[:3] == "sk_"
    assert text[48:80] == key_id.replace("-", "")
    assert text[80:94] == "team1574ck4u7h"
    assert text[94:] == format(zlib.crc32(text[:94].encode()), "08x")
    assert text != api_key_text(SeededEntropy(2), key_id, ApiKeyType.TEAM, is_public=False)
