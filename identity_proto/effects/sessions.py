"""Sessions: their reads, the refresh (one step: `UseRefreshToken`), and the commit's session guard and writes
(a new session is the commit's `PutSession`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite
from identity_proto.records import Session, User  # noqa: F401 (User is named only in a quoted result type)

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


@dataclass(frozen=True, slots=True)
class UseRefreshToken(StorageEffect["tuple[Session, User] | None"]):
    """The session whose refresh token hashes to `refresh_token_hash`, with its user, recording `now_ms` as the
    session's last use and (if later) the user's last activity; None when there is no such session or its user is
    gone. Expiry is the caller's to judge."""

    project_id: str
    refresh_token_hash: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class LoadSession(StorageEffect["Session | None"]):
    """The session with this id, or None."""

    project_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ListSessions(StorageEffect[tuple[Session, ...]]):
    """Every session of one user, newest first (ties by id)."""

    project_id: str
    user_id: str


@dataclass(frozen=True, slots=True)
class DropSession(CommitWrite):
    """A commit's write: remove a session (as the flow read it), its refresh token's entry and its place among its
    user's sessions. A session already gone is no error."""

    session: Session


@dataclass(frozen=True, slots=True)
class UserSessionsAre(CommitGuard):
    """A commit's guard: the sessions of `user_id` are exactly `session_ids` (a user's deletion decided on them: a
    session made since conflicts)."""

    user_id: str
    session_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SessionExists(CommitGuard):
    """A commit's guard: the session with this id is stored (expired or not)."""

    session_id: str


@dataclass(frozen=True, slots=True)
class EndSession(CommitWrite):
    """A commit's write: remove the session with this id, its refresh token's entry and its place among its user's
    sessions, as stored (for a flow that knows only the id: signing out). A session already gone is no error."""

    session_id: str
