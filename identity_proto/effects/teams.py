"""Teams and memberships."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.changes import MembershipChanges
from identity_proto.effects.base import StorageEffect
from identity_proto.records import Membership, Team


class TeamWrite(Enum):
    """Why a team or membership write did not happen (checked in this order)."""

    USER_NOT_FOUND = "user_not_found"
    TEAM_NOT_FOUND = "team_not_found"
    MEMBERSHIP_EXISTS = "membership_exists"
    MEMBERSHIP_NOT_FOUND = "membership_not_found"


@dataclass(frozen=True, slots=True)
class CreateTeam(StorageEffect["Team | TeamWrite"]):
    """Store a new team and, when given, its creator's membership, at once; USER_NOT_FOUND (nothing written) when
    the creator's user does not exist."""

    project_id: str
    team: Team
    creator: Membership | None = None


@dataclass(frozen=True, slots=True)
class LoadTeam(StorageEffect["Team | None"]):
    """The team with this id, or None."""

    project_id: str
    team_id: str


@dataclass(frozen=True, slots=True)
class ListTeams(StorageEffect[tuple[Team, ...]]):
    """Teams oldest first (ties by id): all of them, or those `user_id` is a member of."""

    project_id: str
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTeam(StorageEffect[bool]):
    """Remove a team with all its memberships, deselecting it for every user who had it selected, at once."""

    project_id: str
    team_id: str


@dataclass(frozen=True, slots=True)
class AddMembership(StorageEffect["Membership | TeamWrite"]):
    """Add a membership: USER_NOT_FOUND, TEAM_NOT_FOUND, MEMBERSHIP_EXISTS (in that order; nothing written), or
    the stored membership. A membership therefore never points at a missing team or user."""

    project_id: str
    membership: Membership


@dataclass(frozen=True, slots=True)
class LoadMembership(StorageEffect["Membership | None"]):
    """The membership of `user_id` in `team_id`, or None."""

    project_id: str
    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class ListMemberships(StorageEffect[tuple[Membership, ...]]):
    """Memberships in the order they were created (not by timestamp: two created in one millisecond keep their
    order), filtered by team and/or user when given."""

    project_id: str
    team_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class RemoveMembership(StorageEffect[bool]):
    """Remove a membership (with its profile and permissions) and clear the user's selection of that team, at
    once. False when there was none."""

    project_id: str
    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class UpdateMembership(StorageEffect["Membership | None"]):
    """Set the given (field, value) pairs of a membership (profile fields, or `permissions` as a sorted tuple);
    None when there is no such membership."""

    project_id: str
    team_id: str
    user_id: str
    changes: MembershipChanges

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", MembershipChanges.of(self.changes))


@dataclass(frozen=True, slots=True)
class ChangePermission(StorageEffect["Membership | None"]):
    """Grant (`granted`) or revoke one permission id of a membership, atomically (concurrent grants of different
    permissions all survive). None when there is no such membership."""

    project_id: str
    team_id: str
    user_id: str
    permission_id: str
    granted: bool
