"""Team invitations (reference part 2 §3): one-time codes of purpose TEAM_INVITATION that name a team (`team_id`)
and an address (`email`), with an id of their own (`id`, what the API shows), indexed by team and by address.

Reads are effects; writes are a `Commit` the core builds (`identity_proto.flows.team_invitations`): storing one
(`PutInvitation`, guarded on its team existing), accepting one (`UseInvitation` with the membership, guarded on the
invitation being unused, the user and team existing and the membership as read), revoking one (`DropInvitation`)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite
from identity_proto.records import VerificationCode

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


class InvitationAcceptance(Enum):
    """What accepting an invitation did, in the order it checks (`identity_proto.flows.team_invitations`)."""

    #: The invitation was marked used and the membership added.
    ACCEPTED = "accepted"
    #: The invitation was marked used; the user was a member already (nothing else written).
    ALREADY_MEMBER = "already_member"
    #: No invitation with this code hash; nothing written.
    NOT_FOUND = "not_found"
    #: Its lifetime is over; nothing written.
    EXPIRED = "expired"
    #: It was used (accepted) before; nothing written.
    ALREADY_USED = "already_used"
    #: The accepting user does not exist; nothing written.
    USER_NOT_FOUND = "user_not_found"
    #: The team is gone; nothing written (the invitation is left as it was).
    TEAM_NOT_FOUND = "team_not_found"


@dataclass(frozen=True, slots=True)
class LoadTeamInvitation(StorageEffect["VerificationCode | None"]):
    """The invitation with this id as stored (used or expired ones too), or None."""

    project_id: str
    invitation_id: str


@dataclass(frozen=True, slots=True)
class ListTeamInvitations(StorageEffect[tuple[VerificationCode, ...]]):
    """The invitations stored for `team_id`, or (with `team_id` None) sent to any of `emails`, oldest first (ties
    by id). Used and expired ones may be among them: the core judges them against its clock. A store may forget
    invitations some time after they expire."""

    project_id: str
    team_id: str | None = None
    emails: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------------------------
# Commit guards and writes of invitations


@dataclass(frozen=True, slots=True)
class InvitationIsStored(CommitGuard):
    """The code with this hash is stored (not revoked; a store may forget it some time after it expires)."""

    code_hash: str


@dataclass(frozen=True, slots=True)
class InvitationIsUnused(CommitGuard):
    """The code with this hash is stored and not used."""

    code_hash: str


@dataclass(frozen=True, slots=True)
class PutInvitation(CommitWrite):
    """Store the invitation `code` (purpose TEAM_INVITATION, with `id`, `team_id` and `email` set) as a one-time
    code, findable by its id, and list it under its team and its address (guard its team with `RecordExists`)."""

    code: VerificationCode

    def __post_init__(self) -> None:
        if self.code.id is None or self.code.team_id is None or self.code.email is None:
            raise TypeError("an invitation has an id, a team and an address")


@dataclass(frozen=True, slots=True)
class UseInvitation(CommitWrite):
    """Mark the invitation's code used (guard it with `InvitationIsUnused`)."""

    code_hash: str


@dataclass(frozen=True, slots=True)
class DropInvitation(CommitWrite):
    """Delete the invitation `code` as read (guard it with `InvitationIsStored`): its code, its id entry and its
    index entries."""

    code: VerificationCode
