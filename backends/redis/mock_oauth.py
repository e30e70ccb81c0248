"""The mock OAuth provider's keys, codes, tokens and test hooks (dev/test mode only), under the hash tag
``{mock-oauth}`` (one slot of its own: every script here names keys of that slot only).

Each Lua script sits right above the plan that runs it (`Script("<name>", ...)`); `script` registers it in
`SCRIPTS` under that name. Key names are in `backends.redis.keys` (`KeySpace.mock_oauth`). Records are stored as the
JSON of their dataclass; TTLs are relative (PX: the record's lifetime as the core's clock counts it, plus
`MOCK_GRACE_MS`), so a dev clock moved far from Redis's never drops a fresh record.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import orjson

from backends.redis.keys import MOCK_GRACE_MS, KeySpace
from backends.redis.plan import Arg, Call, Plan, Script, _plans, script
from identity_proto.effects import (
    EnsureMockSigningKeys,
    LoadMockSigningKeys,
    LoadMockToken,
    MockAuthorization,
    MockFailureKind,
    MockSigningKeys,
    MockToken,
    RedeemMockCode,
    RevokeMockToken,
    SaveMockCode,
    SaveMockTokens,
    SetMockFailure,
    TakeMockFailure,
)


def _ttl(expires_at_millis: int, now_ms: int) -> int:
    return max(expires_at_millis - now_ms, 0) + MOCK_GRACE_MS


def _keys_of(raw: Any) -> MockSigningKeys:
    value = orjson.loads(raw)
    return MockSigningKeys(es256=value["es256"], rs256=value["rs256"])


@_plans(LoadMockSigningKeys)
def _load_keys(keys: KeySpace, effect: LoadMockSigningKeys) -> Plan[MockSigningKeys | None]:
    raw = yield Call("GET", keys.mock_oauth("keys"))
    return None if raw is None else _keys_of(raw)


# KEYS: the keys' key. ARGV: the JSON of the keys to store if none are. Returns the stored JSON.
script(
    "mock_oauth_ensure_keys",
    """
local stored = redis.call('GET', KEYS[1])
if stored then return stored end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
""",
)


@_plans(EnsureMockSigningKeys)
def _ensure_keys(keys: KeySpace, effect: EnsureMockSigningKeys) -> Plan[MockSigningKeys]:
    given = orjson.dumps({"es256": effect.keys.es256, "rs256": effect.keys.rs256})
    return _keys_of((yield Script("mock_oauth_ensure_keys", (keys.mock_oauth("keys"),), (given,))))


@_plans(SaveMockCode)
def _save_code(keys: KeySpace, effect: SaveMockCode) -> Plan[None]:
    record = effect.authorization
    ttl = _ttl(record.expires_at_millis, effect.now_ms)
    yield Call("SET", keys.mock_oauth(f"code:{effect.code_hash}"), orjson.dumps(dataclasses.asdict(record)), "PX", ttl)


@_plans(RedeemMockCode)
def _redeem_code(keys: KeySpace, effect: RedeemMockCode) -> Plan[MockAuthorization | None]:
    raw = yield Call("GETDEL", keys.mock_oauth(f"code:{effect.code_hash}"))
    return None if raw is None else MockAuthorization(**orjson.loads(raw))


# KEYS: the tokens' keys. ARGV: for each, its JSON and its TTL (ms). All written or none (one script).
script(
    "mock_oauth_save_tokens",
    """
for i, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[2 * i - 1], 'PX', ARGV[2 * i])
end
return 1
""",
)


@_plans(SaveMockTokens)
def _save_tokens(keys: KeySpace, effect: SaveMockTokens) -> Plan[None]:
    names = tuple(keys.mock_oauth(f"token:{token_hash}") for token_hash, _ in effect.tokens)
    args: list[Arg] = []
    for _, token in effect.tokens:
        args += [orjson.dumps(dataclasses.asdict(token)), _ttl(token.expires_at_millis, effect.now_ms)]
    yield Script("mock_oauth_save_tokens", names, tuple(args))


@_plans(LoadMockToken)
def _load_token(keys: KeySpace, effect: LoadMockToken) -> Plan[MockToken | None]:
    raw = yield Call("GET", keys.mock_oauth(f"token:{effect.token_hash}"))
    return None if raw is None else MockToken(**orjson.loads(raw))


@_plans(RevokeMockToken)
def _revoke_token(keys: KeySpace, effect: RevokeMockToken) -> Plan[bool]:
    return bool((yield Call("DEL", keys.mock_oauth(f"token:{effect.token_hash}"))))


@_plans(SetMockFailure)
def _set_failure(keys: KeySpace, effect: SetMockFailure) -> Plan[None]:
    # "<expires_at_millis>:<kind>": the core's clock judges the hook's expiry; the TTL only collects it.
    ttl = max(effect.expires_at_millis - effect.now_ms, 0) + MOCK_GRACE_MS
    value = f"{effect.expires_at_millis}:{effect.kind}"
    yield Call("SET", keys.mock_oauth(f"fail:{effect.client_id or ''}"), value, "PX", ttl)


# KEYS: the client's failure, any client's failure. ARGV: now_ms. Each present one is removed; returns the kind of
# the first that had not expired by now_ms, or false.
script(
    "mock_oauth_take_failure",
    """
for _, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value then
    redis.call('DEL', key)
    local sep = string.find(value, ':', 1, true)
    if tonumber(string.sub(value, 1, sep - 1)) > tonumber(ARGV[1]) then
      return string.sub(value, sep + 1)
    end
  end
end
return false
""",
)


@_plans(TakeMockFailure)
def _take_failure(keys: KeySpace, effect: TakeMockFailure) -> Plan[MockFailureKind | None]:
    names = (keys.mock_oauth(f"fail:{effect.client_id}"), keys.mock_oauth("fail:"))
    reply = yield Script("mock_oauth_take_failure", names, (effect.now_ms,))
    if not reply:
        return None
    return cast(MockFailureKind, reply.decode() if isinstance(reply, bytes) else reply)
