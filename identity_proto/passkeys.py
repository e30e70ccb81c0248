"""Passkeys (WebAuthn, https://www.w3.org/TR/webauthn-3/): the options the service offers a browser, and the
verification of what the browser's authenticator answers. Pure functions of the request; the verification itself is
py_webauthn's (`webauthn`, imported on first use: a service that never sees a passkey never loads it).

The relying party (reference: the original's passkey routes):

- The options name no real RP ID: `rp.id` / `rpId` is `RP_ID_PLACEHOLDER`, which the client replaces with its
  page's host name (the original's SDK insists on this exact value before it does so). A service serving several
  apps' domains has no one RP ID to name.
- So the origin decides: the origin the browser wrote into `clientDataJSON` must be trusted by the project (a
  trusted domain, wildcards included, or localhost when the project allows it: `flows.otp.callback_is_trusted`),
  and the RP ID the authenticator signed must be that origin's host, exactly (`expected_rp_id`).
- The challenge is derived from the code the service returns with the options (`challenge_of`): the code is stored
  as a hash, bound to the project, its purpose and (registration) the user, used once and expires, so the
  challenge is all of that too, and nothing but the code's hash is stored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

from identity_proto.records import Passkey, User
from identity_proto.urls import UnsafeURL, parse_web_url

__all__ = [
    "CHALLENGE_LIFETIME_MS",
    "RP_ID_PLACEHOLDER",
    "TIMEOUT_MS",
    "PasskeyRejected",
    "authentication_options",
    "b64url",
    "challenge_of",
    "client_origin",
    "registration_options",
    "verify_authentication",
    "verify_registration",
]

#: What the options name as the relying party: the client puts its page's host name in its place (the original's
#: SDK checks for exactly this value, then replaces it).
RP_ID_PLACEHOLDER = "THIS_VALUE_WILL_BE_REPLACED.example.com"
#: How long the browser is told to wait for the authenticator (the original's 60 s).
TIMEOUT_MS = 60_000
#: How long a challenge's code lives: the timeout and 5 s for the answer to arrive (the original's).
CHALLENGE_LIFETIME_MS = TIMEOUT_MS + 5_000

#: COSE algorithms offered, in the original's order: EdDSA, ES256, RS256.
_ALGORITHMS = (-8, -7, -257)


class PasskeyRejected(ValueError):
    """A browser's answer that does not verify; the message says why (py_webauthn's words, for the log).
    `cloned`: the signature counter did not go up (the answer of a cloned authenticator, or a replayed one)."""

    def __init__(self, message: str, *, cloned: bool = False) -> None:
        super().__init__(message)
        self.cloned = cloned


def b64url(data: bytes) -> str:
    """base64url without padding (WebAuthn's JSON encoding of bytes)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _from_b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def challenge_of(code: str) -> bytes:
    """The WebAuthn challenge of a challenge code: a hash of the code (32 bytes), so the challenge need not be
    stored; only the code's holder can present a signature over it."""
    return hashlib.sha256(b"identity-service passkey challenge\0" + code.lower().encode()).digest()


def registration_options(project_name: str, user: User, challenge: bytes) -> dict[str, Any]:
    """`PublicKeyCredentialCreationOptionsJSON` for `user` (the original's shape: a discoverable credential, user
    verification preferred, no attestation asked for; the user handle is the user id's UTF-8)."""
    name = user.display_name or user.primary_email or "Stack Auth User"
    return {
        "challenge": b64url(challenge),
        "rp": {"name": project_name, "id": RP_ID_PLACEHOLDER},
        "user": {"id": b64url(user.id.encode()), "name": name, "displayName": name},
        "pubKeyCredParams": [{"alg": alg, "type": "public-key"} for alg in _ALGORITHMS],
        "timeout": TIMEOUT_MS,
        "attestation": "none",
        "excludeCredentials": [],
        "authenticatorSelection": {
            "residentKey": "required",
            "userVerification": "preferred",
            "requireResidentKey": True,
        },
        "extensions": {"credProps": True},
    }


def authentication_options(challenge: bytes) -> dict[str, Any]:
    """`PublicKeyCredentialRequestOptionsJSON`: any discoverable credential of the RP (the original's shape)."""
    return {
        "challenge": b64url(challenge),
        "timeout": TIMEOUT_MS,
        "rpId": RP_ID_PLACEHOLDER,
        "allowCredentials": [],
        "userVerification": "preferred",
    }


def client_origin(credential: Mapping[str, Any]) -> str | None:
    """The origin the browser wrote into the answer's `clientDataJSON`, or None when there is none to read."""
    response = credential.get("response")
    encoded = response.get("clientDataJSON") if isinstance(response, Mapping) else None
    if not isinstance(encoded, str):
        return None
    try:
        client_data = orjson.loads(_from_b64url(encoded))
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        return None
    origin = client_data.get("origin") if isinstance(client_data, dict) else None
    return origin if isinstance(origin, str) else None


def expected_rp_id(origin: str) -> str | None:
    """The RP ID an answer from `origin` must have been signed for: the origin's host (None: not a web origin
    every parser reads alike, or not an origin at all but a URL with a path)."""
    try:
        parsed = parse_web_url(origin)
    except UnsafeURL:
        return None
    if str(parsed.origin) != origin:  # a browser writes the serialised origin, nothing else
        return None
    return parsed.origin.host.strip("[]")


def verify_registration(
    credential: Mapping[str, Any], challenge: bytes, origin: str, rp_id: str, now_ms: int
) -> Passkey:
    """The passkey a registration answer (`navigator.credentials.create()`'s JSON) registers, verified: the
    challenge, the origin, the RP ID's hash, user presence, the attestation (`none` or one py_webauthn checks);
    else `PasskeyRejected`."""
    from webauthn import verify_registration_response

    try:
        verified = verify_registration_response(
            credential=dict(credential),
            expected_challenge=challenge,
            expected_origin=origin,
            expected_rp_id=rp_id,
            require_user_verification=False,  # the original's choice: presence is enough
        )
    except Exception as problem:  # untrusted input: whatever the library cannot parse is a refusal
        raise PasskeyRejected(str(problem) or type(problem).__name__) from None
    response = credential.get("response")
    transports = response.get("transports") if isinstance(response, Mapping) else None
    return Passkey(
        credential_id=b64url(verified.credential_id),
        public_key=b64url(verified.credential_public_key),
        sign_count=verified.sign_count,
        transports=tuple(t for t in transports or () if isinstance(t, str))[:8],
        aaguid=verified.aaguid,
        created_at_millis=now_ms,
        rp_id=rp_id,
    )


def verify_authentication(
    credential: Mapping[str, Any], challenge: bytes, origin: str, rp_id: str, passkey: Passkey
) -> int:
    """The authenticator's new signature counter, once a sign-in answer (`navigator.credentials.get()`'s JSON) is
    verified against `passkey`: the challenge, the origin, the RP ID's hash, user presence, the signature over the
    authenticator data and client data, and a counter above the stored one unless both are 0 (a lower or equal
    one is a cloned authenticator's); else `PasskeyRejected`."""
    from webauthn import verify_authentication_response

    try:
        verified = verify_authentication_response(
            credential=dict(credential),
            expected_challenge=challenge,
            expected_origin=origin,
            expected_rp_id=rp_id,
            credential_public_key=_from_b64url(passkey.public_key),
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=False,
        )
    except Exception as problem:  # untrusted input: whatever the library cannot parse is a refusal
        text = str(problem) or type(problem).__name__
        raise PasskeyRejected(text, cloned=text.startswith("Response sign count")) from None
    return int(verified.new_sign_count)
