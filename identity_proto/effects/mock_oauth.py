"""The mock OAuth provider's records (dev/test mode only; `identity_proto.flows.mock_oauth`): its signing keys,
authorization codes, tokens and test hooks, kept in the store as short-lived values (`effects.oauth.ShortLived`'s
mock kinds) so that every worker on one Redis agrees. Codes and tokens are kept by the SHA-256 of the secret
(`tokens.hash_secret`), never as themselves; expiry is judged by the core against the request's clock.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Literal

from identity_proto.effects.base import ComputeEffect

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = ["GenerateMockSigningKeys", "MockAuthorization", "MockFailureKind", "MockSigningKeys", "MockToken"]

MockFailureKind = Literal["access_denied", "invalid_grant", "unavailable"]


@dataclass(frozen=True, slots=True)
class MockSigningKeys:
    """The mock's two ID-token signing keys, as private JWKs (JSON text, each with its `kid`)."""

    es256: str = field(repr=False)
    rs256: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class GenerateMockSigningKeys(ComputeEffect[MockSigningKeys]):
    """A fresh P-256 key and a fresh 2048-bit RSA key (RSA generation takes a while: done by the driver, in a worker
    thread under the async one). Only when the store holds none yet (the first kept is every worker's)."""

    def compute(self) -> MockSigningKeys:
        """Generate both keys."""
        import json

        from joserfc.jwk import ECKey, RSAKey  # dev/test mode only: not loaded in production

        es = ECKey.generate_key("P-256", {"use": "sig", "alg": "ES256"}, private=True, auto_kid=True)
        rs = RSAKey.generate_key(2048, {"use": "sig", "alg": "RS256"}, private=True, auto_kid=True)
        return MockSigningKeys(es256=json.dumps(es.as_dict(private=True)), rs256=json.dumps(rs.as_dict(private=True)))


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
