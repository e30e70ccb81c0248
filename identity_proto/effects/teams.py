"""Teams and memberships: their reads, and the guards and writes a `Commit` of them uses (the decisions are the
core's, `identity_proto.flows.teams`)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.changes import MembershipChanges
from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite, RecordKind
from identity_proto.records import ApiKey, Membership, Team

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


class TeamWrite(Enum):
    """Why a team or membership write did not happen (checked in this order; `identity_proto.flows.teams`)."""

    USER_NOT_FOUND = "user_not_found"
    TEAM_NOT_FOUND = "team_not_found"
    MEMBERSHIP_EXISTS = "membership_exists"
    MEMBERSHIP_NOT_FOUND = "membership_not_found"


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


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes of memberships and teams


@dataclass(frozen=True, slots=True)
class RecordExists(CommitGuard):
    """A record of `kind` has this id (the flow need not have read it: a write that only needs its record there)."""

    kind: RecordKind
    id: str


@dataclass(frozen=True, slots=True)
class MembershipIsAbsent(CommitGuard):
    """`user_id` is not a member of `team_id`."""

    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class MembershipFieldsAre(CommitGuard):
    """The membership of `record.user_id` in `record.team_id` exists, and the fields `names` hold what they held in
    `record` when the flow read it (no names: it exists)."""

    record: Membership
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TeamMembersAre(CommitGuard):
    """The members of `team_id` are exactly `user_ids` (a team's deletion decided on them)."""

    team_id: str
    user_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TeamApiKeysAre(CommitGuard):
    """The API keys of `team_id` are exactly `key_ids` (a team's deletion decided on them)."""

    team_id: str
    key_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PatchMembership(CommitWrite):
    """Set the changed fields of an existing membership (guard it with `MembershipFieldsAre`), and only those."""

    team_id: str
    user_id: str
    changes: MembershipChanges

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "changes", MembershipChanges.of(self.changes))


@dataclass(frozen=True, slots=True)
class DropMembership(CommitWrite):
    """Remove an existing membership (guard it with `MembershipFieldsAre`) from every index."""

    team_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class DropTeam(CommitWrite):
    """Remove an existing team (its record, its place in the list, its member index: drop its memberships first)
    with the API keys `api_keys` it owns (guard them with `TeamApiKeysAre`)."""

    team_id: str
    api_keys: tuple[ApiKey, ...] = ()


@dataclass(frozen=True, slots=True)
class UserTeamsAre(CommitGuard):
    """The teams `user_id` is a member of are exactly `team_ids` (a user's deletion decided on them)."""

    user_id: str
    team_ids: tuple[str, ...]
