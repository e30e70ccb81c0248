"""Teams, memberships, permissions, member profiles (reference §5)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _metadata,
    _not_null,
    _optional_uuid_or_me,
    _plain_name,
    _profile_image,
    _uuid_or_me,
    documented,
    is_uuid,
)


@documented({"pattern": UUID_PATTERN})
def _uuid_only(value: str | None) -> str | None:
    if value is not None and not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


class ClientTeamCreateBody(Body):
    """POST /teams with client access."""

    display_name: str = Field(max_length=256)
    profile_image_url: str | None = None
    client_metadata: Any = None
    creator_user_id: str | None = None
    _plain_display_name = field_validator("display_name")(_plain_name)
    _image = field_validator("profile_image_url")(_profile_image)
    _client_metadata = field_validator("client_metadata")(_metadata)
    _creator = field_validator("creator_user_id")(_optional_uuid_or_me)


class ServerTeamCreateBody(ClientTeamCreateBody):
    """POST /teams with server or admin access."""

    client_read_only_metadata: Any = None
    server_metadata: Any = None
    _server_metadata = field_validator("client_read_only_metadata", "server_metadata")(_metadata)


class ClientTeamUpdateBody(Body):
    """PATCH /teams/{team_id} with client access."""

    display_name: str | None = Field(default=None, max_length=256)
    profile_image_url: str | None = None
    client_metadata: Any = None
    _image = field_validator("profile_image_url")(_profile_image)
    _client_metadata = field_validator("client_metadata")(_metadata)

    _non_null = field_validator("display_name", mode="before")(_not_null)
    _plain_display_name = field_validator("display_name")(_plain_name)


class ServerTeamUpdateBody(ClientTeamUpdateBody):
    """PATCH /teams/{team_id} with server or admin access."""

    client_read_only_metadata: Any = None
    server_metadata: Any = None
    _server_metadata = field_validator("client_read_only_metadata", "server_metadata")(_metadata)


class TeamIdParams(Query):
    """Path parameters naming a team."""

    team_id: str
    _team = field_validator("team_id")(_uuid_only)


class MembershipParams(Query):
    """Path parameters naming a membership: a team and a user (or `me`)."""

    team_id: str
    user_id: str
    _team = field_validator("team_id")(_uuid_only)
    _user = field_validator("user_id")(_uuid_or_me)


class PermissionParams(MembershipParams):
    """Path parameters naming one permission of a membership."""

    permission_id: str = Field(max_length=128, pattern=r"^\$?[a-z0-9_:-]+$")


class ListTeamsQuery(Query):
    """GET /teams."""

    user_id: str | None = None
    _user = field_validator("user_id")(_optional_uuid_or_me)


class ListMembershipsQuery(Query):
    """GET /team-member-profiles and GET /team-permissions."""

    team_id: str | None = None
    user_id: str | None = None
    recursive: Literal["true", "false"] = "false"
    _team = field_validator("team_id")(_uuid_only)
    _user = field_validator("user_id")(_optional_uuid_or_me)


class MemberProfileUpdateBody(Body):
    """PATCH /team-member-profiles/{team_id}/{user_id}."""

    display_name: str | None = Field(default=None, max_length=256)
    profile_image_url: str | None = None
    _image = field_validator("profile_image_url")(_profile_image)

    _non_null = field_validator("display_name", mode="before")(_not_null)
    _plain_display_name = field_validator("display_name")(_plain_name)
