"""Permissions: project permission grants, and changes of the project's permission definitions (reference part 2
§6). Team permission grants live on memberships (`flows.teams.change_permission`).

Project grants are written by a `Commit` the core builds (`identity_proto.flows.permissions`): a grant with
`GrantPermissions` (guarded on the user existing), a revoke with `RevokePermission` (guarded by `ProjectGrantIs` on the
grant being held, among how many: a user holding none leaves the set of holders). A change of the definitions is a
commit too (`flows.permissions.change_definitions`: the config compare-and-set, and the grants it rewrites)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


@dataclass(frozen=True, slots=True)
class ListProjectPermissions(StorageEffect[tuple[tuple[str, tuple[str, ...]], ...]]):
    """Direct project grants as (user id, the ids they hold, sorted), sorted by user id, for users who hold any:
    every such user's, or only `user_id`'s when given."""

    project_id: str
    user_id: str | None = None


class DefinitionsWrite(Enum):
    """Why a change of the permission definitions (`flows.permissions.change_definitions`) wrote nothing."""

    #: There is no such project.
    PROJECT_NOT_FOUND = "project_not_found"
    #: A config field named in `expected` no longer holds the value given there (someone changed it since it was
    #: read): read again and retry.
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class DropProjectGrants(CommitWrite):
    """A commit's write: revoke every project permission `user_id` holds directly (a user's deletion; whatever
    they hold, so it needs no guard)."""

    user_id: str


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes of project grants (`GrantPermissions`, the grant, is the commit's own)


@dataclass(frozen=True, slots=True)
class ProjectGrantIs(CommitGuard):
    """The user holds `permission_id` directly, among exactly `held` ids in all (a revoke decided on both: whether it
    takes the user's last grant)."""

    user_id: str
    permission_id: str
    held: int


@dataclass(frozen=True, slots=True)
class RevokePermission(CommitWrite):
    """Remove the user's direct grant of `permission_id` (guard it with `ProjectGrantIs`); with `last`, the user
    holds none afterwards and leaves the set of holders."""

    user_id: str
    permission_id: str
    last: bool
