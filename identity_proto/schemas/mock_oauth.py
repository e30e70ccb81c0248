"""The mock OAuth provider's inputs (dev/test mode only). An OAuth server tolerates parameters it does not know
(providers' authorize URLs carry extras such as `access_type`), so its query and form models ignore unknown keys;
their meaning is checked by the flows, which answer in OAuth's words (`error=...`), not SCHEMA_ERROR."""

from __future__ import annotations

from pydantic import ConfigDict

from identity_proto.schemas.base import Body, Query

__all__ = ["MockAuthorizeParams", "MockFailNextBody", "MockRevokeBody", "MockTokenForm"]


class MockAuthorizeParams(Query):
    """`GET <mock>/authorize` query, and the login form posted back to it (the same fields, plus the user's)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    client_id: str = ""
    redirect_uri: str = ""
    response_type: str = ""
    state: str | None = None
    scope: str = ""
    nonce: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    #: The ID token's signing algorithm: ES256 (the default) or RS256.
    alg: str = "ES256"
    # The login form's own fields.
    email: str | None = None
    display_name: str | None = None
    #: "false": the provider reports the address unverified (`email_verified: false`); anything else: verified.
    email_verified: str | None = None
    action: str | None = None


class MockTokenForm(Query):
    """`POST <mock>/token` form (RFC 6749 §4.1.3, §6)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    grant_type: str = ""
    code: str | None = None
    redirect_uri: str | None = None
    code_verifier: str | None = None
    refresh_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None


class MockFailNextBody(Body):
    """`POST <mock>/hooks/fail-next`."""

    kind: str
    client_id: str | None = None


class MockRevokeBody(Body):
    """`POST <mock>/hooks/revoke`."""

    token: str
