"""Password rules and hash identification (hashing itself runs as `HashPassword`/`VerifyPassword` effects).

libpass (the maintained passlib fork) hashes with bcrypt and verifies bcrypt and argon2 hashes in Modular Crypt
Format, so hashes imported from other systems keep working.
"""

from __future__ import annotations

import re

from passlib.context import CryptContext

__all__ = ["MAX_PASSWORD_LENGTH", "MIN_PASSWORD_LENGTH", "PASSWORD_CONTEXT", "is_supported_hash", "too_long"]

#: Minimum length on the auth/password endpoints (reference §6: PASSWORD_TOO_SHORT, details {min_length: 8}).
MIN_PASSWORD_LENGTH = 8
#: Maximum length in characters (reference §3.2); bcrypt also reads at most 72 bytes, see `too_long`.
MAX_PASSWORD_LENGTH = 70
_BCRYPT_MAX_BYTES = 72

PASSWORD_CONTEXT = CryptContext(schemes=["bcrypt", "argon2"])

# reference §3.2: $2a$/$2b$/$2y$, a two-digit cost up to 16, then exactly 53 characters (60 in total).
_BCRYPT_MCF = re.compile(r"^\$2[aby]\$(0[4-9]|1[0-6])\$[./A-Za-z0-9]{53}$")
_ARGON2_MCF = re.compile(r"^\$argon2(id|i|d)\$v=\d+\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$")


def too_long(password: str) -> bool:
    """Longer than 70 characters, or than the 72 bytes bcrypt reads (a longer one would be silently cut)."""
    return len(password) > MAX_PASSWORD_LENGTH or len(password.encode()) > _BCRYPT_MAX_BYTES


def is_supported_hash(password_hash: str) -> bool:
    """Whether `password_hash` is a bcrypt (cost <= 16) or argon2 hash in Modular Crypt Format."""
    # The patterns bound what we accept (bcrypt cost <= 16, reference §3.2); libpass confirms it can read it.
    if _BCRYPT_MCF.match(password_hash):
        return bool(PASSWORD_CONTEXT.identify(password_hash) == "bcrypt")
    return bool(_ARGON2_MCF.match(password_hash)) and PASSWORD_CONTEXT.identify(password_hash) == "argon2"
