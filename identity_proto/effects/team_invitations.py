"""Team invitations (reference part 2 §3): one-time codes of purpose TEAM_INVITATION that name a team (`team_id`)
and an address (`email`), with an id of their own (`id`, what the API shows), indexed by team and by address."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from identity_proto.effects.base import StorageEffect
from identity_proto.records import Membership, VerificationCode


class InvitationAcceptance(Enum):
    """What `AcceptTeamInvitation` did, in the order it checks."""

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
class CreateTeamInvitation(StorageEffect[bool]):
    """Store the invitation `code` (purpose TEAM_INVITATION, with `id`, `team_id` and `email` set) as a one-time
    code, findable by its id, and list it under its team and its address, at once; only if the team exists
    (False: nothing written)."""

    project_id: str
    code: VerificationCode


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


@dataclass(frozen=True, slots=True)
class RevokeTeamInvitation(StorageEffect[bool]):
    """Delete the invitation `invitation_id` if it is one of `team_id`'s (with its index entries), at once. False
    when there is no such invitation of that team (nothing written)."""

    project_id: str
    invitation_id: str
    team_id: str


@dataclass(frozen=True, slots=True)
class AcceptTeamInvitation(StorageEffect[InvitationAcceptance]):
    """Accept the invitation whose code hashes to `code_hash` for `membership.user_id`, atomically: the checks of
    `InvitationAcceptance` in order (an invitation of another team than `membership.team_id` counts as not
    found); then mark it used and, unless the user is a member of the team already, add `membership` (kept in
    the indexes as `AddMembership` keeps it). Of concurrent accepts of one invitation exactly one succeeds.
    Counts no attempt (the flow checked the code first)."""

    project_id: str
    code_hash: str
    now_ms: int
    membership: Membership
