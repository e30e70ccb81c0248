"""Rules about users that several flows share: e-mail normalisation and validation, restriction."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from identity_proto.auth import AccessType
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.records import ContactChannel, ProjectConfig, User

__all__ = [
    "MAX_EMAIL_LENGTH",
    "checked_email",
    "checked_profile_image",
    "email_taken",
    "normalize_email",
    "restricted_reason",
    "verified_emails",
]

# reference §3.2: a client may only set a user's image as base64 data of these types; a server also http(s) URLs.
_CLIENT_IMAGE = re.compile(r"^data:image/(png|jpg|jpeg|gif|bmp|webp);base64,[A-Za-z0-9+/]+=*$")
_ANY_IMAGE = re.compile(r"^(https?://\S+|data:image/[a-z0-9.+-]+;base64,[A-Za-z0-9+/]+=*)$")


def checked_profile_image(url: str | None, access_type: AccessType) -> str | None:
    """An image URL as stored, by one rule for users, teams and team member profiles: http(s) or a base64 data
    image; clients (access_type CLIENT) only the latter, of common image types. Anything else is 400
    INVALID_PROFILE_IMAGE_URL. (Size was checked by the schema: smaller than 100KB.)"""
    if url is None:
        return None
    pattern = _CLIENT_IMAGE if access_type is AccessType.CLIENT else _ANY_IMAGE
    if not pattern.match(url):
        raise KnownError(ErrorCode.INVALID_PROFILE_IMAGE_URL)
    return url


# reference §2.2: a valid address whose local part has no leading, trailing or double dots, and whose domain ends
# in a top-level domain of at least two letters (so test@localhost and test@gmail are refused). ASCII only, so no
# invisible character (a zero-width space) or lookalike letter (a Cyrillic e) makes a second account of an
# address.
_STRICT_EMAIL = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,}"
)

# The original's rule for a user's primary e-mail on create and update (yup's `email()`, the HTML spec's valid
# e-mail address), applied in compatibility mode only: ASCII like ours, but no top-level domain required.
_HTML_EMAIL = re.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)

#: The longest address accepted (as stored).
MAX_EMAIL_LENGTH = 256


def normalize_email(email: str) -> str:
    """The stored form of an address: NFKC-normalised (full-width and other compatibility forms become their
    plain letters), trimmed and lower-cased."""
    return unicodedata.normalize("NFKC", email).strip().lower()


def checked_email(email: str, *, original_user_rule: bool = False) -> str:
    """The one rule for every e-mail address the service takes (sign-up, sign-in codes, password sign-in, user
    create and update by client and server, outbox filter, import): `email` in its stored form
    (`normalize_email`), or ValueError("must be a valid email") unless that form passes the strict check of
    reference §2.2. Validating the normalised form means that two inputs naming one stored address are one
    account, and that an address that only looks like another (invisible or non-ASCII characters, a trailing dot)
    is refused everywhere alike. `original_user_rule`: the original's looser rule for user create and update
    (compatibility mode)."""
    normalized = normalize_email(email)
    rule = _HTML_EMAIL if original_user_rule else _STRICT_EMAIL
    if len(normalized) > MAX_EMAIL_LENGTH or not rule.fullmatch(normalized):
        raise ValueError("must be a valid email")
    return normalized


def restricted_reason(user: User, config: ProjectConfig) -> str | None:
    """Why the user is restricted (reference §3.4, first match wins), or None."""
    if user.is_anonymous:
        return "anonymous"
    if config.require_email_verification and not (user.primary_email and user.primary_email_verified):
        return "email_not_verified"
    if user.restricted_by_admin:
        return "restricted_by_administrator"
    return None


def email_taken(email: str) -> KnownError:
    """409 USER_EMAIL_ALREADY_EXISTS: another user signs in with `email` (reference §3.3; would_work false)."""
    return KnownError(
        ErrorCode.USER_EMAIL_ALREADY_EXISTS,
        details={"email": email, "would_work_if_email_was_verified": False},
        context={"email": email},
    )


# team invitations
def verified_emails(channels: Iterable[ContactChannel]) -> frozenset[str]:
    """The addresses a user has proven to own, from all their contact channels (the primary e-mail among them:
    `effects.ListContactChannels`): what an invitation's address is compared with (listing a user's invitations,
    accepting one by id). Channel values and invitation addresses are both in stored form (`normalize_email`)."""
    return frozenset(channel.value for channel in channels if channel.is_verified)
