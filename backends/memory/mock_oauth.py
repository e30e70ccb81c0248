"""The memory store: the mock OAuth provider's keys, codes, tokens and test hooks (dev/test mode only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from backends.memory.store import MemoryStore, _performs
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

#: Expired codes and tokens are swept every this many writes (the core judges expiry; this only frees memory).
_SWEEP_EVERY = 256


@dataclass
class MockOAuthData:
    """Everything the mock provider keeps."""

    keys: MockSigningKeys | None = None
    #: code hash -> what it stands for; token hash -> token.
    codes: dict[str, MockAuthorization] = field(default_factory=dict)
    tokens: dict[str, MockToken] = field(default_factory=dict)
    #: client id ("" for any client) -> (failure kind, expires at).
    failures: dict[str, tuple[MockFailureKind, int]] = field(default_factory=dict)
    writes: int = 0

    def swept(self, now_ms: int) -> None:
        """Count a write; every `_SWEEP_EVERY`, drop what expired before `now_ms`."""
        self.writes += 1
        if self.writes % _SWEEP_EVERY:
            return
        for table in (self.codes, self.tokens):
            for key in [k for k, v in table.items() if v.expires_at_millis <= now_ms]:
                del table[key]


def _data(store: MemoryStore) -> MockOAuthData:
    if store.mock_oauth is None:
        store.mock_oauth = MockOAuthData()
    data: MockOAuthData = store.mock_oauth
    return data


@_performs(LoadMockSigningKeys)
def _load_keys(store: MemoryStore, effect: LoadMockSigningKeys) -> MockSigningKeys | None:
    return _data(store).keys


@_performs(EnsureMockSigningKeys)
def _ensure_keys(store: MemoryStore, effect: EnsureMockSigningKeys) -> MockSigningKeys:
    data = _data(store)
    if data.keys is None:
        data.keys = effect.keys
    return data.keys


@_performs(SaveMockCode)
def _save_code(store: MemoryStore, effect: SaveMockCode) -> None:
    data = _data(store)
    data.codes[effect.code_hash] = effect.authorization
    data.swept(effect.now_ms)


@_performs(RedeemMockCode)
def _redeem_code(store: MemoryStore, effect: RedeemMockCode) -> MockAuthorization | None:
    return _data(store).codes.pop(effect.code_hash, None)


@_performs(SaveMockTokens)
def _save_tokens(store: MemoryStore, effect: SaveMockTokens) -> None:
    data = _data(store)
    for token_hash, token in effect.tokens:
        data.tokens[token_hash] = token
    data.swept(effect.now_ms)


@_performs(LoadMockToken)
def _load_token(store: MemoryStore, effect: LoadMockToken) -> MockToken | None:
    return _data(store).tokens.get(effect.token_hash)


@_performs(RevokeMockToken)
def _revoke_token(store: MemoryStore, effect: RevokeMockToken) -> bool:
    return _data(store).tokens.pop(effect.token_hash, None) is not None


@_performs(SetMockFailure)
def _set_failure(store: MemoryStore, effect: SetMockFailure) -> None:
    _data(store).failures[effect.client_id or ""] = (effect.kind, effect.expires_at_millis)


@_performs(TakeMockFailure)
def _take_failure(store: MemoryStore, effect: TakeMockFailure) -> MockFailureKind | None:
    failures = _data(store).failures
    for key in (effect.client_id, ""):
        found = failures.pop(key, None)
        if found is not None and found[1] > effect.now_ms:
            return found[0]
    return None
