"""Sessions."""

from __future__ import annotations

from pydantic import Field, field_validator

from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _optional_uuid_or_me,
    _uuid_or_me,
    documented,
    is_uuid,
)

#: reference §1.4: at most 367 days.
MAX_SESSION_LIFETIME_MS = 31_708_800_000


class CreateSessionBody(Body):
    """POST /auth/sessions (server, admin)."""

    user_id: str
    expires_in_millis: int = Field(default=365 * 24 * 3600 * 1000, ge=1, le=MAX_SESSION_LIFETIME_MS)
    is_impersonation: bool = False
    _user_id = field_validator("user_id")(_uuid_or_me)


class ListSessionsQuery(Query):
    """GET /auth/sessions."""

    user_id: str
    _user_id = field_validator("user_id")(_uuid_or_me)


class SessionUserQuery(Query):
    """DELETE /auth/sessions/{id}: the original's routes share the list's query; `user_id` is checked, not used."""

    user_id: str | None = None
    _user_id = field_validator("user_id")(_optional_uuid_or_me)


class SessionIdParams(Query):
    """Path parameters naming a session."""

    session_id: str

    @field_validator("session_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value
