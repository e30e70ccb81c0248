"""Users."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite, IndexName, RecordKind
from identity_proto.records import Team, User  # noqa: F401 (Team is named only in quoted result types)

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


@dataclass(frozen=True, slots=True)
class Exists(CommitGuard):
    """A commit's guard: a record of `kind` has this id (what a write that needs no read to decide, a PATCH of a
    user's display name say, depends on)."""

    kind: RecordKind
    id: str


@dataclass(frozen=True, slots=True)
class LoadUser(StorageEffect["User | None"]):
    """The user with this id, or None."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class LoadUserWithTeam(StorageEffect["tuple[User, Team | None] | None"]):
    """The user with this id and the team they have selected (None when none is, or it is gone), read together;
    None when there is no such user. (What rendering a user needs, in one read.)"""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class FindUserByIndex(StorageEffect["User | None"]):
    """The user the unique index `index` names under `key`, or None."""

    project_id: str
    index: IndexName
    key: str


def find_user_by_email(project_id: str, email: str) -> FindUserByIndex:
    """The user whose auth-enabled primary e-mail is exactly `email` (already normalised)."""
    return FindUserByIndex(project_id, IndexName.EMAIL, email)


@dataclass(frozen=True, slots=True)
class DropUser(CommitWrite):
    """A commit's write: remove a user's record and its place in the list (`flows.users.drop_user` drops what
    points at it, its index entries included, in the same commit)."""

    user_id: str


@dataclass(frozen=True, slots=True)
class ListUsers(StorageEffect[tuple[User, ...]]):
    """Users ordered by (signed_up_at_millis, id), ascending or descending, starting at `cursor` (inclusive: the
    user with that id comes first) when given, at most `limit` of them (None: all). Filtering by text or team is
    the caller's; this is the ordered walk."""

    project_id: str
    limit: int | None = None
    cursor: str | None = None
    descending: bool = False
