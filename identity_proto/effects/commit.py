"""`Commit`: the one generic write. The core decides, in Python, once; a store only checks guards and applies writes.

A flow reads what it needs (typed read effects), decides, and yields one `Commit`:

- **guards**, checked in order before anything is written: a record is absent (`IsAbsent`), a record exists and
  holds, in named fields, what the flow read (`FieldsAre`: a compare-and-set on exactly the fields the decision
  depended on, so two concurrent PATCHes of different fields both survive), an index entry is free or names a given
  id (`IndexIs`), a session is live (`SessionIsLive`);
- **writes**, applied in order, all or none: put a record (`PutUser`, `PutTeam`, `PutMembership`, `PutSession`),
  patch fields (`PatchUser`, `PatchTeam`), grant project permissions (`GrantPermissions`), set or drop an index
  entry (`SetIndex`, `DropIndex`);
- **events** the change announces (`Announce`: the transactional outbox stays inside the same commit), each with its
  record as stored once the writes are applied.

The store answers `Committed` (with the records asked for in `returns`: by kind and id, or `ReferencedBy` the id
another record holds in a field) or `Conflict(guard)`: the index of the first
guard that did not hold, nothing written. `commit` turns a conflict into `CommitConflict`, and the service re-runs
the whole flow (it is pure given the request, the clock and entropy), a bounded number of times: "one of N
concurrent sign-ups of one address wins" becomes "N-1 conflict, re-run, and see the winner".

A store implements `Commit` once: the memory store under its lock (`backends/memory/commit.py`), Redis with one
generic script that reads a structured op list, every key in the project's hash-tag slot
(`backends/redis/commit.py`). Neither knows a business rule.

A resource's own guards and writes live in its effects module (`effects.teams`, ...); backends/README.md lists them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeAlias

from identity_proto.changes import TeamChanges, UserChanges
from identity_proto.effects.base import Flow, StorageEffect
from identity_proto.records import Membership, Session, Team, User

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "Announce",
    "Commit",
    "CommitConflict",
    "CommitGuard",
    "CommitWrite",
    "Committed",
    "Conflict",
    "DropIndex",
    "FieldsAre",
    "GrantPermissions",
    "Guard",
    "IndexIs",
    "IndexName",
    "IsAbsent",
    "PatchTeam",
    "PatchUser",
    "PutMembership",
    "PutSession",
    "PutTeam",
    "PutUser",
    "RecordKind",
    "ReferencedBy",
    "SessionIsLive",
    "SetIndex",
    "Write",
    "commit",
]


class CommitGuard:
    """What a commit checks before it writes anything (a frozen dataclass subclasses this)."""

    __slots__ = ()


class CommitWrite:
    """What a commit writes (a frozen dataclass subclasses this). A resource's writes may live in its own effects
    module; each store registers how it applies them (`backends/memory/commit.py`, `backends/redis/commit.py`)."""

    __slots__ = ()


class RecordKind(StrEnum):
    """The records a guard or an event may name."""

    USER = "user"
    TEAM = "team"
    PROJECT = "project"


class IndexName(StrEnum):
    """The project's unique indexes: key -> user id."""

    #: auth e-mail (normalised) -> the user it signs in
    EMAIL = "email"
    #: `oauth_index_key(provider id, account id)` of a sign-in account -> its user
    OAUTH = "oauth"
    #: a passkey's credential id (base64url) -> its user (`identity_proto.effects.passkeys`)
    PASSKEY = "passkey"


# ---------------------------------------------------------------------------------------------------------------
# Guards


@dataclass(frozen=True, slots=True)
class IsAbsent(CommitGuard):
    """No record of `kind` has this id."""

    kind: RecordKind
    id: str


@dataclass(frozen=True, slots=True)
class FieldsAre(CommitGuard):
    """The record exists, and the fields `names` hold what they held in `record` when the flow read it (a
    compare-and-set on exactly the fields the decision depended on). No names: the record exists."""

    record: User | Team
    names: tuple[str, ...] = ()

    @property
    def kind(self) -> RecordKind:
        return _KINDS[type(self.record)]


_KINDS = {User: RecordKind.USER, Team: RecordKind.TEAM}


@dataclass(frozen=True, slots=True)
class IndexIs(CommitGuard):
    """The index entry `key` names `value` (None: the entry is free)."""

    index: IndexName
    key: str
    value: str | None


@dataclass(frozen=True, slots=True)
class SessionIsLive(CommitGuard):
    """The session exists, belongs to `user_id` and has not expired at `now_ms`."""

    session_id: str
    user_id: str
    now_ms: int


Guard: TypeAlias = CommitGuard


# ---------------------------------------------------------------------------------------------------------------
# Writes


@dataclass(frozen=True, slots=True)
class PutUser(CommitWrite):
    """Store a new user (listed by its `signed_up_at_millis`). Guard its id with `IsAbsent`."""

    user: User


@dataclass(frozen=True, slots=True)
class PutTeam(CommitWrite):
    """Store a new team (listed by its `created_at_millis`). Guard its id with `IsAbsent`."""

    team: Team


@dataclass(frozen=True, slots=True)
class PutMembership(CommitWrite):
    """Store a new membership (listed after every existing one)."""

    membership: Membership


@dataclass(frozen=True, slots=True)
class PutSession(CommitWrite):
    """Store a new session, findable by its refresh token's hash and listed with its user's sessions."""

    session: Session


@dataclass(frozen=True, slots=True)
class PatchUser(CommitWrite):
    """Set the changed fields of an existing user, and only those."""

    user_id: str
    changes: UserChanges


@dataclass(frozen=True, slots=True)
class PatchTeam(CommitWrite):
    """Set the changed fields of an existing team, and only those."""

    team_id: str
    changes: TeamChanges


@dataclass(frozen=True, slots=True)
class GrantPermissions(CommitWrite):
    """Add project permissions to those the user holds directly."""

    user_id: str
    permission_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetIndex(CommitWrite):
    """Make the index entry `key` name `value`."""

    index: IndexName
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class DropIndex(CommitWrite):
    """Remove the index entry `key` (whatever it names)."""

    index: IndexName
    key: str


Write: TypeAlias = CommitWrite


# ---------------------------------------------------------------------------------------------------------------
# Events


@dataclass(frozen=True, slots=True)
class Announce:
    """A webhook event of the commit (`identity_proto.events`), recorded with the writes.

    `record` names the record the event carries, as stored once the writes are applied; `with_team` adds a user's
    selected team, `unselected` records the user as it was before selecting one (a sign-up's `user.created` comes
    before its personal team's `team.created`). `ids` are the event's ids when it carries no record."""

    type: str
    record: tuple[RecordKind, str] | None = None
    with_team: bool = False
    unselected: bool = False
    ids: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------------------------
# Returns


@dataclass(frozen=True, slots=True)
class ReferencedBy:
    """A record a commit answers with, named by another: the record of `kind` whose id is held in field `field`
    of the record `of` (both as stored once the writes are applied); None when that field is null or names no
    record. (A user's selected team, say, without knowing which one it is before the commit.)"""

    kind: RecordKind
    of: tuple[RecordKind, str]
    field: str


Returned: TypeAlias = tuple[RecordKind, str] | ReferencedBy


# ---------------------------------------------------------------------------------------------------------------
# The effect


@dataclass(frozen=True, slots=True)
class Conflict:
    """A commit refused: the guard at index `guard` did not hold. Nothing was written."""

    guard: int


@dataclass(frozen=True, slots=True)
class Committed:
    """A commit applied: the records it was asked to return (`Commit.returns`), as stored once it was applied (None
    for one that does not exist)."""

    records: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Commit(StorageEffect["Conflict | Committed"]):
    """Check `guards` in order; if all hold, apply `writes`, record `events`, and answer with the records named in
    `returns` as stored now (so a write that answers with its record is one trip), atomically.

    `events` are recorded only when the project has a webhook endpoint at that moment (checked in the same step):
    an endpoint gets only the events recorded after its creation, so an event recorded while there is none would
    be owed to no one, and a project without endpoints would keep one per write. (The fake's memory store records
    them all the same, for `project.events()`: `MemoryStore(keep_every_event=True)`.)"""

    project_id: str
    guards: tuple[Guard, ...] = ()
    writes: tuple[Write, ...] = ()
    events: tuple[Announce, ...] = ()
    returns: tuple[Returned, ...] = ()


class CommitConflict(Exception):
    """A flow's commit found a guard broken by a concurrent write; the service re-runs the flow
    (`identity_proto.service`), which then reads, and decides on, the state that write left."""

    def __init__(self, guard: Guard) -> None:
        super().__init__(f"conflict at {guard!r}")
        self.guard = guard


def commit(
    project_id: str,
    guards: tuple[Guard, ...] = (),
    writes: tuple[Write, ...] = (),
    events: tuple[Announce, ...] = (),
    returns: tuple[Returned, ...] = (),
) -> Flow[tuple[Any, ...]]:
    """Yield one `Commit`; raise `CommitConflict` when a guard did not hold. Returns the records of `returns`."""
    # Yielded here, as `perform` would: one generator fewer on every write.
    answer: Conflict | Committed = yield Commit(project_id, guards, writes, events, returns)
    if isinstance(answer, Conflict):
        raise CommitConflict(guards[answer.guard])
    return answer.records
