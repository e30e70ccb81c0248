"""The mock OAuth provider's storage (dev/test mode only; `identity_proto.flows.mock_oauth`): its signing keys,
authorization codes, tokens and test hooks, kept in the store so that every worker on one Redis agrees.

The mock is no project's: its data lives beside the projects' (Redis: hash tag ``{mock-oauth}``, one slot). Codes
and tokens are stored by the SHA-256 of the secret (`tokens.hash_secret`), never as themselves. Expiry is judged by
the core against the request's clock; stores drop expired entries only to free memory (Redis: TTLs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from identity_proto.effects.base import ComputeEffect, StorageEffect

__all__ = [
    "EnsureMockSigningKeys",
    "GenerateMockSigningKeys",
    "LoadMockSigningKeys",
    "LoadMockToken",
    "MockAuthorization",
    "MockFailureKind",
    "MockSigningKeys",
    "MockToken",
    "RedeemMockCode",
    "RevokeMockToken",
    "SaveMockCode",
    "SaveMockTokens",
    "SetMockFailure",
    "TakeMockFailure",
]

MockFailureKind = Literal["access_denied", "invalid_grant", "unavailable"]


@dataclass(frozen=True, slots=True)
class MockSigningKeys:
    """The mock's two ID-token signing keys, as private JWKs (JSON text, each with its `kid`)."""

    es256: str = field(repr=False)
    rs256: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class GenerateMockSigningKeys(ComputeEffect[MockSigningKeys]):
    """A fresh P-256 key and a fresh 2048-bit RSA key (RSA generation takes a while: done by the driver, in a worker
    thread under the async one). Only when the store holds none yet (`EnsureMockSigningKeys` keeps the first)."""

    def compute(self) -> MockSigningKeys:
        """Generate both keys."""
        import json

        from joserfc.jwk import ECKey, RSAKey  # dev/test mode only: not loaded in production

        es = ECKey.generate_key("P-256", {"use": "sig", "alg": "ES256"}, private=True, auto_kid=True)
        rs = RSAKey.generate_key(2048, {"use": "sig", "alg": "RS256"}, private=True, auto_kid=True)
        return MockSigningKeys(es256=json.dumps(es.as_dict(private=True)), rs256=json.dumps(rs.as_dict(private=True)))


@dataclass(frozen=True, slots=True)
class LoadMockSigningKeys(StorageEffect["MockSigningKeys | None"]):
    """The stored signing keys, or None when none were stored yet."""


@dataclass(frozen=True, slots=True)
class EnsureMockSigningKeys(StorageEffect[MockSigningKeys]):
    """Store `keys` unless keys are stored already; return the stored ones (of concurrent first requests on several
    workers, every one gets the keys of the first)."""

    keys: MockSigningKeys


@dataclass(frozen=True, slots=True)
class MockAuthorization:
    """What an authorization code of the mock stands for: who signed in, for which client and redirect URI, with
    which PKCE challenge (None: no PKCE) and `nonce`, and the ID token's algorithm."""

    client_id: str
    redirect_uri: str
    scope: str
    email: str
    display_name: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    nonce: str | None
    alg: str
    expires_at_millis: int
    #: What the provider says of the address (`email_verified` in the ID token and userinfo).
    email_verified: bool = True


@dataclass(frozen=True, slots=True)
class SaveMockCode(StorageEffect[None]):
    """Store an authorization code (by its hash) until `authorization.expires_at_millis`."""

    code_hash: str
    authorization: MockAuthorization
    #: The request's time (stores may drop what expired before it).
    now_ms: int


@dataclass(frozen=True, slots=True)
class RedeemMockCode(StorageEffect["MockAuthorization | None"]):
    """Remove the code and return what it stood for (None when unknown or already redeemed): a code is spent by
    its first presentation, whatever the caller then judges (expiry, client, redirect URI, PKCE). Of concurrent
    redemptions exactly one gets it."""

    code_hash: str


@dataclass(frozen=True, slots=True)
class MockToken:
    """An access or refresh token the mock issued."""

    kind: Literal["access", "refresh"]
    client_id: str
    scope: str
    email: str
    display_name: str | None
    alg: str
    expires_at_millis: int
    email_verified: bool = True


@dataclass(frozen=True, slots=True)
class SaveMockTokens(StorageEffect[None]):
    """Store each token (by its hash) until its `expires_at_millis`."""

    tokens: tuple[tuple[str, MockToken], ...]
    #: The request's time (stores may drop what expired before it).
    now_ms: int


@dataclass(frozen=True, slots=True)
class LoadMockToken(StorageEffect["MockToken | None"]):
    """The token with this hash, or None (never issued, revoked, or dropped after its expiry)."""

    token_hash: str


@dataclass(frozen=True, slots=True)
class RevokeMockToken(StorageEffect[bool]):
    """Forget the token with this hash; whether there was one."""

    token_hash: str


@dataclass(frozen=True, slots=True)
class SetMockFailure(StorageEffect[None]):
    """Test hook: the next token request of `client_id` (None: of any client) fails as `kind` says. Replaces a
    failure set before for the same client."""

    kind: MockFailureKind
    client_id: str | None
    now_ms: int
    #: The hook is dropped after this (a test that set one and never used it leaves nothing behind for long).
    expires_at_millis: int


@dataclass(frozen=True, slots=True)
class TakeMockFailure(StorageEffect["MockFailureKind | None"]):
    """Remove and return the failure set for `client_id`, else the one set for any client; None when neither is
    set (or it expired by `now_ms`)."""

    client_id: str
    now_ms: int
