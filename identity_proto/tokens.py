"""Secrets and tokens: entropy, ids, API keys, and ES256 access tokens.

Randomness is an input: the host passes an `Entropy` with each request (`os.urandom` in production, a seeded one
in tests), so the core has no global randomness and a test can replay a run exactly.

Hashing choices (why SHA-256 and not bcrypt for keys): API keys and refresh tokens are generated here with at
least 224 bits of entropy, so nobody can brute-force them from their hash; a fast hash keeps every request cheap.
Slow hashes (bcrypt) are for low-entropy human passwords only.

Access tokens are ES256 JWTs made and checked with joserfc (on `cryptography`); nothing here hand-rolls crypto.
Each project has its own P-256 key, stored with the project as its private scalar, so every worker sharing a
store signs and verifies with the same key. Verifying ES256 costs about 100 µs, so verified signatures are
cached (bounded); the expiry is checked against the request's `now` on every use, never cached.

joserfc and `cryptography` are imported when a key is first built (`SigningKey.from_scalar`), not with this
module: importing them costs more CPU than everything else a first response needs, and a service answering with
API keys alone (or a test that signs nothing) never uses them. Making a key pair's scalar needs neither. Serving
hosts import them at start-up instead (`load_signing`, through `Service.prepare`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import importlib
import random
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


if TYPE_CHECKING:
    from joserfc.jwk import ECKey

__all__ = [
    "CROCKFORD_ALPHABET",
    "Entropy",
    "SeededEntropy",
    "SigningKey",
    "VerifiedTokenCache",
    "access_token_key",
    "derived_scalar",
    "hash_secret",
    "load_signing",
    "new_api_key",
    "new_request_id",
    "new_signing_key",
    "new_uuid",
    "random_string",
    "secret_matches",
    "unverified_claims",
]

#: Lower-case Crockford base32 (no i, l, o, u), the original's alphabet for codes and refresh tokens.
CROCKFORD_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

# The order of the P-256 group: a private scalar must lie in [1, n - 1].
_P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


class Entropy(Protocol):
    """A source of random bytes, passed in by the host."""

    def token_bytes(self, n: int) -> bytes:
        """`n` random bytes."""
        ...


class SeededEntropy:
    """Deterministic entropy for tests and reproducible benchmarks. Never use it to serve real users."""

    def __init__(self, seed: int = 0) -> None:
        self._random = random.Random(seed)  # noqa: S311 - deterministic on purpose, test-only
        self._lock = threading.Lock()

    def token_bytes(self, n: int) -> bytes:
        """`n` pseudo-random bytes from the seed."""
        with self._lock:
            return self._random.randbytes(n)


#: alphabet -> a 256-byte table mapping each byte value b to alphabet[b % len(alphabet)] (ASCII alphabets).
_TABLES: dict[str, bytes] = {}


def random_string(entropy: Entropy, length: int, alphabet: str = CROCKFORD_ALPHABET) -> str:
    """`length` characters drawn uniformly from `alphabet` (whose size must divide 256, so no bias): each random
    byte b becomes alphabet[b % size], mapped in C by `bytes.translate`."""
    table = _TABLES.get(alphabet)
    if table is None:
        if 256 % len(alphabet) or not alphabet.isascii():
            raise ValueError("alphabet must be ASCII and its size must divide 256")
        table = _TABLES[alphabet] = bytes(ord(alphabet[i % len(alphabet)]) for i in range(256))
    return entropy.token_bytes(length).translate(table).decode("ascii")


def new_uuid(entropy: Entropy) -> str:
    """A random (version 4) UUID in canonical form."""
    raw = bytearray(entropy.token_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    hexed = raw.hex()
    return f"{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}"


def new_request_id(entropy: Entropy) -> str:
    """A 16-character request id (reference §0.2)."""
    return random_string(entropy, 16)


def new_api_key(entropy: Entropy, prefix: str) -> str:
    """A project API key: `prefix` (pck_, ssk_ or sak_) and 48 Crockford characters (240 bits)."""
    return prefix + random_string(entropy, 48)


def hash_secret(secret: str) -> str:
    """SHA-256 hex digest of a high-entropy secret (key, refresh token, code): what the store keeps."""
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(given: str, stored_hash: str | None) -> bool:
    """Whether `given` hashes to `stored_hash`, compared in constant time. False when nothing is stored."""
    if stored_hash is None:
        return False
    return hmac.compare_digest(hash_secret(given), stored_hash)


def new_signing_key(entropy: Entropy) -> str:
    """A fresh P-256 private scalar, hex, for a project's token signing key."""
    scalar = int.from_bytes(entropy.token_bytes(40)) % (_P256_ORDER - 1) + 1
    return f"{scalar:064x}"


#: The audience suffixes (reference §1.3: `<project id>:anon`, `<project id>:restricted`) whose tokens are signed
#: with a key of their own, and the label each one's key is derived with (`derived_scalar`).
_AUDIENCE_KEY_LABELS = {"anon": b"anonymous-users", "restricted": b"restricted-users"}


@functools.lru_cache(maxsize=4096)
def derived_scalar(scalar_hex: str, label: bytes) -> str:
    """The private scalar of a key derived from a project's own scalar for `label` (HMAC-SHA256, 512 bits reduced
    into [1, n - 1]): every worker sharing a store derives the same key, nothing more is stored, and rotating the
    project's key rotates this one."""
    secret = bytes.fromhex(scalar_hex)
    wide = b"".join(hmac.digest(secret, label + bytes([i]), "sha256") for i in (1, 2))
    return f"{int.from_bytes(wide) % (_P256_ORDER - 1) + 1:064x}"


def access_token_key(project_scalar_hex: str, audience: str) -> SigningKey:
    """The key that signs and verifies a project's access tokens whose `aud` is `audience`: the project's own for
    signed-up users (`<project id>`), and a key derived for each of the other kinds (`<project id>:anon` for
    anonymous users, `<project id>:restricted` for restricted ones).

    The original signs each kind with keys of its own (reference part 2 §4), and its JWKS lists the restricted
    users' keys only with `?include_restricted=true` and the anonymous users' only with `?include_anonymous=true`;
    so does this service. A backend that verifies tokens against the plain JWKS and forgets to check `aud` or
    `iss` then still never takes an anonymous visitor, or a user the project holds back (an unverified e-mail
    where verification is required, a restriction by an admin), for a signed-up user in good standing."""
    label = _AUDIENCE_KEY_LABELS.get(audience.partition(":")[2])
    return SigningKey.from_scalar(project_scalar_hex if label is None else derived_scalar(project_scalar_hex, label))


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A project's ES256 key pair, built from the stored private scalar."""

    kid: str
    key: ECKey
    #: The first segment of every token this key signs: its JWS protected header, base64url (the same each time).
    header_segment: bytes
    #: joserfc's ES256 algorithm, which signs (held here: joserfc is imported only when a key is first built).
    algorithm: Any

    @classmethod
    def from_scalar(cls, scalar_hex: str) -> SigningKey:
        """Build the key pair; results are memoised (building one costs about as much as a signature)."""
        return _signing_key(scalar_hex)

    def public_jwk(self) -> dict[str, Any]:
        """The public key as a JWK, for the JWKS document."""
        return {**self.key.as_dict(private=False), "kid": self.kid, "alg": "ES256", "use": "sig"}

    def sign(self, claims: Mapping[str, Any]) -> str:
        """A compact ES256 JWT carrying `claims`: the bytes `joserfc.jwt.encode` makes, signed by joserfc.

        `jws.serialize_compact` checks the header against its registry, encodes it with the standard library's
        `json` and looks the operation key up again on every call: 40 % of a token's cost, all of it for a header
        that is the same for every token of a key. Here the header is encoded once per key (by joserfc's own
        encoder), the claims by orjson, and the signature is made by joserfc's ES256 algorithm (the one
        `serialize_compact` uses: ECDSA P-256 SHA-256 by `cryptography`, r || s). `tests/unit/test_sans_io.py`
        pins the header and payload byte for byte against `jwt.encode` and verifies the result with joserfc and
        PyJWT."""
        signing_input = self.header_segment + b"." + _b64(orjson.dumps(claims))
        signature = self.algorithm.sign(signing_input, self.key)
        return (signing_input + b"." + _b64(signature)).decode("ascii")

    def verify(self, token: str) -> dict[str, Any] | None:
        """The claims if `token` carries a valid signature by this key, else None. Expiry is not checked."""
        from joserfc import jwt
        from joserfc.errors import JoseError

        try:
            return dict(jwt.decode(token, self.key, algorithms=["ES256"]).claims)
        except (JoseError, ValueError, TypeError):
            return None


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


_signing_keys: dict[str, SigningKey] = {}
_signing_keys_lock = threading.Lock()


def load_signing() -> None:
    """Import what building keys, signing and verifying need now, rather than when the first key is built."""
    for module in (
        "cryptography.hazmat.primitives.asymmetric.ec",
        "cryptography.hazmat.backends.openssl",  # loaded by the first key derived
        "joserfc.errors",
        "joserfc.jwk",
        "joserfc.jws",
        "joserfc.jwt",
        "joserfc.util",
    ):
        importlib.import_module(module)


def _signing_key(scalar_hex: str) -> SigningKey:
    found = _signing_keys.get(scalar_hex)
    if found is not None:
        return found
    from cryptography.hazmat.primitives.asymmetric import ec
    from joserfc.jwk import ECKey
    from joserfc.jws import JWSRegistry
    from joserfc.util import json_b64encode

    private = ec.derive_private_key(int(scalar_hex, 16), ec.SECP256R1())
    key = ECKey.import_key(private)
    kid = key.thumbprint()[:12]
    built = SigningKey(
        kid=kid,
        key=key,
        header_segment=json_b64encode({"typ": "JWT", "alg": "ES256", "kid": kid}),
        algorithm=JWSRegistry.algorithms["ES256"],
    )
    with _signing_keys_lock:
        if len(_signing_keys) >= 4096:  # bounded: one entry per project seen by this process
            _signing_keys.clear()
        _signing_keys[scalar_hex] = built
    return built


def unverified_claims(token: str) -> dict[str, Any] | None:
    """The payload of a compact JWS *without* checking its signature (to learn which project it names), or
    None when it is not a JWS with a JSON object payload."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1]
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


class VerifiedTokenCache:
    """A bounded memo of `SigningKey.verify`: token -> (id of the key that verified it, claims). Thread-safe.

    Only signatures are memoised; callers still compare `exp` with their own `now` on every use, so a cached
    token expires exactly when an uncached one would. A hit counts only for the key that verified the token.

    Kept small, since every new access token (each sign-in and refresh) adds an entry: an entry is the token's
    SHA-256 and its claims as compact JSON (about 0.8 KiB, not the token and a dict: 3.5 KiB), and entries whose
    token has expired (at the caller's `now_ms`) leave from the least recently used end as new ones come.
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        #: digest -> (key id, exp in seconds, claims as JSON)
        self._entries: OrderedDict[bytes, tuple[str, int, str]] = OrderedDict()
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def seen(self, token: str) -> tuple[str, dict[str, Any]] | None:
        """(id of the key that verified `token`, its claims) if some key verified it before, else None (which key
        is for `verify` to check: pass what this answered)."""
        entry = self._entries.get(hashlib.sha256(token.encode()).digest())
        return None if entry is None else (entry[0], orjson.loads(entry[2]))

    def remember(self, key: SigningKey, token: str, claims: Mapping[str, Any]) -> None:
        """`token` was just signed by `key` over `claims` (by this process): what verifying it would find, kept
        without the signature check (the memo is keyed by the token's exact bytes, which only that signing made).
        The next request carrying it, on this worker, skips the ECDSA verification: half the CPU of a downstream
        test's sign-in and first read in the in-process fake."""
        self._keep(hashlib.sha256(token.encode()).digest(), key.kid, claims, now_ms=0)

    def verify(
        self, key: SigningKey, token: str, seen: tuple[str, dict[str, Any]] | None = None, now_ms: int = 0
    ) -> dict[str, Any] | None:
        """Claims of `token` if signed by `key`, else None. `seen`: what `seen(token)` answered, if asked; `now_ms`:
        the request's clock (entries expired by then may go)."""
        digest = hashlib.sha256(token.encode()).digest()
        if seen is not None and seen[0] == key.kid:
            with self._lock:
                if digest in self._entries:
                    self._entries.move_to_end(digest)
            return seen[1]
        claims = key.verify(token)
        if claims is not None:
            self._keep(digest, key.kid, claims, now_ms=now_ms)
        return claims

    def _keep(self, digest: bytes, kid: str, claims: Mapping[str, Any], *, now_ms: int) -> None:
        exp = claims.get("exp")
        entry = (kid, exp if isinstance(exp, int) else 0, orjson.dumps(claims).decode())  # (a copy: 8 KiB less)
        with self._lock:
            entries = self._entries
            entries[digest] = entry
            entries.move_to_end(digest)
            now = now_ms // 1000
            while entries:
                oldest = next(iter(entries.values()))
                if len(entries) <= self._max_entries and oldest[1] >= now:
                    break
                entries.popitem(last=False)
