"""Provider tokens at rest: what an OAuth provider granted a linked account (access token, refresh token, expiry,
scope), sealed with AES-256-GCM before it reaches a store, so a copy of the store alone reveals no token.

The key is `ServiceOptions.oauth_token_key` (32 bytes; hosts read `IDENTITY_OAUTH_TOKEN_KEY`, base64url). In dev
mode without one the fixed `DEV_TOKEN_KEY` is used: it is public, so dev-mode tokens are as good as plain text.
In production without one provider tokens are not stored at all (`token_key` answers None): connected accounts
then answer OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE.

`cryptography` is imported when a token is first sealed or opened, not with the routes (start-up imports no
crypto until it is needed, as `identity_proto.tokens` does for signing).

A sealed blob is `v1.<base64url(nonce || ciphertext+tag)>`; the associated data binds it to its project and account
row, so a blob copied onto another account does not open there. The nonce is 12 bytes of the request's entropy.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

import orjson

from identity_proto.effects.oauth_provider import ProviderTokens

if TYPE_CHECKING:
    from identity_proto.context import ServiceOptions
    from identity_proto.tokens import Entropy

__all__ = ["DEV_TOKEN_KEY", "SealedTokens", "decode_token_key", "seal", "token_key", "unseal"]

#: The key dev mode uses when none is configured. Public (it is in the source): never protects real tokens.
DEV_TOKEN_KEY = b"identity-dev-oauth-token-key-32b"
_VERSION = "v1"
_NONCE_BYTES = 12


class SealedTokens(ValueError):
    """A sealed blob that does not open with this key (another key, another account, or tampered with)."""


def decode_token_key(value: str) -> bytes:
    """A configured key (base64url, padding optional) as its 32 bytes; ValueError when it is not that."""
    try:
        raw = base64.urlsafe_b64decode(value.strip() + "=" * (-len(value.strip()) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("must be 32 bytes, base64url-encoded") from None
    if len(raw) != 32:
        raise ValueError("must be 32 bytes, base64url-encoded")
    return raw


def token_key(options: ServiceOptions) -> bytes | None:
    """The key provider tokens are sealed with: the configured one, else the dev key in dev mode, else None (no
    provider token is stored)."""
    if options.oauth_token_key is not None:
        return options.oauth_token_key
    return DEV_TOKEN_KEY if options.dev_mode else None


def _associated(project_id: str, account_row_id: str) -> bytes:
    return f"{_VERSION}\n{project_id}\n{account_row_id}".encode()


def seal(
    tokens: ProviderTokens, scope: str, key: bytes, *, project_id: str, account_row_id: str, entropy: Entropy
) -> str:
    """`tokens`, tagged with the `scope` they were granted for (space-separated), sealed for one account row."""
    plain = orjson.dumps(
        {
            "access_token": tokens.access_token,
            "refresh_token": tokens.refresh_token,
            "expires_at_millis": tokens.expires_at_millis,
            "scope": scope,
        }
    )
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = entropy.token_bytes(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(nonce, plain, _associated(project_id, account_row_id))
    return f"{_VERSION}.{base64.urlsafe_b64encode(nonce + sealed).decode().rstrip('=')}"


def unseal(sealed: str, key: bytes, *, project_id: str, account_row_id: str) -> ProviderTokens:
    """The tokens `seal` sealed (their `scope` is the one they were tagged with); `SealedTokens` when the blob does
    not open with `key` for this account row."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    version, _, payload = sealed.partition(".")
    if version != _VERSION or not payload:
        raise SealedTokens("not a sealed token set")
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        plain = AESGCM(key).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _associated(project_id, account_row_id))
        data = orjson.loads(plain)
        return ProviderTokens(
            access_token=str(data["access_token"]),
            refresh_token=data.get("refresh_token"),
            expires_at_millis=data.get("expires_at_millis"),
            scope=str(data.get("scope") or ""),
        )
    except (binascii.Error, ValueError, InvalidTag, KeyError, TypeError, orjson.JSONDecodeError):
        raise SealedTokens("the sealed token set does not open with this key") from None
