"""Password rules and hash identification (hashing itself runs as `HashPassword`/`VerifyPassword` effects).

libpass (the maintained passlib fork) hashes with bcrypt and verifies bcrypt and argon2 hashes in Modular Crypt
Format, so hashes imported from other systems keep working. Its context is built on first use
(`password_context`), and libpass loads bcrypt's backend on the first hash: together about 55 ms of CPU that only
the routes taking or checking a password need. Serving hosts pay it at start-up instead (`load_hashing`, through
`Service.prepare`).
"""

from __future__ import annotations

import functools
import importlib
import re
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from passlib.context import CryptContext

__all__ = [
    "MAX_PASSWORD_LENGTH",
    "MIN_PASSWORD_LENGTH",
    "hash_cost_problem",
    "is_supported_hash",
    "load_hashing",
    "password_context",
    "timing_decoy_hash",
    "too_long",
]

#: Minimum length on the auth/password endpoints (reference §6: PASSWORD_TOO_SHORT, details {min_length: 8}).
MIN_PASSWORD_LENGTH = 8
#: Maximum length in characters (reference §3.2); bcrypt also reads at most 72 bytes, see `too_long`.
MAX_PASSWORD_LENGTH = 70
_BCRYPT_MAX_BYTES = 72


@functools.cache
def password_context() -> CryptContext:
    """libpass's context for bcrypt and argon2 hashes (one per process, built on first use)."""
    from passlib.context import CryptContext

    return CryptContext(schemes=["bcrypt", "argon2"])


#: libpass loads bcrypt's backend by setting class attributes, which is not safe against a second thread doing the
#: same at once: a serving host's `Service.prepare` thread and a first request's hash in the async driver's worker
#: thread can (the suspected cause of a 500 on a first password sign-up seen once on a loaded machine). The core
#: starts no thread; this lock only makes the one-time loading safe for hosts that call in from several.
_HASHING_LOCK = threading.Lock()
_hashing_loaded = False


def load_hashing() -> None:
    """Build the context and load what libpass loads on the first hash (bcrypt's backend, `passlib.hash`) now,
    once, whichever thread asks first (the others wait for it)."""
    global _hashing_loaded
    if _hashing_loaded:
        return
    with _HASHING_LOCK:
        if not _hashing_loaded:
            password_context().handler("bcrypt").get_backend()
            importlib.import_module("passlib.hash").bcrypt.get_backend()
            _hashing_loaded = True


# reference §3.2: $2a$/$2b$/$2y$, a two-digit cost up to 16, then exactly 53 characters (60 in total).
_BCRYPT_MCF = re.compile(r"^\$2[aby]\$(0[4-9]|1[0-6])\$[./A-Za-z0-9]{53}$")
_ARGON2_MCF = re.compile(
    r"^\$argon2(id|i|d)\$v=\d+\$m=(?P<m>\d+),t=(?P<t>\d+),p=(?P<p>\d+)\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$"
)

#: The most an imported argon2 hash may cost to verify: memory in KiB, passes, lanes. Every anonymous sign-in
#: attempt for an address pays its hash's cost, so it is capped as bcrypt's is (cost 16, reference §3.2). The caps
#: admit every OWASP-recommended argon2id setting (m=47104 t=1 ... m=7168 t=5, p=1), RFC 9106's second
#: recommendation and argon2-cffi's default (m=65536 t=3 p=4), but not RFC 9106's first (2 GiB).
ARGON2_MAX_COST = {"m": 64 * 1024, "t": 10, "p": 4}
_ARGON2_COST_NAMES = {"m": "memory (m, KiB)", "t": "time (t)", "p": "parallelism (p)"}


def too_long(password: str) -> bool:
    """Longer than 70 characters, or than the 72 bytes bcrypt reads (a longer one would be silently cut)."""
    return len(password) > MAX_PASSWORD_LENGTH or len(password.encode()) > _BCRYPT_MAX_BYTES


def hash_cost_problem(password_hash: str) -> str | None:
    """Why verifying `password_hash` would cost more than an imported hash may, worded to follow the field's
    name in a SCHEMA_ERROR (naming each limit it exceeds); None when it does not (or is no argon2 hash: other
    hashes are judged by `is_supported_hash`, whose bcrypt pattern already caps the cost at 16)."""
    found = _ARGON2_MCF.match(password_hash)
    if found is None:
        return None
    over = [
        f"{_ARGON2_COST_NAMES[name]} must be at most {limit}, not {int(found[name])}"
        for name, limit in ARGON2_MAX_COST.items()
        if int(found[name]) > limit
    ]
    return f"is an argon2 hash above the cost limit: {'; '.join(over)}" if over else None


def is_supported_hash(password_hash: str) -> bool:
    """Whether `password_hash` is a bcrypt (cost <= 16) or argon2 hash in Modular Crypt Format."""
    # The patterns bound what we accept (bcrypt cost <= 16, reference §3.2); libpass confirms it can read it.
    if _BCRYPT_MCF.match(password_hash):
        return bool(password_context().identify(password_hash) == "bcrypt")
    return bool(_ARGON2_MCF.match(password_hash)) and password_context().identify(password_hash) == "argon2"


# The salt and checksum of a bcrypt hash of a random secret that was thrown away: no password is known to match
# them at any cost (and at any cost but the one they were made with, none matches them at all).
_DECOY_SALT_AND_CHECKSUM = "JACceLGeSlysUw8QOZJy7eyZbu3vn9pP3oqirKW9soSowFfsNkFHG"


@functools.cache
def timing_decoy_hash(rounds: int) -> str:
    """A bcrypt hash at cost `rounds` that no password matches: what a password sign-in verifies against when the
    address has no password to check (unknown, or its user has none), so that answering costs exactly what a
    wrong password for a real user costs (real hashes are made at the same configured cost). bcrypt's work
    depends on the cost alone, never on whether the checksum could match, so the decoy needs no hashing to make:
    it is built once per cost and kept."""
    if not 4 <= rounds <= 31:
        raise ValueError(f"bcrypt cost must be 4-31, not {rounds}")
    return f"$2b${rounds:02d}${_DECOY_SALT_AND_CHECKSUM}"
