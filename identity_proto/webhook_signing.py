"""Webhook signatures: the Standard Webhooks scheme Svix uses (reference part 2 §8), so receivers verify with the
`svix` or `standardwebhooks` libraries unchanged.

- A secret is `whsec_<base64 of the key>`; the HMAC key is the decoded part.
- The signed content is `{msg_id}.{timestamp}.{body}` (timestamp in Unix seconds, body the exact bytes sent).
- A signature is `v1,<base64 of HMAC-SHA256(key, content)>`; several are sent space-separated (during a secret
  rotation's overlap, one per secret: a receiver holding either verifies).
- The same three values go out under both header families: `svix-id`/`svix-timestamp`/`svix-signature` and
  `webhook-id`/`webhook-timestamp`/`webhook-signature`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

__all__ = [
    "SECRET_PREFIX",
    "USER_AGENT",
    "WebhookSecretError",
    "new_webhook_secret",
    "sign",
    "signature_header",
    "webhook_headers",
    "webhook_key",
]

SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix every secret carries, not a secret
USER_AGENT = "identity-service-webhooks/1"


class WebhookSecretError(ValueError):
    """A secret that is not `whsec_` followed by base64."""


def new_webhook_secret(key: bytes) -> str:
    """The secret for `key` (24 random bytes is what Svix issues; any length verifies)."""
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def webhook_key(secret: str) -> bytes:
    """The HMAC key a `whsec_` secret holds."""
    if not secret.startswith(SECRET_PREFIX):
        raise WebhookSecretError("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except binascii.Error:
        raise WebhookSecretError("a webhook secret is whsec_ followed by base64") from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One signature, `v1,<base64>`, of `body` as message `msg_id` sent at `timestamp` (Unix seconds)."""
    content = b"%s.%d.%s" % (msg_id.encode("utf-8"), timestamp, body)
    digest = hmac.new(webhook_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_header(secrets: tuple[str, ...], msg_id: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: one signature per secret, space-separated."""
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def webhook_headers(secrets: tuple[str, ...], msg_id: str, timestamp: int, body: bytes) -> tuple[tuple[str, str], ...]:
    """Every header a webhook POST carries: both header families, the JSON content type, our user agent."""
    signature = signature_header(secrets, msg_id, timestamp, body)
    stamp = str(timestamp)
    return (
        ("content-type", "application/json"),
        ("user-agent", USER_AGENT),
        ("svix-id", msg_id),
        ("svix-timestamp", stamp),
        ("svix-signature", signature),
        ("webhook-id", msg_id),
        ("webhook-timestamp", stamp),
        ("webhook-signature", signature),
    )
