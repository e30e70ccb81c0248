"""A software passkey authenticator for test suites: it answers the service's WebAuthn options as a browser with a
platform authenticator would, with no browser.

    authenticator = project.passkey_authenticator()            # origin http://localhost:3000 (localhost is trusted)
    with project.client("client", access_token=tokens["access_token"]) as http:
        authenticator.register(http)                           # initiate, navigator.credentials.create(), register
    with project.client("client") as http:
        signed_in = authenticator.sign_in(http)                # initiate, navigator.credentials.get(), sign in
    assert signed_in["user_id"] == user["id"]

Its answers are real: a P-256 key pair per credential (kept here; the service gets the public key), `none`
attestation, authenticator data with the SHA-256 of the RP ID, flags user present and verified (and attested
credential data on registration), and a signature counter that goes up by one with each signature; ECDSA is
`cryptography`'s and CBOR `cbor2`'s. As the official SDK does, it replaces the options' placeholder RP ID with its
origin's host name. `create` and `get` answer options alone (any WebAuthn relying party's); `clone()` copies the
authenticator with its keys and counters, to show that a clone's counter is refused.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import secrets
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import cbor2
import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

__all__ = ["PasskeyAuthenticator", "PasskeyCredential"]

#: The options' RP ID that the client replaces with its page's host name (`identity_proto.passkeys`).
RP_ID_PLACEHOLDER = "THIS_VALUE_WILL_BE_REPLACED.example.com"
PREFIX = "/api/v1/auth/passkey"

_UP, _UV, _AT = 0x01, 0x04, 0x40
#: A software authenticator has no certified model: the all-zero AAGUID, as with `none` attestation.
_AAGUID = bytes(16)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _from_b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class PasskeyCredential:
    """A credential the authenticator holds: its id, its private key, the RP and user it was made for, and its
    signature counter."""

    credential_id: bytes
    private_key: ec.EllipticCurvePrivateKey
    rp_id: str
    user_handle: bytes
    sign_count: int = 0

    @property
    def id(self) -> str:
        """The credential id as WebAuthn's JSON carries it (base64url)."""
        return _b64url(self.credential_id)

    def cose_public_key(self) -> bytes:
        """The public key as a COSE_Key (EC2, ES256, P-256)."""
        numbers = self.private_key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})


class PasskeyAuthenticator:
    """A platform authenticator in a browser page at `origin`, holding discoverable credentials (one per RP and
    user, as a browser keeps them)."""

    def __init__(self, origin: str = "http://localhost:3000") -> None:
        self.origin = origin
        self.credentials: list[PasskeyCredential] = []

    @property
    def host(self) -> str:
        """The host name of the origin: the RP ID the authenticator uses in place of the placeholder."""
        return urlsplit(self.origin).hostname or ""

    def clone(self) -> PasskeyAuthenticator:
        """A copy holding the same keys and counters (a cloned authenticator); the two count on separately."""
        twin = PasskeyAuthenticator(self.origin)
        twin.credentials = [copy.copy(c) for c in self.credentials]
        return twin

    # --- the WebAuthn calls --------------------------------------------------------------------------------------

    def create(self, options: dict[str, Any], *, origin: str | None = None, rp_id: str | None = None) -> dict[str, Any]:
        """`navigator.credentials.create({publicKey: options})` as JSON (`RegistrationResponseJSON`): a new key
        pair for the options' RP (or `rp_id`) and user, replacing one held for that pair. `origin` overrides the
        page's origin written into the client data (to test what a relying party refuses)."""
        rp = options.get("rp", {})
        rp_id = rp_id or self._rp_id(rp.get("id"))
        user_handle = _from_b64url(options["user"]["id"])
        credential = PasskeyCredential(
            secrets.token_bytes(16), ec.generate_private_key(ec.SECP256R1()), rp_id, user_handle
        )
        self.credentials = [c for c in self.credentials if (c.rp_id, c.user_handle) != (rp_id, user_handle)]
        self.credentials.append(credential)
        attested = (
            _AAGUID
            + struct.pack(">H", len(credential.credential_id))
            + credential.credential_id
            + credential.cose_public_key()
        )
        auth_data = self._authenticator_data(rp_id, _UP | _UV | _AT, credential.sign_count) + attested
        client_data = self._client_data("webauthn.create", options["challenge"], origin)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": credential.id,
            "rawId": credential.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": _b64url(client_data),
                "attestationObject": _b64url(attestation),
                "transports": ["internal"],
            },
            "clientExtensionResults": {"credProps": {"rk": True}},
            "authenticatorAttachment": "platform",
        }

    def get(self, options: dict[str, Any], *, origin: str | None = None, rp_id: str | None = None) -> dict[str, Any]:
        """`navigator.credentials.get({publicKey: options})` as JSON (`AuthenticationResponseJSON`): an assertion by
        the credential held for the options' RP (or `rp_id`; the newest one, or one of `allowCredentials`), its
        counter raised by one. LookupError when it holds none."""
        rp_id = rp_id or self._rp_id(options.get("rpId"))
        allowed = {item["id"] for item in options.get("allowCredentials") or ()}
        held = [c for c in self.credentials if c.rp_id == rp_id and (not allowed or c.id in allowed)]
        if not held:
            raise LookupError(f"the authenticator holds no credential for {rp_id}")
        credential = held[-1]
        credential.sign_count += 1
        auth_data = self._authenticator_data(rp_id, _UP | _UV, credential.sign_count)
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = credential.private_key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": credential.id,
            "rawId": credential.id,
            "type": "public-key",
            "response": {
                "clientDataJSON": _b64url(client_data),
                "authenticatorData": _b64url(auth_data),
                "signature": _b64url(signature),
                "userHandle": _b64url(credential.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    # --- the service's ceremonies --------------------------------------------------------------------------------

    def register(self, client: httpx.Client, **overrides: Any) -> dict[str, Any]:
        """Register a passkey for the user signed in on `client` (a client of the project with their access token):
        initiate, `create`, register. Returns the registration's answer (`{"user_handle"}`); AssertionError with
        the service's answer when a step is refused. `overrides` go to `create` (`origin`, `rp_id`)."""
        started = _ok(client.post(f"{PREFIX}/initiate-passkey-registration", json={}))
        credential = self.create(started["options_json"], **overrides)
        return _ok(client.post(f"{PREFIX}/register", json={"credential": credential, "code": started["code"]}))

    def sign_in(self, client: httpx.Client, **overrides: Any) -> dict[str, Any]:
        """Sign in with a passkey on `client` (a client of the project): initiate, `get`, sign in. Returns the
        sign-in's answer (`{"access_token", "refresh_token", "user_id", "is_new_user"}`); AssertionError with the
        service's answer when a step is refused (the second factor's 400 included). `overrides` go to `get`."""
        started = _ok(client.post(f"{PREFIX}/initiate-passkey-authentication", json={}))
        answer = self.get(started["options_json"], **overrides)
        return _ok(client.post(f"{PREFIX}/sign-in", json={"authentication_response": answer, "code": started["code"]}))

    # --- parts ---------------------------------------------------------------------------------------------------

    def _rp_id(self, named: str | None) -> str:
        return self.host if named in (None, RP_ID_PLACEHOLDER) else str(named)

    @staticmethod
    def _authenticator_data(rp_id: str, flags: int, sign_count: int) -> bytes:
        return hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", sign_count)

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": origin or self.origin, "crossOrigin": False}
        return json.dumps(data, separators=(",", ":")).encode()


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise AssertionError(
            f"{response.request.method} {response.request.url.path} -> {response.status_code}: {response.text}"
        )
    return dict(response.json())
