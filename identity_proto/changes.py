"""Change sets: which fields of one stored record a write sets, validated once, where the change is built.

A field-level write (a commit's `PatchUser` / `PatchTeam` / `PatchMembership`, `PatchProject`)
carries one of these rather than loose (name, value) pairs, so a store never has to ask whether a name is a field it
may set: a change set that exists names only settable fields of its record, each once (an unknown or fixed field is
a `TypeError` when it is built, in the core). Stores iterate it as (field, value) pairs, in the order given.

| change set | record | fields it may not set |
|---|---|---|
| `UserChanges` | `User` | `id`, `oauth_accounts`, `passkeys` |
| `TeamChanges` | `Team` | `id` |
| `MembershipChanges` | `Membership` | `team_id`, `user_id` |
| `ProjectConfigChanges` | `ProjectConfig` | (none) |
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from identity_proto.quickinit import quick_init
from identity_proto.records import Membership, ProjectConfig, Team, User, replaced

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = ["Changes", "MembershipChanges", "ProjectConfigChanges", "TeamChanges", "UserChanges"]

RecordT = TypeVar("RecordT")
Pairs = Iterable[tuple[str, Any]]


def _settable(record: type[Any], *, fixed: set[str]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(record)) - fixed


@dataclass(frozen=True, slots=True)
class Changes(Generic[RecordT]):
    """Validated (field, value) pairs of one record type; subclasses name the record and its fixed fields."""

    #: The fields of the record a change may set (`_settable`: all but its identity).
    settable: ClassVar[frozenset[str]] = frozenset()

    pairs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        names = {name for name, _value in self.pairs}
        if names <= self.settable and len(names) == len(self.pairs):
            return
        unknown = [name for name, _value in self.pairs if name not in self.settable]
        if unknown:
            raise TypeError(f"{type(self).__name__} cannot set {', '.join(map(repr, unknown))}")
        raise TypeError(f"{type(self).__name__} sets a field twice: {[name for name, _value in self.pairs]}")

    @classmethod
    def of(cls, pairs: Pairs | Changes[Any] = (), /, **fields: Any) -> Any:
        """The change set of `pairs` (or an existing change set of this type, as it is) and `fields`."""
        if isinstance(pairs, cls) and not fields:
            return pairs
        return cls((*pairs, *fields.items()) if fields else tuple(pairs))

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.pairs)

    def as_dict(self) -> dict[str, Any]:
        """The changes by field name."""
        return dict(self.pairs)

    def apply(self, record: RecordT) -> RecordT:
        """`record` with these changes made."""
        return replaced(record, dict(self.pairs), known=True) if self.pairs else record


@dataclass(frozen=True, slots=True)
class UserChanges(Changes[User]):
    """Changes of a `User` (any field but its id and, OAuth, its linked accounts: those change only with their
    OAuth index, by a commit's `SetOAuthAccounts`: `flows.oauth_accounts.commit_accounts`, a sign-up or an upgrade;
    likewise its passkeys, with the passkey index, by a commit's `SetPasskeys`: `flows.passkeys`)."""

    settable = _settable(User, fixed={"id", "oauth_accounts", "passkeys"})


@dataclass(frozen=True, slots=True)
class TeamChanges(Changes[Team]):
    """Changes of a `Team` (any field but its id)."""

    settable = _settable(Team, fixed={"id"})


@dataclass(frozen=True, slots=True)
class MembershipChanges(Changes[Membership]):
    """Changes of a `Membership`: its profile and permissions, never whose membership of which team it is."""

    settable = _settable(Membership, fixed={"team_id", "user_id"})


@dataclass(frozen=True, slots=True)
class ProjectConfigChanges(Changes[ProjectConfig]):
    """Changes of a project's `ProjectConfig`."""

    settable = _settable(ProjectConfig, fixed=set())


for _changes in (UserChanges, TeamChanges, MembershipChanges, ProjectConfigChanges):
    quick_init(_changes)  # made per request (identity_proto.quickinit)
