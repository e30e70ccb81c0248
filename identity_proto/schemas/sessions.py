"""Sessions."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from identity_proto.schemas.base import Body, Query, _uuid_or_me, is_uuid

#: reference §1.4: at most 367 days.
MAX_SESSION_LIFETIME_MS = 31_708_800_000


class OAuthTokenBody(Body):
    """POST /auth/oauth/token, form-encoded (official-sdk §3.8): the refresh grant only."""

    grant_type: Literal["refresh_token"]
    refresh_token: str = Field(min_length=1, max_length=256)
    client_id: str = Field(min_length=1, max_length=64)
    client_secret: str = Field(min_length=1, max_length=256)
    scope: str | None = None


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


class SessionIdParams(Query):
    """Path parameters naming a session."""

    session_id: str

    @field_validator("session_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value
