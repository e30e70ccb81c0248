"""User and team API keys (reference part 2 §5)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _not_null,
    _optional_uuid_or_me,
    _uuid_or_me,
    documented,
    is_uuid,
)

#: The latest expiry accepted: the end of year 9999 (a JavaScript Date holds it; a Redis score holds it exactly).
MAX_EXPIRES_AT_MILLIS = 253_402_300_799_999


@documented({"pattern": UUID_PATTERN})
def _uuid(value: str) -> str:
    if not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


class _ApiKeyCreateBody(Body):
    description: str = Field(max_length=4096)
    #: Required, and null for a key that never expires (the original's schema: nullable, defined). A time in the
    #: past is accepted (the key is expired from the start).
    expires_at_millis: int | None = Field(ge=0, le=MAX_EXPIRES_AT_MILLIS)
    is_public: bool = False

    _non_null = field_validator("is_public", mode="before")(_not_null)


class UserApiKeyCreateBody(_ApiKeyCreateBody):
    """POST /user-api-keys."""

    user_id: str
    _user = field_validator("user_id")(_uuid_or_me)


class TeamApiKeyCreateBody(_ApiKeyCreateBody):
    """POST /team-api-keys."""

    team_id: str
    _team = field_validator("team_id")(_uuid)


class ApiKeyUpdateBody(Body):
    """PATCH /user-api-keys/{id}, /team-api-keys/{id}: a new description, and/or revoke the key (no un-revoking,
    no change of expiry: the original's schema)."""

    description: str | None = Field(default=None, max_length=4096)
    revoked: Literal[True] | None = None

    _non_null = field_validator("description", "revoked", mode="before")(_not_null)


class ApiKeyCheckBody(Body):
    """POST /user-api-keys/check, /team-api-keys/check."""

    api_key: str


class UserApiKeysQuery(Query):
    """The query of the user-key routes: `user_id` (a UUID or `me`) is optional in the schema; listing needs it
    (its own SCHEMA_ERROR, as the original words it), reading and updating ignore it."""

    user_id: str | None = None
    _user = field_validator("user_id")(_optional_uuid_or_me)


class TeamApiKeysQuery(Query):
    """The query of the team-key routes: `team_id` is required by every one (the original's schema); reading and
    updating go by the key's own team."""

    team_id: str
    _team = field_validator("team_id")(_uuid)


class ApiKeyIdParams(Query):
    """Path parameters naming an API key."""

    api_key_id: str
    _id = field_validator("api_key_id")(_uuid)
