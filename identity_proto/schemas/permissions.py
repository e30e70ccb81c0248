"""Permissions and permission definitions (reference part 2 §6)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import field_validator

from identity_proto.permissions import PERMISSION_ID, SYSTEM_PERMISSIONS
from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _items_rule,
    _not_null,
    _optional_uuid_or_me,
    _uuid_or_me,
    documented,
    is_uuid,
)

#: A new definition's id: no `$` (reference: `customPermissionDefinitionIdSchema`).
_CUSTOM_ID = re.compile(r"^[a-z0-9_:]+$")
#: Longest id accepted anywhere (ours: the original sets none; a definition that could not be named in a path would
#: be a trap).
MAX_PERMISSION_ID_LENGTH = 256
#: `_permission_id` in the document: a custom id, or one of the system permissions' `$` ids.
_ID_RULE = {
    "pattern": "^(?:" + "|".join(re.escape(name) for name in sorted(SYSTEM_PERMISSIONS)) + "|[a-z0-9_:]+)$",
    "maxLength": MAX_PERMISSION_ID_LENGTH,
}


@documented(_ID_RULE)
def _permission_id(value: str) -> str:
    """A permission id as paths, filters and contained lists name it (`permissionDefinitionIdSchema`)."""
    if len(value) > MAX_PERMISSION_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_PERMISSION_ID_LENGTH} characters")
    if not PERMISSION_ID.match(value):
        raise ValueError('must contain only lowercase letters, numbers, ":", "_" and an optional "$" at the beginning')
    if value.startswith("$") and value not in SYSTEM_PERMISSIONS:
        raise ValueError("is an invalid system permission")
    return value


@documented(_ID_RULE)
def _optional_permission_id(value: str | None) -> str | None:
    return value if value is None else _permission_id(value)


@documented({"pattern": _CUSTOM_ID.pattern, "maxLength": MAX_PERMISSION_ID_LENGTH})
def _custom_id(value: str | None) -> str | None:
    """A definition's own id (`customPermissionDefinitionIdSchema`)."""
    if value is None:
        return value
    if len(value) > MAX_PERMISSION_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_PERMISSION_ID_LENGTH} characters")
    if not _CUSTOM_ID.match(value):
        raise ValueError('must contain only lowercase letters, numbers, ":" and "_"')
    return value


@documented(lambda schema: _items_rule(schema, _ID_RULE))
def _contained(value: list[str] | None) -> list[str] | None:
    return value if value is None else [_permission_id(item) for item in value]


class PermissionDefinitionCreateBody(Body):
    """POST /team-permission-definitions, /project-permission-definitions."""

    id: str
    description: str | None = None
    contained_permission_ids: list[str] | None = None
    _id = field_validator("id")(_custom_id)
    _contained_ids = field_validator("contained_permission_ids")(_contained)
    _non_null = field_validator("description", "contained_permission_ids", mode="before")(_not_null)


class PermissionDefinitionUpdateBody(Body):
    """PATCH /…-permission-definitions/{permission_id}: it replaces the definition (omitted fields take their
    defaults, reference §6), so every field is optional and none may be null."""

    id: str | None = None
    description: str | None = None
    contained_permission_ids: list[str] | None = None
    _id = field_validator("id")(_custom_id)
    _contained_ids = field_validator("contained_permission_ids")(_contained)
    _non_null = field_validator("id", "description", "contained_permission_ids", mode="before")(_not_null)


class PermissionDefinitionParams(Query):
    """Path parameters naming a definition."""

    permission_id: str
    _permission = field_validator("permission_id")(_permission_id)


class TeamPermissionParams(Query):
    """Path parameters naming one team permission grant: a team, a user (or `me`), a permission."""

    team_id: str
    user_id: str
    permission_id: str
    _user = field_validator("user_id")(_uuid_or_me)
    _permission = field_validator("permission_id")(_permission_id)

    @field_validator("team_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
    def _team(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value


class ProjectPermissionParams(Query):
    """Path parameters naming one project permission grant: a user (or `me`) and a permission."""

    user_id: str
    permission_id: str
    _user = field_validator("user_id")(_uuid_or_me)
    _permission = field_validator("permission_id")(_permission_id)


class ListProjectPermissionsQuery(Query):
    """GET /project-permissions."""

    user_id: str | None = None
    permission_id: str | None = None
    #: The API's default is false (the SDK always sends it).
    recursive: Literal["true", "false"] = "false"
    _user = field_validator("user_id")(_optional_uuid_or_me)
    _permission = field_validator("permission_id")(_optional_permission_id)


class ListTeamPermissionsQuery(ListProjectPermissionsQuery):
    """GET /team-permissions."""

    team_id: str | None = None

    @field_validator("team_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
    def _team(cls, value: str | None) -> str | None:
        if value is not None and not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value
